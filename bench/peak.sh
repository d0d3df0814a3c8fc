# shellcheck shell=bash
# Sourced by the bench scripts: one core's fp32 peak and figures as a fraction of it.
# measure_peak BUILD   sets $peak to bench/fma_peak's best fp32 figure (the widest FMAs this CPU
#                      has: AVX-512 where present, else AVX2), or leaves it empty when not built.
# of_peak G T          "<G> GFLOP/s[, <pct>% of <T> x peak]"
# median V...          the median of the values (the upper one of an even count)
peak=
measure_peak() {
  if [[ -x $1/bench/fma_peak ]]; then
    peak=$("$1/bench/fma_peak" --seconds 0.2 --repeats 15 | sed -n 's/^fp32.* peak, one core: \([0-9.]*\) GFLOP.*/\1/p' |
      sort -g | tail -1)
    echo "fp32 FMA peak, one core (bench/fma_peak): $peak GFLOP/s"
  fi
}
of_peak() {
  if [[ -n $peak ]]; then
    echo "$1 GFLOP/s, $(awk "BEGIN{printf \"%.0f\", 100 * $1 / ($2 * $peak)}")% of $2 x peak"
  else
    echo "$1 GFLOP/s"
  fi
}
median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }
# cnn_of_peak I T      of_peak for the example CNN at I images/s on T threads: 8,294,400 FLOP a
#                      training image (how it is counted: bench/compare_cnn.sh)
cnn_of_peak() { of_peak "$(awk "BEGIN{printf \"%.1f\", $1 * 8294400 * 1e-9}")" "$2"; }
