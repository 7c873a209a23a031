"""The official client's whole resource tree against runledger, strict validation on.

Every public method of the sync client's resources (`client.agent`, its sub-resources, and any
other resource the client has) is found by introspection and called once through the table
`CALLS` below, which says how to call it. Each call must get a response the client validates, or
the deliberate `422 operation_not_supported` that docs/api.md documents for it (`NOT_SUPPORTED`);
anything else fails, a 404 most of all, since it means a route is missing. A method the table
does not know (a new client version's) fails the walk too, so a future gap is caught rather
than skipped.
"""

from __future__ import annotations

import functools
import inspect
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest
from oz_agent_sdk import APIStatusError
from oz_agent_sdk._resource import SyncAPIResource

from conftest import CONFIG, NEW_SDK, Server, create_run, serving, unique, wait_state

OPERATION_NOT_SUPPORTED = "https://docs.warp.dev/reference/api-and-sdk/troubleshooting/errors/operation_not_supported"

# A screenshot's bytes: a PNG signature and some body.
PNG_PRINTF = "\\211PNG\\r\\n\\032\\n" + "runledger" * 8


@pytest.fixture(scope="module")
def agent_dir() -> Iterable[Path]:
    # Not under /tmp (a sandboxed agent gets a private one) and open to every user.
    base = "/var/tmp" if os.path.isdir("/var/tmp") else None
    directory = Path(tempfile.mkdtemp(prefix="runledger-sdk-tree-", dir=base))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def server(agent_dir: Path) -> Iterable[Server]:
    # An agent that reports a screenshot (an artifact type every pinned client knows).
    agent = agent_dir / "agent.sh"
    agent.write_text(
        "#!/bin/sh\nset -e\n"
        f"printf '{PNG_PRINTF}' > shot.png\n"
        """echo '{"type":"screenshot","path":"shot.png","description":"the page"}' >> "$RUNLEDGER_REPORT"\n"""
    )
    agent.chmod(0o755)
    config = CONFIG + f"""
[[environments]]
id = "reporting"
harness = "command"
command = ["{agent}"]
"""
    yield from serving(config, "runledger-sdk-tree-")


class Context:
    """What the calls share: the client, a finished run with an artifact, a run to cancel and
    the schedule the schedule methods create, change and delete."""

    def __init__(self, server: Server):
        self.server = server
        self.client = server.client()
        marker = unique("tree")
        created = create_run(self.client, prompt=f"{marker} report", config={"environment_id": "reporting"})
        self.run = wait_state(self.client, created.run_id, "SUCCEEDED")
        assert self.run.artifacts, "the reporting agent's screenshot"
        self.artifact_uid = self.run.artifacts[0].data.artifact_uid
        self.schedule_id: str | None = None

    def cancellable(self) -> str:
        return create_run(self.client, prompt="to cancel", config={"environment_id": "long"}).run_id

    def schedule(self) -> str:
        assert self.schedule_id, "agent.schedules.create ran first and succeeded"
        return self.schedule_id

    def create_schedule(self) -> Any:
        item = self.client.agent.schedules.create(
            name=unique("nightly"), cron_schedule="0 9 * * *", prompt="tidy the docs"
        )
        self.schedule_id = item.id
        return item


def _followup(c: Context) -> Any:
    from conftest import followup

    return followup(c.client, c.run.run_id, "one more thing")


# How to call each method, by its path in the client, in the order they run (a schedule is made
# before it is read, changed, paused, resumed and deleted).
CALLS: dict[str, Callable[[Context], Any]] = {
    "agent.list": lambda c: c.client.agent.list(sort_by="name", refresh=True, include_malformed_skills=True),
    "agent.list_environments": lambda c: c.client.agent.list_environments(),
    "agent.get_artifact": lambda c: c.client.agent.get_artifact(c.artifact_uid),
    "agent.run": lambda c: c.client.agent.run(prompt="from the walk", config={"environment_id": "fast"}),
    "agent.runs.retrieve": lambda c: c.client.agent.runs.retrieve(c.run.run_id),
    "agent.runs.list": lambda c: c.client.agent.runs.list(limit=5),
    "agent.runs.list_handoff_attachments": lambda c: c.client.agent.runs.list_handoff_attachments(c.run.run_id),
    "agent.runs.cancel": lambda c: c.client.agent.runs.cancel(c.cancellable()),
    "agent.runs.submit_followup": _followup,
    "agent.sessions.check_redirect": lambda c: c.client.agent.sessions.check_redirect(c.run.session_id or c.run.run_id),
    "agent.conversations.check_redirect": lambda c: c.client.agent.conversations.check_redirect(c.run.run_id),
    "agent.schedules.create": lambda c: c.create_schedule(),
    "agent.schedules.retrieve": lambda c: c.client.agent.schedules.retrieve(c.schedule()),
    "agent.schedules.update": lambda c: c.client.agent.schedules.update(
        c.schedule(), name=unique("nightly"), cron_schedule="30 9 * * *", enabled=True, prompt="tidy the docs again"
    ),
    "agent.schedules.list": lambda c: c.client.agent.schedules.list(),
    "agent.schedules.pause": lambda c: c.client.agent.schedules.pause(c.schedule()),
    "agent.schedules.resume": lambda c: c.client.agent.schedules.resume(c.schedule()),
    "agent.schedules.delete": lambda c: c.client.agent.schedules.delete(c.schedule()),
    "agent.agent.create": lambda c: c.client.agent.agent.create(name="reviewer"),
    "agent.agent.update": lambda c: c.client.agent.agent.update("some-agent", name="renamed"),
    "agent.agent.list": lambda c: c.client.agent.agent.list(),
    "agent.agent.get": lambda c: c.client.agent.agent.get("some-agent"),
    "agent.agent.delete": lambda c: c.client.agent.agent.delete("some-agent"),
}

# The methods runledger answers `422 operation_not_supported` (docs/api.md): agent identities.
NOT_SUPPORTED = {
    "agent.agent.create",
    "agent.agent.update",
    "agent.agent.list",
    "agent.agent.get",
    "agent.agent.delete",
}

# What some answers must say, beyond validating.
CHECKS: dict[str, Callable[[Context, Any], None]] = {
    "agent.list": lambda c, r: _equal(r.agents, []),
    "agent.runs.list_handoff_attachments": lambda c, r: _equal(r.attachments, []),
    # The run has finished: its session gives way to its conversation, which needs no redirect.
    # 0.15 checks without a key (the hosted endpoint is public), and runledger then answers no
    # redirect whatever the id, so that an anonymous caller learns nothing of runs.
    "agent.sessions.check_redirect": lambda c, r: _equal(r.conversation_id, None if NEW_SDK else c.run.run_id),
    "agent.conversations.check_redirect": lambda c, r: _equal(r.session_id, None),
}


def _equal(got: Any, want: Any) -> None:
    assert got == want, f"{got!r} != {want!r}"


def _is_resource_property(owner: type, name: str) -> bool:
    attr = inspect.getattr_static(owner, name, None)
    return isinstance(attr, (functools.cached_property, property)) or type(attr).__name__ == "cached_property"


def walk(obj: Any, prefix: str) -> list[str]:
    """The public methods of `obj` and of every resource below it, as dotted paths."""
    found: list[str] = []
    for name in sorted(dir(type(obj))):
        if name.startswith("_") or name in ("with_raw_response", "with_streaming_response"):
            continue
        path = f"{prefix}.{name}" if prefix else name
        if _is_resource_property(type(obj), name):
            value = getattr(obj, name)
            if isinstance(value, SyncAPIResource):
                found.extend(walk(value, path))
            continue
        if isinstance(obj, SyncAPIResource) and inspect.isfunction(inspect.getattr_static(type(obj), name)):
            found.append(path)
    return found


def tree(client: Any) -> list[str]:
    """Every method of every resource of the client: its resource properties are walked (the
    client's own methods, `get`, `post` and the like, are the transport, not the API)."""
    methods: list[str] = []
    for name in sorted(dir(type(client))):
        if name.startswith("_") or name in ("with_raw_response", "with_streaming_response"):
            continue
        if _is_resource_property(type(client), name):
            value = getattr(client, name)
            if isinstance(value, SyncAPIResource):
                methods.extend(walk(value, name))
    return methods


def test_the_table_knows_every_method_of_the_client(server: Server) -> None:
    methods = tree(server.client())
    assert "agent.runs.retrieve" in methods and "agent.list" in methods, methods
    unknown = sorted(set(methods) - set(CALLS))
    assert not unknown, f"methods of this client that the walk does not know how to call: {unknown}"


def test_every_method_gets_a_valid_answer_or_the_documented_422(server: Server) -> None:
    c = Context(server)
    methods = set(tree(c.client))
    failures: list[str] = []
    called = 0
    for name, call in CALLS.items():
        if name not in methods:
            continue  # a method of another client version
        called += 1
        try:
            result = call(c)
        except APIStatusError as e:
            body = e.body if isinstance(e.body, dict) else {}
            if e.status_code == 404:
                failures.append(f"{name}: 404 (a missing route?) {body}")
            elif name in NOT_SUPPORTED and e.status_code == 422 and body.get("type") == OPERATION_NOT_SUPPORTED:
                assert body.get("detail"), f"{name}: the 422 says what to use instead"
            else:
                failures.append(f"{name}: {e.status_code} {body}")
            continue
        except Exception as e:  # a response the client refused to validate, among others
            failures.append(f"{name}: {type(e).__name__}: {e}")
            continue
        if name in NOT_SUPPORTED:
            failures.append(f"{name}: answered {result!r}, but docs/api.md says 422")
            continue
        check = CHECKS.get(name)
        if check is not None:
            try:
                check(c, result)
            except AssertionError as e:
                failures.append(f"{name}: {e}")
    assert called == len(methods), "every method of the client was called"
    assert not failures, "\n".join(failures)


def test_the_walk_finds_methods_and_resources_it_has_never_seen(server: Server) -> None:
    """The walk itself: a resource's new method, and a new sub-resource's methods, are found
    (and so fail the table check above until the table knows them)."""
    from oz_agent_sdk._compat import cached_property

    class Extra(SyncAPIResource):
        def frobnicate(self) -> None: ...

    class Grown(SyncAPIResource):
        def rotate(self) -> None: ...

        @cached_property
        def extra(self) -> Extra:
            return Extra(self._client)

        @property
        def with_raw_response(self) -> None:
            return None

    client = server.client()
    assert walk(Grown(client), "agent.grown") == ["agent.grown.extra.frobnicate", "agent.grown.rotate"]
