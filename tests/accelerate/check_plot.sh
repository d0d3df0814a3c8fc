#!/usr/bin/env bash
# `brisk plot`: two small runs give a real PNG and an SVG that names both runs; bad input (a
# missing file, no numeric series, an unknown metric, no gnuplot) is an error that names it.
# The error checks need no gnuplot; the drawing checks exit 77 (skipped) when it is absent.
# Usage: check_plot.sh BRISK
set -uo pipefail
brisk=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# expect_error WANT CMD...: CMD must exit non-zero with WANT in its stderr.
expect_error() {
  local want=$1
  shift
  if "$@" > "$tmp/stdout" 2> "$tmp/err"; then
    fail "'$*' succeeded; expected an error with: $want"
  elif ! grep -qF -- "$want" "$tmp/err"; then
    fail "'$*' said: $(cat "$tmp/err"); expected: $want"
  fi
}

mkdir -p "$tmp/run_a" "$tmp/run_b" "$tmp/empty"
for i in 1 2 3 4 5 6; do
  echo "{\"step\":$((i * 10)),\"epoch\":$i,\"loss\":$(awk -v i=$i "BEGIN{printf \"%.6f\", 2.0 / i}"),\"tokens_per_s\":$((1000 + i))}"
done > "$tmp/run_a/metrics.jsonl"
echo '{"step":30,"epoch":3,"eval_loss":0.5,"eval_accuracy":0.8}' >> "$tmp/run_a/metrics.jsonl"
for i in 1 2 3 4; do
  echo "{\"step\":$((i * 10)),\"epoch\":$i,\"loss\":$(awk -v i=$i "BEGIN{printf \"%.6f\", 3.0 / i}"),\"eval_accuracy\":0.$((5 + i))}"
done > "$tmp/run_b/metrics.jsonl"
echo '{"step":1,"note":"no numbers here"}' > "$tmp/empty/metrics.jsonl"

expect_error "cannot read '$tmp/nope/metrics.jsonl'" "$brisk" plot "$tmp/nope/metrics.jsonl" -o "$tmp/x"
expect_error "no numeric series with an 'step' in $tmp/empty/metrics.jsonl" "$brisk" plot "$tmp/empty/metrics.jsonl" -o "$tmp/x"
expect_error "unknown metric 'bleu': the files have loss, tokens_per_s, eval_loss, eval_accuracy" "$brisk" plot "$tmp/run_a/metrics.jsonl" --metrics loss,bleu -o "$tmp/x"
expect_error "--x 'time' is not valid" "$brisk" plot "$tmp/run_a/metrics.jsonl" --x time -o "$tmp/x"
echo '{"step":1,"loss":' > "$tmp/empty/bad.jsonl"
expect_error "$tmp/empty/bad.jsonl:1: not a JSON record" "$brisk" plot "$tmp/empty/bad.jsonl" -o "$tmp/x"
expect_error "gnuplot not found on PATH; install it (Debian/Ubuntu: apt-get install gnuplot-nox" \
  env PATH=/nonexistent "$brisk" plot "$tmp/run_a/metrics.jsonl" -o "$tmp/x"
[[ -e $tmp/x.png || -e $tmp/x.svg ]] && fail "a failed plot left pictures behind"

if ! command -v gnuplot > /dev/null; then
  if ((failures)); then exit 1; fi
  echo "SKIP: gnuplot is not installed (Debian/Ubuntu: apt-get install gnuplot-nox); the error checks passed"
  exit 77
fi

for x in step epoch; do
  if ! "$brisk" plot "$tmp/run_a/metrics.jsonl" "$tmp/run_b/metrics.jsonl" --x $x -o "$tmp/out/curves_$x.png" > "$tmp/out.txt" 2>&1; then
    fail "brisk plot --x $x failed: $(cat "$tmp/out.txt")"
    continue
  fi
  png=$tmp/out/curves_$x.png svg=$tmp/out/curves_$x.svg
  magic=$(head -c 8 "$png" 2> /dev/null | od -An -tx1 | tr -d ' \n')
  [[ $magic == 89504e470d0a1a0a ]] || fail "$png is not a PNG (first bytes: $magic)"
  [[ $(stat -c %s "$png" 2> /dev/null || echo 0) -gt 2000 ]] || fail "$png is suspiciously small"
  grep -q "<svg" "$svg" || fail "$svg has no <svg element"
  for name in run_a run_b loss eval_accuracy tokens_per_s; do
    grep -q ">$name<\|>$name " "$svg" || grep -qF "$name" "$svg" || fail "$svg does not name $name"
  done
  grep -q "wrote $png and $svg (2 runs, 4 metrics: loss, tokens_per_s, eval_loss, eval_accuracy)" "$tmp/out.txt" ||
    fail "unexpected summary: $(cat "$tmp/out.txt")"
done
# --metrics picks the panels: only the runs that have it are drawn.
if "$brisk" plot "$tmp/run_a/metrics.jsonl" "$tmp/run_b/metrics.jsonl" --metrics tokens_per_s -o "$tmp/tp" > /dev/null 2>&1; then
  grep -qF run_a "$tmp/tp.svg" || fail "tp.svg does not name run_a"
  grep -qF run_b "$tmp/tp.svg" && fail "tp.svg names run_b, which has no tokens_per_s"
else
  fail "brisk plot --metrics tokens_per_s failed"
fi
if ((failures)); then exit 1; fi
echo "plot checks passed"
