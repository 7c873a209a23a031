"""Follow-ups (queued, in progress, finished, cancelled runs) and cancel, through the official
client: `runs.submit_followup` on 0.15, a raw `client.post(..., cast_to=object)` on 0.10.1
(which has no follow-up method); `runs.cancel` on both."""

from __future__ import annotations

import re

import pytest
from oz_agent_sdk import BadRequestError, NotFoundError

from conftest import (
    NEW_SDK,
    cancel,
    create_run,
    followup,
    poll,
    run_events,
    transcript,
    wait_state,
)


def seconds(iso: str) -> float:
    """ISO 8601 duration `PT[nH][nM][n[.fff]S]` in seconds."""
    m = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?", iso)
    assert m, iso
    h, mi, s = m.groups()
    return int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)


def entries(client, run_id):
    return transcript(client, run_id)["entries"]


def test_sdk_followup_method(client):
    # 0.15 has the method; 0.10.1 has not, and the helper falls back to client.post.
    assert hasattr(client.agent.runs, "submit_followup") == NEW_SDK


def test_followup_in_progress_is_delivered_to_the_agent(client):
    run = create_run(client, prompt="work for a long time", config={"environment_id": "long"}).run_id
    wait_state(client, run, "INPROGRESS")
    answer = followup(client, run, "please also run the linter", mode="plan")
    assert isinstance(answer, dict)
    assert answer.get("run_id") == run and answer.get("state") == "INPROGRESS"
    assert client.agent.runs.retrieve(run).state == "INPROGRESS"
    poll(
        lambda: entries(client, run),
        lambda es: any(e["stream"] == "followup" and "(plan) please also run the linter" in e["text"] for e in es),
        "the running agent to acknowledge the follow-up",
    )
    # The agent took it: recorded as delivered, so it is not requeued when the execution ends.
    events = poll(
        lambda: run_events(client, run),
        lambda es: any(e["type"] == "FollowupsDelivered" for e in es),
        "the delivery to be recorded",
    )
    assert [e["type"] for e in events] == ["Created", "Started", "FollowupReceived", "FollowupsDelivered"]
    assert events[2]["data"]["message"] == "please also run the linter"
    assert events[2]["data"]["mode"] == "plan"
    assert events[3]["data"] == {"execution": 1, "count": 1}
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert cancel(client, run) == run


def test_followup_on_queued_run_is_kept_until_it_starts(client):
    blocker = create_run(client, prompt="occupy long1", config={"environment_id": "long1"}).run_id
    wait_state(client, blocker, "INPROGRESS")
    queued = create_run(client, prompt="wait behind the blocker", config={"environment_id": "long1"})
    assert queued.at_capacity is True
    run = queued.run_id
    answer = followup(client, run, "here is more context")
    assert isinstance(answer, dict) and answer.get("state") == "QUEUED"
    assert client.agent.runs.retrieve(run).state == "QUEUED"
    assert [e["type"] for e in run_events(client, run)] == ["Created", "FollowupReceived"]

    assert cancel(client, blocker) == blocker  # frees the slot: the queued run starts
    wait_state(client, run, "INPROGRESS")
    poll(
        lambda: entries(client, run),
        lambda es: any("queued follow-up (normal): here is more context" in e["text"] for e in es),
        "the agent to receive the queued follow-up when it starts",
    )
    assert cancel(client, run) == run


def test_followup_on_finished_run_starts_a_new_execution(client):
    """SUCCEEDED → follow-up → QUEUED → INPROGRESS → SUCCEEDED: a second execution of the same
    run. Another run occupies the one-slot `single` environment, so QUEUED is observable."""
    run = create_run(client, prompt="first pass", config={"environment_id": "single"}).run_id
    first = wait_state(client, run, "SUCCEEDED")
    blocker = create_run(client, prompt="occupy single", config={"environment_id": "single"}).run_id
    wait_state(client, blocker, "INPROGRESS")

    answer = followup(client, run, "now do the second pass")
    assert isinstance(answer, dict) and answer.get("state") == "QUEUED"
    seen: list[str] = []

    def observe():
        r = client.agent.runs.retrieve(run)
        if not seen or seen[-1] != r.state:
            seen.append(r.state)
        return r

    again = poll(observe, lambda r: r.state == "SUCCEEDED", "the resumed run to succeed", timeout=20)
    # The follow-up's answer already said QUEUED; polling sees the states in order (QUEUED
    # lasts while the blocker runs, so it is seen unless this machine stalls for ~0.5 s).
    assert seen in (["QUEUED", "INPROGRESS", "SUCCEEDED"], ["INPROGRESS", "SUCCEEDED"]), seen
    assert again.run_id == run and again.updated_at > first.updated_at
    assert again.started_at is not None and again.started_at >= first.started_at
    if NEW_SDK:  # 0.10.1's RunItem has no run_time field
        assert seconds(again.run_time) > seconds(first.run_time)  # both executions count
    assert again.created_at == first.created_at and again.prompt == "first pass"

    events = run_events(client, run)
    assert [e["type"] for e in events] == ["Created", "Started", "Succeeded", "FollowupReceived", "Started", "Succeeded"]
    assert [e["data"].get("execution") for e in events if e["type"] in ("Started", "Succeeded")] == [1, 1, 2, 2]
    assert events[3]["data"]["message"] == "now do the second pass"
    es = entries(client, run)
    assert {e["execution"] for e in es} == {1, 2}
    assert any(e["execution"] == 2 and "resumed by follow-up (normal): now do the second pass" in e["text"] for e in es)
    wait_state(client, blocker, "SUCCEEDED")


def test_followup_on_cancelled_run_resumes_it(client):
    run = create_run(client, prompt="to be cancelled", config={"environment_id": "long"}).run_id
    wait_state(client, run, "INPROGRESS")
    assert cancel(client, run) == run
    assert client.agent.runs.retrieve(run).state == "CANCELLED"
    answer = followup(client, run, "try again, please")
    assert isinstance(answer, dict) and answer.get("state") == "QUEUED"
    wait_state(client, run, "INPROGRESS")
    assert cancel(client, run) == run
    kinds = [e["type"] for e in run_events(client, run)]
    assert kinds == ["Created", "Started", "Cancelled", "FollowupReceived", "Started", "Cancelled"]


@pytest.mark.parametrize(
    "body",
    [
        {"message": ""},
        {"message": "   "},
        {},
        {"message": "hello", "mode": "shout"},
        {"message": 42},
    ],
)
def test_bad_followups_are_400(client, body):
    run = create_run(client, prompt="target of bad follow-ups").run_id
    with pytest.raises(BadRequestError) as e:
        if NEW_SDK and isinstance(body.get("message", ""), str):
            client.agent.runs.submit_followup(run, **body)
        else:
            client.post(f"/agent/runs/{run}/followups", body=body, cast_to=object)
    assert e.value.status_code == 400


@pytest.mark.parametrize("run_id", ["01KAQZZZZZZZZZZZZZZZZZZZZZ", "00000000000000000000000000", "not-a-run"])
def test_followup_and_cancel_of_unknown_runs_are_404(client, run_id):
    with pytest.raises(NotFoundError):
        followup(client, run_id, "hello?")
    with pytest.raises(NotFoundError):
        client.agent.runs.cancel(run_id)


def test_cancel_in_progress(server, client):
    run = create_run(client, prompt="cancel me while I work", config={"environment_id": "long"}).run_id
    wait_state(client, run, "INPROGRESS")
    # Any key of the instance may cancel; the event records who did.
    assert cancel(server.client(server.agent), run) == run
    done = client.agent.runs.retrieve(run)
    assert done.state == "CANCELLED"
    events = run_events(client, run)
    assert [e["type"] for e in events] == ["Created", "Started", "Cancelled"]
    assert events[-1]["data"]["by"] == server.agent.id
    poll(
        lambda: entries(client, run),
        lambda es: any(e["text"] == "demo agent: stopped" for e in es),
        "the agent to be stopped",
    )
    # Cancelling again: the run is in a terminal state.
    with pytest.raises(BadRequestError) as e:
        client.agent.runs.cancel(run)
    assert e.value.status_code == 400
    assert isinstance(e.value.body, dict) and "invalid_request" in e.value.body["type"]
    assert client.agent.runs.retrieve(run).state == "CANCELLED"


def test_cancel_queued(client):
    blocker = create_run(client, prompt="occupy slow", config={"environment_id": "slow"}).run_id
    queued = create_run(client, prompt="never starts", config={"environment_id": "slow"}).run_id
    assert client.agent.runs.retrieve(queued).state == "QUEUED"
    assert cancel(client, queued) == queued
    r = client.agent.runs.retrieve(queued)
    assert r.state == "CANCELLED" and r.started_at is None
    assert [e["type"] for e in run_events(client, queued)] == ["Created", "Cancelled"]
    with pytest.raises(BadRequestError):
        client.agent.runs.cancel(queued)
    assert cancel(client, blocker) == blocker


def test_cancel_finished_run_is_400(client):
    run = create_run(client, prompt="quick").run_id
    wait_state(client, run, "SUCCEEDED")
    with pytest.raises(BadRequestError) as e:
        client.agent.runs.cancel(run)
    assert e.value.status_code == 400
    assert client.agent.runs.retrieve(run).state == "SUCCEEDED"
