#!/usr/bin/env bash
# Runs a brisk program as a 2-task Slurm job on this host, through a real Slurm controller and
# node daemon: installs Debian's slurm-wlm and munge when missing (as root), writes a minimal
# slurm.conf for this host into a temporary folder, starts munged, slurmctld and slurmd there,
# runs `srun -n 2 --mpi=pmix PROGRAM ARGS...` and then the same inside an `sbatch` job, and stops the daemons and removes the folder
# afterwards, on failure too. Nothing outside the temporary folder is configured or started.
# Usage: scripts/slurm-test.sh PROGRAM [ARGS...]
#   e.g. scripts/slurm-test.sh build/tests/dist/mp/dist_worker facts slurm
# Or, for a training PROGRAM that takes --out DIR (docs/slurm.md, "Preemption and requeueing"):
#   scripts/slurm-test.sh --requeue PROGRAM [ARGS...]   examples/slurm/brisk-requeue.sbatch, sent
#       SIGUSR1 (scancel --batch) after the first checkpoint: it must save, requeue itself and end
#       with the files of the same job never signalled
#   scripts/slurm-test.sh --restart BRISK PROGRAM [ARGS...]   `brisk launch --max-restarts 2` inside
#       an sbatch job, rank 1 SIGKILLed at its step 7: the same files as the job that never failed
# Exits with the job's status (0: every task passed); 77 (skipped) when Slurm is missing and
# cannot be installed (not root, no apt-get). Env: BRISK_SLURM_NTASKS (default 2),
# BRISK_SLURM_TIMEOUT (seconds for the job, default 120), BRISK_SLURM_KEEP=1 (keep the folder).
set -uo pipefail
mode=facts
if [[ ${1:-} == --requeue || ${1:-} == --restart ]]; then
  mode=${1#--}
  shift
fi
if [[ $mode == restart ]]; then
  brisk=$(realpath "${1:-}")
  shift
fi
if (($# < 1)); then
  echo "usage: scripts/slurm-test.sh [--requeue | --restart BRISK] PROGRAM [ARGS...]" >&2
  exit 2
fi
program=$(realpath "$1")
shift
ntasks=${BRISK_SLURM_NTASKS:-2}
job_timeout=${BRISK_SLURM_TIMEOUT:-120}
say() { echo "slurm-test: $*"; }

# 1. Slurm and munge, from Debian.
need=()
for tool in slurmctld slurmd srun sinfo munged munge; do
  if ! command -v "$tool" > /dev/null && [[ ! -x /usr/sbin/$tool ]]; then need+=("$tool"); fi
done
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get > /dev/null; then
    say "SKIP: ${need[*]} not installed, and this is not root on Debian/Ubuntu to install them" \
      "(apt-get install slurm-wlm munge)"
    exit 77
  fi
  say "installing slurm-wlm and munge (missing: ${need[*]})"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge > /dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q > /dev/null
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge > /dev/null; then
      say "SKIP: apt-get could not install slurm-wlm munge"
      exit 77
    fi
  fi
fi
export PATH=$PATH:/usr/sbin:/sbin
if [[ $(id -u) -ne 0 ]]; then
  # slurmd starts the tasks as the submitting user: that takes root (or a SlurmdUser set up by hand).
  say "SKIP: slurmd must run as root to start tasks; run this as root (e.g. in a container or VM)"
  exit 77
fi

# 2. A temporary cluster of one node: this host.
tmp=$(mktemp -d /tmp/brisk-slurm.XXXXXX)
chmod 700 "$tmp"
pids=()
cleanup() {
  local status=$?
  for pidfile in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
    [[ -s $pidfile ]] || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2> /dev/null || continue
    for _ in $(seq 50); do
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2> /dev/null
  done
  if ((status != 0)) && [[ -d $tmp/log ]]; then
    for log in "$tmp"/log/*.log; do
      echo "---- last lines of $(basename "$log")"
      tail -n 15 "$log"
    done
  fi
  if [[ ${BRISK_SLURM_KEEP:-0} == 1 ]]; then say "kept $tmp"; else rm -rf "$tmp"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/log"
chmod 700 "$tmp/munge"

# Ports nothing listens on (a real cluster's daemons on 6817/6818 are left alone).
port_free() { ! (echo > "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }
ctld_port=0
for _ in $(seq 50); do
  p=$((20000 + RANDOM % 20000))
  if port_free "$p" && port_free $((p + 1)); then
    ctld_port=$p
    break
  fi
done
((ctld_port)) || { say "no free port pair found"; exit 1; }
host=$(hostname -s)
cpus=$(nproc)
cat > "$tmp/slurm.conf" << CONF
ClusterName=brisk-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$tmp/slurm.conf

head -c 1024 /dev/urandom > "$tmp/munge/munge.key"
chmod 600 "$tmp/munge/munge.key"
munged --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.sock" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" --seed-file="$tmp/munge/seed" ||
  { say "munged did not start"; exit 1; }
slurmctld -i || { say "slurmctld did not start"; exit 1; }
slurmd || { say "slurmd did not start"; exit 1; }
state=""
for _ in $(seq 60); do
  state=$(sinfo -h -o %T 2> /dev/null | head -1)
  [[ $state == idle ]] && break
  sleep 0.5
done
if [[ $state != idle ]]; then
  say "the node did not come up (state '${state:-unknown}')"
  exit 1
fi

say "$(slurmctld -V), $(munged -V 2>&1 | head -1), Open MPI $(ompi_info --parsable 2> /dev/null |
  sed -n 's/^ompi:version:full://p'), PMIx $(dpkg-query -W -f='${Version}' libpmix2 2> /dev/null || echo '?'),"\
  "host $host ($cpus CPUs), $(date -u '+%Y-%m-%d %H:%M UTC')"
overcommit=()
((cpus < ntasks)) && overcommit=(--overcommit)
export OMP_NUM_THREADS=1 OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
if [[ $mode != facts ]]; then
  # shellcheck source=scripts/slurm-jobs.sh
  source "$(dirname "$0")/slurm-jobs.sh"
  "slurm_$mode" "$@"
  exit $?
fi
say "srun -n $ntasks --mpi=pmix ${overcommit[*]} $program $*"
# Each task gets one OpenMP thread, and only the loopback interface for OpenMPI (one host).
OMP_NUM_THREADS=1 OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
  timeout "$job_timeout" srun -n "$ntasks" --mpi=pmix "${overcommit[@]}" --time=5 --kill-on-bad-exit=1 \
  --label "$program" "$@"
status=$?
if ((status == 124)); then say "FAILED: the job ran past ${job_timeout}s"; exit 1; fi
if ((status != 0)); then say "FAILED: srun exited with $status"; exit 1; fi
say "srun: passed"

# The same as a batch job, as examples/slurm/*.sbatch run it: srun inside an sbatch script.
{
  echo "#!/bin/bash"
  echo "#SBATCH --ntasks=$ntasks ${overcommit[*]}"
  echo "export OMP_NUM_THREADS=1 OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo"
  echo "srun --mpi=pmix --kill-on-bad-exit=1 --label $(printf '%q ' "$program" "$@")"
} > "$tmp/job.sbatch"
say "sbatch --wait: $(tail -n 1 "$tmp/job.sbatch")"
timeout "$job_timeout" sbatch --wait --time=5 --output="$tmp/job.out" "$tmp/job.sbatch"
status=$?
cat "$tmp/job.out" 2> /dev/null
if ((status == 124)); then say "FAILED: the batch job ran past ${job_timeout}s"; exit 1; fi
if ((status != 0)); then say "FAILED: the batch job exited with $status"; exit 1; fi
say "passed: $ntasks tasks under srun and under sbatch"
