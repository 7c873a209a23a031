#!/usr/bin/env python3
"""Measures the server's memory under bursts of large responses (issue #28's figures).

Not a test and not run by CI; run it with `benches/output.sh` (builds the release binary).
Standard library only. It starts its own servers on 127.0.0.1 and stops them.

Setup: one real run (the demo agent), exported, grown to HISTORY_EVENTS events (default
20,000) whose follow-ups of FOLLOWUP_BYTES (default 1,100) make a history of about 28 MB of
JSON, imported into a new data directory, plus a transcript of TRANSCRIPT_MB (default 64) MiB
for the run. Then, against a server on that directory:
  1. idle RSS;
  2. CLIENTS (default 40) clients page through the whole history at once (`limit=10000`):
     peak RSS while they read, RSS 1, 5, 15 and 30 s after the last one finished;
  3. the same clients read the whole transcript at once (4 MiB pages): the same figures;
  4. the same clients follow the SSE stream until its last history event: the same figures.
Every client checks that it got every event (or every transcript byte) once.
"""
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import BIN, Server, rss_mb
EVENTS = int(os.environ.get("HISTORY_EVENTS", "20000"))
FOLLOWUP = int(os.environ.get("FOLLOWUP_BYTES", "1100"))
CLIENTS = int(os.environ.get("CLIENTS", "40"))
TRANSCRIPT_MB = int(os.environ.get("TRANSCRIPT_MB", "64"))
AFTER = [1, 5, 15, 30]

CONFIG = """[server]
bind = "127.0.0.1:0"

[[environments]]
id = "demo"
harness = "demo"
demo_duration_ms = 10
"""


def build(work):
    """A data directory with one run of EVENTS events and a large transcript; the run id."""
    first = os.path.join(work, "first")
    os.mkdir(first)
    s = Server(first, CONFIG)
    run_id = s.create(prompt="a long history")
    while s.state(run_id) != "SUCCEEDED":
        time.sleep(0.05)
    s.stop(signal.SIGTERM)
    exported = subprocess.run([BIN, "export", "--data-dir", s.data], check=True,
                              capture_output=True, text=True).stdout.splitlines()
    created, started, done = exported[0], exported[1], exported[-1]
    at = json.loads(started)["at"]
    lines = [created, started]
    filler = "é€ \"x\"\t" * (FOLLOWUP // 12)
    for seq in range(2, EVENTS - 1):
        lines.append(json.dumps({
            "run_id": run_id, "seq": seq, "at": at, "type": "FollowupReceived",
            "data": {"message": f"follow-up {seq}: {filler}", "mode": "plan",
                     "by": "01KAKBYKEY0000000000000000"}}, ensure_ascii=False,
            separators=(",", ":")))
    last = json.loads(done)
    last["seq"] = EVENTS - 1
    lines.append(json.dumps(last, separators=(",", ":")))
    backup = os.path.join(work, "history.jsonl")
    with open(backup, "w") as f:
        f.write("\n".join(lines) + "\n")
    second = os.path.join(work, "second")
    os.mkdir(second)
    data = os.path.join(second, "data")
    subprocess.run([BIN, "import", backup, "--data-dir", data], check=True, capture_output=True)
    os.makedirs(os.path.join(data, "transcripts"), mode=0o700, exist_ok=True)
    entry = json.dumps({"at": 1, "execution": 1, "stream": "stdout",
                        "text": "€" * 5000, "continued": True}) + "\n"
    with open(os.path.join(data, "transcripts", f"{run_id}.jsonl"), "w") as f:
        for _ in range(TRANSCRIPT_MB * 1024 * 1024 // len(entry.encode())):
            f.write(entry)
    history_mb = os.path.getsize(backup) / 1e6
    return second, run_id, history_mb


def read_history(s, run_id):
    seen, after = 0, None
    while True:
        query = "limit=10000" + (f"&after_seq={after}" if after is not None else "")
        page = s.call("GET", f"/agent/runs/{run_id}/events?{query}")
        for e in page["events"]:
            assert e["seq"] == seen, (e["seq"], seen)
            seen += 1
        if "next" not in page:
            return seen
        after = page["next"]


def read_transcript(s, run_id):
    entries, offset = 0, 0
    while True:
        page = s.call("GET", f"/agent/runs/{run_id}/transcript?offset={offset}&limit=10000")
        entries += len(page["entries"])
        offset = page["next_offset"]
        if not page["has_more"]:
            return entries


def read_stream(s, run_id):
    seen = 0
    with s.request("GET", f"/agent/runs/{run_id}/events", headers=[("Accept", "text/event-stream")]) as r:
        for line in r:
            if line.startswith(b"id: "):
                assert int(line[4:]) == seen
                seen += 1
                if seen == EVENTS:
                    return seen
    return seen


def burst(s, name, read, expected):
    pid = s.proc.pid
    peak = [rss_mb(pid)]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.time()
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(lambda _: read(), range(CLIENTS)))
    took = time.time() - started
    stop.set()
    sampler.join()
    assert all(r == expected for r in results), (name, results[:3], expected)
    after = {}
    finished = time.time()
    for secs in AFTER:
        time.sleep(max(0, finished + secs - time.time()))
        after[secs] = rss_mb(pid)
    print(f"{name}: {CLIENTS} clients in {took:.1f} s; peak RSS {peak[0]:.0f} MB; after "
          + ", ".join(f"{k} s: {v:.0f} MB" for k, v in after.items()), flush=True)


def main():
    work = tempfile.mkdtemp(prefix="runledger-output-")
    second, run_id, history_mb = build(work)
    s = Server(second, CONFIG)
    try:
        time.sleep(5)
        print(f"idle RSS {rss_mb(s.proc.pid):.0f} MB", flush=True)
        entries = read_transcript(s, run_id)
        print(f"history: {EVENTS} events, {history_mb:.1f} MB as export lines; transcript "
              f"{TRANSCRIPT_MB} MiB, {entries} entries", flush=True)
        burst(s, "events pages", lambda: read_history(s, run_id), EVENTS)
        burst(s, "transcript pages", lambda: read_transcript(s, run_id), entries)
        burst(s, "SSE history", lambda: read_stream(s, run_id), EVENTS)
    finally:
        s.stop(signal.SIGTERM)
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    sys.exit(main())
