#!/usr/bin/env bash
# A preempted job continues bit for bit (docs/fault-tolerance.md, "Preemption"): `brisk launch -n NP
# [LAUNCH_FLAGS] PROGRAM OUT_FLAG DIR ARGS` straight, against the same command preempted at a chosen
# step (BRISK_FAULT_SIGNAL_AT_STEP=SPEC: a rank sends SIGUSR1 or SIGTERM to itself or to the
# launcher, as a batch system would) and then started again. The preempted launch, given
# --max-restarts 2, must exit 75 without restarting, the program saying where it saved, and leave
# the PREEMPTED marker; the run started again must continue from it by itself, end normally, remove
# the marker and end with the straight run's files (same_bits.sh).
#
#   run_preempt.sh TEST_JOB CLI WORK_DIR NP SPEC "LAUNCH_FLAGS" OUT_FLAG PROGRAM [ARGS...]
set -u
job=$1; cli=$2; work=$3; np=$4; spec=$5; launch_flags=$6; out_flag=$7; shift 7
# shellcheck source=tests/accelerate/same_bits.sh
source "$(dirname "$0")/same_bits.sh"
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck disable=SC2086  # LAUNCH_FLAGS is a list of words
"$job" --timeout 120 -- "$cli" launch -n "$np" $launch_flags "$1" "$out_flag" "$work/straight" "${@:2}" \
  >"$work/straight.log" 2>&1 || { cat "$work/straight.log"; fail "the straight run"; }
# shellcheck disable=SC2086
"$job" --timeout 120 --exit-code 75 --env "BRISK_FAULT_SIGNAL_AT_STEP=$spec" \
  --grep "Accelerator: the job was preempted \((SIGUSR1|SIGTERM) reached rank [0-9]+\): every rank stopped after the same step \([0-9]+ optimizer steps in this run\) and saved [^ ]*/checkpoints/checkpoint_[0-9]+; exiting with status 75" \
  --grep "brisk launch: (the program|the job \([0-9]+ processes under mpirun\)) was preempted.*exiting with status 75" \
  --reject "attempt [0-9]+ of|did not stop within|BRISK_FAULT_KILL" \
  -- "$cli" launch -n "$np" --max-restarts 2 $launch_flags "$1" "$out_flag" "$work/preempted" "${@:2}" \
  >"$work/preempted.log" 2>&1 || { cat "$work/preempted.log"; fail "the preempted run"; }
grep -E "BRISK_FAULT_SIGNAL|brisk launch: |Accelerator: " "$work/preempted.log"
marker="$work/preempted/checkpoints/PREEMPTED"
[[ -f $marker ]] || fail "the preempted run left no $marker"
# shellcheck disable=SC2086
"$job" --timeout 120 --grep "Accelerator: the last run was preempted \([^)]*PREEMPTED\): continuing from [^ ]*/$(head -1 "$marker")" \
  -- "$cli" launch -n "$np" $launch_flags "$1" "$out_flag" "$work/preempted" "${@:2}" \
  >"$work/resumed.log" 2>&1 || { cat "$work/resumed.log"; fail "the run started again"; }
grep -E "last run was preempted|resumed from|continuing from" "$work/resumed.log"
[[ ! -e $marker ]] || fail "the run that continued and ended left $marker behind"
same_bits "$work/straight" "$work/preempted" || exit 1
echo "PREEMPT-OK"
