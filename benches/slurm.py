#!/usr/bin/env python3
"""Measures execution on Slurm (issue #26's figures) against real clusters of
`tests/slurm/cluster.sh` (controller and nodes on loopback, on this machine).

Not a test and not run by CI; run it with `benches/slurm.sh` (builds the release binary), as
root. Standard library only. Each part starts a cluster and a server of its own and stops both.

Figures:
  1. latency: from just before the create call to the agent's first line (`date +%s%N`,
     printed by the agent; the nodes share the server's clock), p50 and p99, runs one after
     another, alternating an environment with runs_on = "slurm" and the same environment with
     runs_on = "local" (3 nodes).
  2. throughput: RUNS_PER_NODE runs per node of a fixed-length agent (`sleep AGENT_SECS`),
     created at once, on clusters of 1, 2 and 3 nodes of 2 slots each (1 CPU and 256 MB per
     run); runs/s from the first create to the last run's terminal state (its `updated_at`),
     and the ratio to linear, throughput(n) / (n × throughput(1)).
  3. live: LIVE_RUNS runs in progress at once (an agent that sleeps) on LIVE_NODES nodes that
     declare enough CPUs; the server's CPU (utime + stime of /proc/<pid>/stat) over a window
     of WINDOW_SECS with every run in progress, its RSS, and the same for the `srun` processes
     it runs (one per run in progress), scaled to 1,000 runs.

TIMELINE=1 prints each throughput run's created, started and ended times (seconds from the
first create) on stderr. SLURM_CONF_EXTRA ("Key=Value;Key=Value") appends lines to every
cluster's slurm.conf and reconfigures it, e.g. SchedulerParameters=batch_sched_delay=0.
"""
import concurrent.futures
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import Server, rss_mb, script

LATENCY_RUNS = int(os.environ.get("LATENCY_RUNS", "100"))
RUNS_PER_NODE = int(os.environ.get("RUNS_PER_NODE", "40"))
AGENT_SECS = float(os.environ.get("AGENT_SECS", "2"))
MAX_NODES = int(os.environ.get("MAX_NODES", "3"))
LIVE_RUNS = int(os.environ.get("LIVE_RUNS", "200"))
LIVE_NODES = int(os.environ.get("LIVE_NODES", "4"))
WINDOW_SECS = float(os.environ.get("WINDOW_SECS", "30"))
PARTS = os.environ.get("PARTS", "latency,throughput,live").split(",")
CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "slurm", "cluster.sh")
TICK = os.sysconf("SC_CLK_TCK")


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def when(text):
    """Seconds since the epoch of an RFC 3339 time of the API."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Cluster:
    """`tests/slurm/cluster.sh start DIR NODES`, stopped by `stop()`."""

    def __init__(self, nodes, **env):
        self.dir = tempfile.mkdtemp(prefix="runledger-slurm-bench-")
        out = subprocess.run(
            ["bash", CLUSTER, "start", self.dir, str(nodes)],
            capture_output=True, text=True, env={**os.environ, **env},
        )
        if out.returncode != 0:
            self.stop()
            raise SystemExit(f"the cluster did not start:\n{out.stdout}\n{out.stderr}")
        self.conf = next(l.split("=", 1)[1] for l in out.stdout.splitlines() if l.startswith("SLURM_CONF="))
        # The server's salloc, srun, scancel and scontrol reach this cluster.
        os.environ["SLURM_CONF"] = self.conf
        extra = [l.strip() for l in os.environ.get("SLURM_CONF_EXTRA", "").split(";") if l.strip()]
        if extra:
            with open(self.conf, "a") as f:
                f.write("\n".join(extra) + "\n")
            subprocess.run(["scontrol", "reconfigure"], check=True)
            time.sleep(2)

    def stop(self):
        subprocess.run(["bash", CLUSTER, "stop", self.dir], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def environment(id, agent, workspaces, runs_on, cap, memory_mb=256):
    text = (
        f'[[environments]]\nid = "{id}"\nharness = "command"\ncommand = ["{agent}"]\n'
        f'workspace_root = "{workspaces}"\nruns_on = "{runs_on}"\nmax_concurrent = {cap}\n'
        f"memory_mb = {memory_mb}\n"
    )
    if runs_on == "slurm":
        text += '[environments.slurm]\npartition = "agents"\n'
    return text + "\n"


def config(*environments):
    # One key polls many runs: no per-key rate limit.
    return ('[server]\nbind = "127.0.0.1:0"\nstop_grace_secs = 3\n\n[limits]\nrate_limit = false\n\n'
            + "".join(environments))


def cpu_secs(pid):
    """utime + stime of process `pid`, in seconds (its own, not its children's)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def pss_mb(pid):
    """The proportional set size of process `pid` (shared pages divided among their users), in MiB."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid, comm):
    """The child processes of `pid` named `comm`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        if ppid == pid and name == comm:
            out.append(int(entry))
    return out


def wait_all(server, ids, timeout):
    """Waits until every run is terminal; the runs as the API returns them."""
    deadline = time.time() + timeout
    pending = list(ids)
    # One run at a time, oldest first (they end about in that order): a light load on the
    # server while it is measured.
    while pending:
        if time.time() > deadline:
            raise SystemExit(f"{len(pending)} runs did not finish, e.g. {server.call('GET', '/agent/runs/' + pending[0])}")
        if server.state(pending[0]) in ("SUCCEEDED", "FAILED", "CANCELLED"):
            pending.pop(0)
        else:
            time.sleep(0.2)
    return [server.call("GET", f"/agent/runs/{r}") for r in ids]


def latency(work):
    agent = os.path.join(work, "first.sh")
    script(agent, 'echo "t=$(date +%s%N)"')
    cluster = Cluster(3)
    try:
        ws = os.path.join(work, "ws-latency")
        server = Server(work, config(
            environment("slurm", agent, ws, "slurm", 64),
            environment("local", agent, ws, "local", 64),
        ))
        try:
            for mode in ("slurm", "local"):
                # One warm-up run each: the first figures would include cold caches.
                server.wait(server.create(mode))
            values = {"slurm": [], "local": []}
            for i in range(LATENCY_RUNS * 2):
                mode = ("slurm", "local")[i % 2]
                before = time.time_ns()
                rid = server.create(mode)
                state = server.wait(rid)
                lines = [t for t in server.transcript(rid) if t.startswith("t=")]
                if state != "SUCCEEDED" or not lines:
                    raise SystemExit(f"{mode} run {rid} {state}: {server.transcript(rid)}")
                values[mode].append((int(lines[0][2:]) - before) / 1e6)
        finally:
            server.stop()
    finally:
        cluster.stop()
    return values


def throughput(work, nodes):
    agent = os.path.join(work, "fixed.sh")
    script(agent, f"sleep {AGENT_SECS:g}; echo done")
    runs = RUNS_PER_NODE * nodes
    cluster = Cluster(nodes)
    try:
        ws = os.path.join(work, f"ws-throughput-{nodes}")
        # Every run is handed to Slurm at once (max_concurrent above the runs): Slurm queues
        # what does not fit, as a cluster shared with other users would.
        os.makedirs(f"{work}/t{nodes}")
        server = Server(f"{work}/t{nodes}", config(environment("fixed", agent, ws, "slurm", runs + 1)))
        try:
            server.wait(server.create("fixed"))
            with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
                ids = list(pool.map(lambda i: server.create("fixed", f"task {i}"), range(runs)))
            done = wait_all(server, ids, 60 + runs * AGENT_SECS * 3)
        finally:
            server.stop()
    finally:
        cluster.stop()
    states = {}
    for r in done:
        states[r["state"]] = states.get(r["state"], 0) + 1
    first = min(when(r["created_at"]) for r in done)
    last = max(when(r["updated_at"]) for r in done)
    if os.environ.get("TIMELINE"):
        for r in sorted(done, key=lambda r: r.get("started_at", "")):
            print(f'{when(r["created_at"]) - first:7.2f} {when(r.get("started_at", r["created_at"])) - first:7.2f} '
                  f'{when(r["updated_at"]) - first:7.2f} {r["state"]}', file=sys.stderr)
    return {"runs": runs, "secs": last - first, "rate": runs / (last - first), "states": states}


def live(work):
    agent = os.path.join(work, "sleeper.sh")
    # The warm-up run ends at once; the others work until they are cancelled.
    script(agent, '[ "$RUNLEDGER_PROMPT" = warm-up ] && exit 0; echo started; exec sleep 3600')
    per_node = -(-LIVE_RUNS // LIVE_NODES)
    memory_mb = 64
    cluster = Cluster(LIVE_NODES, NODE_CPUS=str(per_node), NODE_MEMORY_MB=str(per_node * memory_mb + 1000))
    try:
        ws = os.path.join(work, "ws-live")
        os.makedirs(f"{work}/live")
        server = Server(f"{work}/live", config(
            environment("live", agent, ws, "slurm", LIVE_RUNS + 1, memory_mb=memory_mb)))
        pid = server.proc.pid
        try:
            server.wait(server.create("live", "warm-up"))
            time.sleep(2)
            # The same window with no run, for what the server spends idle.
            i0 = cpu_secs(pid)
            time.sleep(WINDOW_SECS)
            idle_cpu = cpu_secs(pid) - i0
            idle_rss = rss_mb(pid)
            cpu0 = cpu_secs(pid)
            t0 = time.time()
            with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
                ids = list(pool.map(lambda i: server.create("live", f"task {i}"), range(LIVE_RUNS)))
            deadline = time.time() + 60 + LIVE_RUNS * 2
            while True:
                states = [server.state(r) for r in ids]
                if all(s == "INPROGRESS" for s in states):
                    break
                if time.time() > deadline or any(s in ("SUCCEEDED", "FAILED", "CANCELLED") for s in states):
                    raise SystemExit(f"not all in progress: {sorted(set(states))}")
                time.sleep(1)
            ramp_secs = time.time() - t0
            ramp_cpu = cpu_secs(pid) - cpu0
            # Let the last starts settle, then a window in which nothing calls the server.
            time.sleep(5)
            sruns = children(pid, "srun")
            s0, c0 = cpu_secs(pid), {p: cpu_secs(p) for p in sruns}
            w0 = time.time()
            time.sleep(WINDOW_SECS)
            window = time.time() - w0
            s1, c1 = cpu_secs(pid), {p: cpu_secs(p) for p in sruns if os.path.exists(f"/proc/{p}")}
            rss = rss_mb(pid)
            srun_rss = sum(rss_mb(p) for p in sruns if os.path.exists(f"/proc/{p}"))
            srun_pss = sum(pss_mb(p) for p in sruns if os.path.exists(f"/proc/{p}"))
            jobs = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i"], capture_output=True, text=True).stdout.split()
            result = {
                "runs": LIVE_RUNS, "nodes": LIVE_NODES, "cpus": per_node, "idle_rss": idle_rss,
                "rss": rss, "window": window, "cpu": s1 - s0,
                "srun_cpu": sum(c1[p] - c0[p] for p in c1), "sruns": len(sruns),
                "srun_rss": srun_rss, "srun_pss": srun_pss, "idle_cpu": idle_cpu, "jobs": len(jobs),
                "ramp_secs": ramp_secs, "ramp_cpu": ramp_cpu,
            }
            # Cancel every run (each a `scancel`), as a clean end rather than a lost server.
            with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
                list(pool.map(lambda r: server.call("POST", f"/agent/runs/{r}/cancel"), ids))
            wait_all(server, ids, 300)
        finally:
            server.stop()
    finally:
        cluster.stop()
    return result


def main():
    if os.geteuid() != 0:
        raise SystemExit("benches/slurm.sh runs Slurm's daemons: run it as root")
    # Not under /tmp: a sandboxed agent has a private one. /var/tmp can be traversed by the
    # agent user (nobody, under a root server).
    work = tempfile.mkdtemp(prefix="runledger-slurm-bench-", dir="/var/tmp")
    os.chmod(work, 0o755)
    out = []
    try:
        if "latency" in PARTS:
            values = latency(work)
            out.append("| Environment | Runs | p50 | p99 | max |")
            out.append("|---|---|---|---|---|")
            for mode in ("local", "slurm"):
                v = values[mode]
                out.append(f'| runs_on = "{mode}" | {len(v)} | {pct(v, 50):.1f} ms | {pct(v, 99):.1f} ms | {max(v):.1f} ms |')
            out.append(f"Slurm adds {pct(values['slurm'], 50) - pct(values['local'], 50):.1f} ms to the p50 "
                       f"(mean {statistics.mean(values['slurm']) - statistics.mean(values['local']):.1f} ms).")
            out.append("")
            print("\n".join(out[-6:]), flush=True)
        if "throughput" in PARTS:
            rows = [throughput(work, n) for n in range(1, MAX_NODES + 1)]
            base = rows[0]["rate"]
            out.append(f"| Nodes (slots) | Runs of `sleep {AGENT_SECS:g}` | Took | Runs/s | Ideal (slots / {AGENT_SECS:g} s) | Ratio to linear | States |")
            out.append("|---|---|---|---|---|---|---|")
            for n, r in enumerate(rows, 1):
                out.append(f"| {n} ({2 * n}) | {r['runs']} | {r['secs']:.1f} s | {r['rate']:.3f} | {2 * n / AGENT_SECS:.2f} | "
                           f"{r['rate'] / (n * base):.2f} | {r['states']} |")
            out.append("")
            print("\n".join(out[-(len(rows) + 3):]), flush=True)
        if "live" in PARTS:
            r = live(work)
            k = 1000 / r["runs"]
            out.append(f"{r['runs']} runs in progress on {r['nodes']} nodes of {r['cpus']} CPUs "
                       f"({r['jobs']} Slurm jobs running, {r['sruns']} srun processes); all started in {r['ramp_secs']:.1f} s.")
            out.append("")
            out.append(f"| What | Measured with {r['runs']} in progress | Per 1,000 runs in progress (scaled) |")
            out.append("|---|---|---|")
            busy = r["cpu"] - r["idle_cpu"]
            out.append(f"| server CPU over {r['window']:.0f} s | {r['cpu']:.2f} s (idle, no run: {r['idle_cpu']:.2f} s) | "
                       f"{100 * busy / r['window'] * k:.2f} % of a core beyond idle |")
            out.append(f"| server RSS | {r['rss']:.1f} MB ({r['idle_rss']:.1f} MB before the runs) | "
                       f"+{(r['rss'] - r['idle_rss']) * k:.0f} MB |")
            out.append(f"| server CPU to start them all | {r['ramp_cpu']:.2f} s ({1000 * r['ramp_cpu'] / r['runs']:.1f} ms a run) | "
                       f"{r['ramp_cpu'] * k:.0f} s |")
            out.append(f"| the {r['sruns']} srun processes (one per run), CPU over {r['window']:.0f} s | {r['srun_cpu']:.2f} s | "
                       f"{100 * r['srun_cpu'] / r['window'] * k:.2f} % of a core |")
            out.append(f"| the {r['sruns']} srun processes, RSS / PSS | {r['srun_rss']:.0f} MB / {r['srun_pss']:.0f} MB "
                       f"({r['srun_pss'] / max(1, r['sruns']):.1f} MB each) | {r['srun_pss'] * k:.0f} MB (PSS) |")
            print("\n".join(out[-9:]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = os.environ.get("RESULTS")
    if results:
        with open(results, "w") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    sys.exit(main())
