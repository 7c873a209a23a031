"""Parent and child runs through the official client: `parent_run_id` on create (the SDK's own
argument on 0.15, an extra body field on 0.10.1, through both create paths), returned in the
strictly validated `RunItem`, the `ancestor_run_id` list filter at any depth, an unknown
parent refused with the document's error model, and a cancel that cascades to the
descendants (`{"cascade": false}` keeps them)."""

from __future__ import annotations

import pytest
from oz_agent_sdk import BadRequestError

from conftest import NEW_SDK, cancel, create_run, list_all, wait_state


def child(client, parent: str, *, path: str | None = None) -> str:
    if path is not None:
        run = create_run(client, path=path, prompt="child", config={"environment_id": "slow"}, parent_run_id=parent)
    elif NEW_SDK:
        run = create_run(client, prompt="child", config={"environment_id": "slow"}, parent_run_id=parent)
    else:
        run = create_run(client, prompt="child", config={"environment_id": "slow"}, extra_body={"parent_run_id": parent})
    return run.run_id


def test_a_parent_is_returned_and_its_descendants_listed(client):
    root = create_run(client, prompt="root", config={"environment_id": "slow"}).run_id
    a = child(client, root)
    b = child(client, a, path="/agent/run")
    c = child(client, b, path="/agent/runs")
    retrieved = client.agent.runs.retrieve(c)
    if NEW_SDK:
        assert retrieved.parent_run_id == b
    else:
        assert retrieved.model_extra.get("parent_run_id") == b
    assert getattr(client.agent.runs.retrieve(root), "parent_run_id", None) is None
    if NEW_SDK:
        below = list_all(client, ancestor_run_id=root)
    else:
        below = list_all(client, extra_query={"ancestor_run_id": root})
    assert {r.run_id for r in below} == {a, b, c}
    cancel(client, root)
    for run_id in (root, a, b, c):
        wait_state(client, run_id, "CANCELLED")


def test_an_unknown_parent_is_400_naming_the_field(client):
    with pytest.raises(BadRequestError) as e:
        create_run(client, prompt="orphan", extra_body={"parent_run_id": "01KAAAAAAAAAAAAAAAAAAAAAAA"})
    assert e.value.status_code == 400
    assert e.value.body["detail"].startswith("parent_run_id")


def test_cascade_false_keeps_the_children(client):
    root = create_run(client, prompt="root", config={"environment_id": "slow"}).run_id
    kept = child(client, root)
    client.post(f"/agent/runs/{root}/cancel", body={"cascade": False}, cast_to=object)
    wait_state(client, root, "CANCELLED")
    assert client.agent.runs.retrieve(kept).state in ("QUEUED", "INPROGRESS")
    cancel(client, kept)
    wait_state(client, kept, "CANCELLED")
