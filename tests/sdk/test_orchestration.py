"""Messages between runs and event polling through the official client's generic `post` and
`get` (the Oz document marks these operations internal, so the SDK has no typed method):
the shapes the document defines, the 422 of an ended recipient, the 409 of a report the run's
state contradicts and the 422 of `run_blocked`, on every pinned SDK version."""

from __future__ import annotations

import re

import httpx
import pytest
from oz_agent_sdk import ConflictError, NotFoundError, UnprocessableEntityError

from conftest import create_run, poll, wait_state

ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def running(client, prompt: str) -> str:
    run = create_run(client, prompt=prompt, config={"environment_id": "slow"})
    wait_state(client, run.run_id, "INPROGRESS")
    return run.run_id


def test_a_message_is_sent_delivered_listed_and_read(client):
    parent = running(client, "parent")
    child = running(client, "child")
    sent = client.post(
        "/agent/messages",
        body={"to": [child], "subject": "Split", "body": "Take the handlers.", "sender_run_id": parent},
        cast_to=object,
    )
    assert set(sent) == {"message_ids"}
    (message_id,) = sent["message_ids"]
    assert ULID.fullmatch(message_id)

    # The demo agent takes it as a follow-up: delivered without anyone marking it.
    inbox = poll(
        lambda: client.get(f"/agent/messages/{child}", cast_to=object),
        lambda headers: headers and headers[0]["delivered_at"] is not None,
        "the message to be delivered",
    )
    assert set(inbox[0]) == {"message_id", "sender_run_id", "subject", "sent_at", "delivered_at", "read_at"}
    assert inbox[0]["message_id"] == message_id
    assert inbox[0]["sender_run_id"] == parent
    assert inbox[0]["read_at"] is None

    read = client.post(f"/agent/messages/{message_id}/read", cast_to=object)
    assert read["body"] == "Take the handlers."
    assert read["subject"] == "Split"
    assert read["read_at"] is not None
    unread = client.get(f"/agent/messages/{child}", cast_to=object, options={"params": {"unread": "true"}})
    assert unread == []

    raw = client.post(f"/agent/messages/{message_id}/delivered", cast_to=httpx.Response)
    assert raw.status_code == 204

    with pytest.raises(NotFoundError):
        client.post("/agent/messages/01BX5ZZKBKACTAV9WEVGEMMVRZ/read", cast_to=object)


def test_a_message_to_an_ended_run_is_422(client):
    sender = running(client, "sender")
    done = create_run(client, prompt="done").run_id
    wait_state(client, done, "SUCCEEDED")
    with pytest.raises(UnprocessableEntityError):
        client.post(
            "/agent/messages",
            body={"to": [done], "subject": "s", "body": "b", "sender_run_id": sender},
            cast_to=object,
        )


def test_events_are_polled_in_sequence_and_reports_are_checked(client):
    worker = running(client, "worker")
    done = create_run(client, prompt="done").run_id
    wait_state(client, done, "SUCCEEDED")
    events = client.get(
        "/agent/events", cast_to=object, options={"params": {"run_ids": [worker, done], "since": 0, "limit": 500}}
    )
    assert {(e["run_id"], e["event_type"]) for e in events} >= {
        (worker, "run_in_progress"),
        (done, "run_in_progress"),
        (done, "run_succeeded"),
    }
    sequences = [e["sequence"] for e in events]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    for e in events:
        assert set(e) == {"event_type", "run_id", "ref_id", "execution_id", "occurred_at", "sequence"}

    reported = client.post(
        f"/agent/events/{worker}", body={"event_type": "run_succeeded", "execution_id": "w-1"}, cast_to=object
    )
    assert reported["sequence"] > sequences[-1]
    wait_state(client, worker, "SUCCEEDED")
    after = client.get(
        "/agent/events", cast_to=object, options={"params": {"run_ids": [worker], "since": sequences[-1]}}
    )
    assert [(e["event_type"], e["execution_id"], e["sequence"]) for e in after] == [
        ("run_succeeded", "w-1", reported["sequence"])
    ]

    with pytest.raises(ConflictError):
        client.post(f"/agent/events/{done}", body={"event_type": "run_failed"}, cast_to=object)
    with pytest.raises(UnprocessableEntityError):
        client.post(f"/agent/events/{done}", body={"event_type": "run_blocked"}, cast_to=object)
