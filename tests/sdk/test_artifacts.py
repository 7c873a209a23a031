"""Artifacts through the official client, strict validation on: a command agent reports a pull
request, a file (a 1.5 MB binary), a plan and a screenshot through RUNLEDGER_REPORT;
`runs.retrieve(...).artifacts` holds them as the SDK's typed items, `runs.list(artifact_type=...)`
finds the run, `agent.get_artifact(...)` answers each type, and the `download_url` serves the
file's bytes.

SDK 0.10.1 knows only the PLAN, PULL_REQUEST and SCREENSHOT items and a screenshot-shaped
artifact response, so with it the agent reports no file and only the screenshot is retrieved."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterable

import httpx
import pytest
from oz_agent_sdk import NotFoundError

from conftest import CONFIG, NEW_SDK, Server, create_run, list_all, serving, unique, wait_state

BLOB_BYTES = 1_500_000
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def _agent(directory: Path, with_file: bool) -> Path:
    lines = [
        "set -e",
        'R="$RUNLEDGER_REPORT"',
        f'cp "{directory}/blob.bin" blob.bin',
        f'cp "{directory}/shot.png" shot.png',
        """echo '{"type":"pull_request","url":"https://git.example/acme/app/pull/9","branch":"fix-9","title":"Fix"}' >> "$R\"""",
        """echo '{"type":"plan","title":"Plan","markdown":"# Plan\\n\\n- one\\n"}' >> "$R\"""",
        """echo '{"type":"screenshot","path":"shot.png","description":"the page"}' >> "$R\"""",
    ]
    if with_file:
        lines.append("""echo '{"type":"file","path":"blob.bin","description":"the blob"}' >> "$R\"""")
    path = directory / ("agent-file.sh" if with_file else "agent.sh")
    path.write_text("#!/usr/bin/env bash\n" + "\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def agent_dir() -> Iterable[Path]:
    # Not under /tmp (a sandboxed agent gets a private one) and open to every user: agents of a
    # root server run as another user.
    base = "/var/tmp" if os.path.isdir("/var/tmp") else None
    directory = Path(tempfile.mkdtemp(prefix="runledger-sdk-artifacts-", dir=base))
    directory.chmod(0o755)
    (directory / "blob.bin").write_bytes(os.urandom(BLOB_BYTES))
    (directory / "shot.png").write_bytes(PNG)
    for name in ("blob.bin", "shot.png"):
        (directory / name).chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def server(agent_dir: Path) -> Iterable[Server]:
    config = CONFIG + f"""
[[environments]]
id = "reporting"
harness = "command"
command = ["{_agent(agent_dir, NEW_SDK)}"]
"""
    yield from serving(config, "runledger-sdk-artifacts-")


@pytest.fixture(scope="module")
def reported(server: Server):
    client = server.client()
    marker = unique("artifacts")
    created = create_run(client, prompt=f"{marker} report", config={"environment_id": "reporting"})
    wait_state(client, created.run_id, "SUCCEEDED")
    return client.agent.runs.retrieve(created.run_id)


def test_the_run_lists_its_artifacts_as_typed_items(reported):
    from oz_agent_sdk.types.agent.artifact_item import PlanArtifact, PullRequestArtifact, ScreenshotArtifact

    items = reported.artifacts
    assert items is not None
    kinds = [type(a) for a in items]
    assert kinds[:3] == [PullRequestArtifact, PlanArtifact, ScreenshotArtifact]
    pr, plan, shot = items[:3]
    assert pr.data.url == "https://git.example/acme/app/pull/9"
    assert pr.data.branch == "fix-9"
    assert plan.data.title == "Plan"
    assert plan.data.document_uid == plan.data.artifact_uid
    assert shot.data.mime_type == "image/png"
    assert shot.data.description == "the page"
    assert all(a.created_at.tzinfo is not None for a in items)
    if NEW_SDK:
        from oz_agent_sdk.types.agent.artifact_item import FileArtifact

        assert len(items) == 4
        blob = items[3]
        assert isinstance(blob, FileArtifact)
        assert blob.data.filepath == "blob.bin"
        assert blob.data.filename == "blob.bin"
        assert blob.data.size_bytes == BLOB_BYTES
        assert blob.data.mime_type == "application/octet-stream"
    else:
        assert len(items) == 3


def test_the_artifact_type_filter_finds_the_run(server, reported):
    client = server.client()
    plain = create_run(client, prompt=unique("no artifacts"), config={"environment_id": "fast"})
    wait_state(client, plain.run_id, "SUCCEEDED")
    types = ["PLAN", "PULL_REQUEST", "SCREENSHOT"] + (["FILE"] if NEW_SDK else [])
    for artifact_type in types:
        ids = [r.run_id for r in list_all(client, artifact_type=artifact_type)]
        assert ids == [reported.run_id], artifact_type


def test_the_artifact_endpoint_and_its_download(server, reported, agent_dir):
    client = server.client()
    shot = reported.artifacts[2]
    got = client.agent.get_artifact(shot.data.artifact_uid)
    assert got.artifact_type == "SCREENSHOT"
    assert got.data.content_type == "image/png"
    r = httpx.get(got.data.download_url, timeout=10)
    assert r.status_code == 200
    assert r.content == PNG
    assert r.headers["content-security-policy"].startswith("sandbox")
    if not NEW_SDK:
        return
    plan = client.agent.get_artifact(reported.artifacts[1].data.artifact_uid)
    assert plan.artifact_type == "PLAN"
    assert plan.data.content == "# Plan\n\n- one\n"
    assert plan.data.content_type == "text/markdown"
    blob = client.agent.get_artifact(reported.artifacts[3].data.artifact_uid)
    assert blob.artifact_type == "FILE"
    assert blob.data.size_bytes == BLOB_BYTES
    r = httpx.get(blob.data.download_url, timeout=30)
    assert r.status_code == 200
    assert r.content == (agent_dir / "blob.bin").read_bytes()
    assert r.headers["content-type"] == "application/octet-stream"


def test_another_teams_key_and_an_unknown_uid_are_not_found(server, reported):
    admin = {"Authorization": f"Bearer {server.admin.secret}"}
    r = httpx.post(f"{server.base_url}/admin/teams", json={"name": "others"}, headers=admin, timeout=5)
    assert r.status_code == 201, r.text
    r = httpx.post(f"{server.base_url}/admin/keys", json={"name": "eve", "team": "others"}, headers=admin, timeout=5)
    assert r.status_code == 200, r.text
    other = server.client(r.json()["key"])
    with pytest.raises(NotFoundError):
        other.agent.get_artifact(reported.artifacts[2].data.artifact_uid)
    with pytest.raises(NotFoundError):
        server.client().agent.get_artifact("00000000-0000-4000-8000-000000000000")
