"""Fixtures for the agent-CLI suite: the scripted model server and one adapter per CLI.

Each CLI runs directly (not through runledger) in a fresh workspace, with a private HOME (and
CODEX_HOME / GEMINI_CLI_HOME) under $REPO/target/models-runs/, pointed at the scripted server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BIN_DIR = Path(os.environ.get("AGENT_CLIS_BIN", REPO / "target" / "agent-clis" / "bin"))
RUNS_DIR = Path(os.environ.get("MODEL_TESTS_RUNS", REPO / "target" / "models-runs"))
CLI_TIMEOUT = float(os.environ.get("MODEL_TESTS_CLI_TIMEOUT", "60"))

CLIS = ["claude", "codex", "gemini"]

# Model names each CLI is given with --model (or config): known to the CLI, so it applies that
# model's tool set and metadata, and never reaches any real service.
MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.5", "gemini": "gemini-2.5-flash"}


# ---------------------------------------------------------------------------------------------
# The scripted model server


class ModelServer:
    def __init__(self, log_path: Path):
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "server.py"), "--log", str(log_path)],
            stdout=subprocess.PIPE,
            stderr=None,
            text=True,
        )
        line = self.proc.stdout.readline().strip()
        if not line.startswith("PORT="):
            self.proc.kill()
            raise RuntimeError(f"model server did not start: {line!r}")
        self.port = int(line.split("=", 1)[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def script(self, script):
        self._call("POST", "/_script", script)

    def clear(self):
        self._call("POST", "/_requests/clear", {})

    def unauthorized(self, on: bool):
        self._call("POST", "/_mode", {"unauthorized": on})

    def requests(self):
        return self._call("GET", "/_requests")

    def main_requests(self):
        return [r for r in self.requests() if r["kind"] == "main"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="session")
def model_server():
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    log = RUNS_DIR / "requests.jsonl"
    log.unlink(missing_ok=True)
    server = ModelServer(log)
    yield server
    server.stop()


@pytest.fixture
def server(model_server):
    model_server.clear()
    model_server.unauthorized(False)
    model_server.script([])
    return model_server


# ---------------------------------------------------------------------------------------------
# CLI adapters


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    events: list = field(default_factory=list)  # stdout JSON lines, parsed

    def session_id(self):
        for e in self.events:
            for key in ("session_id", "thread_id"):
                if isinstance(e.get(key), str):
                    return e[key]
        return None

    def describe(self):
        return f"exit {self.rc}\n--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"


def parse_events(stdout):
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return events


def base_env(home: Path):
    env = {
        "PATH": f"{BIN_DIR}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    node = shutil.which("node")
    if node:  # gemini and the codex shim are node scripts; keep the machine's node reachable
        env["PATH"] = f"{BIN_DIR}:{Path(node).parent}:/usr/local/bin:/usr/bin:/bin"
    return env


class Agent:
    """One CLI in one private home, pointed at the scripted server."""

    name = ""

    def __init__(self, server: ModelServer, root: Path, workspace: Path):
        self.server = server
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.workspace = workspace
        self.runs = 0
        self.extra_args = []
        self.setup()

    def setup(self):
        pass

    def env(self, key=True):
        raise NotImplementedError

    def base_env(self):
        env = base_env(self.home)
        # Each run's temporary files (Gemini CLI's error reports, Claude Code's task output)
        # stay in its private root; CODEX_HOME is next to this directory, never inside it.
        tmp = self.root / "tmp"
        tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(tmp)
        return env

    def argv(self, prompt, resume=None, write=True, model=True):
        raise NotImplementedError

    def add_mcp_server(self, name, command, args):
        """Give the CLI a stdio MCP server, in the CLI's own configuration format."""
        raise NotImplementedError

    def run(self, prompt, resume=None, write=True, key=True, model=True, stdin=None, timeout=CLI_TIMEOUT):
        argv = self.argv(prompt, resume=resume, write=write, model=model)
        proc = subprocess.run(
            argv,
            cwd=self.workspace,
            env=self.env(key=key),
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.runs += 1
        base = self.root / f"run-{self.runs}"
        base.with_suffix(".argv.json").write_text(json.dumps(argv, indent=1))
        base.with_suffix(".stdout").write_text(proc.stdout)
        base.with_suffix(".stderr").write_text(proc.stderr)
        base.with_suffix(".rc").write_text(f"{proc.returncode}\n")
        return Result(proc.returncode, proc.stdout, proc.stderr, parse_events(proc.stdout))


class Claude(Agent):
    name = "claude"

    def env(self, key=True):
        env = self.base_env()
        env.update(
            {
                "ANTHROPIC_BASE_URL": self.server.url,
                # Root may bypass permissions only when it says it runs in a sandbox.
                "IS_SANDBOX": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                # Without this a 401 is retried 10 times with backoff (minutes) before failing.
                "CLAUDE_CODE_MAX_RETRIES": "0",
                "DISABLE_AUTOUPDATER": "1",
            }
        )
        if key:
            env["ANTHROPIC_API_KEY"] = "scripted-test-key"
        return env

    def argv(self, prompt, resume=None, write=True, model=True):
        argv = [str(BIN_DIR / "claude"), "-p", "--output-format", "stream-json", "--verbose"]
        if write:
            argv += ["--permission-mode", "bypassPermissions"]
        if model:
            argv += ["--model", MODELS["claude"]]
        if resume:
            argv += ["--resume", resume]
        return argv + self.extra_args + ["--", prompt]

    def add_mcp_server(self, name, command, args):
        path = self.root / "mcp.json"
        config = json.loads(path.read_text()) if path.exists() else {"mcpServers": {}}
        config["mcpServers"][name] = {"command": command, "args": args}
        path.write_text(json.dumps(config, indent=2))
        if "--mcp-config" not in self.extra_args:
            self.extra_args += ["--mcp-config", str(path)]


    def start_streaming(self):
        """Claude Code with streaming JSON input: user messages arrive on stdin, one JSON per line,
        also while a turn runs."""
        argv = [str(BIN_DIR / "claude"), "-p", "--input-format", "stream-json", "--output-format", "stream-json"]
        argv += ["--verbose", "--permission-mode", "bypassPermissions", "--model", MODELS["claude"]]
        return subprocess.Popen(
            argv,
            cwd=self.workspace,
            env=self.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )


def stream_user_message(text):
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}}) + "\n"


class Codex(Agent):
    name = "codex"
    # Full access: the caller's sandbox is the boundary. "workspace-write" uses Codex's own
    # bubblewrap sandbox instead.
    sandbox = "danger-full-access"

    def setup(self):
        # CODEX_HOME lives under target/, never under TMPDIR (its sandbox helper refuses that).
        self.codex_home = self.root / "codex-home"
        self.codex_home.mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text(
            "\n".join(
                [
                    'model_provider = "scripted"',
                    "",
                    "[model_providers.scripted]",
                    'name = "scripted"',
                    f'base_url = "{self.server.url}/v1"',
                    'env_key = "OPENAI_API_KEY"',
                    'wire_api = "responses"',
                    "supports_websockets = false",
                    "request_max_retries = 0",
                    "stream_max_retries = 0",
                    "",
                ]
            )
        )

    def env(self, key=True):
        env = self.base_env()
        env["CODEX_HOME"] = str(self.codex_home)
        if key:
            env["OPENAI_API_KEY"] = "scripted-test-key"
        return env

    def argv(self, prompt, resume=None, write=True, model=True):
        argv = [str(BIN_DIR / "codex"), "exec", "--json", "--skip-git-repo-check"]
        argv += ["--sandbox", self.sandbox if write else "read-only"]
        if model:
            argv += ["--model", MODELS["codex"]]
        if resume:
            argv += ["resume", "--", resume, prompt]
        else:
            argv += ["--", prompt]
        return argv

    def add_mcp_server(self, name, command, args):
        config = self.codex_home / "config.toml"
        block = f"\n[mcp_servers.{name}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        config.write_text(config.read_text() + block)


class Gemini(Agent):
    name = "gemini"

    def setup(self):
        # GEMINI_CLI_HOME replaces the home directory for Gemini CLI's state: settings in
        # $GEMINI_CLI_HOME/.gemini/settings.json. With a base URL set, the auth type must be
        # chosen here or the CLI exits 41.
        self.gemini_home = self.root / "gemini-home"
        (self.gemini_home / ".gemini").mkdir(parents=True, exist_ok=True)
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        (self.gemini_home / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2))

    def env(self, key=True):
        env = self.base_env()
        env.update({"GEMINI_CLI_HOME": str(self.gemini_home), "GOOGLE_GEMINI_BASE_URL": self.server.url})
        if key:
            env["GEMINI_API_KEY"] = "scripted-test-key"
        return env

    def argv(self, prompt, resume=None, write=True, model=True):
        argv = [str(BIN_DIR / "gemini"), "--skip-trust", "--output-format", "stream-json"]
        argv += ["--approval-mode", "yolo" if write else "default"]
        if model:
            argv += ["--model", MODELS["gemini"]]
        if resume:
            argv += [f"--resume={resume}"]
        return argv + [f"--prompt={prompt}"]

    def add_mcp_server(self, name, command, args):
        path = self.gemini_home / ".gemini" / "settings.json"
        settings = json.loads(path.read_text())
        settings.setdefault("mcpServers", {})[name] = {"command": command, "args": args}
        path.write_text(json.dumps(settings, indent=2))


ADAPTERS = {"claude": Claude, "codex": Codex, "gemini": Gemini}


@pytest.fixture(params=CLIS)
def cli_name(request):
    path = BIN_DIR / request.param
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/install-agent-clis first")
    return request.param


@pytest.fixture
def agent_factory(server, tmp_path, request):
    """Makes an Agent for a CLI: private home under target/models-runs/, workspace in tmp_path."""
    made = []

    def make(name, workspace=None):
        root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=RUNS_DIR))
        ws = workspace or (tmp_path / f"ws-{uuid.uuid4().hex[:8]}")
        ws.mkdir(parents=True, exist_ok=True)
        agent = ADAPTERS[name](server, root, ws)
        made.append(agent)
        return agent

    yield make
    # A CLI that sent a request the server does not know (a new probe or API) fails the test,
    # so an upgrade that changes what the CLIs send is noticed.
    strays = [f"{r['method']} {r['path']}" for r in server.requests() if r["kind"] in ("unknown", "bad-request")]
    assert not strays, f"requests the scripted server does not understand: {strays}"
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for agent in made:
        if not failed and not os.environ.get("MODEL_TESTS_KEEP"):
            shutil.rmtree(agent.root, ignore_errors=True)


@pytest.fixture
def agent(agent_factory, cli_name):
    return agent_factory(cli_name)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def wait_for(pred, timeout=30.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(interval)
    return None
