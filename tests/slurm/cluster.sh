#!/usr/bin/env bash
# A real Slurm cluster on this machine for the tests of Slurm execution: Debian's slurmctld,
# slurmd and munge, a controller and NODES nodes (default 3), each `slurmd -N nI` on a port of
# its own, all on loopback, every file under DIR. Nothing outside DIR is written or read
# (munge's socket, key and seed, Slurm's state, spool, pid and log files) but the jobs' cgroups,
# so clusters of different test runs do not meet, and the system's own munge and Slurm (if any)
# are untouched.
#
#   tests/slurm/cluster.sh start DIR [NODES]   install what is missing (apt), start, wait until
#                                              every node is idle; prints SLURM_CONF=DIR/slurm.conf
#   tests/slurm/cluster.sh stop DIR            stop every daemon of DIR (by its pid file), the steps
#                                              still running on its nodes, and srun/salloc of DIR
#   tests/slurm/cluster.sh kill-node DIR NAME  node NAME dies: SIGKILL of its slurmd and of every
#                                              process of its job steps
#   tests/slurm/cluster.sh restart-node DIR NAME   start NAME's slurmd again (it returns to service)
#
# Node nI has the feature `zone-a` when I is 1 and `zone-b` otherwise (for `--constraint`),
# 2 CPUs and 2000 MB of memory as Slurm sees them (NODE_CPUS and NODE_MEMORY_MB change both; a
# node then declares what its slurmd is told, not what the machine has: config_overrides). Without accounting storage (no slurmdbd),
# finished jobs are read with `scontrol show job`, which keeps them for MinJobAge (1 h).
#
# Memory is enforced: proctrack/cgroup and task/cgroup on cgroup v1 (DIR/cgroup.conf), so `--mem`
# is the job's memory.limit_in_bytes, a step over it is OOM-killed (srun: "task 0: Out Of Memory",
# `scontrol show job -d`: DerivedExitCode=0:125), and scancel reaches every process of a step, also
# those that left its process tree. Each node's cgroups are /sys/fs/cgroup/*/slurm_<node>/; job
# ids start at a random FirstJobId so that clusters of other test runs, whose nodes have the same
# names, never share a job's cgroup.
#
# Node failure is detected fast: a node whose slurmd stops answering is DOWN, and its jobs
# NODE_FAIL, SlurmdTimeout (6 s) + 1 to 5 s after it died (measured: 6.7 to 10.5 s). The
# controller pings every SlurmdTimeout/3 s, one ping cycle at a time, and retries a refused
# connection once a second for MessageTimeout, so MessageTimeout=1 keeps a cycle short; with the
# defaults (10 s) it took 28 s. SLURMD_TIMEOUT and MESSAGE_TIMEOUT override both. The node
# returns to service by itself when it registers again (ReturnToService=2). Must run as root (the
# daemons run as root; jobs run as the submitting user).
set -euo pipefail

usage() {
    echo "usage: $0 start DIR [NODES] | stop DIR | kill-node DIR NAME | restart-node DIR NAME" >&2
    exit 64
}

[[ $# -ge 2 ]] || usage
action="$1"
dir="$(mkdir -p "$2" && cd "$2" && pwd)"
nodes="${3:-3}"

# Whether pid (from a pid file) is still the daemon named comm, not a process that reused the pid.
is_daemon() {
    [[ -n "$1" && "$(cat /proc/"$1"/comm 2>/dev/null)" == "$2" ]]
}

stop() {
    local pid f name
    # Every node as if it died: slurmd and the steps' processes (stopping slurmd alone leaves the
    # steps running), while slurmctld still answers which jobs ran on it.
    for f in "$dir"/slurmd-*.pid; do
        [[ -f "$f" ]] || continue
        name="${f#"$dir"/slurmd-}"
        kill_node "${name%.pid}" >/dev/null
    done
    # srun and salloc of this cluster (SLURM_CONF in their environment) would wait forever for the
    # controller and the steps that are gone.
    for pid in $(pgrep -x 'srun|salloc' || true); do
        if { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf"; then
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    for f in "$dir/slurmctld.pid" "$dir/munged.pid"; do
        [[ -f "$f" ]] || continue
        pid="$(cat "$f")"
        name="$(basename "$f" .pid)"
        if is_daemon "$pid" "$name" && kill "$pid" 2>/dev/null; then
            for _ in $(seq 1 100); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    done
}

# `count` free TCP ports on loopback, one per line.
free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
    print(s.getsockname()[1])
EOF
}

start() {
    if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 ||
        ! command -v srun >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
        echo "tests/slurm/cluster.sh: installing slurmctld, slurmd, slurm-client and munge" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge
    fi
    stop
    rm -rf "$dir/state" "$dir/spool" "$dir/log"
    mkdir -p "$dir/state" "$dir/spool" "$dir/log"
    if [[ ! -f "$dir/munge.key" ]]; then
        (umask 077 && head -c 1024 /dev/urandom >"$dir/munge.key")
    fi
    munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
        --log-file="$dir/log/munged.log" --pid-file="$dir/munged.pid" \
        --seed-file="$dir/munged.seed"

    mapfile -t ports < <(free_ports $((nodes + 2)))
    local first_job_id=$(( (RANDOM * 32768 + RANDOM) % 60000000 + 1000000 )) cgroup_v1=yes
    if [[ "$(stat -f -c %T /sys/fs/cgroup/memory 2>/dev/null)" != cgroupfs ]] ||
        [[ "$(stat -f -c %T /sys/fs/cgroup/freezer 2>/dev/null)" != cgroupfs ]]; then
        cgroup_v1=no
        echo "tests/slurm/cluster.sh: no cgroup v1 memory and freezer controllers here:" \
            "memory limits are not enforced and scancel reaches only the steps' process trees" >&2
    fi
    {
        echo "ClusterName=runledger-test"
        echo "SlurmctldHost=localhost"
        echo "SlurmctldPort=${ports[0]}"
        echo "SlurmdPort=${ports[1]}"
        echo "AuthType=auth/munge"
        echo "AuthInfo=socket=$dir/munge.sock"
        echo "CredType=cred/munge"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "StateSaveLocation=$dir/state"
        echo "SlurmdSpoolDir=$dir/spool/%n"
        echo "SlurmctldPidFile=$dir/slurmctld.pid"
        echo "SlurmdPidFile=$dir/slurmd-%n.pid"
        echo "SlurmctldLogFile=$dir/log/slurmctld.log"
        echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
        if [[ $cgroup_v1 == yes ]]; then
            echo "ProctrackType=proctrack/cgroup"
            echo "TaskPlugin=task/cgroup"
            echo "JobAcctGatherType=jobacct_gather/cgroup"
        else
            echo "ProctrackType=proctrack/linuxproc"
            echo "TaskPlugin=task/none"
            echo "JobAcctGatherType=jobacct_gather/none"
        fi
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core_Memory"
        echo "SchedulerType=sched/backfill"
        echo "ReturnToService=2"
        echo "MinJobAge=3600"
        # Job ids of their own: with cgroups, a node's jobs live in
        # /sys/fs/cgroup/<controller>/slurm_<node>/uid_<uid>/job_<id>, and clusters of other test runs
        # on this machine have nodes of the same names; with the same job ids they would share cgroups.
        echo "FirstJobId=$first_job_id"
        echo "SlurmdTimeout=${SLURMD_TIMEOUT:-6}"
        echo "MessageTimeout=${MESSAGE_TIMEOUT:-1}"
        echo "AccountingStorageType=accounting_storage/none"
        echo "MpiDefault=none"
        if [[ -n "${NODE_CPUS:-}${NODE_MEMORY_MB:-}" ]]; then
            # A node declaring more than the machine has is drained otherwise (INVAL, "Low CPUs").
            echo "SlurmdParameters=config_overrides"
        fi
        for i in $(seq 1 "$nodes"); do
            feature=zone-b
            [[ $i == 1 ]] && feature=zone-a
            echo "NodeName=n$i NodeHostname=localhost Port=${ports[$((i + 1))]} CPUs=${NODE_CPUS:-2} RealMemory=${NODE_MEMORY_MB:-2000} Features=$feature State=UNKNOWN"
        done
        echo "PartitionName=agents Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
    } >"$dir/slurm.conf"
    # Slurm reads cgroup.conf from slurm.conf's directory.
    {
        echo "CgroupPlugin=cgroup/v1"
        echo "CgroupMountpoint=/sys/fs/cgroup"
        echo "ConstrainRAMSpace=yes"
        echo "ConstrainSwapSpace=yes"
        echo "ConstrainCores=no"
        echo "ConstrainDevices=no"
    } >"$dir/cgroup.conf"
    export SLURM_CONF="$dir/slurm.conf"

    slurmctld -i
    for i in $(seq 1 "$nodes"); do
        slurmd -N "n$i"
    done
    for _ in $(seq 1 300); do
        if [[ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" == "$nodes" ]]; then
            echo "SLURM_CONF=$SLURM_CONF"
            return 0
        fi
        sleep 0.1
    done
    echo "tests/slurm/cluster.sh: the nodes did not become idle within 30 s:" >&2
    sinfo -N >&2 || true
    tail -n 20 "$dir/log/slurmctld.log" >&2 || true
    stop
    exit 1
}

# Every descendant of the given pids (not the pids themselves), one per line.
descendants() {
    ps -eo pid=,ppid= | awk -v roots="$*" '
        { parent[$1] = $2; pids[NR] = $1 }
        END {
            n = split(roots, r, " "); for (i = 1; i <= n; i++) inset[r[i]] = 1
            do {
                changed = 0
                for (i in pids) { p = pids[i]; if (!(p in inset) && (parent[p] in inset)) { inset[p] = 1; changed = 1; print p } }
            } while (changed)
        }'
}

# The slurmstepd processes of node NAME. On one machine every node's steps are children of init,
# so they are told apart by the node's own slurmd log file, which each slurmstepd keeps open
# (SlurmdLogFile has %n), or by the node's spool directory (SlurmdSpoolDir has %n) holding the
# step's socket.
stepds_of() {
    local name="$1" pid fd
    for pid in $(pgrep -x slurmstepd || true); do
        for fd in /proc/"$pid"/fd/*; do
            case "$(readlink "$fd" 2>/dev/null)" in
            "$dir/log/slurmd-$name.log" | "$dir/spool/$name/"*)
                echo "$pid"
                break
                ;;
            esac
        done
    done
}

# Simulates node NAME dying: SIGKILL its slurmd and every slurmstepd of the node with the whole
# process tree under it (on a real cluster they would die with the machine; here they would keep
# running and finish the step's work). The tree is stopped (SIGSTOP) before it is killed so that
# nothing forks in between; processes that left the tree (double fork) are found through the
# node's cgroups when proctrack/cgroup is used.
kill_node() {
    local name="$1" pid="" pids job jobs
    export SLURM_CONF="$dir/slurm.conf"
    if [[ -f "$dir/slurmd-$name.pid" ]]; then
        pid="$(cat "$dir/slurmd-$name.pid")"
        is_daemon "$pid" slurmd && kill -9 "$pid" 2>/dev/null
        rm -f "$dir/slurmd-$name.pid"
    fi
    pids="$(stepds_of "$name" | tr '\n' ' ')"
    # The jobs of this cluster on the node (other clusters may have a node of the same name, hence
    # the same cgroup directory slurm_NAME, but not the same job ids: FirstJobId).
    jobs=""
    if [[ -f "$dir/slurmctld.pid" ]] && is_daemon "$(cat "$dir/slurmctld.pid")" slurmctld; then
        jobs="$(squeue -h -w "$name" -o %i --states=all 2>/dev/null | tr '\n' ' ' || true)"
    fi
    for job in $jobs; do
        pids="$pids $({ cat /sys/fs/cgroup/freezer/slurm_"$name"/uid_*/job_"$job"/step_*/cgroup.procs || true; } 2>/dev/null | tr '\n' ' ')"
    done
    if [[ -n "${pids// /}" ]]; then
        # shellcheck disable=SC2086
        pids="$pids $(descendants $pids | tr '\n' ' ')"
        # shellcheck disable=SC2086
        kill -STOP $pids 2>/dev/null || true
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null || true
    fi
    # The killed steps' cgroup directories (nothing removes them once slurmstepd is gone).
    for job in $jobs; do
        for _ in $(seq 1 20); do
            find /sys/fs/cgroup/*/slurm_"$name"/uid_*/job_"$job" -depth -type d -exec rmdir {} + 2>/dev/null || true
            compgen -G "/sys/fs/cgroup/*/slurm_$name/uid_*/job_$job" >/dev/null || break
            sleep 0.1
        done
    done
    pids="$(xargs <<<"$pids")"
    echo "killed node $name (slurmd ${pid:-none}; slurmstepd and their processes: ${pids:-none})"
}

restart_node() {
    local name="$1"
    export SLURM_CONF="$dir/slurm.conf"
    slurmd -N "$name"
}

case "$action" in
start) start ;;
stop) stop ;;
kill-node) [[ $# -eq 3 ]] || usage; kill_node "$3" ;;
restart-node) [[ $# -eq 3 ]] || usage; restart_node "$3" ;;
*) usage ;;
esac
