"""Read-only runs of the three presets through runledger, with the real CLIs in its sandbox:
commands that only read succeed and their output reaches the model; a write, through the shell
tool or a CLI's own file tool (Codex's apply_patch), fails the run naming the denied write.

Each placement is a runledger server of its own: `default` (the data directory under
target/models-runs, no TMPDIR) and `tmp` (the data directory and an explicit `workspace_root`
under /tmp, with `TMPDIR = "/tmp"`: the run's home and workspace lie under its temporary
directory, where Codex's own sandbox fails).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import BIN_DIR, CLIS, MODELS
from test_clis import tool_results, user_prompts
from test_runledger import KEYS, RUN_TIMEOUT, Runledger, endpoint

README = "readme-marker-7f3a\n"
COMMIT = "first-commit-marker-c41e"
GIT = "git -c user.name=t -c user.email=t@example.com"
# The workspace of every run: a README committed to a fresh repository.
SETUP = f"printf '{README.strip()}\\n' > README && git init -q && {GIT} add README && {GIT} commit -qm {COMMIT}"
PLACEMENTS = ["default", "tmp"]


def config(placement):
    def text(root, model_url):
        lines = ['[server]\nbind = "127.0.0.1:0"\n', "[limits]\nrate_limit = false\n", "[secrets]"]
        lines += [f'{KEYS[c]} = {{ env = "RL_TEST_{KEYS[c]}" }}' for c in CLIS]
        # The agents' PATH said outright: the CLIs and node, wherever the server's own PATH points.
        node = shutil.which("node")
        path = f"{BIN_DIR}:{Path(node).parent if node else '/usr/bin'}:/usr/local/bin:/usr/bin:/bin"
        env = f'CLAUDE_CODE_MAX_RETRIES = "0", PATH = "{path}"'
        place = ""
        if placement == "tmp":
            env += ', TMPDIR = "/tmp"'
            place = f'workspace_root = "{root / "workspaces"}"\n'
        for cli in CLIS:
            lines.append(
                f'\n[[environments]]\nid = "{cli}-ro"\nharness = "{cli}"\n'
                f'model_id = "{MODELS[cli]}"\nmodel_base_url = "{endpoint(cli, model_url)}"\n'
                f"max_runtime_secs = {int(RUN_TIMEOUT)}\n{place}"
                f"setup = [{json.dumps(SETUP)}]\n"
                f'secrets = ["{KEYS[cli]}"]\nagent_permissions = "read-only"\nenv = {{ {env} }}\n'
            )
        return "\n".join(lines) + "\n"

    return text


@pytest.fixture(scope="module", params=PLACEMENTS)
def runledger(request, model_server):
    placement = request.param
    base = Path("/tmp") if placement == "tmp" else None
    server = Runledger(model_server, config=config(placement), **({"base": base} if base else {}))
    if placement == "tmp":
        server.workspace_root = server.root / "workspaces"
    yield server
    server.stop()
    if not os.environ.get("MODEL_TESTS_KEEP"):
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(params=CLIS)
def cli(request):
    return request.param


def requests_of(server, prompt):
    """The model requests of the run whose prompt was `prompt`."""
    return [r for r in server.main_requests() if any(prompt in p for p in user_prompts(r))]


def finished(runledger, env, prompt):
    run_id = runledger.create(env, prompt)
    return run_id, runledger.finished(run_id)


# Codex runs `cat` and `git log` without asking even in its own read-only mode (its known-safe
# commands); the Python one-liner is not on that list.
READS = ["cat README", "python3 -c 'print(open(\"README\").read())'", "git log --format=%s"]


def test_commands_that_only_read_succeed_and_their_output_reaches_the_model(runledger, server, cli):
    prompt = f"Read the README ({cli}, {runledger.root.name})."
    server.script([{"tool": "shell", "command": c} for c in READS] + [{"text": "Read it."}])
    run_id, run = finished(runledger, f"{cli}-ro", prompt)
    assert run["state"] == "SUCCEEDED", (run, runledger.transcript(run_id))
    requests = requests_of(server, prompt)
    # One request per tool result, each carrying the output of the command before it.
    assert len(requests) == len(READS) + 1, [tool_results(r) for r in requests]
    for step, command in enumerate(READS):
        results = tool_results(requests[step + 1])
        expected = COMMIT if command.startswith("git") else README.strip()
        assert results and expected in results[-1], (command, results)


@pytest.mark.parametrize(
    "command, path",
    [
        ("echo x > echoed.txt", "echoed.txt"),
        ("touch touched.txt", "touched.txt"),
        ("python3 -c 'open(\"py.txt\", \"w\")'", "py.txt"),
    ],
)
def test_a_write_through_the_shell_tool_fails_the_run_naming_it(runledger, server, cli, command, path):
    prompt = f"Write {path} ({cli}, {runledger.root.name})."
    server.script([{"tool": "shell", "command": command}, {"text": "Finished."}])
    run_id, run = finished(runledger, f"{cli}-ro", prompt)
    assert not (runledger.workspace(run_id) / path).exists()
    assert run["state"] == "FAILED", (run, runledger.transcript(run_id))
    status = run["status_message"]
    # The command as the CLI ran it (Codex hands it to `bash -lc`, quoted).
    assert path in status["message"] and "denied" in status["message"], status
    if cli != "codex":
        assert command in status["message"], status
    assert status.get("error_code") == "not_authorized", status
    # The model heard of the refusal too.
    results = tool_results(requests_of(server, prompt)[-1])
    assert any("read-only file system" in r.lower() for r in results), results


def test_a_write_through_the_file_tool_fails_the_run_naming_it(runledger, server, cli):
    """Codex's apply_patch, Claude Code's Write, Gemini CLI's write_file."""
    prompt = f"Create hello.txt ({cli}, {runledger.root.name})."
    server.script([{"tool": "write_file", "path": "hello.txt", "content": "hello\n"}, {"text": "Finished."}])
    run_id, run = finished(runledger, f"{cli}-ro", prompt)
    assert not (runledger.workspace(run_id) / "hello.txt").exists()
    assert run["state"] == "FAILED", (run, runledger.transcript(run_id))
    status = run["status_message"]
    assert "hello.txt" in status["message"] and "denied" in status["message"], status
    assert status.get("error_code") == "not_authorized", status


def test_a_read_only_run_reports_its_plan_and_writes_its_scratch_files(runledger, server, cli):
    """What a plan run needs stays writable: the report file (outside the workspace) and /tmp."""
    plan = json.dumps({"type": "plan", "title": "The plan", "markdown": "1. read README"})
    prompt = f"Plan the work ({cli}, {runledger.root.name})."
    server.script(
        [
            {"tool": "shell", "command": "echo scratch > /tmp/notes && cat /tmp/notes"},
            {"tool": "shell", "command": f"echo '{plan}' >> \"$RUNLEDGER_REPORT\""},
            {"text": "Planned."},
        ]
    )
    run_id, run = finished(runledger, f"{cli}-ro", prompt)
    assert run["state"] == "SUCCEEDED", (run, runledger.transcript(run_id))
    assert any("scratch" in r for r in tool_results(requests_of(server, prompt)[1])), "the scratch file"
    artifacts = run.get("artifacts", [])
    assert [a["artifact_type"] for a in artifacts] == ["PLAN"], (artifacts, runledger.transcript(run_id))
    assert artifacts[0]["data"]["title"] == "The plan", artifacts


def test_a_write_whose_error_the_agent_hides_still_never_lands(runledger, server, cli):
    """The kernel refuses it whatever the agent does with the error; with no error in the
    output there is nothing to name, so only the file's absence is certain."""
    prompt = f"Write quietly ({cli}, {runledger.root.name})."
    script = "touch quiet.txt 2>/dev/null; ln -s /etc/passwd link 2>/dev/null; mkdir d 2>/dev/null; true"
    server.script([{"tool": "shell", "command": script}, {"text": "Finished."}])
    run_id, run = finished(runledger, f"{cli}-ro", prompt)
    assert run["state"] in ("SUCCEEDED", "FAILED"), run
    ws = runledger.workspace(run_id)
    assert sorted(p.name for p in ws.iterdir()) == [".git", "README"], list(ws.iterdir())
