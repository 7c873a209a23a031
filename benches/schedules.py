"""Schedule figures (issue #21, point 6); see benches/schedules.sh and docs/performance.md
("Schedules").

With SCHEDULES (10,000) schedules stored:

1. Create rate: POST /api/v1/agent/schedules from CLIENTS (16) keep-alive connections.
2. Memory: VmRSS of the idle server (IDLE_SECS, 5 s, after /readyz) started on a data directory
   with no schedule and on one with SCHEDULES daily schedules (none due during the bench), and
   of the server that has just created them.
3. Start time: from spawning the server on the directory with SCHEDULES schedules to /readyz
   answering 200, ROUNDS (5) times (SIGTERM between rounds), median and max; the same on the
   directory without schedules.
4. Firing lag, in the seconds test mode (`[schedules] seconds = true`), parsed from the
   server's `a schedule fired ... due=<ms> lag_ms=<n>` lines (logged once the run is durable):
   - burst: SCHEDULES schedules `<i % 60> * * * * *`, each once a minute at its own second
     (SCHEDULES / 60 firings per second), measured for BURST_SECS (150) seconds;
   - steady: STEADY_FIRING (100) schedules `* * * * * *` among SCHEDULES, measured for
     STEADY_SECS (60) seconds;
   - same second (SAME_SECOND=1, off by default): SCHEDULES schedules all due at second 30 of
     every minute, two minutes.
   Each case counts the firings expected in its window against those logged, reads
   `runledger_schedule_firings_total{outcome="failed"}`, and checks a sample of the logged runs
   against the runs API (`created_at` minus the due time).
PARTS (start,burst,steady) chooses the parts to run. Standard library only."""

import datetime
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

from benchlib import BIN

SCHEDULES = int(os.environ.get("SCHEDULES", "10000"))
CLIENTS = int(os.environ.get("CLIENTS", "16"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
IDLE_SECS = float(os.environ.get("IDLE_SECS", "5"))
BURST_SECS = int(os.environ.get("BURST_SECS", "150"))
STEADY_SECS = int(os.environ.get("STEADY_SECS", "60"))
STEADY_FIRING = int(os.environ.get("STEADY_FIRING", "100"))
SAME_SECOND = os.environ.get("SAME_SECOND", "0") == "1"
# Which parts run: any of start (create rate, memory, start time), burst, steady.
PARTS = os.environ.get("PARTS", "start,burst,steady").split(",")
SAMPLE = int(os.environ.get("SAMPLE", "200"))
# Room after a window for its last firings to be logged before they are counted.
GRACE_SECS = 10

PROMPT = (
    "Upgrade the service's dependencies to their latest compatible releases, run the test "
    "suite, and open a pull request describing what changed."
)
FIRED = re.compile(r"a schedule fired schedule_id=(\S+) run_id=(\S+) due=(\d+) lag_ms=(\d+)")


def config(seconds):
    text = (
        '[server]\nbind = "127.0.0.1:0"\n\n[limits]\nrate_limit = false\nmax_queued_per_team = 1000000000\n\n'
        '[[environments]]\nid = "bench"\nharness = "demo"\ndemo_duration_ms = 100\nmax_concurrent = 64\n'
        "max_queued = 1000000000\n"
    )
    if seconds:
        text += "\n[schedules]\nseconds = true\n"
    return text


class Server:
    """`runledger serve` on `<workdir>/data`, timed from its spawn to /readyz 200. On a new
    directory the admin key is read from its first stdout line; on a used one it is passed in.
    With `log` set, the server's `a schedule fired` lines are collected from its stderr."""

    def __init__(self, workdir, config_text, key=None, log="warn"):
        path = os.path.join(workdir, "runledger.toml")
        with open(path, "w") as f:
            f.write(config_text)
        self.lock = threading.Lock()
        self.fired = []  # (due ms, lag ms, schedule id, run id, seen at)
        self.problems = []  # WARN and ERROR lines
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [BIN, "serve", "--config", path, "--data-dir", os.path.join(workdir, "data")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "RUST_LOG": log},
        )
        self.key = key if key is not None else self.proc.stdout.readline().strip()
        self.base = None
        for line in self.proc.stderr:
            if line.startswith("runledger listening on "):
                self.base = line.split()[-1]
                break
        if self.base is None:
            raise SystemExit("server did not start")
        threading.Thread(target=self._read_log, daemon=True).start()
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(self.base + "/readyz").status == 200:
                    self.ready_secs = time.perf_counter() - started
                    return
            except Exception:
                time.sleep(0.005)
        raise SystemExit("server did not become ready")

    def _read_log(self):
        for line in self.proc.stderr:
            m = FIRED.search(line)
            if m:
                with self.lock:
                    self.fired.append((int(m[3]), int(m[4]), m[1], m[2], time.time()))
            elif " WARN " in line or " ERROR " in line:
                with self.lock:
                    self.problems.append(line.strip())

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + "/api/v1" + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.key)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    def metrics(self):
        req = urllib.request.Request(self.base + "/metrics", headers={"Authorization": "Bearer " + self.key})
        return urllib.request.urlopen(req).read().decode()

    def metric(self, prefix):
        return sum(float(l.split()[-1]) for l in self.metrics().splitlines() if l.startswith(prefix))

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            kib = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        return kib / 1024

    def cpu_split(self):
        """User and system CPU seconds so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick

    def cpu_secs(self):
        return sum(self.cpu_split())

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def create_all(server, bodies):
    """Creates the schedules `bodies` from CLIENTS keep-alive connections; the ids (in the
    order of `bodies`), the seconds taken and the server's CPU seconds."""
    host = server.base.split("//", 1)[1]
    ids = [None] * len(bodies)
    failures = []
    next_index = iter(range(len(bodies)))
    take = threading.Lock()

    def worker():
        conn = http.client.HTTPConnection(host, timeout=120)
        headers = {"Authorization": "Bearer " + server.key, "Content-Type": "application/json"}
        while True:
            with take:
                i = next(next_index, None)
            if i is None:
                break
            conn.request("POST", "/api/v1/agent/schedules", json.dumps(bodies[i]), headers)
            r = conn.getresponse()
            payload = r.read()
            if r.status != 201:
                failures.append((r.status, payload[:200]))
                continue
            ids[i] = json.loads(payload)["id"]
        conn.close()

    cpu = server.cpu_secs()
    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{len(failures)} creates failed, e.g. {failures[0]}")
    return ids, took, server.cpu_secs() - cpu


def body(i, cron):
    return {
        "name": f"maintenance-{i:05d}",
        "cron_schedule": cron,
        "prompt": PROMPT,
        "agent_config": {"environment_id": "bench"},
        "metadata": {"team": "infra", "index": str(i)},
    }


def daily(i):
    """A daily schedule whose hour is at least two hours away from now (UTC), so that none is
    due while the bench runs."""
    hour = (datetime.datetime.now(datetime.timezone.utc).hour + 3 + i % 19) % 24
    return f"{i % 60} {hour} * * *"


def daily_seconds(i):
    return f"{i % 60} {daily(i)}"


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def idle_rss(server):
    time.sleep(IDLE_SECS)
    return server.rss_mib()


def memory_and_start():
    print(f"== create rate, memory and start time with {SCHEDULES} schedules stored")
    with tempfile.TemporaryDirectory(prefix="runledger-sched-empty-") as empty, \
            tempfile.TemporaryDirectory(prefix="runledger-sched-full-") as full:
        # The same store otherwise: each directory has its admin key and nothing else.
        s = Server(empty, config(False))
        empty_key = s.key
        s.stop()
        s = Server(full, config(False))
        full_key = s.key
        rss_fresh = idle_rss(s)
        ids, took, cpu = create_all(s, [body(i, daily(i)) for i in range(SCHEDULES)])
        listed = len(s.call("GET", "/agent/schedules")["schedules"])
        rss_created = idle_rss(s)
        print(
            f"created {len(ids)} schedules in {took:.1f} s from {CLIENTS} connections: "
            f"{len(ids) / took:.0f} schedules/s, server CPU {cpu / len(ids) * 1e6:.0f} us per create; "
            f"listed {listed}; RSS {rss_fresh:.1f} MiB before, {rss_created:.1f} MiB after"
        )
        s.stop()
        results = {}
        for label, work, key in (("0 schedules", empty, empty_key), (f"{SCHEDULES} schedules", full, full_key)):
            ready, rss = [], []
            for _ in range(ROUNDS):
                s = Server(work, config(False), key=key)
                ready.append(s.ready_secs)
                rss.append(idle_rss(s))
                if label != "0 schedules":
                    got = len(s.call("GET", "/agent/schedules")["schedules"])
                    if got != SCHEDULES:
                        raise SystemExit(f"{got} schedules after a restart, {SCHEDULES} expected")
                s.stop()
            results[label] = (ready, rss)
            print(
                f"start on {label}: ready in median {statistics.median(ready) * 1000:.0f} ms, "
                f"max {max(ready) * 1000:.0f} ms ({', '.join(f'{r * 1000:.0f}' for r in ready)}); "
                f"idle RSS median {statistics.median(rss):.1f} MiB (max {max(rss):.1f})"
            )
        base = statistics.median(results["0 schedules"][1])
        full_rss = statistics.median(results[f"{SCHEDULES} schedules"][1])
        print(
            f"memory of {SCHEDULES} schedules after a start: {full_rss - base:+.1f} MiB "
            f"({(full_rss - base) * 1024 * 1024 / SCHEDULES:.0f} bytes per schedule)"
        )


def expected_firings(crons_seconds, start, end):
    """Firings due in [start, end) (whole seconds) of schedules firing at the given second of
    every minute (None: every second)."""
    n = 0
    for t in range(start, end):
        for sec in crons_seconds:
            if sec is None or sec == t % 60:
                n += 1
    return n


def event_ms(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp() * 1000


def firing(label, crons, window_secs):
    """Creates `crons` (a list of 6-field expressions) in the seconds test mode, waits until
    they are all durable, then measures the firings due in the next `window_secs` seconds."""
    print(f"== firing lag: {label}")
    with tempfile.TemporaryDirectory(prefix="runledger-sched-fire-") as work:
        s = Server(work, config(True), log="warn,runledger::schedules=info")
        try:
            ids, took, _ = create_all(s, [body(i, c) for i, c in enumerate(crons)])
            print(f"created {len(ids)} schedules in {took:.1f} s")
            start = int(time.time()) + 2
            end = start + window_secs
            firing_seconds = []
            for c in crons:
                sec = c.split()[0]
                minute = c.split()[1]
                if minute != "*":
                    continue  # daily: not due in the window
                firing_seconds.append(None if sec == "*" else int(sec))
            want = expected_firings(firing_seconds, start, end)
            failed_before = s.metric('runledger_schedule_firings_total{outcome="failed"}')
            while time.time() < start:
                time.sleep(0.05)
            user, system = s.cpu_split()
            while time.time() < end + GRACE_SECS:
                time.sleep(0.5)
            user, system = (a - b for a, b in zip(s.cpu_split(), (user, system)))
            cpu = user + system
            failed = s.metric('runledger_schedule_firings_total{outcome="failed"}') - failed_before
            with s.lock:
                fired = [f for f in s.fired if start * 1000 <= f[0] < end * 1000]
                problems = list(s.problems)
            lags = [f[1] for f in fired]
            per_second = {}
            for f in fired:
                per_second[f[0] // 1000] = per_second.get(f[0] // 1000, 0) + 1
            duplicates = len(fired) - len({(f[2], f[0]) for f in fired})
            print(
                f"window {window_secs} s: {len(fired)}/{want} firings logged ({len(fired) / window_secs:.0f}/s), "
                f"{duplicates} duplicates, {failed:.0f} failed (metric), {len(problems)} WARN/ERROR lines; "
                f"lag p50 {percentile(lags, 50)} ms, p90 {percentile(lags, 90)} ms, p99 {percentile(lags, 99)} ms, "
                f"max {max(lags)} ms; server CPU {cpu:.1f} s (user {user:.1f}, system {system:.1f}; "
                f"{cpu / max(1, len(fired)) * 1e6:.0f} us per firing "
                f"over the window and its {GRACE_SECS} s grace)"
            )
            for line in problems[:5]:
                print("   ", line[:300])
            # The runs API's view of a sample: the run's created_at minus its due time.
            step = max(1, len(fired) // SAMPLE)
            sample = fired[::step][:SAMPLE]
            api = []
            for due, lag, _, run_id, _ in sample:
                run = s.call("GET", f"/agent/runs/{run_id}")
                api.append((event_ms(run["created_at"]) - due, lag))
            over = sum(1 for a, lag in api if a > lag + 1)
            print(
                f"runs API, {len(api)} sampled runs: created_at - due p50 {percentile([a for a, _ in api], 50):.0f} ms, "
                f"p99 {percentile([a for a, _ in api], 99):.0f} ms; {over} created later than their logged lag"
            )
        finally:
            s.stop()


def main():
    if "start" in PARTS:
        memory_and_start()
    if "burst" in PARTS:
        firing(
            f"burst, {SCHEDULES} schedules each once a minute at its own second ({SCHEDULES / 60:.0f}/s), {BURST_SECS} s",
            [f"{i % 60} * * * * *" for i in range(SCHEDULES)],
            BURST_SECS,
        )
    if "steady" in PARTS:
        firing(
            f"steady, {STEADY_FIRING} of {SCHEDULES} schedules every second, {STEADY_SECS} s",
            [("* * * * * *" if i < STEADY_FIRING else daily_seconds(i)) for i in range(SCHEDULES)],
            STEADY_SECS,
        )
    if SAME_SECOND:
        firing(
            f"same second, {SCHEDULES} schedules all due at second 30 of each minute, 120 s",
            [f"30 * * * * *" for _ in range(SCHEDULES)],
            120,
        )


if __name__ == "__main__":
    main()
