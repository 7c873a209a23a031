"""Webhook delivery figures (issue #20, point 7); see benches/webhooks.sh and
docs/performance.md ("Webhooks").

1. Latency: the time from a run's terminal event (the delivery's `timestamp`) to the arrival of
   its `run.succeeded` at a local receiver, p50 and p99, with SUBSCRIPTIONS subscriptions (100)
   and with one, for RUNS runs (200) of a demo agent that finishes at once.
2. Create rate: POST /api/v1/agent/runs with wrk for DURATION seconds (10) at 64 connections,
   without webhooks, then with one subscription to the terminal states, then to every state
   change, at a receiver that answers in SLOW_SECS (5) seconds, so that deliveries are owed and
   pile up while it runs; ROUNDS (3) rounds alternating, medians. The server's CPU time per
   create is the steadier figure on a shared machine.
Standard library and wrk only."""

import datetime
import json
import os
import resource
import statistics
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from benchlib import Server

RUNS = int(os.environ.get("RUNS", "200"))
SUBSCRIPTIONS = int(os.environ.get("SUBSCRIPTIONS", "100"))
DURATION = int(os.environ.get("DURATION", "10"))
SLOW_SECS = float(os.environ.get("SLOW_SECS", "5"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class Receiver:
    """Answers 200 after `delay` seconds; records each arrival's time and payload."""

    def __init__(self, delay=0.0):
        self.lock = threading.Lock()
        self.arrivals = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                at = time.time()
                payload = json.loads(body)
                with receiver.lock:
                    receiver.arrivals.append((at, payload["type"], payload["timestamp"], payload["data"]["run_id"]))
                if delay:
                    time.sleep(delay)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        ThreadingHTTPServer.daemon_threads = True
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def count(self, topic):
        with self.lock:
            return sum(1 for a in self.arrivals if a[1] == topic)


def config(workdir, hooks):
    secret = os.path.join(workdir, "secret")
    with open(secret, "w") as f:
        f.write(SECRET)
    text = (
        '[server]\nbind = "127.0.0.1:0"\n\n[limits]\nrate_limit = false\nmax_queued_per_team = 1000000000\n\n'
        '[[environments]]\nid = "bench"\nharness = "demo"\ndemo_duration_ms = 0\nmax_concurrent = 64\n'
        "max_queued = 1000000000\n"
    )
    for name, url, events in hooks:
        text += (
            f'\n[[webhooks]]\nname = "{name}"\nurl = "{url}"\nsecret_file = "{secret}"\n'
            f"allow_private = true\n{events}"
        )
    return text


def cpu_secs(pid):
    """User and system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_secs():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def event_time(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def latency(subscriptions):
    receiver = Receiver()
    with tempfile.TemporaryDirectory(prefix="runledger-webhooks-") as work:
        hooks = [(f"s{i}", f"{receiver.url}/s{i}", 'events = ["run.succeeded"]\n') for i in range(subscriptions)]
        server = Server(work, config(work, hooks))
        try:
            started = time.time()
            server_cpu, receiver_cpu = cpu_secs(server.proc.pid), own_cpu_secs()
            threads = []
            per = RUNS // 4
            for _ in range(4):
                t = threading.Thread(target=lambda: [server.create() for _ in range(per)])
                t.start()
                threads.append(t)
            for t in threads:
                t.join()
            want = per * 4 * subscriptions
            deadline = time.time() + 600
            while receiver.count("run.succeeded") < want and time.time() < deadline:
                time.sleep(0.05)
            took = time.time() - started
            server_cpu = cpu_secs(server.proc.pid) - server_cpu
            receiver_cpu = own_cpu_secs() - receiver_cpu
            got = receiver.count("run.succeeded")
            ms = [(at - event_time(ts)) * 1000 for at, topic, ts, _ in receiver.arrivals if topic == "run.succeeded"]
            print(
                f"{subscriptions:>3} subscription(s), {per * 4} runs: {got}/{want} run.succeeded deliveries "
                f"in {took:.1f} s ({got / took:.0f}/s); event to arrival p50 {percentile(ms, 50):.1f} ms, "
                f"p99 {percentile(ms, 99):.1f} ms, max {max(ms):.1f} ms; CPU: server {server_cpu:.1f} s, "
                f"receiver and client {receiver_cpu:.1f} s"
            )
        finally:
            server.stop()
            receiver.httpd.shutdown()


def create_rate(label, hooks, receiver=None):
    with tempfile.TemporaryDirectory(prefix="runledger-webhooks-") as work:
        server = Server(work, config(work, hooks))
        try:
            lua = os.path.join(work, "create.lua")
            with open(lua, "w") as f:
                f.write(
                    'wrk.method = "POST"\n'
                    "wrk.body = '{\"prompt\":\"Fix the flaky integration test in the billing service.\",\"title\":\"load\"}'\n"
                    'wrk.headers["Content-Type"] = "application/json"\n'
                    f'wrk.headers["Authorization"] = "Bearer {server.key}"\n'
                )
            url = server.base + "/api/v1/agent/runs"
            subprocess.run(["wrk", "-t1", "-c64", "-d3s", "-s", lua, url], check=True, capture_output=True)
            before = cpu_secs(server.proc.pid)
            out = subprocess.run(
                ["wrk", "-t1", "-c64", f"-d{DURATION}s", "--latency", "-s", lua, url],
                check=True, capture_output=True, text=True,
            ).stdout
            cpu = cpu_secs(server.proc.pid) - before
            requests = int(next(l.split()[0] for l in out.splitlines() if "requests in" in l))
            rate = float(next(l.split()[1] for l in out.splitlines() if l.startswith("Requests/sec")))
            per_create = cpu / requests * 1e6
            p99 = next(l.split()[1] for l in out.splitlines() if l.strip().startswith("99%"))
            owed = server.metric("runledger_webhook_deliveries_owed")
            extra = f", deliveries owed at the end {owed:.0f}" if hooks else ""
            if receiver is not None:
                extra += f", arrived {len(receiver.arrivals)}"
            print(f"{label}: {rate:.0f} creates/s, p99 {p99}, server CPU per create {per_create:.0f} us{extra}")
            return rate, per_create
        finally:
            server.stop()


def main():
    print("== latency (terminal event to arrival)")
    latency(1)
    latency(SUBSCRIPTIONS)
    print(f"== create rate, {DURATION} s at 64 connections, alternating, {ROUNDS} rounds")
    variants = [
        ("no webhooks", None),
        ("run.succeeded/failed/cancelled to a receiver answering in 5 s",
         'events = ["run.succeeded", "run.failed", "run.cancelled"]\n'),
        ("every state change to a receiver answering in 5 s", ""),
    ]
    results = {label: [] for label, _ in variants}
    for _ in range(ROUNDS):
        for label, events in variants:
            if events is None:
                results[label].append(create_rate(label, []))
                continue
            slow = Receiver(delay=SLOW_SECS)
            results[label].append(create_rate(label, [("slow", slow.url + "/slow", events)], slow))
            slow.httpd.shutdown()
    base = results["no webhooks"]
    for label, _ in variants:
        rate = statistics.median(r[0] for r in results[label])
        cpu = statistics.median(r[1] for r in results[label])
        b_rate = statistics.median(r[0] for r in base)
        b_cpu = statistics.median(r[1] for r in base)
        print(
            f"median, {label}: {rate:.0f} creates/s ({100 * (rate - b_rate) / b_rate:+.1f} %), "
            f"server CPU per create {cpu:.0f} us ({100 * (cpu - b_cpu) / b_cpu:+.1f} %)"
        )


if __name__ == "__main__":
    main()
