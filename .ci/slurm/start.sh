#!/usr/bin/env bash
# Start a single-node Slurm cluster for tests, without systemd, cgroups or munge.
#
#   eval "$(.ci/slurm/start.sh [SCRATCH_DIR])"     # exports SLURM_CONF for every client
#
# With accounting where slurmdbd and MariaDB are installed (install.sh; SLURM_ACCOUNTING=0 turns
# it off): slurmdbd on MariaDB (accounting.sh), this user in account `ci` with MaxSubmitJobs=6,
# as a shared site limits its users. MaxArraySize=4 (common.sh).
#
# Writes slurm.conf and all state/spool/log/pid files under SCRATCH_DIR (default
# $SLURM_SCRATCH or /tmp/scaling-slurm), starts slurmctld + slurmd, waits until the node is idle
# and prints `export SLURM_CONF=...` on stdout (everything else goes to stderr). Idempotent: if
# this scratch dir's cluster already answers, it only prints the export line.
set -euo pipefail
source "$(dirname "$0")/common.sh"

scratch="$(realpath -m "${1:-${SLURM_SCRATCH:-/tmp/scaling-slurm}}")"
conf="$scratch/slurm.conf"
export SLURM_CONF="$conf"

if [ -f "$conf" ] && sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "slurm already running with $conf" >&2
    echo "export SLURM_CONF=$conf"
    exit 0
fi
for bin in slurmctld slurmd sinfo; do
    command -v "$bin" >/dev/null || { echo "start.sh: $bin not found; run .ci/slurm/install.sh" >&2; exit 1; }
done

mkdir -p "$scratch"/{state,spool,log,run}
host="$(hostname -s)"
# The node line exactly as slurmd sees this machine (CPUs, sockets, memory), minus UpTime.
node="$(slurmd -C | head -n1)"
ctld_port="${SLURMCTLD_PORT:-6817}"
slurmd_port="${SLURMD_PORT:-6818}"
accounting=""
if [ "${SLURM_ACCOUNTING:-1}" = 1 ] && command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null; then
    accounting="$(bash "$(dirname "$0")/accounting.sh" conf "$scratch")"
fi

cat > "$conf" <<CONF
# Written by .ci/slurm/start.sh: a one-node test cluster (see FACTS.md for why each line).
ClusterName=scaling-ci
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
$(common_conf "$scratch" | grep -v '^AccountingStorageType=' || true)
${accounting:-AccountingStorageType=accounting_storage/none}
SlurmdSpoolDir=$scratch/spool
SlurmdPidFile=$scratch/run/slurmd.pid
SlurmdLogFile=$scratch/log/slurmd.log
$node State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

if [ -n "$accounting" ]; then
    start_s=$SECONDS
    bash "$(dirname "$0")/accounting.sh" start "$scratch" scaling-ci >&2
fi
# -c: start clean (forget jobs of an earlier cluster in this scratch dir).
slurmctld -c -f "$conf"
slurmd -f "$conf"
if [ -n "$accounting" ]; then
    bash "$(dirname "$0")/accounting.sh" limits "$scratch" scaling-ci >&2
    echo "accounting up in $((SECONDS - start_s)) s: MaxSubmitJobs ${SLURM_MAX_SUBMIT:-6} for $(id -un)" >&2
fi

for _ in $(seq 1 60); do
    state="$(sinfo -h -o %T 2>/dev/null | head -n1 || true)"
    if [ "$state" = idle ]; then
        echo "slurm up: node $host idle, conf $conf" >&2
        echo "export SLURM_CONF=$conf"
        exit 0
    fi
    sleep 1
done
echo "start.sh: node did not become idle in 60 s (state: ${state:-none}); logs in $scratch/log" >&2
tail -n 20 "$scratch/log/slurmctld.log" "$scratch/log/slurmd.log" >&2 || true
exit 1
