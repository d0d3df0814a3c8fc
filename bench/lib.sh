# shellcheck shell=bash
# Sourced by the bench scripts (source "$(dirname "${BASH_SOURCE[0]}")/lib.sh").
# help_if_asked ARGS   with -h or --help: prints the calling script's header comment and exits 0
# require_built EXE [HINT]  exits 1 with "<script>: EXE not built[ (HINT)]" unless EXE is executable
# machine_line         "# <date> <CPU model>, <cores> cores; load average <1 5 15>"
# measure_peak BUILD   sets $peak to bench/fma_peak's best fp32 figure (the widest FMAs this CPU
#                      has: AVX-512 where present, else AVX2) and prints it; leaves it empty when
#                      fma_peak is not built
# of_peak G T          "<G> GFLOP/s[, <pct>% of <T> x peak]"
# cnn_of_peak I T      of_peak for the example CNN at I images/s on T threads: 8,294,400 FLOP a
#                      training image (how it is counted: bench/compare_cnn.sh)
# median V...          the median of the values (the upper one of an even count); - for none
help_if_asked() {
  if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    # The comment block under the #! line, up to the first line that is not a comment.
    awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[1]}"
    exit 0
  fi
}
# Builds a target that is outside the default build (the libtorch peers, bench/CMakeLists.txt);
# where it does not exist (no libtorch-dev), require_built says what to install.
build_target() { # build-dir target
  cmake --build "$1" --target "$2" > /dev/null 2>&1 || true
}
require_built() {
  if [[ ! -x $1 ]]; then
    echo "$(basename "${BASH_SOURCE[1]}" .sh): $1 not built${2:+ ($2)}" >&2
    exit 1
  fi
}
machine_line() {
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
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
cnn_of_peak() { of_peak "$(awk "BEGIN{printf \"%.1f\", $1 * 8294400 * 1e-9}")" "$2"; }
median() {
  if (($#)); then printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; else echo -; fi
}
