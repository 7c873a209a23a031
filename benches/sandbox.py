#!/usr/bin/env python3
"""Measures what containing agents costs (issue #17's figures).

Not a test and not run by CI; run it with `benches/sandbox.sh` (builds the release binary).
Standard library only, plus git. Everything talks to a server it starts on 127.0.0.1.

Figures:
  1. Time from the create call to the agent's first output line, p50 and p99, for a trivial
     agent with sandbox = "none" and with sandbox = "bwrap" (runs one after another, under
     capacity; the agent stamps the time it printed the line).
  2. Checkout of a repository of REPO_FILES files in a new workspace: the first run (mirror
     clone and local clone) and the second (fetch and local clone), as the server reports
     them in the transcript.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

from benchlib import Server, script
RUNS = int(os.environ.get("STARTUP_RUNS", "100"))
FILES = int(os.environ.get("REPO_FILES", "10000"))



def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def git(cwd, *args):
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def main():
    # Not under /tmp: a sandboxed agent has a private one, so a script there is not there for
    # it. /var/tmp can be traversed by the agent user (nobody, under a root server).
    work = tempfile.mkdtemp(prefix="runledger-sandbox-bench-", dir="/var/tmp")
    os.chmod(work, 0o755)
    script(os.path.join(work, "first.sh"), 'echo "t=$(date +%s%N)"')
    script(os.path.join(work, "ok.sh"), "true")
    origin = os.path.join(work, "origin.git")
    src = os.path.join(work, "src")
    git(work, "init", "-q", "--bare", "-b", "main", origin)
    git(work, "init", "-q", "-b", "main", src)
    for i in range(FILES):
        d = os.path.join(src, f"d{i // 100:03d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:05d}.txt"), "w") as f:
            f.write(f"file {i}\n" * 20)
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "files")
    git(src, "push", "-q", origin, "main")
    env = lambda i, cmd, extra="": (
        f'[[environments]]\nid = "{i}"\nharness = "command"\ncommand = ["{os.path.join(work, cmd)}"]\n{extra}\n'
    )
    config = (
        '[server]\nbind = "127.0.0.1:0"\n\n'
        + env("none", "first.sh", 'sandbox = "none"')
        + env("bwrap", "first.sh", 'sandbox = "bwrap"')
        + env("repo", "ok.sh", f'repos = [{{ url = "file://{origin}", ref = "main" }}]')
    )
    server = Server(work, config)
    try:
        startup = {}
        for mode in ("none", "bwrap"):
            # One warm-up run each, so the first figures do not include cold caches.
            server.wait(server.create(mode))
        for i in range(RUNS * 2):
            mode = ("none", "bwrap")[i % 2]
            before = time.time_ns()
            run_id = server.create(mode)
            server.wait(run_id)
            line = next(t for t in server.transcript(run_id) if t.startswith("t="))
            startup.setdefault(mode, []).append((int(line[2:]) - before) / 1e6)
        checkouts = []
        for _ in range(2):
            run_id = server.create("repo")
            state = server.wait(run_id)
            text = "\n".join(server.transcript(run_id))
            m = re.search(r"checked out in (\d+) ms", text)
            if state != "SUCCEEDED" or not m:
                raise SystemExit(f"checkout run {state}:\n{text}")
            checkouts.append(int(m.group(1)))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for mode, values in startup.items():
        print(f"create -> first output line, sandbox = {mode!r}: {len(values)} runs, "
              f"p50 {pct(values, 50):.1f} ms, p99 {pct(values, 99):.1f} ms")
    p50 = pct(startup["bwrap"], 50) - pct(startup["none"], 50)
    print(f"bwrap adds {p50:.1f} ms to the p50 (target <= 10 ms)")
    print(f"checkout of {FILES} files: first run {checkouts[0]} ms, second run {checkouts[1]} ms "
          f"(target <= 1000 ms)")


if __name__ == "__main__":
    main()
