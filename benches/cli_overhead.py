#!/usr/bin/env python3
"""runledger's overhead on a real agent CLI run (issue #25, point 10). Not a test; not run by CI.

For one preset (default `claude`), N times each (default 20), alternating:
  - through runledger (default bubblewrap sandbox, agent user): from the create call to the
    scripted model server receiving the CLI's first model request;
  - by hand: the same CLI with the preset's argv and environment, started directly in a fresh
    workspace: from the spawn to that first request.
Prints p50 and p99 of both and their difference. Run with `benches/cli_overhead.sh`.

Uses the agent-CLI suite's scripted model server and its runledger driver (tests/models/).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "models"))

import conftest  # noqa: E402
import test_runledger  # noqa: E402

CLI = os.environ.get("OVERHEAD_CLI", "claude")
RUNS = int(os.environ.get("OVERHEAD_RUNS", "20"))


def first_request_after(server, t0):
    """Seconds from t0 to the first main request the server recorded after it (polled)."""
    deadline = time.time() + 60
    while time.time() < deadline:
        main = [r for r in server.requests() if r["kind"] == "main" and r["time"] >= t0]
        if main:
            return min(r["time"] for r in main) - t0
        time.sleep(0.01)
    raise RuntimeError("no model request within 60 s")


def by_hand_argv(workspace):
    model = conftest.MODELS[CLI]
    if CLI == "claude":
        # As the preset runs it: streaming input, the prompt as the first user message on stdin.
        return ["claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json",
                "--verbose", "--replay-user-messages", "--permission-mode=bypassPermissions",
                f"--model={model}"]
    if CLI == "codex":
        return ["codex", "exec", "--json", "--skip-git-repo-check", "--sandbox=danger-full-access",
                f"--model={model}", "--", "Say done."]
    return ["gemini", "--skip-trust", "--output-format", "stream-json", "--approval-mode=yolo",
            f"--model={model}", "--prompt=Say done."]


def by_hand_env(server, root):
    home = root / "home"
    home.mkdir()
    env = conftest.base_env(home)
    key = test_runledger.KEYS[CLI]
    env[key] = f"test-key-{CLI}"
    if CLI == "claude":
        env.update({"ANTHROPIC_BASE_URL": server.url, "IS_SANDBOX": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"})
    elif CLI == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model_provider = "runledger"\n[model_providers.runledger]\nname = "x"\n'
            f'base_url = "{server.url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
            "supports_websockets = false\n"
        )
        env["CODEX_HOME"] = str(codex_home)
    else:
        (home / ".gemini").mkdir()
        (home / ".gemini" / "settings.json").write_text('{"security": {"auth": {"selectedType": "gemini-api-key"}}}')
        env.update({"GEMINI_CLI_HOME": str(home), "GOOGLE_GEMINI_BASE_URL": server.url})
    return env


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    runs_dir = Path(tempfile.mkdtemp(prefix="overhead-", dir=REPO / "target"))
    runs_dir.chmod(0o755)
    test_runledger.RUNS_DIR = runs_dir
    server = conftest.ModelServer(runs_dir / "requests.jsonl")
    rl = test_runledger.Runledger(server)
    through, by_hand = [], []
    try:
        server.script([{"text": "Done."}])
        for i in range(RUNS):
            t0 = time.time()
            run_id = rl.create(CLI, "Say done.")
            through.append(first_request_after(server, t0))
            assert rl.finished(run_id)["state"] == "SUCCEEDED", rl.transcript(run_id)

            root = runs_dir / f"hand-{i}"
            (root / "ws").mkdir(parents=True)
            env = by_hand_env(server, root)
            t0 = time.time()
            streaming = CLI == "claude"
            proc = subprocess.Popen(by_hand_argv(root / "ws"), cwd=root / "ws", env=env,
                                    stdin=subprocess.PIPE if streaming else subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
            if streaming:
                proc.stdin.write(json.dumps({"type": "user", "message": {"role": "user", "content": "Say done."}}) + "\n")
                proc.stdin.flush()
            by_hand.append(first_request_after(server, t0))
            if streaming:
                proc.stdin.close()  # the CLI ends after its turn once its input ends
            proc.wait(60)
    finally:
        rl.stop()
        server.stop()
        shutil.rmtree(runs_dir, ignore_errors=True)
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    print(f"{CLI}, {RUNS} runs each: create -> first model request")
    print(f"  through runledger: p50 {ms(pct(through, 50))}, p99 {ms(pct(through, 99))}")
    print(f"  by hand:           p50 {ms(pct(by_hand, 50))}, p99 {ms(pct(by_hand, 99))}")
    print(f"  overhead:          p50 {ms(statistics.median(through) - statistics.median(by_hand))}")


if __name__ == "__main__":
    main()
