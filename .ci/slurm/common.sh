# Sourced by start.sh and start_multinode.sh: the settings every test cluster shares (see
# FACTS.md for why each line). `common_conf SCRATCH` prints them; no systemd, cgroups or munge,
# and every state/spool/log/pid path under SCRATCH. MaxArraySize is a shared site's limit made
# small (SLURM_MAX_ARRAY_SIZE, default 4: an array holds at most 4 cells), so every Slurm test
# submits through the split (docs/cluster.md, "Large studies on a shared cluster").
common_conf() {
    local scratch=$1
    cat <<CONF
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
AuthInfo=cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$scratch/log/jobcomp.log
JobRequeue=1
ReturnToService=2
SchedulerParameters=bf_interval=1,sched_interval=2
KillWait=5
MinJobAge=600
MaxArraySize=${SLURM_MAX_ARRAY_SIZE:-4}
InactiveLimit=0
MailProg=/bin/true
StateSaveLocation=$scratch/state
SlurmctldPidFile=$scratch/run/slurmctld.pid
SlurmctldLogFile=$scratch/log/slurmctld.log
CONF
}
