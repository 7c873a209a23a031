"""Fixtures of the SDK suite: a real runledger server driven by the official Python client.

Each test module gets its own server (fresh data directory, so list tests can assert exact
results). Start-up goes like this:

1. first start on an empty data directory: the server prints one admin API key alone on
   stdout and `runledger listening on http://ADDR` on stderr; we read both, then stop it;
2. with the server stopped, `runledger keys create` adds an agent key and a second personal
   key offline;
3. second start on the same directory (port 0 again, address parsed from stderr).

Every wait polls with a deadline; nothing sleeps a fixed time to synchronise.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import httpx
import pytest

import oz_agent_sdk
from oz_agent_sdk import OzAPI

SDK_VERSION = os.environ.get("OZ_SDK_VERSION") or oz_agent_sdk.__version__
if oz_agent_sdk.__version__ != SDK_VERSION:
    raise RuntimeError(f"OZ_SDK_VERSION={SDK_VERSION} but oz_agent_sdk {oz_agent_sdk.__version__} is installed")
SDK = tuple(int(p) for p in SDK_VERSION.split(".")[:3])
# 0.15 creates runs with POST /agent/runs, has cursor-page auto-pagination, metadata,
# submit_followup and list_environments; 0.10.1 creates with POST /agent/run and returns
# a plain RunListResponse whose page_info.has_next_page is required.
NEW_SDK = SDK >= (0, 15, 0)

BIN = os.environ.get("RUNLEDGER_BIN") or str(Path(__file__).resolve().parents[2] / "target" / "debug" / "runledger")

START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0

CONFIG = """\
[server]
bind = "127.0.0.1:0"

# The suite polls and pages through one key far faster than a client should (and slower still
# on a loaded machine); rate limiting has its own module, test_rate_limit.py.
[limits]
rate_limit = false

# The first environment is the default one.
[[environments]]
id = "fast"
name = "Fast demo"
description = "demo agent, 300 ms"
harness = "demo"
demo_duration_ms = 300
max_concurrent = 8
model_id = "demo-model"

# Stays INPROGRESS long enough to cancel and follow up; a second run waits in QUEUED.
[[environments]]
id = "slow"
harness = "demo"
demo_duration_ms = 5000
max_concurrent = 1

# One run at a time, quickly: a second run is QUEUED (at capacity) and then proceeds.
[[environments]]
id = "single"
harness = "demo"
demo_duration_ms = 600
max_concurrent = 1
model_id = "single-model"

# Outlives every test: in-progress and queued runs that do not change while we look.
[[environments]]
id = "long"
harness = "demo"
demo_duration_ms = 120000
max_concurrent = 16
model_id = "long-model"

[[environments]]
id = "long1"
harness = "demo"
demo_duration_ms = 120000
max_concurrent = 1

# A Claude Code preset whose "CLI" is a shell printing a final result line with its own cost,
# so runs get `request_usage` (the preset's flags follow as the shell's unused arguments).
[[environments]]
id = "usage"
harness = "claude"
command = ["sh", "-c", "echo '{\\"type\\":\\"result\\",\\"subtype\\":\\"success\\",\\"is_error\\":false,\\"result\\":\\"ok\\",\\"session_id\\":\\"sdk-usage-1\\",\\"total_cost_usd\\":0.0123,\\"usage\\":{\\"input_tokens\\":10,\\"output_tokens\\":5}}'"]

[prices]
compute_per_cpu_hour = 1.0
"""

LISTENING = re.compile(r"runledger listening on (http://\S+)")


@dataclass
class Key:
    secret: str
    id: str
    name: str
    kind: str  # "personal" | "agent"
    admin: bool


@dataclass
class Server:
    base_url: str  # http://127.0.0.1:PORT/api/v1
    root_url: str  # http://127.0.0.1:PORT
    data_dir: Path
    config_path: Path
    admin: Key  # personal admin key printed on first start
    agent: Key  # agent-kind key created offline
    personal: Key  # second personal key created offline
    process: subprocess.Popen = field(repr=False)
    stderr_lines: list[str] = field(default_factory=list, repr=False)

    def client(self, key: Key | str | None = None, **kwargs: Any) -> OzAPI:
        secret = self.admin.secret if key is None else key if isinstance(key, str) else key.secret
        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("timeout", 10.0)
        return OzAPI(api_key=secret, base_url=self.base_url, _strict_response_validation=True, **kwargs)

    def restart(self, kill: bool = False) -> None:
        """Stops the server (SIGKILL: a crash; else SIGTERM) and starts it again on the same
        data directory; the address changes (port 0)."""
        started: _Started = self._started  # type: ignore[attr-defined]
        if kill:
            started.process.kill()
            started.process.wait(STOP_TIMEOUT)
        else:
            started.stop()
        again = _Started(self.data_dir, self.config_path)
        try:
            root = again.root_url()
            _wait_ready(root)
        except BaseException:
            again.stop()
            raise
        self._started = again  # type: ignore[attr-defined]
        self.process = again.process
        self.stderr_lines = again.stderr_lines
        self.root_url = root
        self.base_url = f"{root}/api/v1"

    def cli(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return run_cli(self.data_dir, *args, config=self.config_path, env=env, check=check)


def run_cli(
    data_dir: Path, *args: str, config: Path | None = None, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    cmd = [BIN]
    if config is not None:
        cmd += ["--config", str(config)]
    cmd += ["--data-dir", str(data_dir), *args]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RUNLEDGER_")}
    full_env.update(env or {})
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=30)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\nstdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if pytest dies, so no server outlives the suite."""
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # not Linux: the fixture's finaliser still stops the server
        pass


class _Started:
    """A server process whose stdout/stderr are drained by threads (so pipes never fill)."""

    def __init__(self, data_dir: Path, config: Path):
        if not (os.path.isfile(BIN) and os.access(BIN, os.X_OK)):
            raise RuntimeError(f"no runledger binary at {BIN}; run `cargo build` or set RUNLEDGER_BIN")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNLEDGER_")}
        env.setdefault("RUST_LOG", "warn")
        self.process = subprocess.Popen(
            [BIN, "serve", "--config", str(config), "--data-dir", str(data_dir), "--bind", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self.stdout_lines: list[str] = []
        self.stderr_lines: list[str] = []
        self._cond = threading.Condition()
        for stream, sink in ((self.process.stdout, self.stdout_lines), (self.process.stderr, self.stderr_lines)):
            threading.Thread(target=self._drain, args=(stream, sink), daemon=True).start()

    def _drain(self, stream, sink: list[str]) -> None:
        for line in stream:
            with self._cond:
                sink.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[], Any], what: str, timeout: float = START_TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = predicate()
                if found:
                    return found
                if self.process.poll() is not None:
                    # Let the drain threads finish so the message is complete.
                    self._cond.wait(0.2)
                    found = predicate()
                    if found:
                        return found
                    raise RuntimeError(
                        f"runledger exited ({self.process.returncode}) before {what}:\n" + "\n".join(self.stderr_lines)
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"timed out waiting for {what}:\n" + "\n".join(self.stderr_lines))
                self._cond.wait(min(left, 0.5))

    def root_url(self) -> str:
        def find():
            for line in self.stderr_lines:
                m = LISTENING.search(line)
                if m:
                    return m.group(1)
            return None

        return self.wait_for(find, "the 'runledger listening on' line")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT)


def _wait_ready(root_url: str, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{root_url}/readyz", timeout=2.0)
            if r.status_code == 200:
                return
            last = r.status_code
        except httpx.HTTPError as e:
            last = e
        time.sleep(0.02)
    raise RuntimeError(f"{root_url}/readyz not ready in {timeout}s (last: {last!r})")


def _key_ids(root_url: str, admin_secret: str) -> dict[str, dict]:
    r = httpx.get(f"{root_url}/api/v1/admin/keys", headers={"Authorization": f"Bearer {admin_secret}"}, timeout=5)
    r.raise_for_status()
    return {k["name"]: k for k in r.json()["keys"]}


def start_server(tmp: Path, config_text: str = CONFIG) -> Server:
    data_dir = tmp / "data"
    config = tmp / "runledger.toml"
    config.write_text(config_text)

    # 1. First start: the admin key on stdout, alone on its first line.
    first = _Started(data_dir, config)
    try:
        admin_secret = first.wait_for(lambda: first.stdout_lines[0] if first.stdout_lines else None, "the admin key")
        first.root_url()
    finally:
        first.stop()
    assert re.fullmatch(r"rl_[A-Za-z0-9_-]{20,}", admin_secret), f"unexpected admin key line {admin_secret!r}"

    # 2. More keys, offline.
    agent_secret = run_cli(data_dir, "keys", "create", "--name", "sdk-agent", "--kind", "agent").stdout.strip()
    personal_secret = run_cli(data_dir, "keys", "create", "--name", "sdk-second-user").stdout.strip()
    for s in (agent_secret, personal_secret):
        assert re.fullmatch(r"rl_[A-Za-z0-9_-]{20,}", s), f"unexpected key output {s!r}"

    # 3. Second start.
    proc = _Started(data_dir, config)
    try:
        root = proc.root_url()
        _wait_ready(root)
        assert not proc.stdout_lines, f"a second start must not print a new key: {proc.stdout_lines}"
        by_name = _key_ids(root, admin_secret)
    except BaseException:
        proc.stop()
        raise
    admin_name = next(n for n, k in by_name.items() if k["admin"])

    def key(secret: str, name: str) -> Key:
        k = by_name[name]
        return Key(secret=secret, id=k["id"], name=name, kind=k["kind"], admin=k["admin"])

    server = Server(
        base_url=f"{root}/api/v1",
        root_url=root,
        data_dir=data_dir,
        config_path=config,
        admin=key(admin_secret, admin_name),
        agent=key(agent_secret, "sdk-agent"),
        personal=key(personal_secret, "sdk-second-user"),
        process=proc.process,
        stderr_lines=proc.stderr_lines,
    )
    server._started = proc  # type: ignore[attr-defined]
    return server


def serving(config_text: str = CONFIG, prefix: str = "runledger-sdk-") -> Iterable[Server]:
    """A server on a fresh data directory for the length of a fixture: yields it, then stops it
    and removes the directory."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        srv = start_server(tmp, config_text)
        try:
            yield srv
        finally:
            srv._started.stop()  # type: ignore[attr-defined]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def server() -> Iterable[Server]:
    yield from serving()


@pytest.fixture(scope="module")
def client(server: Server) -> OzAPI:
    return server.client()


# ---------------------------------------------------------------------------------------------
# Version-independent helpers


def create_run(client: OzAPI, *, path: str | None = None, metadata: dict[str, str] | None = None, **params: Any):
    """Creates a run through the SDK's own create method (`client.agent.run`), or, with `path`
    ("/agent/run" or "/agent/runs"), through a raw `client.post` of the same body that is still
    validated strictly into the SDK's `AgentRunResponse`. `metadata` goes through the SDK
    argument on 0.15 and as an extra body field on 0.10.1 (which has no such argument)."""
    from oz_agent_sdk.types import AgentRunResponse

    if path is None:
        if metadata is not None:
            if NEW_SDK:
                params["metadata"] = metadata
            else:
                params["extra_body"] = {**params.get("extra_body", {}), "metadata": metadata}
        return client.agent.run(**params)
    extra_headers = params.pop("extra_headers", None)
    body = dict(params)
    if metadata is not None:
        body["metadata"] = metadata
    return client.post(
        path,
        body=body,
        cast_to=AgentRunResponse,
        options={"headers": extra_headers} if extra_headers else {},
    )


@dataclass
class ListResult:
    runs: list
    has_next_page: bool
    next_cursor: str | None


def _list_kwargs(filters: dict[str, Any]) -> dict[str, Any]:
    """SDK arguments for list filters. `metadata` maps to `metadata[k]=v` (the SDK argument on
    0.15, `extra_query` on 0.10.1, which lacks it); `config_name` (no SDK argument) goes as an
    extra query parameter."""
    filters = dict(filters)
    extra_query = dict(filters.pop("extra_query", {}) or {})
    if "config_name" in filters:
        extra_query["config_name"] = filters.pop("config_name")
    if "metadata" in filters and not NEW_SDK:
        for k, v in filters.pop("metadata").items():
            extra_query[f"metadata[{k}]"] = v
    if extra_query:
        filters["extra_query"] = extra_query
    return filters


def list_page(client: OzAPI, **filters: Any) -> ListResult:
    """One page of `GET /agent/runs`, strictly validated by the SDK's own list method."""
    page = client.agent.runs.list(**_list_kwargs(filters))
    if NEW_SDK:
        info = page.page_info
        assert info is not None, "page_info must always be present"
        assert info.has_next_page is not None, "page_info.has_next_page must always be present"
        return ListResult(list(page.runs), info.has_next_page, info.next_cursor)
    return ListResult(list(page.runs), page.page_info.has_next_page, page.page_info.next_cursor)


def list_all(client: OzAPI, **filters: Any) -> list:
    """Every matching run: the SDK's auto-pagination (iterating the cursor page) on 0.15,
    manual `cursor` paging on 0.10.1, which returns a plain RunListResponse."""
    if NEW_SDK:
        return list(client.agent.runs.list(**_list_kwargs(filters)))
    out: list = []
    cursor = None
    for _ in range(10_000):
        kw = dict(filters)
        if cursor:
            kw["cursor"] = cursor
        page = list_page(client, **kw)
        out.extend(page.runs)
        if not page.has_next_page:
            assert page.next_cursor is None, "no next_cursor on the last page"
            return out
        assert page.next_cursor, "has_next_page without next_cursor"
        cursor = page.next_cursor
    raise AssertionError("pagination did not end")


def followup(client: OzAPI, run_id: str, message: str, mode: str | None = None, **kw: Any) -> Any:
    """`POST /agent/runs/{id}/followups`: `runs.submit_followup` where the SDK has it, else a
    raw `client.post` with `cast_to=object`."""
    body: dict[str, Any] = {"message": message}
    if mode is not None:
        body["mode"] = mode
    if hasattr(client.agent.runs, "submit_followup"):
        return client.agent.runs.submit_followup(run_id, **body, **kw)
    return client.post(f"/agent/runs/{run_id}/followups", body=body, cast_to=object)


def run_events(client: OzAPI, run_id: str) -> list[dict]:
    data = client.get(f"/agent/runs/{run_id}/events", cast_to=object)
    assert isinstance(data, dict) and data["run_id"] == run_id
    return data["events"]


def transcript(client: OzAPI, run_id: str) -> dict:
    data = client.get(f"/agent/runs/{run_id}/transcript", cast_to=object)
    assert isinstance(data, dict) and data["run_id"] == run_id
    return data


def poll(fn: Callable[[], Any], until: Callable[[Any], bool], what: str, timeout: float = 15.0, every: float = 0.02) -> Any:
    """Calls `fn` until `until(result)` holds, with a deadline; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {value!r}")
        time.sleep(every)


def wait_state(client: OzAPI, run_id: str, *states: str, timeout: float = 15.0):
    return poll(
        lambda: client.agent.runs.retrieve(run_id),
        lambda r: r.state in states,
        f"run {run_id} to reach {states}",
        timeout=timeout,
    )


def wait_all(client: OzAPI, run_ids: Iterable[str], *states: str, timeout: float = 20.0) -> None:
    for rid in run_ids:
        wait_state(client, rid, *states, timeout=timeout)


def unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns():x}"


def cancel(client: OzAPI, run_id: str) -> str:
    """`runs.cancel`, which the SDK types as `str` and returns as the raw response text. SPEC §1
    (and the OpenAPI document: `application/json`, schema `type: string`) make the body the run
    id as a JSON string, so the SDK hands back `"<id>"` with its quotes; decode and check it."""
    import json

    text = client.agent.runs.cancel(run_id)
    assert isinstance(text, str)
    assert json.loads(text) == run_id, f"cancel returned {text!r}"
    return json.loads(text)
