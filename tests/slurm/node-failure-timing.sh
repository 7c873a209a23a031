#!/usr/bin/env bash
# How long this cluster takes to notice a dead node: starts a cluster in DIR (cluster.sh), then
# TRIALS times allocates a job on n2 in the shape runledger uses (salloc --no-shell, then one
# srun step), kills the node mid-step (cluster.sh kill-node), and prints the seconds from the
# kill until the node is DOWN, until the job leaves RUNNING (and in which state), and until srun
# exits (and with which code); then restarts the node. SLURMD_TIMEOUT and MESSAGE_TIMEOUT are
# passed on to cluster.sh. Stops the cluster at the end.
#
#   tests/slurm/node-failure-timing.sh DIR [TRIALS]
set -euo pipefail

[[ $# -ge 1 ]] || {
    echo "usage: $0 DIR [TRIALS]" >&2
    exit 64
}
here="$(cd "$(dirname "$0")" && pwd)"
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
trials="${2:-5}"
node=n2

"$here/cluster.sh" start "$dir" 3 >/dev/null
export SLURM_CONF="$dir/slurm.conf"
trap '"$here/cluster.sh" stop "$dir"' EXIT
scontrol show config | grep -E '^(SlurmdTimeout|MessageTimeout) '

since() {
    python3 -c 'import sys, time; print("%.1f" % (time.time() - float(sys.argv[1])))' "$1"
}

for trial in $(seq 1 "$trials"); do
    name="nodefail.$trial"
    salloc --no-shell --job-name="$name" --nodelist="$node" --cpus-per-task=1 --mem=100M --time=10 2>/dev/null
    job="$(squeue -h -o %i --name="$name")"
    out="$dir/trial-$trial.out"
    srun --jobid="$job" --nodes=1 --ntasks=1 --overlap --quiet --export=NONE --chdir=/tmp -- \
        /bin/sh -c 'echo started; sleep 1000' >"$out" 2>"$out.err" &
    srun_pid=$!
    for _ in $(seq 1 100); do
        grep -q started "$out" && break
        sleep 0.1
    done
    killed="$(date +%s.%N)"
    "$here/cluster.sh" kill-node "$dir" "$node" >/dev/null
    down="" ended="" state="" exited="" code=""
    while [[ -z "$down" || -z "$ended" || -z "$exited" ]]; do
        if [[ -z "$down" ]] && scontrol show node "$node" | grep -q 'State=DOWN'; then
            down="$(since "$killed")"
        fi
        if [[ -z "$ended" ]]; then
            state="$(scontrol show job -o "$job" | grep -oE 'JobState=[A-Z_]+ Reason=[^ ]+')"
            [[ "$state" == JobState=RUNNING* ]] || ended="$(since "$killed")"
        fi
        if [[ -z "$exited" ]] && ! kill -0 "$srun_pid" 2>/dev/null; then
            exited="$(since "$killed")"
            code=0
            wait "$srun_pid" || code=$?
        fi
        if (($(date +%s) - ${killed%.*} > 120)); then
            echo "trial $trial: not done 120 s after the kill" >&2
            break
        fi
        sleep 0.2
    done
    echo "trial $trial job $job: DOWN after ${down}s; $state after ${ended}s;" \
        "srun exited $code after ${exited}s: $(tr '\n' ' ' <"$out.err")"
    scancel "$job" 2>/dev/null || true
    "$here/cluster.sh" restart-node "$dir" "$node"
    for _ in $(seq 1 100); do
        sinfo -h -N -n "$node" -o %T | grep -qx idle && break
        sleep 0.2
    done
    sleep "$((RANDOM % 3))"
done
