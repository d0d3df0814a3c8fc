# Sourced by run_restart.sh and run_preempt.sh: whether a run that was interrupted (a rank killed and
# the job restarted, or the job preempted and started again) ended with the files of the run that
# never was: model.safetensors, every file of <out>/final when the program writes one, and every file
# of each run's newest checkpoint (numbered apart when the interrupted run saved once more).
# shellcheck shell=bash
newest_checkpoint() {
  local dir n best=-1
  for dir in "$1"/checkpoints/checkpoint_*; do
    n=${dir##*_}
    [[ -d $dir && $n =~ ^[0-9]+$ ]] && ((n > best)) && best=$n
  done
  ((best >= 0)) && echo "$1/checkpoints/checkpoint_$best"
}

# same_bits STRAIGHT OTHER: prints what it compared; exits non-zero (saying which file) when a file
# differs or fewer than three were compared.
same_bits() {
  local a=$1 b=$2 files=0 newest_a newest_b f rel other x y
  newest_a=$(newest_checkpoint "$a")
  newest_b=$(newest_checkpoint "$b")
  for f in "$a/model.safetensors" "$a"/final/* ${newest_a:+"$newest_a"/*}; do
    [[ -f $f ]] || continue
    if [[ -n $newest_a && $f == "$newest_a"/* ]]; then rel=${f#"$newest_a/"}; other="$newest_b/$rel"
    else rel=${f#"$a/"}; other="$b/$rel"; fi
    x=$(sha256sum <"$f" | cut -c1-64)
    y=$(sha256sum <"$other" 2>/dev/null | cut -c1-64)
    [[ $x == "$y" ]] || { echo "FAIL: $rel differs: $x (${f#"$a/"}) against ${y:-missing} (${other#"$b/"})"; return 1; }
    files=$((files + 1))
  done
  ((files >= 3)) || { echo "FAIL: only $files files compared"; return 1; }
  echo "$files files identical (SHA-256; newest checkpoints ${newest_a##*/} and ${newest_b##*/};" \
    "model.safetensors $(sha256sum <"$a/model.safetensors" | cut -c1-16)...)"
}
