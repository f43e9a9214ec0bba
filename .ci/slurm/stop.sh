#!/usr/bin/env bash
# Stop the test cluster that start.sh started in SCRATCH_DIR: cancel its jobs, stop slurmd and
# slurmctld by their pid files, and wait for them to exit. Safe to run when nothing is running.
set -uo pipefail

scratch="$(realpath -m "${1:-${SLURM_SCRATCH:-/tmp/scaling-slurm}}")"
export SLURM_CONF="$scratch/slurm.conf"
[ -f "$SLURM_CONF" ] || { echo "stop.sh: no cluster in $scratch" >&2; exit 0; }

scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
# slurmd.pid, or slurmd-n1.pid ... for the nodes of start_multinode.sh
for pidfile in "$scratch"/run/slurmd*.pid "$scratch/run/slurmctld.pid"; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$pidfile"
done
[ -f "$scratch/slurmdbd.conf" ] && bash "$(dirname "$0")/accounting.sh" stop "$scratch"
echo "slurm stopped ($scratch)" >&2
