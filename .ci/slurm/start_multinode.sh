#!/usr/bin/env bash
# Start a two-node Slurm cluster on this one machine, for node-failure tests: one slurmctld
# and two slurmd's, each on its own port (`NodeName ... Port=`, `slurmd -N`), each node with
# CPUS_PER_NODE CPUs, so that an array spreads over the nodes. The nodes are named
# `$(hostname -s)` and `localhost`: names that resolve to this machine, because submitit makes
# the first node's name a job's MASTER_ADDR (a made-up name like `n1` hangs torch.distributed).
#
#   eval "$(.ci/slurm/start_multinode.sh SCRATCH_DIR [CPUS_PER_NODE])"
#
# Ports: SLURMCTLD_PORT (default 7817) and SLURMD_PORT (the first node's; default 7818, then +1
# per node), so it can run beside the one-node cluster of start.sh on 6817/6818. Prints
# `export SLURM_CONF=...` on stdout; stop it with stop.sh SCRATCH_DIR. Same settings as start.sh
# otherwise (see FACTS.md).
set -euo pipefail
source "$(dirname "$0")/common.sh"

scratch="$(realpath -m "${1:?usage: start_multinode.sh SCRATCH_DIR [CPUS_PER_NODE]}")"
cpus="${2:-1}"
conf="$scratch/slurm.conf"
export SLURM_CONF="$conf"
for bin in slurmctld slurmd sinfo; do
    command -v "$bin" >/dev/null || { echo "start_multinode.sh: $bin not found; run .ci/slurm/install.sh" >&2; exit 1; }
done

mkdir -p "$scratch"/{state,log,run}
host="$(hostname -s)"
nodes=("$host" localhost)
num_nodes=${#nodes[@]}
ctld_port="${SLURMCTLD_PORT:-7817}"
slurmd_port="${SLURMD_PORT:-7818}"
# each node gets an equal share of this machine's memory
mem_mb=$(( $(slurmd -C | head -n1 | grep -oE 'RealMemory=[0-9]+' | cut -d= -f2) / num_nodes ))

{
cat <<CONF
# Written by .ci/slurm/start_multinode.sh: $num_nodes nodes on one machine.
ClusterName=scaling-ci-multi
SlurmctldHost=$host
SlurmctldPort=$ctld_port
$(common_conf "$scratch")
SlurmdSpoolDir=$scratch/spool/%n
SlurmdPidFile=$scratch/run/slurmd-%n.pid
SlurmdLogFile=$scratch/log/slurmd-%n.log
CONF
for i in "${!nodes[@]}"; do
    echo "NodeName=${nodes[$i]} NodeHostname=$host NodeAddr=127.0.0.1 Port=$((slurmd_port + i)) CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN"
done
echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$conf"

slurmctld -c -f "$conf"
for name in "${nodes[@]}"; do
    mkdir -p "$scratch/spool/$name"
    slurmd -f "$conf" -N "$name"
done

for _ in $(seq 1 60); do
    idle="$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$' || true)"
    if [ "$idle" = "$num_nodes" ]; then
        echo "slurm up: $num_nodes nodes idle, conf $conf" >&2
        echo "export SLURM_CONF=$conf"
        exit 0
    fi
    sleep 1
done
echo "start_multinode.sh: $idle of $num_nodes nodes idle after 60 s; logs in $scratch/log" >&2
sinfo -N >&2 || true
exit 1
