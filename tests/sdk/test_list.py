"""`GET /agent/runs` with every filter of SPEC §1, every sort, and paging under filters — on a
server of its own, so the expected result of every query is known exactly.

The data set is settled before any query: the fast runs have SUCCEEDED, two runs are INPROGRESS
in environments that outlive the module, one is QUEUED behind one of them and one was
cancelled while queued. Nothing changes while we look, so every answer must equal a
reference computed in Python from the retrieved runs: the same members in the same order
(`updated_at`: (updated_at, run_id); `created_at`: run_id, a ULID; `title`: (lowercased
title, run_id)), whatever the page size.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta, timezone
from typing import Any, Callable

import pytest

from conftest import NEW_SDK, cancel, create_run, list_all, list_page, wait_state


@dataclass
class Spec:
    key: str  # "admin" | "agent" | "personal"
    env: str
    name: str | None
    model: str | None
    title: str
    prompt: str
    metadata: dict[str, str]
    final: str  # the state it is left in


SPECS = [
    Spec("admin", "fast", "alpha", None, "Bravo report", "Summarise the weekly report", {"team": "core", "prio": "high"}, "SUCCEEDED"),
    Spec("admin", "fast", "alpha", "m-special", "alpha cleanup", "Remove dead code in the PARSER", {"team": "core", "prio": "low"}, "SUCCEEDED"),
    Spec("agent", "fast", "beta", None, "Charlie deploy", "Deploy to staging", {"team": "infra"}, "SUCCEEDED"),
    Spec("agent", "fast", None, "m-special", "Delta bump", "Bump dependencies", {}, "SUCCEEDED"),
    Spec("personal", "fast", "beta", None, "Echo parser audit", "Audit the logs", {"team": "core", "prio": "high"}, "SUCCEEDED"),
    Spec("personal", "long1", "gamma", None, "Foxtrot long", "Long running analysis", {"team": "infra"}, "INPROGRESS"),
    Spec("admin", "long1", "gamma", None, "Golf waiting", "Waits in the queue", {}, "QUEUED"),
    Spec("agent", "long1", None, None, "Hotel cancelled", "Never runs at all", {"team": "core"}, "CANCELLED"),
    Spec("admin", "long", "alpha", "m-long2", "india long", "Second job in progress", {"prio": "high"}, "INPROGRESS"),
    Spec("personal", "fast", "alpha", None, "Juliet report", "Another weekly REPORT", {"team": "core", "prio": "high"}, "SUCCEEDED"),
]


@pytest.fixture(scope="module")
def data(server):
    """Creates the data set and returns (client, runs by id as the server reports them)."""
    clients = {"admin": server.client(server.admin), "agent": server.client(server.agent), "personal": server.client(server.personal)}
    ids: list[str] = []
    for s in SPECS:
        config: dict[str, Any] = {"environment_id": s.env}
        if s.name:
            config["name"] = s.name
        if s.model:
            config["model_id"] = s.model
        created = create_run(clients[s.key], prompt=s.prompt, title=s.title, config=config, metadata=s.metadata or None)
        ids.append(created.run_id)
        # A run is listed as soon as its create call has returned.
        assert [r.run_id for r in list_page(clients["admin"], q=s.title).runs] == [created.run_id]
        if s.env == "long1" and s.final == "INPROGRESS":
            wait_state(clients["admin"], created.run_id, "INPROGRESS")
    client = clients["admin"]
    for run_id, s in zip(ids, SPECS):
        if s.final == "CANCELLED":
            assert cancel(client, run_id) == run_id
    for run_id, s in zip(ids, SPECS):
        wait_state(client, run_id, s.final, timeout=20)
    runs = {rid: client.agent.runs.retrieve(rid) for rid in ids}
    for rid, s in zip(ids, SPECS):
        assert runs[rid].state == s.final
    return client, runs, ids, server


def _order(sort_by: str | None, sort_order: str | None) -> Callable[[list], list]:
    def key(r):
        if sort_by in (None, "updated_at"):
            return (r.updated_at, r.run_id)
        if sort_by == "created_at":
            return (r.run_id,)
        return (r.title.lower(), r.run_id)

    desc = sort_order in (None, "desc")
    return lambda rs: sorted(rs, key=key, reverse=desc)


SORTS = [
    (None, None),
    ("updated_at", "asc"),
    ("created_at", "desc"),
    ("created_at", "asc"),
    ("title", "asc"),
    ("title", "desc"),
]


def spec_of(data, run) -> Spec:
    _, _, ids, _ = data
    return SPECS[ids.index(run.run_id)]


def check(data, filters: dict[str, Any], predicate: Callable[[Any], bool], expect_count: int | None = None) -> None:
    """Every sort and page size give exactly the reference answer for these filters."""
    client, runs, _, _ = data
    matching = [r for r in runs.values() if predicate(r)]
    if expect_count is not None:
        assert len(matching) == expect_count, "the reference data set is not what the test assumes"
    for sort_by, sort_order in SORTS:
        sort: dict[str, Any] = {}
        if sort_by:
            sort["sort_by"] = sort_by
        if sort_order:
            sort["sort_order"] = sort_order
        want = [r.run_id for r in _order(sort_by, sort_order)(matching)]
        one_page = list_page(client, **filters, **sort, limit=100)
        assert [r.run_id for r in one_page.runs] == want, (filters, sort)
        assert one_page.has_next_page is False and one_page.next_cursor is None
        paged = list_all(client, **filters, **sort, limit=2)
        assert [r.run_id for r in paged] == want, (filters, sort, "limit=2")
    # The listed items are the same full items that retrieve returns.
    for item in list_page(client, **filters, limit=100).runs:
        full = runs[item.run_id]
        # run_time of a run in progress grows between calls; everything else is equal.
        a, b = item.model_dump(), full.model_dump()
        assert (a.pop("run_time", None) is None) == (b.pop("run_time", None) is None)
        assert a == b


def test_no_filter(data):
    check(data, {}, lambda r: True, expect_count=len(SPECS))


def test_default_limit_is_20(data):
    client, _, _, server = data
    # 10 runs here: one page; the default limit itself is checked in test_pagination.
    page = list_page(client)
    assert len(page.runs) == len(SPECS) and page.has_next_page is False


@pytest.mark.parametrize(
    "states",
    [["SUCCEEDED"], ["INPROGRESS"], ["QUEUED"], ["CANCELLED"], ["FAILED"], ["QUEUED", "CANCELLED"], ["SUCCEEDED", "INPROGRESS"], ["INPROGRESS", "QUEUED", "CANCELLED", "FAILED"]],
)
def test_state_any_of(data, states):
    check(data, {"state": states}, lambda r: r.state in states)


def test_state_counts(data):
    client, _, _, _ = data
    assert len(list_all(client, state=["SUCCEEDED"])) == 6
    assert len(list_all(client, state=["INPROGRESS"])) == 2
    assert len(list_all(client, state=["QUEUED"])) == 1
    assert len(list_all(client, state=["CANCELLED"])) == 1
    assert len(list_all(client, state=["FAILED"])) == 0


@pytest.mark.parametrize("param", ["name", "config_name"])
@pytest.mark.parametrize("value,count", [("alpha", 4), ("beta", 2), ("gamma", 2), ("nobody", 0)])
def test_name_and_its_alias(data, param, value, count):
    check(data, {param: value}, lambda r: r.agent_config.name == value, expect_count=count)


@pytest.mark.parametrize("value,count", [("m-special", 2), ("m-long2", 1), ("demo-model", 4), ("demo", 3), ("none", 0)])
def test_model_id(data, value, count):
    check(data, {"model_id": value}, lambda r: r.agent_config.api_model_id == value, expect_count=count)


@pytest.mark.parametrize("who,count", [("admin", 4), ("agent", 3), ("personal", 3), (None, 0)])
def test_creator(data, who, count):
    server = data[3]
    uid = getattr(server, who).id if who else "01NOSUCHKEY0000000000000000"
    check(data, {"creator": uid}, lambda r: r.creator.uid == uid, expect_count=count)


def test_creator_types(data):
    _, runs, _, _ = data
    for r in runs.values():
        s = spec_of(data, r)
        assert r.creator.type == ("service_account" if s.key == "agent" else "user")


@pytest.mark.parametrize("source,count", [("API", 10), ("SLACK", 0), ("SCHEDULED_AGENT", 0)])
def test_source(data, source, count):
    check(data, {"source": source}, lambda r: r.source == source, expect_count=count)


@pytest.mark.parametrize("env,count", [("fast", 6), ("long1", 3), ("long", 1), ("slow", 0)])
def test_environment_id(data, env, count):
    check(data, {"environment_id": env}, lambda r: r.agent_config.environment_id == env, expect_count=count)


@pytest.mark.parametrize("i", [0, 3, 6, 9])
def test_created_after_and_before(data, i):
    _, runs, ids, _ = data
    t = runs[ids[i]].created_at
    check(data, {"created_after": t}, lambda r: r.created_at > t)
    check(data, {"created_before": t}, lambda r: r.created_at < t)
    # As an RFC 3339 string with a Z, and with another offset, too.
    z = t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    check(data, {"created_after": z}, lambda r: r.created_at > t)
    east = t.astimezone(timezone(timedelta(hours=5, minutes=30)))
    check(data, {"created_before": east}, lambda r: r.created_at < t)


def test_created_window(data):
    _, runs, ids, _ = data
    lo, hi = runs[ids[1]].created_at, runs[ids[7]].created_at
    check(data, {"created_after": lo, "created_before": hi}, lambda r: lo < r.created_at < hi)
    check(data, {"created_after": hi, "created_before": lo}, lambda r: False, expect_count=0)


def test_updated_after(data):
    _, runs, _, _ = data
    times = sorted({r.updated_at for r in runs.values()})
    for t in (times[0], times[len(times) // 2], times[-2], times[-1]):
        check(data, {"updated_after": t}, lambda r, t=t: r.updated_at > t)


@pytest.mark.parametrize(
    "q,count",
    [("parser", 2), ("PARSER", 2), ("report", 2), ("weekly", 2), ("long", 2), ("zzz-not-there", 0), ("Hotel", 1)],
)
def test_q_matches_title_or_prompt(data, q, count):
    needle = q.lower()
    check(data, {"q": q}, lambda r: needle in r.title.lower() or needle in r.prompt.lower(), expect_count=count)


def _meta(r) -> dict:
    m = r.metadata if NEW_SDK else r.model_extra.get("metadata")
    return m or {}


@pytest.mark.parametrize(
    "want,count",
    [
        ({"team": "core"}, 5),
        ({"team": "infra"}, 2),
        ({"team": "core", "prio": "high"}, 3),
        ({"prio": "high"}, 4),
        ({"team": "core", "prio": "low"}, 1),
        ({"team": "nobody"}, 0),
    ],
)
def test_metadata_pairs_and(data, want, count):
    check(data, {"metadata": want}, lambda r: all(_meta(r).get(k) == v for k, v in want.items()), expect_count=count)


def test_combined_filters(data):
    server = data[3]
    check(
        data,
        {"name": "alpha", "state": ["SUCCEEDED"], "creator": server.admin.id},
        lambda r: r.agent_config.name == "alpha" and r.state == "SUCCEEDED" and r.creator.uid == server.admin.id,
        expect_count=2,
    )
    check(
        data,
        {"environment_id": "long1", "state": ["QUEUED", "INPROGRESS"], "q": "a"},
        lambda r: r.agent_config.environment_id == "long1" and r.state in ("QUEUED", "INPROGRESS") and ("a" in r.title.lower() or "a" in r.prompt.lower()),
        expect_count=2,
    )
    check(
        data,
        {"model_id": "demo-model", "source": "API", "metadata": {"team": "core"}, "state": ["SUCCEEDED", "CANCELLED"]},
        lambda r: r.agent_config.api_model_id == "demo-model" and r.state in ("SUCCEEDED", "CANCELLED") and _meta(r).get("team") == "core",
        expect_count=3,
    )


def test_sort_orders_on_everything(data):
    """The orders themselves, spelled out on the full data set."""
    client, runs, ids, _ = data
    by_created = [r.run_id for r in list_all(client, sort_by="created_at", sort_order="asc", limit=3)]
    assert by_created == ids  # created one after another
    titles = [r.title for r in list_all(client, sort_by="title", sort_order="asc", limit=3)]
    assert titles == sorted((s.title for s in SPECS), key=str.lower)
    assert titles[0] == "alpha cleanup" and titles[-1] == "Juliet report"  # ignoring case
    titles_desc = [r.title for r in list_all(client, sort_by="title", sort_order="desc", limit=3)]
    assert titles_desc == titles[::-1]
    updated = [r.updated_at for r in list_all(client, limit=3)]
    assert updated == sorted(updated, reverse=True)


def test_more_than_five_metadata_filters_is_400(data):
    from oz_agent_sdk import BadRequestError

    client = data[0]
    five = {f"k{i}": "v" for i in range(5)}
    assert list_page(client, metadata=five).runs == []
    with pytest.raises(BadRequestError):
        list_page(client, metadata=five | {"k5": "v"})
