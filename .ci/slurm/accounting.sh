#!/usr/bin/env bash
# Accounting for a test cluster, as a shared site has it: MariaDB (Debian's, in SCRATCH/mysql,
# on loopback) and slurmdbd (SCRATCH/slurmdbd.conf, beside slurm.conf), then the cluster, an
# account `ci` and this user in it with a submit limit, MaxSubmitJobs=SLURM_MAX_SUBMIT (6).
#
#   .ci/slurm/accounting.sh start SCRATCH CLUSTER   # before slurmctld; prints nothing on stdout
#   .ci/slurm/accounting.sh conf SCRATCH            # the slurm.conf lines that use it
#   .ci/slurm/accounting.sh limits SCRATCH CLUSTER  # after slurmctld: the account and limit
#   .ci/slurm/accounting.sh stop SCRATCH
#
# Ports: SLURMDBD_PORT (default 6819) and SLURM_MYSQL_PORT (default 6820). MariaDB runs with
# --skip-grant-tables on loopback only: a throw-away test database, no password to keep.
set -euo pipefail
action=${1:?usage: accounting.sh start|conf|limits|stop SCRATCH [CLUSTER]}
scratch="$(realpath -m "${2:?usage: accounting.sh ACTION SCRATCH}")"
dbd_port="${SLURMDBD_PORT:-6819}"
db_port="${SLURM_MYSQL_PORT:-6820}"
db="$scratch/mysql"

wait_for() {  # wait_for SECONDS WHAT COMMAND...
    local seconds=$1 what=$2
    shift 2
    for _ in $(seq "$((seconds * 4))"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
    echo "accounting.sh: $what did not come up in ${seconds} s; logs in $scratch/log" >&2
    return 1
}

case "$action" in
  start)
    cluster=${3:?usage: accounting.sh start SCRATCH CLUSTER}
    for bin in mariadbd mariadb-install-db slurmdbd sacctmgr; do
        command -v "$bin" >/dev/null || { echo "accounting.sh: $bin not found; run .ci/slurm/install.sh" >&2; exit 1; }
    done
    mkdir -p "$scratch"/{log,run} "$db"
    if [ ! -d "$db/data/mysql" ]; then
        mariadb-install-db --datadir="$db/data" --user=root --skip-test-db \
            --auth-root-authentication-method=normal >"$scratch/log/mariadb-install.log" 2>&1
    fi
    setsid mariadbd --datadir="$db/data" --user=root --socket="$db/mysqld.sock" \
        --port="$db_port" --bind-address=127.0.0.1 --skip-grant-tables \
        --pid-file="$db/mysqld.pid" --log-error="$scratch/log/mariadb.log" \
        --innodb-buffer-pool-size=32M --skip-log-bin </dev/null >/dev/null 2>&1 &
    wait_for 60 MariaDB mariadb --socket="$db/mysqld.sock" -e 'select 1'
    cat >"$scratch/slurmdbd.conf" <<CONF
# Written by .ci/slurm/accounting.sh: slurmdbd on MariaDB for the test cluster.
AuthType=auth/none
DbdHost=localhost
DbdPort=$dbd_port
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=root
StorageLoc=slurm_acct_db_${cluster//-/_}
PidFile=$scratch/run/slurmdbd.pid
LogFile=$scratch/log/slurmdbd.log
CONF
    chmod 600 "$scratch/slurmdbd.conf"
    SLURM_CONF="$scratch/slurm.conf" slurmdbd
    export SLURM_CONF="$scratch/slurm.conf"
    wait_for 60 slurmdbd sacctmgr -n show cluster
    sacctmgr -i add cluster "$cluster" >/dev/null 2>&1 || true
    ;;
  conf)
    cat <<CONF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
AccountingStorageEnforce=associations,limits,qos
CONF
    ;;
  limits)
    cluster=${3:?usage: accounting.sh limits SCRATCH CLUSTER}
    export SLURM_CONF="$scratch/slurm.conf"
    user="$(id -un)"
    sacctmgr -i add account ci cluster="$cluster" >/dev/null 2>&1 || true
    sacctmgr -i add user "$user" account=ci cluster="$cluster" >/dev/null 2>&1 || true
    sacctmgr -i modify user where name="$user" cluster="$cluster" \
        set MaxSubmitJobs="${SLURM_MAX_SUBMIT:-6}" >/dev/null
    ;;
  stop)
    for pidfile in "$scratch/run/slurmdbd.pid" "$db/mysqld.pid"; do
        [ -f "$pidfile" ] || continue
        pid="$(cat "$pidfile")"
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        fi
        rm -f "$pidfile"
    done
    ;;
  *) echo "usage: accounting.sh start|conf|limits|stop SCRATCH [CLUSTER]" >&2; exit 2 ;;
esac
