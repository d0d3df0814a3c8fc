#!/usr/bin/env bash
# BRISK_TRACE under --max-restarts: each attempt keeps its own trace, the first attempt's written
# before the injected kill, and docs/restart_trace_svg.py draws the two as one timeline.
#
#   run_restart_trace.sh CLI WORK_DIR SOURCE_DIR PROGRAM [ARGS...]
set -u
cli=$1; work=$2; src=$3; shift 3
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
BRISK_TRACE="$work/trace" BRISK_FAULT_KILL_AT_STEP=7:0 BRISK_ASYNC_SAVE=1 \
  "$cli" launch -n 1 --max-restarts 1 "$1" --out "$work/out" "${@:2}" > "$work/restarted.log" 2>&1 ||
  { cat "$work/restarted.log"; fail "the restarted run"; }
first=$work/trace.rank0.json second=$work/trace.restart1.rank0.json
[[ -f $first ]] || fail "no trace of the first attempt ($first)"
[[ -f $second ]] || fail "no trace of the restarted attempt ($second)"
grep -q '"killed (BRISK_FAULT_KILL_AT_STEP)"' "$first" || fail "$first does not show the kill"
grep -q '"save_state"' "$first" || fail "$first shows no save_state"
grep -q '"save_state"' "$second" || fail "$second shows no save_state"
if command -v python3 > /dev/null; then
  python3 "$src/docs/restart_trace_svg.py" "$work/restart.svg" "$first" "$second" --log "$work/restarted.log" ||
    fail "restart_trace_svg.py"
  grep -q "SIGKILL (rank 0, attempt 1)" "$work/restart.svg" || fail "the SVG does not mark the kill"
  grep -q "attempt 2 (BRISK_RESTART_COUNT=1)" "$work/restart.svg" || fail "the SVG does not show the restart"
fi
echo "TRACE-OK"
