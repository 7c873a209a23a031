"""Forks through runledger with the real claude, codex and gemini CLIs: a run with two
executions (its task, then a follow-up) is forked after the first; the fork's CLI resumes the
session execution 1 left (restored from its snapshot, under the fork's own workspace path), so
its first model request carries the task, the first answer and the fork's message, and nothing
of execution 2 (`docs/api.md`, "Fork").
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from test_clis import user_prompts
from test_runledger import TERMINAL, Runledger, prompts_of


@pytest.fixture(scope="module")
def runledger(model_server):
    server = Runledger(model_server)
    yield server
    server.stop()
    if not os.environ.get("MODEL_TESTS_KEEP"):
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(params=["claude", "codex", "gemini"])
def cli(request):
    return request.param


def test_a_fork_continues_the_session_of_execution_k_and_not_what_came_after(runledger, server, cli):
    server.script(
        {
            "replies": [
                {"when": "fork-branch", "turns": [{"text": "Answer to the fork."}]},
                {"when": "second-step", "turns": [{"text": "Answer to the second step."}]},
                {"turns": [{"text": "Answer to the first task."}]},
            ]
        }
    )
    run_id = runledger.create(cli, "first-task: remember the word heron")
    run = runledger.finished(run_id)
    assert run["state"] == "SUCCEEDED", (run, runledger.transcript(run_id))
    status, body = runledger.call("POST", f"/agent/runs/{run_id}/followups", {"message": "second-step please"})
    assert status == 200, body
    runledger.wait(run_id, lambda r: r["state"] in TERMINAL and prompts_of(server, "second-step"), "the follow-up")
    assert runledger.finished(run_id)["state"] == "SUCCEEDED", runledger.transcript(run_id)

    status, body = runledger.call(
        "POST", f"/agent/runs/{run_id}/fork", {"after_execution": 1, "message": "fork-branch instead"}
    )
    assert status == 200, body
    fork = body["run_id"]
    run = runledger.finished(fork)
    assert run["state"] == "SUCCEEDED", (run.get("status_message"), [e["text"][:300] for e in runledger.entries(fork)])
    assert run["forked_from"] == {"run_id": run_id, "execution": 1}, run

    asked = prompts_of(server, "fork-branch")
    assert asked, runledger.transcript(fork)
    first = asked[0]
    prompts = user_prompts(first)
    conversation = json.dumps(first["body"])
    # The conversation up to execution 1 (its task and its answer) and the fork's message...
    assert any("first-task" in p for p in prompts), prompts
    assert "Answer to the first task." in conversation, conversation[-3000:]
    assert any("fork-branch instead" in p for p in prompts), prompts
    # ...and nothing of execution 2.
    assert "second-step" not in conversation, conversation[-3000:]
    assert "Answer to the second step." not in conversation, conversation[-3000:]
    # By the session id execution 1 recorded, not a new session that repeats the task.
    system = [e["text"] for e in runledger.entries(fork) if e["stream"] == "system"]
    assert any("the fork starts from the snapshot of execution 1" in t for t in system), system
    assert any(t.startswith("resuming the CLI's session ") for t in system), system
