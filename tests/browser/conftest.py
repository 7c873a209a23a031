"""The browser suite's fixtures: a real runledger server on a fresh data directory with agents
of the `command` harness (one that talks for a few seconds and answers follow-ups, one that runs
until cancelled, one with a long output, one that fails), the admin key, and the distribution's Chromium driven
by Playwright. Run through tests/browser/run.sh."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

BIN = os.environ.get("RUNLEDGER_BIN", "target/debug/runledger")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", "target/browser-screenshots"))

# Prints a line every 0.15 s (every fifth on stderr), then answers each follow-up that arrives
# within 4 s, then exits 0.
CHATTY = r"""#!/usr/bin/env bash
echo "starting on: $1"
for i in $(seq 1 20); do
    if (( i % 5 == 0 )); then echo "warning $i" >&2; else echo "line $i of the work"; fi
    sleep 0.15
done
while IFS= read -r -t 4 message; do
    echo "got follow-up: $message"
done
echo "done"
"""

# Runs until it is stopped, a line a second.
LONG = r"""#!/usr/bin/env bash
i=0
while true; do i=$((i+1)); echo "still working $i"; sleep 1; done
"""

# Fails: a line on stderr, then exit status 3.
BROKEN = r"""#!/usr/bin/env bash
echo "cannot do this" >&2
exit 3
"""

# 100,000 lines (about 4 MB) at once.
LOUD = r"""#!/usr/bin/env bash
seq 1 100000 | sed 's/^/output line number /'
"""


def _config(agents: Path) -> str:
    def env(name: str, script: str) -> str:
        path = agents / f"{name}.sh"
        path.write_text(script)
        path.chmod(0o755)
        return (
            f'[[environments]]\nid = "{name}"\nharness = "command"\nsandbox = "none"\n'
            f'command = ["bash", "{path}", "{{prompt}}"]\n\n'
        )

    return (
        '[server]\nbind = "127.0.0.1:0"\n\n[limits]\nrate_limit = false\n\n'
        + env("chatty", CHATTY)
        + env("long", LONG)
        + env("loud", LOUD)
        + env("broken", BROKEN)
    )


class Server:
    def __init__(self, root: Path):
        self.root = root
        # Agents of a root server run as `nobody`: their scripts must be readable by everyone.
        root.chmod(0o755)
        agents = root / "agents"
        agents.mkdir(mode=0o755)
        config = root / "runledger.toml"
        config.write_text(_config(agents))
        self.log: list[str] = []
        self.proc = subprocess.Popen(
            [BIN, "serve", "--config", str(config), "--data-dir", str(root / "data")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "RUST_LOG": "warn"},
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.key = self.proc.stdout.readline().strip()
        threading.Thread(target=self._drain, args=(self.proc.stdout,), daemon=True).start()
        deadline = time.monotonic() + 30
        self.base = ""
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.match(r"runledger listening on (\S+)", line)
            if m:
                self.base = m.group(1)
                break
        assert self.base, "the server did not start:\n" + "".join(self.log)
        threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True).start()
        poll(lambda: self.status("/readyz") == 200, "the server is ready")

    def _drain(self, stream) -> None:
        for line in stream:
            self.log.append(line)

    def status(self, path: str) -> int:
        try:
            with urllib.request.urlopen(self.base + path, timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def api(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + "/api/v1" + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + (key or self.key))
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def create(self, **body: Any) -> str:
        return self.api("POST", "/agent/runs", body)["run_id"]

    def run(self, run_id: str) -> dict:
        return self.api("GET", f"/agent/runs/{run_id}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def poll(fn: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server() -> Iterable[Server]:
    with tempfile.TemporaryDirectory(prefix="runledger-browser-") as tmp:
        s = Server(Path(tmp))
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="session")
def browser() -> Iterable[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser) -> Iterable[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" and "401" not in m.text else None)
    # The page may load nothing from anywhere but the server.
    requests: list[str] = []
    p.on("request", lambda r: requests.append(r.url))
    p.errors = errors  # type: ignore[attr-defined]
    p.requests = requests  # type: ignore[attr-defined]
    try:
        yield p
    finally:
        context.close()


def sign_in(page: Page, server: Server, key: str | None = None) -> None:
    page.goto(server.base + "/signin")
    page.get_by_label("API key").fill(key or server.key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/runs")


def shoot(browser: Browser, server: Server, path: str, name: str, key: str | None = None,
          ready: Callable[[Page], None] | None = None) -> None:
    """Screenshots of `path` light and dark, 360 px and 1280 px wide."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        for width in (360, 1280):
            context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
            p = context.new_page()
            try:
                if path != "/signin":
                    sign_in(p, server, key)
                p.goto(server.base + path)
                if ready:
                    ready(p)
                p.screenshot(path=str(SCREENSHOTS / f"{name}-{scheme}-{width}.png"), full_page=True)
            finally:
                context.close()
