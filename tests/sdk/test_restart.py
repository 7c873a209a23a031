"""What the strict client sees across a server restart: runs, keys and paging survive; a run that
was in progress is FAILED with a retryable `internal_error` status (SPEC §2), which the SDK's
`StatusMessage`/`ErrorCode` models must accept; a queued run runs after the restart."""

from __future__ import annotations

import pytest

from conftest import create_run, list_all, run_events, wait_state


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_restart_while_runs_are_in_flight(server, kill):
    client = server.client()
    done = create_run(client, prompt="finished before the restart").run_id
    wait_state(client, done, "SUCCEEDED")
    running = create_run(client, prompt="in progress at the restart", config={"environment_id": "long1"}).run_id
    wait_state(client, running, "INPROGRESS")
    queued = create_run(client, prompt="queued at the restart", config={"environment_id": "long1"}).run_id
    assert client.agent.runs.retrieve(queued).state == "QUEUED"
    before = {r.run_id for r in list_all(client, limit=2)}

    server.restart(kill=kill)
    client = server.client()  # new address, same keys

    assert {r.run_id for r in list_all(client, limit=2)} == before
    assert client.agent.runs.retrieve(done).state == "SUCCEEDED"

    lost = wait_state(client, running, "FAILED")
    assert lost.status_message is not None
    assert lost.status_message.message
    assert lost.status_message.error_code == "internal_error"
    assert lost.status_message.retryable is True
    assert [e["type"] for e in run_events(client, running)] == ["Created", "Started", "Failed"]
    failed = [r.run_id for r in list_all(client, state=["FAILED"])]
    assert running in failed

    # The queued run takes the freed slot after the restart.
    wait_state(client, queued, "INPROGRESS")
    assert client.agent.runs.cancel(queued)
    # A failed run resumes on a follow-up like any finished run.
    from conftest import followup

    followup(client, running, "pick up where you left off")
    wait_state(client, running, "INPROGRESS")
    assert client.agent.runs.cancel(running)
