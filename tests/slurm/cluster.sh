#!/usr/bin/env bash
# A real Slurm cluster on this machine for the tests of Slurm execution: Debian's slurmctld,
# slurmd and munge, a controller and NODES nodes (default 3), each `slurmd -N nI` on a port of
# its own, all on loopback, every file under DIR. Nothing outside DIR is written or read
# (munge's socket, key and seed, Slurm's state, spool, pid and log files), so clusters of
# different test runs do not meet, and the system's own munge and Slurm (if any) are untouched.
#
#   tests/slurm/cluster.sh start DIR [NODES]   install what is missing (apt), start, wait until
#                                              every node is idle; prints SLURM_CONF=DIR/slurm.conf
#   tests/slurm/cluster.sh stop DIR            stop every daemon of DIR (by its pid file)
#
# Node nI has the feature `zone-a` when I is 1 and `zone-b` otherwise (for `--constraint`),
# 2 CPUs and 2000 MB of memory as Slurm sees them. Without accounting storage (no slurmdbd),
# finished jobs are read with `scontrol show job`, which keeps them for MinJobAge (1 h). A node
# whose slurmd stops answering is marked DOWN after SlurmdTimeout (10 s) and returns to
# service by itself when it registers again (ReturnToService=2). Must run as root (the daemons
# run as root; jobs run as the submitting user).
set -euo pipefail

usage() {
    echo "usage: $0 start DIR [NODES] | stop DIR" >&2
    exit 64
}

[[ $# -ge 2 ]] || usage
action="$1"
dir="$(mkdir -p "$2" && cd "$2" && pwd)"
nodes="${3:-3}"

stop() {
    local pid
    for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
        [[ -f "$f" ]] || continue
        pid="$(cat "$f")"
        if kill "$pid" 2>/dev/null; then
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
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core_Memory"
        echo "SchedulerType=sched/backfill"
        echo "ReturnToService=2"
        echo "MinJobAge=3600"
        echo "SlurmdTimeout=10"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "MpiDefault=none"
        for i in $(seq 1 "$nodes"); do
            feature=zone-b
            [[ $i == 1 ]] && feature=zone-a
            echo "NodeName=n$i NodeHostname=localhost Port=${ports[$((i + 1))]} CPUs=2 RealMemory=2000 Features=$feature State=UNKNOWN"
        done
        echo "PartitionName=agents Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
    } >"$dir/slurm.conf"
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

case "$action" in
start) start ;;
stop) stop ;;
*) usage ;;
esac
