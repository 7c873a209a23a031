#!/usr/bin/env python3
"""Measures runledger's execution side with real child processes (issue #3's figures).

Not a test and not run by CI; run it with `benches/agents.sh` (builds the release binary).
Standard library only. Everything talks to a server it starts on 127.0.0.1 and stops itself.

Figures:
  1. N concurrent runs (default 200) of a short command agent: all complete, none lost.
  2. Time from the create call returning to the agent process starting, p50 and p99, under
     capacity (runs created one after another, each agent records its start time).
  3. Server RSS with M live sleeping agents (default 1000).
  4. Server RSS growth while one agent prints 100 MB.
"""
import concurrent.futures
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import Server, script
CONCURRENT = int(os.environ.get("CONCURRENT_RUNS", "200"))
LATENCY_RUNS = int(os.environ.get("LATENCY_RUNS", "200"))
LIVE_AGENTS = int(os.environ.get("LIVE_AGENTS", "1000"))
OUTPUT_BYTES = int(os.environ.get("OUTPUT_BYTES", str(100 * 1000 * 1000)))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0



def wait_all(server, ids, states, timeout):
    deadline = time.time() + timeout
    pending = set(ids)
    while pending and time.time() < deadline:
        for rid in list(pending):
            if server.state(rid) in states:
                pending.discard(rid)
        time.sleep(0.1)
    return pending


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    work = tempfile.mkdtemp(prefix="runledger-agents-")
    starts = os.path.join(work, "starts")
    os.mkdir(starts)
    # Unconfined agents (these figures predate the sandbox; benches/sandbox.py measures it),
    # which a root server runs as `nobody`: they must reach the scripts and the stamps.
    os.chmod(work, 0o755)
    os.chmod(starts, 0o777)
    marker = f"runledger-bench-{os.getpid()}"
    script(os.path.join(work, "short.sh"), 'echo "working on $RUNLEDGER_PROMPT"; sleep 0.2; echo done')
    script(os.path.join(work, "stamp.sh"), f'date +%s%N > {starts}/$RUNLEDGER_RUN_ID')
    script(os.path.join(work, "sleeper.sh"), f"exec -a {marker} sleep 600")
    script(os.path.join(work, "loud.sh"), f"head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' 'x' | fold -w 100")
    env = lambda i, cmd, cap: (
        f'[[environments]]\nid = "{i}"\nharness = "command"\ncommand = ["{os.path.join(work, cmd)}"]\n'
        f'max_concurrent = {cap}\nsandbox = "none"\n\n'
    )
    config = (
        '[server]\nbind = "127.0.0.1:0"\nstop_grace_secs = 1\n\n'
        + env("short", "short.sh", 256)
        + env("stamp", "stamp.sh", 256)
        + env("sleep", "sleeper.sh", LIVE_AGENTS + 10)
        + env("loud", "loud.sh", 4)
    )
    server = Server(work, config)
    results = {}
    try:
        # 1. Concurrent runs.
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
            ids = list(pool.map(lambda i: server.create("short", f"task {i}"), range(CONCURRENT)))
        created = time.time() - t0
        lost = wait_all(server, ids, {"SUCCEEDED"}, 300)
        total = time.time() - t0
        states = {}
        for rid in ids:
            states[server.state(rid)] = states.get(server.state(rid), 0) + 1
        results["concurrent"] = (CONCURRENT, created, total, len(lost), states)

        # 2. Create → process start latency, under capacity.
        latencies = []
        for i in range(LATENCY_RUNS):
            rid = server.create("stamp")
            returned = time.time_ns()
            path = os.path.join(starts, rid)
            deadline = time.time() + 10
            while not os.path.exists(path) or os.path.getsize(path) == 0:
                if time.time() > deadline:
                    raise SystemExit(f"agent of {rid} never started")
                time.sleep(0.001)
            with open(path) as f:
                latencies.append((int(f.read().strip()) - returned) / 1e6)
        results["latency"] = (statistics.median(latencies), pct(latencies, 99), max(latencies))

        # 4. Output volume (before the sleepers, so RSS growth is the printing agent's alone).
        base = rss_kib(server.proc.pid)
        peak = base
        rid = server.create("loud")
        deadline = time.time() + 300
        while server.state(rid) not in ("SUCCEEDED", "FAILED") and time.time() < deadline:
            peak = max(peak, rss_kib(server.proc.pid))
            time.sleep(0.05)
        transcript = os.path.getsize(os.path.join(work, "data", "transcripts", rid + ".jsonl"))
        results["loud"] = (server.state(rid), base, peak, transcript)

        # 3. Many live agents.
        before = rss_kib(server.proc.pid)
        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
            sleepers = list(pool.map(lambda i: server.create("sleep"), range(LIVE_AGENTS)))
        deadline = time.time() + 300
        while server.metric('runledger_running_executions{environment="sleep"}') < LIVE_AGENTS:
            if time.time() > deadline:
                break
            time.sleep(0.2)
        running = int(server.metric('runledger_running_executions{environment="sleep"}'))
        time.sleep(1)
        results["live"] = (running, before, rss_kib(server.proc.pid))
    finally:
        server.stop()
        subprocess.run(["pkill", "-KILL", "-f", marker])

    n, created, total, lost, states = results["concurrent"]
    p50, p99, worst = results["latency"]
    state, base, peak, transcript = results["loud"]
    running, before, live = results["live"]
    print("| What | Figure |")
    print("|---|---|")
    print(f"| {n} concurrent runs of a short agent (0.2 s) | created in {created:.2f} s, all finished in {total:.2f} s; lost: {lost}; states: {states} |")
    print(f"| create returned → agent process started, under capacity ({LATENCY_RUNS} runs) | p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {worst:.1f} ms |")
    print(f"| server RSS with {running} live sleeping agents | {live / 1024:.1f} MB (before: {before / 1024:.1f} MB) |")
    print(f"| one agent printing {OUTPUT_BYTES / 1e6:.0f} MB ({state}) | server RSS {base / 1024:.1f} MB → peak {peak / 1024:.1f} MB (+{(peak - base) / 1024:.1f} MB); transcript file {transcript / 1e6:.0f} MB |")


if __name__ == "__main__":
    sys.exit(main())
