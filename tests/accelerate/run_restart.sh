#!/usr/bin/env bash
# A job that loses a rank and is restarted ends with the bits of the job that never failed:
# `brisk launch -n NP [LAUNCH_FLAGS] PROGRAM OUT_FLAG DIR ARGS` straight, against the same command
# with --max-restarts 2 whose rank KILL_RANK is SIGKILLed at its step KILL_STEP on the first attempt
# (BRISK_FAULT_KILL_AT_STEP); the restarted job continues from the newest complete checkpoint by
# itself. The saved weights (model.safetensors), every file of <out>/final when the program writes
# one, and every file of the newest checkpoint must have the same SHA-256.
#
#   run_restart.sh TEST_JOB CLI WORK_DIR NP KILL_STEP:KILL_RANK "LAUNCH_FLAGS" OUT_FLAG PROGRAM [ARGS...]
set -u
# shellcheck source=tests/accelerate/same_bits.sh
source "$(dirname "$0")/same_bits.sh"
job=$1; cli=$2; work=$3; np=$4; kill=$5; launch_flags=$6; out_flag=$7; shift 7
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck disable=SC2086  # LAUNCH_FLAGS is a list of words
"$job" --timeout 120 -- "$cli" launch -n "$np" $launch_flags "$1" "$out_flag" "$work/straight" "${@:2}" \
  >"$work/straight.log" 2>&1 || { cat "$work/straight.log"; fail "the straight run"; }
# shellcheck disable=SC2086
"$job" --timeout 200 --env "BRISK_FAULT_KILL_AT_STEP=$kill" \
  --grep "attempt 1 of 3 failed after [0-9.]+ s: (rank ${kill#*:}|the program) was killed by SIGKILL" \
  --grep "restart 1 \(BRISK_RESTART_COUNT\) (continues from .*checkpoint_[0-9]+|found no complete checkpoint)" \
  -- "$cli" launch -n "$np" --max-restarts 2 $launch_flags "$1" "$out_flag" "$work/restarted" "${@:2}" \
  >"$work/restarted.log" 2>&1 || { cat "$work/restarted.log"; fail "the restarted run"; }
grep -E "brisk launch: attempt|continues from|passing over|starting from scratch|BRISK_FAULT" "$work/restarted.log"
same_bits "$work/straight" "$work/restarted" || exit 1
echo "RESTART-OK"
