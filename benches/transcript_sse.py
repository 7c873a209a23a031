#!/usr/bin/env python3
"""What following a transcript live costs (issue #22's figures).

Not a test and not run by CI; run it with `benches/transcript_sse.sh` (builds the release
binary). Standard library, and the agent's `yes` and `head`. It starts its own server on
127.0.0.1 (a `command` environment in the default sandbox) and stops it.

1. Agent throughput. A run whose agent waits START_DELAY seconds, then writes OUTPUT_MB MiB of
   100-byte lines as fast as it can. Its throughput is the output over the time its pipeline
   took, as it measures itself (`date +%s%N` before and after, reported on stderr): how long
   the agent's writes waited for the server to take them. Each
   round runs the agent once alone and once with FOLLOWERS connections following the
   transcript over SSE from before its first line to the stream's `end` (each checks that its
   stream ended with `event: end`). ROUNDS rounds, alternating; the medians and the cost
   (1 - with / without) are printed. The clients share the server's two cores here, where real
   ones would be on other machines: all connections are one process at `nice 19`, so the
   figure is what the server spends on them rather than what a hundred client processes take.
2. Idle followers. A run whose agent prints one line and sleeps; IDLE_FOLLOWERS connections
   follow its transcript and read their first entry, then stay idle. Server RSS before they
   connect and 5 s after the last one got its entry; the difference per follower.
"""
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import Server, rss_mb, script

OUTPUT_MB = int(os.environ.get("OUTPUT_MB", "50"))
FOLLOWERS = int(os.environ.get("FOLLOWERS", "100"))
ROUNDS = int(os.environ.get("ROUNDS", "9"))
IDLE_FOLLOWERS = int(os.environ.get("IDLE_FOLLOWERS", "1000"))
START_DELAY = float(os.environ.get("START_DELAY", "3"))


def config(agents):
    return f"""[server]
bind = "127.0.0.1:0"

[limits]
rate_limit = false

[[environments]]
id = "flood"
harness = "command"
command = ["{agents}/flood.sh"]
max_concurrent = 1

[[environments]]
id = "idle"
harness = "command"
command = ["{agents}/idle.sh"]
"""


def agent_secs(s, run_id):
    """How long the agent took to write its output, as it measured itself (`date +%s%N`
    around its pipeline, reported on stderr)."""
    t = s.call("GET", f"/agent/runs/{run_id}/transcript?offset=0&limit=10000")
    while True:
        for e in t["entries"]:
            if e["stream"] == "stderr" and e["text"].startswith("elapsed_ns "):
                return int(e["text"].split()[1]) / 1e9
        if not t["has_more"]:
            raise SystemExit(f"run {run_id} did not report its time")
        t = s.call("GET", f"/agent/runs/{run_id}/transcript?offset={t['next_offset']}&limit=10000")


FOLLOW_CLIENT = r"""
import selectors, socket, sys
host, port, path, key, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
           "Accept: text/event-stream\r\n\r\n").encode()
sel = selectors.DefaultSelector()
tails, sizes = {}, {}
for i in range(n):
    c = socket.create_connection((host, port))
    c.sendall(request)
    c.setblocking(False)
    sel.register(c, selectors.EVENT_READ, i)
    tails[i], sizes[i] = b"", 0
print("connected", flush=True)
buf = bytearray(1 << 20)
view = memoryview(buf)
left = n
while left:
    for k, _ in sel.select():
        i = k.data
        got = k.fileobj.recv_into(buf)
        if got == 0:
            sel.unregister(k.fileobj)
            k.fileobj.close()
            left -= 1
            continue
        sizes[i] += got
        tails[i] = (tails[i] + bytes(view[max(0, got - 300):got]))[-300:]
ended = sum(b"event: end" in t for t in tails.values())
print(ended, min(sizes.values()), flush=True)
"""


def followers(s, run_id, n):
    """One client process following the transcript on `n` connections to the stream's end
    (real clients are on other machines: one process at nice 19 takes the least CPU here)."""
    host, port = s.base.removeprefix("http://").rsplit(":", 1)
    p = subprocess.Popen(
        ["nice", "-n", "19", sys.executable, "-c", FOLLOW_CLIENT, host, port,
         f"/api/v1/agent/runs/{run_id}/transcript", s.key, str(n)],
        stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "connected":
        raise SystemExit("the followers could not connect")
    return p


def one_run(s, n):
    run_id = s.create(env="flood", prompt="flood")
    client = followers(s, run_id, n) if n else None
    state = s.wait(run_id, timeout=600)
    if state != "SUCCEEDED":
        raise SystemExit(f"run {run_id} ended {state}")
    if client is not None:
        out, _ = client.communicate(timeout=600)
        ended, smallest = (int(x) for x in out.split())
        if ended != n or smallest < OUTPUT_MB << 20:
            raise SystemExit(f"{n - ended} followers' streams did not end ({smallest} bytes)")
    return OUTPUT_MB / agent_secs(s, run_id)


def idle_followers(s):
    run_id = s.create(env="idle", prompt="idle")
    while s.transcript(run_id).count("ready") == 0:
        time.sleep(0.05)
    host, port = s.base.removeprefix("http://").rsplit(":", 1)
    request = (f"GET /api/v1/agent/runs/{run_id}/transcript HTTP/1.1\r\nHost: {host}\r\n"
               f"Authorization: Bearer {s.key}\r\nAccept: text/event-stream\r\n\r\n").encode()
    # A few first, so what the server allocates once is not counted per follower.
    warm = []
    for _ in range(10):
        c = socket.create_connection((host, int(port)))
        c.sendall(request)
        warm.append(c)
    # Past the workers' collection after a quiet 2 s (crates/base/src/memory.rs), for both samples.
    time.sleep(5)
    before = rss_mb(s.proc.pid)
    conns = []
    for _ in range(IDLE_FOLLOWERS):
        c = socket.create_connection((host, int(port)))
        c.sendall(request)
        conns.append(c)
    for c in conns:
        c.settimeout(30)
        got = b""
        while b"ready" not in got:
            chunk = c.recv(65536)
            if not chunk:
                raise SystemExit("a follower's stream closed early")
            got += chunk
    time.sleep(5)
    after = rss_mb(s.proc.pid)
    for c in conns + warm:
        c.close()
    s.call("POST", f"/agent/runs/{run_id}/cancel")
    return before, after


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    base = "/var/tmp" if os.path.isdir("/var/tmp") else None
    with tempfile.TemporaryDirectory(prefix="runledger-sse-", dir=base) as work:
        os.chmod(work, 0o755)
        line = "x" * 99
        script(os.path.join(work, "flood.sh"),
               f"sleep {START_DELAY}; start=$(date +%s%N); "
               f"yes {line} | head -c {OUTPUT_MB * 1024 * 1024}; "
               f"echo elapsed_ns $(( $(date +%s%N) - start )) >&2")
        script(os.path.join(work, "idle.sh"), "echo ready; sleep 600")
        s = Server(work, config(work))
        try:
            alone, followed = [], []
            for r in range(ROUNDS):
                alone.append(one_run(s, 0))
                followed.append(one_run(s, FOLLOWERS))
                print(f"round {r + 1}: alone {alone[-1]:.1f} MiB/s, "
                      f"with {FOLLOWERS} followers {followed[-1]:.1f} MiB/s", flush=True)
            a, f = statistics.median(alone), statistics.median(followed)
            print(f"agent throughput, {OUTPUT_MB} MiB of 100-byte lines, median of {ROUNDS}: "
                  f"alone {a:.1f} MiB/s, with {FOLLOWERS} SSE followers {f:.1f} MiB/s "
                  f"(cost {100 * (1 - f / a):.1f} %)")
            before, after = idle_followers(s)
            print(f"server RSS with {IDLE_FOLLOWERS} idle transcript followers: "
                  f"{before:.1f} MiB before, {after:.1f} MiB after "
                  f"({1024 * (after - before) / IDLE_FOLLOWERS:.1f} KiB per follower)")
        finally:
            s.stop(signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
