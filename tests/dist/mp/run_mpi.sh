#!/usr/bin/env bash
# Runs one multi-process test: `mpirun -n NP PROGRAM ARGS` with the options every brisk test
# uses (oversubscribed, unbound, yielding, TCP on loopback only, root allowed, one OpenMP thread), then
# checks the exit status, the elapsed time, the output, and that no process is left behind.
#
#   run_mpi.sh --np N --expect pass|fail [--grep REGEX]... [--max-seconds S] [--env K=V]...
#              [--mpirun-arg ARG]... -- PROGRAM ARGS...
set -u
np=2; expect=pass; max=60; greps=(); envs=(); extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --np) np=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --grep) greps+=("$2"); shift 2 ;;
    --max-seconds) max=$2; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --mpirun-arg) extra+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "run_mpi.sh: unknown option $1"; exit 2 ;;
  esac
done
mpirun=${MPIEXEC:-mpirun}
command -v "$mpirun" >/dev/null || { echo "run_mpi.sh: $mpirun not found: install openmpi-bin"; exit 2; }
token="brisk_mp_token_$$_${RANDOM}${RANDOM}"
# yield_when_idle: a rank waiting in MPI gives its core away instead of spinning, which
# matters when ranks (and other programs) outnumber the cores.
opts=(-n "$np" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1
      --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x OMP_NUM_THREADS=1)
[[ $(id -u) -eq 0 ]] && opts+=(--allow-run-as-root)
for e in ${envs[@]+"${envs[@]}"}; do export "$e"; opts+=(-x "${e%%=*}"); done
out=$(mktemp)
start=$(date +%s%N)
OMP_NUM_THREADS=1 timeout -k 5 $((max + 30)) "$mpirun" "${opts[@]}" ${extra[@]+"${extra[@]}"} "$@" "--token=$token" >"$out" 2>&1
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$out"
echo "---- run_mpi.sh: exit status $rc after ${elapsed_ms} ms (expect $expect, at most ${max} s)"
fail=0
if [[ $expect == pass && $rc -ne 0 ]]; then echo "FAIL: the job failed"; fail=1; fi
if [[ $expect == fail && $rc -eq 0 ]]; then echo "FAIL: the job exited 0 but should have failed"; fail=1; fi
if (( elapsed_ms >= (max + 30) * 1000 )); then echo "FAIL: the job hung and was killed by timeout(1)"; fail=1; fi
if (( elapsed_ms > max * 1000 )); then echo "FAIL: took ${elapsed_ms} ms, more than ${max} s"; fail=1; fi
for g in ${greps[@]+"${greps[@]}"}; do
  grep -Eq -- "$g" "$out" || { echo "FAIL: output lacks /$g/"; fail=1; }
done
# Nothing of the job may survive it (ranks, orted).
for _ in $(seq 50); do pgrep -f "$token" >/dev/null || break; sleep 0.1; done
left=$(pgrep -f "$token")
if [[ -n $left ]]; then
  echo "FAIL: processes left behind:"; ps -o pid,args -p $left
  kill -9 $left 2>/dev/null
  fail=1
fi
rm -f "$out"
[[ $fail -eq 0 ]] && echo "PASS"
exit $fail
