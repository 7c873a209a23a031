"""What the Python benches share: the runledger binary they drive, a server started on a
config of their own (its admin key, its address, waiting for /readyz), API calls, and agent
scripts. Standard library only."""

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request

BIN = os.environ.get("RUNLEDGER_BIN", "target/release/runledger")
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def rss_mb(pid):
    """The resident memory of process `pid`, in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def script(path, body):
    """An executable bash script at `path` (an agent of a `command` environment)."""
    with open(path, "w") as f:
        f.write("#!/usr/bin/env bash\n" + body + "\n")
    os.chmod(path, 0o755)


class Server:
    """`runledger serve` on `config` with the data directory `<workdir>/data`."""

    def __init__(self, workdir, config, ready_secs=60, call_secs=300):
        self.workdir = workdir
        self.data = os.path.join(workdir, "data")
        self.call_secs = call_secs
        path = os.path.join(workdir, "runledger.toml")
        with open(path, "w") as f:
            f.write(config)
        self.proc = subprocess.Popen(
            [BIN, "serve", "--config", path, "--data-dir", self.data],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "RUST_LOG": "warn"},
        )
        self.key = self.proc.stdout.readline().strip()
        self.base = None
        for line in self.proc.stderr:
            if line.startswith("runledger listening on "):
                self.base = line.split()[-1]
                break
        if self.base is None:
            raise SystemExit("server did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        deadline = time.time() + ready_secs
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(self.base + "/readyz").status == 200:
                    return
            except Exception:
                time.sleep(0.05)
        raise SystemExit("server did not become ready")

    def request(self, method, path, body=None, headers=()):
        """An open response to an API request (the caller reads and closes it)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + "/api/v1" + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.key)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in headers:
            req.add_header(k, v)
        return urllib.request.urlopen(req, timeout=self.call_secs)

    def call(self, method, path, body=None):
        with self.request(method, path, body) as r:
            return json.loads(r.read())

    def create(self, env=None, prompt="x"):
        body = {"prompt": prompt}
        if env is not None:
            body["config"] = {"environment_id": env}
        return self.call("POST", "/agent/runs", body)["run_id"]

    def state(self, run_id):
        return self.call("GET", f"/agent/runs/{run_id}")["state"]

    def wait(self, run_id, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = self.state(run_id)
            if state in TERMINAL:
                return state
            time.sleep(0.01)
        raise SystemExit(f"run {run_id} did not finish")

    def transcript(self, run_id):
        t = self.call("GET", f"/agent/runs/{run_id}/transcript?limit=1000")
        return [e["text"] for e in t["entries"]]

    def metric(self, name):
        text = urllib.request.urlopen(self.base + "/metrics").read().decode()
        return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name))

    def stop(self, sig=signal.SIGKILL):
        self.proc.send_signal(sig)
        self.proc.wait()
