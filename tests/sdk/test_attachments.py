"""Attachments through the official client (issue #20, point 2), strict validation on: files
sent with `client.agent.run(attachments=...)`, as base64 text or as a path the SDK encodes,
are in the run's workspace byte for byte before its agent starts, and are listed on the run;
over a limit is the SDK's BadRequestError naming it."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Iterable

import pytest
from oz_agent_sdk import BadRequestError

from conftest import CONFIG, Server, create_run, serving, transcript, wait_state

ATTACH_CONFIG = CONFIG + """
[[environments]]
id = "attach"
harness = "command"
command = ["sh", "-c", "cd \\"$RUNLEDGER_ATTACHMENTS_DIR\\" && sha256sum -- *"]
"""


@pytest.fixture(scope="module")
def server() -> Iterable[Server]:
    yield from serving(ATTACH_CONFIG, "runledger-sdk-attach-")


def test_attachments_reach_the_workspace_and_are_listed(server: Server, tmp_path: Path):
    client = server.client()
    png = bytes.fromhex("89504e470d0a1a0a") + bytes(range(256)) * 4096  # ~1 MiB
    notes = "Zusammenfassung: ✓ läuft\n".encode()
    path = tmp_path / "notes.md"
    path.write_bytes(notes)
    run = create_run(
        client,
        prompt="look at the attachments",
        config={"environment_id": "attach"},
        attachments=[
            {"file_name": "screen.png", "mime_type": "image/png", "data": base64.b64encode(png).decode()},
            {"file_name": "notes.md", "mime_type": "text/markdown", "data": path},
        ],
    )
    done = wait_state(client, run.run_id, "SUCCEEDED", "FAILED", timeout=30)
    assert done.state == "SUCCEEDED", done

    folder = server.data_dir / "workspaces" / run.run_id / ".runledger" / "attachments"
    assert (folder / "screen.png").read_bytes() == png
    assert (folder / "notes.md").read_bytes() == notes
    # The agent read them: its output holds both digests.
    text = "\n".join(e["text"] for e in transcript(client, run.run_id)["entries"])
    for name, data in (("screen.png", png), ("notes.md", notes)):
        assert f"{hashlib.sha256(data).hexdigest()}  {name}" in text, text

    listed = client.agent.runs.retrieve(run.run_id).to_dict()["attachments"]
    assert listed == [
        {"file_name": "screen.png", "mime_type": "image/png", "size_bytes": len(png),
         "sha256": hashlib.sha256(png).hexdigest()},
        {"file_name": "notes.md", "mime_type": "text/markdown", "size_bytes": len(notes),
         "sha256": hashlib.sha256(notes).hexdigest()},
    ]


def test_over_a_limit_is_a_bad_request_naming_it(server: Server):
    client = server.client()
    six = [{"file_name": f"f{i}.txt", "mime_type": "text/plain", "data": "aGk="} for i in range(6)]
    with pytest.raises(BadRequestError) as e:
        create_run(client, prompt="too many", attachments=six)
    assert "at most 5 files" in e.value.body["detail"]
    with pytest.raises(BadRequestError) as e:
        create_run(client, prompt="escape", attachments=[{"file_name": "../x", "mime_type": "text/plain", "data": "aGk="}])
    assert "must be a file name" in e.value.body["detail"]
