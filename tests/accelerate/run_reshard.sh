#!/usr/bin/env bash
# Resuming a checkpoint on another number of processes and/or another sharding stage
# (docs/checkpoints.md), with zero_worker's reshard-* scenarios:
#   resume: SAVE_NP processes under SAVE_STAGE train OddNet (global batch 8) and save after 5
#     steps; LOAD_NP processes under LOAD_STAGE resume it (parameters bit for bit right after the
#     load, saved again at once, the rest of the epoch within AdamW's tolerance of the
#     uninterrupted run); one process then loads both checkpoints unsharded and finds the same
#     optimizer state bit for bit.
#   refuse: saved inside an accumulation window; the resume elsewhere is refused, saying why.
#   warn:   resumed with another global batch; the loader starts the next epoch, with a warning.
#   merge:  SAVE_NP processes under SAVE_STAGE save the tiny GPT-2's state and save_model it;
#     `BRISK merge-weights` of the checkpoint equals save_model's file byte for byte (LOAD_* unused).
#
#   run_reshard.sh WORKER TEST_JOB WORK_DIR SAVE_NP SAVE_STAGE LOAD_NP LOAD_STAGE resume|refuse|warn|merge [BRISK]
set -u
worker=$1; run_mpi=$2; work=$3; snp=$4; sstage=$5; lnp=$6; lstage=$7; mode=$8; brisk=${9:-}
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
job() {
  local np=$1; shift
  if [[ $np == 1 ]]; then OMP_NUM_THREADS=1 "$worker" "$@"
  else "$run_mpi" --np "$np" --expect pass --timeout 120 -- "$worker" "$@"; fi
}
case $mode in
  resume)
    job "$snp" reshard-save "$sstage" "$work" 1 5 || fail "saving on $snp process(es) under $sstage"
    job "$lnp" reshard-load "$lstage" "$work" || fail "resuming on $lnp process(es) under $lstage"
    job 1 reshard-compare none "$work" || fail "the optimizer state after resuming elsewhere differs"
    ;;
  refuse)
    job "$snp" reshard-save "$sstage" "$work" 2 7 || fail "saving on $snp process(es) under $sstage"
    job "$lnp" reshard-refuse "$lstage" "$work" || fail "the accumulation-window refusal"
    ;;
  warn)
    job "$snp" reshard-save "$sstage" "$work" 1 5 || fail "saving on $snp process(es) under $sstage"
    job "$lnp" reshard-warn "$lstage" "$work" || fail "the loader warning"
    ;;
  merge)
    job "$snp" merge-save "$sstage" "$work" || fail "training and saving on $snp process(es) under $sstage"
    "$brisk" merge-weights "$work/ckpt" "$work/merged.safetensors" || fail "brisk merge-weights"
    cmp "$work/model/model.safetensors" "$work/merged.safetensors" ||
      fail "merge-weights output differs from save_model's"
    echo "merge-weights equals save_model byte for byte ($snp process(es), $sstage)"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "RESHARD-OK $snp $sstage -> $lnp $lstage ($mode)"
