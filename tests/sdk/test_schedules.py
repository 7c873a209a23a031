"""Schedules through the official client (issue #21), strict validation on: create, retrieve,
list, update, pause, resume and delete parse as the SDK's own types; bad expressions are the
SDK's BadRequestError naming the problem; and firings, in the server's seconds test mode
(`[schedules] seconds = true`: a 6-field expression fires every few seconds instead of every
minute), make ordinary runs the runs list finds by `schedule_id`."""

from __future__ import annotations

import datetime as dt
from typing import Iterable

import pytest
from oz_agent_sdk import BadRequestError, NotFoundError

from conftest import CONFIG, Server, list_all, poll, serving, unique, wait_state

SCHEDULES_CONFIG = CONFIG + """
[schedules]
seconds = true
"""


@pytest.fixture(scope="module")
def server() -> Iterable[Server]:
    yield from serving(SCHEDULES_CONFIG, "runledger-sdk-schedules-")


def scheduled_runs(client, schedule_id: str) -> list:
    return list_all(client, schedule_id=schedule_id)


def test_the_lifecycle_of_a_schedule(server: Server):
    client = server.client()
    name = unique("nightly")
    created = client.agent.schedules.create(
        name=name,
        cron_schedule="CRON_TZ=America/New_York 30 2 * * *",
        prompt="Upgrade the dependencies",
        agent_config={"environment_id": "fast", "model_id": "m-1"},
    )
    assert created.enabled and created.name == name
    assert created.prompt == "Upgrade the dependencies"
    assert created.agent_config.environment_id == "fast"
    assert created.agent_config.api_model_id == "m-1"
    assert created.scope.type == "Team"
    assert created.created_by.type == "user"
    # 02:30 in New York is 06:30 or 07:30 UTC, whatever the season.
    next_run = created.history.next_run
    assert next_run is not None and next_run.tzinfo is not None
    assert next_run.astimezone(dt.timezone.utc).strftime("%M") == "30"
    assert next_run.astimezone(dt.timezone.utc).hour in (6, 7)
    assert created.to_dict()["time_zone"] == "America/New_York"

    got = client.agent.schedules.retrieve(created.id)
    assert got.id == created.id and got.cron_schedule == created.cron_schedule
    listed = client.agent.schedules.list().schedules
    assert created.id in [s.id for s in listed]
    assert [s.name for s in listed] == sorted(s.name for s in listed)

    updated = client.agent.schedules.update(
        created.id, name=name + "-2", cron_schedule="@weekly", enabled=True, prompt="Weekly upgrade"
    )
    assert updated.name == name + "-2" and updated.cron_schedule == "@weekly"
    assert updated.agent_config.api_model_id == "m-1", "an update without agent_config keeps it"
    assert updated.history.next_run.astimezone(dt.timezone.utc).weekday() == 6  # Sunday

    paused = client.agent.schedules.pause(created.id)
    assert paused.enabled is False and paused.history.next_run is None
    assert client.agent.schedules.pause(created.id).enabled is False
    resumed = client.agent.schedules.resume(created.id)
    assert resumed.enabled is True and resumed.history.next_run is not None

    assert client.agent.schedules.delete(created.id).success is True
    with pytest.raises(NotFoundError):
        client.agent.schedules.retrieve(created.id)
    with pytest.raises(NotFoundError):
        client.agent.schedules.resume(created.id)
    assert created.id not in [s.id for s in client.agent.schedules.list().schedules]


@pytest.mark.parametrize(
    "cron, wanted",
    [
        ("0 9 * *", "must have 5 fields"),
        ("0 25 * * *", "cron_schedule"),
        ("@fortnightly", "unknown macro"),
        ("CRON_TZ=Atlantis/Capital 0 9 * * *", "IANA"),
        ("0 0 30 2 *", "never fires"),
    ],
)
def test_a_bad_expression_is_refused_naming_the_problem(server: Server, cron: str, wanted: str):
    client = server.client()
    with pytest.raises(BadRequestError) as refused:
        client.agent.schedules.create(name="bad", cron_schedule=cron, prompt="p")
    assert wanted in str(refused.value), refused.value


def test_a_schedule_fires_runs_that_list_by_schedule_id_and_stops_when_paused(server: Server):
    client = server.client()
    schedule = client.agent.schedules.create(
        name=unique("every-2s"),
        cron_schedule="*/2 * * * * *",
        prompt="scheduled work",
        agent_config={"environment_id": "fast"},
    )
    runs = poll(lambda: scheduled_runs(client, schedule.id), lambda rs: len(rs) >= 2,
                "two firings", timeout=20, every=0.2)
    for run in runs:
        assert run.source == "SCHEDULED_AGENT"
        assert run.prompt == "scheduled work"
        assert run.schedule is not None
        assert run.schedule.schedule_id == schedule.id
        assert run.schedule.schedule_name == schedule.name
        assert run.schedule.cron_schedule == "*/2 * * * * *"
    done = wait_state(client, runs[0].run_id, "SUCCEEDED", timeout=20)
    assert done.schedule.schedule_id == schedule.id

    # Another schedule's runs are not this one's.
    other = client.agent.schedules.create(
        name=unique("other"), cron_schedule="*/3 * * * * *", prompt="o",
        agent_config={"environment_id": "fast"},
    )
    poll(lambda: scheduled_runs(client, other.id), lambda rs: len(rs) >= 1, "the other's firing", timeout=20, every=0.2)
    assert all(r.schedule.schedule_id == schedule.id for r in scheduled_runs(client, schedule.id))
    client.agent.schedules.delete(other.id)

    client.agent.schedules.pause(schedule.id)
    settled = len(scheduled_runs(client, schedule.id))
    history = client.agent.schedules.retrieve(schedule.id).history
    assert history.last_ran is not None and history.next_run is None
    recent = client.agent.schedules.retrieve(schedule.id).to_dict()["history"]["recent_runs"]
    assert {r["run_id"] for r in recent} <= {r.run_id for r in scheduled_runs(client, schedule.id)}
    import time

    time.sleep(4)
    assert len(scheduled_runs(client, schedule.id)) == settled, "a paused schedule fired"
    client.agent.schedules.delete(schedule.id)
