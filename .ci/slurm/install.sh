#!/usr/bin/env bash
# Install a single-node Slurm (Debian's slurm-wlm, slurmdbd, MariaDB) for the end-to-end tests. Idempotent: does
# nothing when slurmctld, slurmd and sinfo are already on PATH. Needs root and apt.
set -euo pipefail

if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sinfo >/dev/null \
    && command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null; then
    echo "slurm already installed: $(slurmd -V)"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "install.sh: needs root to apt-get install slurm-wlm" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# munge comes along as a dependency; start.sh runs with auth/none and does not need it.
# slurmdbd and MariaDB: accounting, so the user's submit limits are real (start.sh, accounting.sh)
apt-get install -y -qq --no-install-recommends slurm-wlm slurmdbd mariadb-server >/dev/null
echo "installed: $(slurmd -V)"
