"""Two teams through the official client, strict validation on: each team's keys see, list,
follow up on and cancel only their own runs; another team's run is the SDK's NotFoundError (a
404, never a 403 that would confirm it exists); an environment limited to a team is the SDK's
PermissionDeniedError for the others, naming it."""

from __future__ import annotations

from typing import Iterable

import httpx
import pytest
from oz_agent_sdk import NotFoundError, PermissionDeniedError

from conftest import CONFIG, Server, create_run, followup, list_all, run_events, serving, transcript, unique

TEAMS_CONFIG = CONFIG + """
[[environments]]
id = "infra-only"
harness = "demo"
demo_duration_ms = 300
teams = ["infra"]
"""


@pytest.fixture(scope="module")
def server() -> Iterable[Server]:
    yield from serving(TEAMS_CONFIG, "runledger-sdk-teams-")


@pytest.fixture(scope="module")
def infra_key(server: Server) -> str:
    """A personal key of a second team, made through the admin API."""
    admin = {"Authorization": f"Bearer {server.admin.secret}"}
    r = httpx.post(f"{server.base_url}/admin/teams", json={"name": "infra"}, headers=admin, timeout=5)
    assert r.status_code == 201, r.text
    r = httpx.post(f"{server.base_url}/admin/keys", json={"name": "bob", "team": "infra"}, headers=admin, timeout=5)
    assert r.status_code == 200, r.text
    assert r.json()["team"] == "infra"
    return r.json()["key"]


def test_each_team_sees_only_its_own_runs(server, infra_key):
    alice = server.client(server.personal)
    bob = server.client(infra_key)
    marker = unique("teams")
    mine = create_run(alice, prompt=f"{marker} alice", config={"environment_id": "long"})
    theirs = create_run(bob, prompt=f"{marker} bob", config={"environment_id": "long"})

    assert alice.agent.runs.retrieve(mine.run_id).run_id == mine.run_id
    for action in (
        lambda: bob.agent.runs.retrieve(mine.run_id),
        lambda: followup(bob, mine.run_id, "not yours"),
        lambda: bob.agent.runs.cancel(mine.run_id),
        lambda: run_events(bob, mine.run_id),
        lambda: transcript(bob, mine.run_id),
    ):
        with pytest.raises(NotFoundError) as e:
            action()
        assert e.value.body["detail"] == "no run with this id"

    # Every key of the team sees the team's runs (the admin key is in `default` too).
    for key, own, other in ((server.personal, mine, theirs), (server.admin, mine, theirs), (infra_key, theirs, mine)):
        ids = {r.run_id for r in list_all(server.client(key), q=marker)}
        assert own.run_id in ids and other.run_id not in ids, (key, ids)

    # Nothing bob tried reached alice's run.
    assert [e["type"] for e in run_events(alice, mine.run_id)][:1] == ["Created"]
    assert all(e["type"] != "FollowupReceived" for e in run_events(alice, mine.run_id))
    assert alice.agent.runs.retrieve(mine.run_id).state in ("QUEUED", "INPROGRESS")
    alice.agent.runs.cancel(mine.run_id)
    bob.agent.runs.cancel(theirs.run_id)


def test_an_environment_of_another_team_is_refused_by_name(server, infra_key):
    alice = server.client(server.personal)
    with pytest.raises(PermissionDeniedError) as e:
        create_run(alice, prompt="p", config={"environment_id": "infra-only"})
    assert '"infra-only"' in e.value.body["detail"]
    run = create_run(server.client(infra_key), prompt="p", config={"environment_id": "infra-only"})
    assert run.state in ("QUEUED", "INPROGRESS")
