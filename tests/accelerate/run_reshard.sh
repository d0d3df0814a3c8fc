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
#   fashion: `BRISK launch -n SAVE_NP FASHION_MNIST --sharding SAVE_STAGE` (5 steps, its checkpoint
#     and save_model); merge-weights of the checkpoint equals the saved model byte for byte.
#
#   run_reshard.sh WORKER TEST_JOB WORK_DIR SAVE_NP SAVE_STAGE LOAD_NP LOAD_STAGE resume|refuse|warn|merge|fashion
#     [BRISK] [FASHION_MNIST]
set -u
worker=$1; run_mpi=$2; work=$3; snp=$4; sstage=$5; lnp=$6; lstage=$7; mode=$8; brisk=${9:-}; fashion=${10:-}
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
  fashion)
    OMP_NUM_THREADS=1 "$brisk" launch -n "$snp" --sharding "$sstage" "$fashion" --epochs 1 --steps-per-epoch 5 \
      --threads 1 --out "$work/fm" || fail "brisk launch -n $snp fashion_mnist --sharding $sstage"
    grep -q "\"sharding\": \"$sstage\"" "$work/fm/checkpoints/checkpoint_0/state.json" ||
      fail "the checkpoint does not record sharding $sstage"
    "$brisk" merge-weights "$work/fm/checkpoints/checkpoint_0" "$work/merged.safetensors" || fail "brisk merge-weights"
    cmp "$work/fm/model.safetensors" "$work/merged.safetensors" ||
      fail "merge-weights output differs from fashion_mnist's save_model"
    echo "merge-weights equals fashion_mnist's save_model byte for byte ($snp process(es), $sstage)"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "RESHARD-OK $snp $sstage -> $lnp $lstage ($mode)"
