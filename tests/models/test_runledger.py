"""The presets through runledger: the real binary, the default bubblewrap sandbox, the real
claude, codex and gemini CLIs, and the scripted model server on loopback.

One runledger server for the module; per CLI three environments: `<cli>` (edit, with its key
from [secrets]), `<cli>-ro` (agent_permissions = "read-only") and `<cli>-nokey` (no secret).
Every wait polls the API with a deadline.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import BIN_DIR, CLIS, MODELS, REPO, RUNS_DIR
from test_clis import TOOL_TASK, user_prompts

BIN = Path(os.environ.get("RUNLEDGER_BIN", REPO / "target" / "debug" / "runledger"))
RUN_TIMEOUT = float(os.environ.get("MODEL_TESTS_RUN_TIMEOUT", "120"))
KEYS = {"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
# Per million input and output tokens, for `[prices]`.
PRICES = {MODELS["codex"]: (1.25, 10), MODELS["gemini"]: (0.30, 2.50)}


def agent_visible(path):
    """A copy of `path` that a sandboxed agent user can read: under /var/tmp (the sandbox keeps
    the host's /var/tmp, not its /tmp), in a directory open to every user."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else RUNS_DIR
    copies = Path(tempfile.mkdtemp(prefix="runledger-models-", dir=base))
    copies.chmod(0o755)
    atexit.register(shutil.rmtree, copies, True)
    copy = copies / path.name
    shutil.copyfile(path, copy)
    copy.chmod(0o644)
    return copy


def endpoint(cli, url):
    # Codex's provider block takes the Responses base URL, /v1 included; the other two SDKs add
    # their API's own prefix.
    return f"{url}/v1" if cli == "codex" else url


def agent_path():
    """The PATH of the agents: runledger gives them the environment's `env.PATH`, never its own,
    so the CLIs' directory (and node's, which the CLIs start with) is named there."""
    node = shutil.which("node")
    return f"{BIN_DIR}:{Path(node).parent if node else '/usr/bin'}:/usr/local/bin:/usr/bin:/bin"


def config_text(model_url):
    lines = [
        '[server]\nbind = "127.0.0.1:0"\n',
        "[limits]\nrate_limit = false\n",
        "[secrets]",
    ]
    lines += [f'{KEYS[c]} = {{ env = "RL_TEST_{KEYS[c]}" }}' for c in CLIS]
    # Claude Code reports its own cost; the other two are priced from their tokens.
    lines.append("\n[prices]\ncompute_per_cpu_hour = 0.05")
    for model, (inp, out) in PRICES.items():
        lines.append(f'[prices.models."{model}"]\ninput_per_mtok = {inp}\noutput_per_mtok = {out}')
    for cli in CLIS:
        for suffix, extra in (
            ("", f'secrets = ["{KEYS[cli]}"]'),
            ("-ro", f'secrets = ["{KEYS[cli]}"]\nagent_permissions = "read-only"'),
            ("-nokey", ""),
        ):
            lines.append(
                f'\n[[environments]]\nid = "{cli}{suffix}"\nharness = "{cli}"\n'
                f'model_id = "{MODELS[cli]}"\nmodel_base_url = "{endpoint(cli, model_url)}"\n'
                f"max_runtime_secs = {int(RUN_TIMEOUT)}\n"
                # Claude Code retries a 401 ten times with backoff (minutes) by default.
                f'env = {{ CLAUDE_CODE_MAX_RETRIES = "0", PATH = "{agent_path()}" }}\n{extra}'
            )
    return "\n".join(lines) + "\n"


class Runledger:
    """A runledger server in a root of its own under `base`; `config(root, model_url)` gives its
    configuration file's text (default: `config_text`)."""

    def __init__(self, model_server, base=RUNS_DIR, config=None):
        if not BIN.is_file():
            raise RuntimeError(f"no runledger binary at {BIN}; run `cargo build` or set RUNLEDGER_BIN")
        base.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix="runledger-", dir=base))
        # The agents run as the unprivileged agent user, which reaches its home and MCP file by
        # their absolute paths: mkdtemp's 0700 would hide them.
        self.root.chmod(0o755)
        self.data = self.root / "data"
        self.workspace_root = self.data / "workspaces"
        config_file = self.root / "runledger.toml"
        text = config(self.root, model_server.url) if config else config_text(model_server.url)
        config_file.write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNLEDGER_")}
        env.update({"PATH": agent_path(), "RUST_LOG": "warn"})
        env.update({f"RL_TEST_{KEYS[c]}": f"test-key-{c}" for c in CLIS})
        self.argv = [str(BIN), "serve", "--config", str(config_file), "--data-dir", str(self.data)]
        self.env = env
        self._start()
        # The first start on an empty data directory prints the admin key alone on stdout.
        self.key = self._wait(lambda: self.stdout[0] if self.stdout else None, "the admin key")

    def _start(self):
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            start_new_session=True,
        )
        self.stdout, self.stderr = [], []
        self.cond = threading.Condition()
        for stream, sink in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            threading.Thread(target=self._drain, args=(stream, sink), daemon=True).start()
        listening = re.compile(r"runledger listening on (http://\S+)")
        self.url = self._wait(
            lambda: next((m.group(1) for l in self.stderr if (m := listening.search(l))), None), "the address"
        )

    def restart(self):
        """Stops the server (SIGTERM) and starts it again on the same data directory."""
        self.stop()
        self._start()

    def _drain(self, stream, sink):
        for line in stream:
            with self.cond:
                sink.append(line.rstrip("\n"))
                self.cond.notify_all()

    def _wait(self, found, what, timeout=30):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not (value := found()):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"runledger: no {what}:\n" + "\n".join(self.stderr))
                self.cond.wait(0.5)
            return value

    def call(self, method, path, body=None):
        req = urllib.request.Request(
            f"{self.url}/api/v1{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def create(self, env, prompt):
        status, body = self.call("POST", "/agent/runs", {"prompt": prompt, "config": {"environment_id": env}})
        assert status == 200, body
        return body["run_id"]

    def run(self, run_id):
        status, body = self.call("GET", f"/agent/runs/{run_id}")
        assert status == 200, body
        return body

    def wait(self, run_id, pred, what, timeout=RUN_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if pred(run):
                return run
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id}: timed out waiting for {what}: {run}\n{self.transcript(run_id)}")
            time.sleep(0.2)

    def finished(self, run_id):
        return self.wait(run_id, lambda r: r["state"] in TERMINAL, "a terminal state")

    def transcript(self, run_id):
        req = urllib.request.Request(
            f"{self.url}/api/v1/agent/runs/{run_id}/transcript", headers={"Authorization": f"Bearer {self.key}"}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.read().decode(errors="replace")[-6000:]
        except urllib.error.HTTPError as e:
            return f"(transcript: {e.code})"

    def entries(self, run_id):
        """Every transcript entry, paging through the transcript API."""
        out, offset = [], 0
        while True:
            status, page = self.call("GET", f"/agent/runs/{run_id}/transcript?offset={offset}")
            assert status == 200, page
            out += page["entries"]
            if not page["has_more"]:
                return out
            offset = page["next_offset"]

    def workspace(self, run_id):
        return self.workspace_root / run_id

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture(scope="module")
def runledger(model_server):
    server = Runledger(model_server)
    yield server
    server.stop()
    if not os.environ.get("MODEL_TESTS_KEEP"):
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(params=CLIS)
def cli(request):
    return request.param


def prompts_of(server, api_prompt):
    return [r for r in server.main_requests() if api_prompt in "\n".join(user_prompts(r))]


def test_a_task_writes_a_file_runs_a_command_and_a_follow_up_continues_the_session(runledger, server, cli):
    task = "Create hello.txt, then run a command that writes second.txt."
    server.script({"replies": [{"when": "second task", "turns": [{"text": "Second answer."}]}, {"turns": TOOL_TASK}]})
    run_id = runledger.create(cli, task)
    run = runledger.finished(run_id)
    assert run["state"] == "SUCCEEDED", (run, runledger.transcript(run_id))
    ws = runledger.workspace(run_id)
    assert (ws / "hello.txt").read_text() == "hello from the model\n"
    assert (ws / "second.txt").read_text().strip() == "shell-ok"
    # Readable entries beside the raw JSON lines: the assistant's text, the write, the command.
    readable = [e["text"] for e in runledger.entries(run_id) if e["stream"] == "agent"]
    assert any("hello.txt" in t for t in readable), readable
    assert any("second.txt" in t for t in readable), readable
    assert any(t.startswith("assistant: ") for t in readable), readable
    # Its steps: the file written, the command with its exit status, the agent's words.
    status, page = runledger.call("GET", f"/agent/runs/{run_id}/steps")
    assert status == 200, page
    tools = [s for s in page["steps"] if s["type"] == "tool"]
    command = [s for s in tools if "second.txt" in (s.get("target") or "")]
    assert command and command[0]["status"] == "ok" and command[0]["exit_code"] == 0, page["steps"]
    assert any("hello.txt" in (s.get("target") or "") for s in tools), tools
    assert any(s["type"] == "message" and s["text"] for s in page["steps"]), page["steps"]
    # What it changed in its (plain) workspace: both files added, with their one line each.
    status, changes = runledger.call("GET", f"/agent/runs/{run_id}/changes")
    assert status == 200, changes
    files = {f["path"]: f for e in changes["executions"] for r in e["repositories"] for f in r["files"]}
    for name in ("hello.txt", "second.txt"):
        found = [f for path, f in files.items() if path.endswith(name)]
        assert found and found[0]["status"] == "added" and found[0]["additions"] == 1, changes
    # The session page shows them, the command with its exit status; the raw view the
    # readable entries, neither the CLI's JSON.
    with urllib.request.urlopen(run["session_link"], timeout=10) as page:
        html = page.read().decode()
    assert "hello.txt" in html and 'class="exit ok">exit 0</span>' in html, html[-3000:]
    assert "&quot;type&quot;" not in html, html[-3000:]
    with urllib.request.urlopen(run["session_link"] + "&view=raw", timeout=10) as page:
        raw = page.read().decode()
    assert "hello.txt" in raw and "raw JSON output is in the transcript API" in raw
    assert "&quot;type&quot;" not in raw, raw[-3000:]
    # What it cost: Claude Code's own figure, the others' tokens at the configured prices.
    first_cost = check_usage(runledger, run, cli, executions=1)
    check_provenance(run, cli)

    status, body = runledger.call("POST", f"/agent/runs/{run_id}/followups", {"message": "the second task"})
    assert status == 200, body
    runledger.wait(run_id, lambda r: r["state"] in TERMINAL and prompts_of(server, "second task"), "the follow-up")
    run = runledger.finished(run_id)
    assert run["state"] == "SUCCEEDED", (run, runledger.transcript(run_id))
    # The CLI's own session continued: the follow-up reached the model with the original task.
    followup = prompts_of(server, "second task")[-1]
    assert any(task in p for p in user_prompts(followup)), user_prompts(followup)
    # By the session id the CLI reported (not a new session that repeats the task).
    system = [e["text"] for e in runledger.entries(run_id) if e["stream"] == "system"]
    assert any(t.startswith("resuming the CLI's session ") for t in system), system
    # Summed over both executions.
    assert check_usage(runledger, run, cli, executions=2) > first_cost, run


def check_provenance(run, cli):
    """Asserts the run's `provenance` names the CLI and the version its `--version` prints when
    run directly (the one recorded ran in runledger's sandbox, as the agent user)."""
    provenance = run.get("provenance")
    assert provenance and provenance["harness"] == cli, run
    printed = subprocess.run(
        [str(BIN_DIR / cli), "--version"], capture_output=True, text=True, timeout=60,
        env={"PATH": agent_path(), "HOME": tempfile.mkdtemp(prefix="version-home-", dir=RUNS_DIR)},
    )
    lines = [l.strip() for l in (printed.stdout or printed.stderr).splitlines() if l.strip()]
    assert lines, printed
    assert provenance["agent_cli"] == {"name": cli, "version": lines[0][:200]}, provenance
    assert provenance["runledger_version"], provenance


def check_usage(runledger, run, cli, executions):
    """Asserts `request_usage` is filled from what the CLI reported (the scripted server reports
    tokens for every request) and returns its inference cost."""
    usage = run.get("request_usage")
    assert usage and usage.get("inference_cost", 0) > 0, run
    # Where the host measures CPU time (a cgroup the server can create), it is priced too.
    assert usage.get("compute_cost", 1) > 0, run
    status, page = runledger.call("GET", f"/agent/runs/{run['run_id']}/events")
    assert status == 200, page
    recorded = [e["data"] for e in page["events"] if e["type"] == "UsageRecorded"]
    assert [d["execution"] for d in recorded] == list(range(1, executions + 1)), recorded
    for data in recorded:
        assert data["tokens"]["input"] > 0 and data["tokens"]["output"] > 0, data
        assert data["inference_cost"]["source"] == ("cli" if cli == "claude" else "prices"), data
    return usage["inference_cost"]


@pytest.mark.parametrize("prompt", ["--version", "- fix the typo"])
def test_prompts_that_look_like_options_reach_the_model(runledger, server, cli, prompt):
    server.script([{"text": "Done."}])
    run_id = runledger.create(cli, prompt)
    run = runledger.finished(run_id)
    assert run["state"] == "SUCCEEDED", (run, runledger.transcript(run_id))
    assert prompts_of(server, prompt), [user_prompts(r) for r in server.main_requests()]


def test_a_follow_up_during_a_turn_reaches_the_model(runledger, server, cli):
    server.script(
        {
            "replies": [
                {"when": "while you work", "turns": [{"text": "Noted."}]},
                {"turns": [{"tool": "shell", "command": "echo working > busy.txt", "delay": 4}, {"text": "Done."}]},
            ]
        }
    )
    run_id = runledger.create(cli, "Work for a while.")
    runledger.wait(run_id, lambda r: r["state"] == "INPROGRESS" and server.main_requests(), "the first request")
    status, body = runledger.call("POST", f"/agent/runs/{run_id}/followups", {"message": "also this, while you work"})
    assert status == 200, body
    if cli == "claude":
        # Claude Code hands a message that arrives during a turn to the model with the next tool
        # result, in the same turn.
        def reached():
            return any("also this, while you work" in json.dumps(r["body"]) for r in server.main_requests())
    else:
        def reached():
            return prompts_of(server, "while you work")
    runledger.wait(run_id, lambda r: r["state"] in TERMINAL and reached(), "the follow-up")
    assert runledger.finished(run_id)["state"] == "SUCCEEDED", runledger.transcript(run_id)
    transcript = runledger.transcript(run_id)
    # Claude Code takes it live, from its streaming input; the others as the next turn of the
    # same execution. Either way the transcript says when, and the log records it as taken.
    if cli == "claude":
        assert "1 follow-up(s) reached the agent during its turn" in transcript, transcript
    else:
        assert "the follow-up sent during the turn is delivered now, as the next turn" in transcript, transcript
    status, body = runledger.call("GET", f"/agent/runs/{run_id}/events")
    assert status == 200, body
    kinds = [e["type"] for e in body["events"]]
    assert kinds.count("Started") == 1 and "Requeued" not in kinds, kinds
    assert kinds.index("FollowupsDelivered") < kinds.index("Succeeded"), kinds


def test_a_read_only_environment_fails_a_write_naming_the_denial(runledger, server, cli):
    server.script(TOOL_TASK[:1] + [{"text": "Finished."}])
    run_id = runledger.create(f"{cli}-ro", "Create hello.txt.")
    run = runledger.finished(run_id)
    assert not (runledger.workspace(run_id) / "hello.txt").exists()
    assert run["state"] == "FAILED", (run, runledger.transcript(run_id))
    message = run["status_message"]["message"]
    assert "denied" in message, message
    assert run["status_message"].get("error_code") == "not_authorized", run["status_message"]


def test_a_cli_without_credentials_fails_with_its_own_message(runledger, server, cli):
    server.script([{"text": "Done."}])
    run_id = runledger.create(f"{cli}-nokey", "Say hello.")
    run = runledger.finished(run_id)
    assert run["state"] == "FAILED", (run, runledger.transcript(run_id))
    status = run["status_message"]
    own = {"claude": "Not logged in", "codex": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}[cli]
    assert own in status["message"], status
    assert "\x1b" not in status["message"] and "\n" not in status["message"], status
    assert "YOLO mode" not in status["message"], status  # start-up noise is left out
    assert status.get("error_code") == "authentication_required", status


def test_mcp_servers_reach_each_cli_and_an_unusable_entry_is_named(runledger, server, cli):
    """The run's stdio MCP server reaches the model as a tool and the model's call reaches the
    server; a `warp_id` entry, which no CLI can use, is named in a `system` transcript entry."""
    # python3 from the agent's PATH: the suite's own interpreter may live where the agent user
    # cannot reach (a pyenv under /root); the script from a copy it can reach (a checkout under
    # /tmp is not there in the sandbox's private /tmp).
    mcp = {
        "probe": {"command": "python3", "args": [str(agent_visible(Path(__file__).with_name("mcp_server.py"))), "mcp-calls.txt"]},
        "elsewhere": {"warp_id": "mcp-123"},
    }
    server.script(
        [{"tool": "mcp", "server": "probe", "name": "record_marker", "arguments": {"text": "MARKER-1"}}, {"text": "Recorded."}]
    )
    status, body = runledger.call(
        "POST", "/agent/runs", {"prompt": "Record the marker.", "config": {"environment_id": cli, "mcp_servers": mcp}}
    )
    assert status == 200, body
    run_id = body["run_id"]
    run = runledger.finished(run_id)
    transcript = runledger.transcript(run_id)
    assert run["state"] == "SUCCEEDED", (run, transcript)
    calls = runledger.workspace(run_id) / "mcp-calls.txt"
    assert calls.exists() and calls.read_text() == "MARKER-1\n", transcript
    system = [e["text"] for e in runledger.entries(run_id) if e["stream"] == "system"]
    assert any(t.startswith('MCP server "elsewhere" is left out') for t in system), system


def test_a_follow_up_after_a_server_restart_continues_the_session(runledger, server, cli):
    """The CLI's session id and state are kept per run on disk: a restarted server resumes it."""
    task = "Remember the word PELICAN."
    server.script({"replies": [{"when": "which word", "turns": [{"text": "PELICAN."}]}, {"turns": [{"text": "Noted."}]}]})
    run_id = runledger.create(cli, task)
    assert runledger.finished(run_id)["state"] == "SUCCEEDED", runledger.transcript(run_id)
    runledger.restart()
    status, body = runledger.call("POST", f"/agent/runs/{run_id}/followups", {"message": "which word was it?"})
    assert status == 200, body
    runledger.wait(run_id, lambda r: r["state"] in TERMINAL and prompts_of(server, "which word"), "the follow-up")
    assert runledger.finished(run_id)["state"] == "SUCCEEDED", runledger.transcript(run_id)
    followup = prompts_of(server, "which word")[-1]
    assert any(task in p for p in user_prompts(followup)), user_prompts(followup)
    system = [e["text"] for e in runledger.entries(run_id) if e["stream"] == "system"]
    assert any(t.startswith("resuming the CLI's session ") for t in system), system


REPORT_TASK = [
    {
        "tool": "shell",
        "command": (
            "echo '# Findings' > findings.md && "
            "printf '%s\\n' "
            "'{\"type\":\"pull_request\",\"url\":\"https://git.example.com/acme/app/pull/9\",\"branch\":\"fix-9\"}' "
            "'{\"type\":\"file\",\"path\":\"findings.md\",\"description\":\"what was found\"}' "
            ">> \"$RUNLEDGER_REPORT\""
        ),
    },
    {"text": "Reported the pull request and the findings."},
]


def test_a_cli_reports_artifacts_through_the_report_file(runledger, server, cli):
    """The preset tells the CLI about RUNLEDGER_REPORT in its base prompt, and what the CLI's own
    shell tool appends there comes back as the run's artifacts."""
    server.script({"turns": REPORT_TASK})
    run_id = runledger.create(cli, "Open the pull request and report it with your findings.")
    run = runledger.finished(run_id)
    assert run["state"] == "SUCCEEDED", (run, runledger.transcript(run_id))
    assert any("RUNLEDGER_REPORT" in json.dumps(r["body"]) for r in server.main_requests()), "the protocol never reached the model"
    artifacts = run.get("artifacts", [])
    assert [a["artifact_type"] for a in artifacts] == ["PULL_REQUEST", "FILE"], (artifacts, runledger.transcript(run_id))
    assert artifacts[0]["data"] == {"url": "https://git.example.com/acme/app/pull/9", "branch": "fix-9"}
    assert artifacts[1]["data"]["filepath"] == "findings.md"
    status, got = runledger.call("GET", f"/agent/artifacts/{artifacts[1]['data']['artifact_uid']}")
    assert status == 200, got
    with urllib.request.urlopen(got["data"]["download_url"], timeout=10) as r:
        assert r.read() == b"# Findings\n"
