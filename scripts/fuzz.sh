#!/usr/bin/env bash
# libFuzzer campaigns over brisk's readers of untrusted bytes (tests/fuzz/fuzz_*.cpp), built with
# clang 14, AddressSanitizer and UndefinedBehaviorSanitizer into build-fuzz/ (CPU only).
#
# Usage:
#   scripts/fuzz.sh build                 build every target (installs clang-14 if missing)
#   scripts/fuzz.sh list                  the targets' names
#   scripts/fuzz.sh smoke [SECONDS]       each target for SECONDS (default 10) on a scratch copy of its
#                                         seed corpus; exits non-zero on any crash, leak, timeout or OOM
#   scripts/fuzz.sh run NAME [ARGS...]    a campaign of one target (e.g. -runs=10000000); on success
#                                         libFuzzer's final statistics go to tests/fuzz/stats/NAME.txt
# Env: BRISK_FUZZ_BUILD_DIR (default build-fuzz), BRISK_JOBS.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
build_dir=${BRISK_FUZZ_BUILD_DIR:-build-fuzz}
corpus_root=tests/fuzz/corpus
# Bounds every input must respect: 10 s per input, 2 GiB of memory, 1 MiB inputs at most.
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=1048576)

ensure_clang() {
  local missing=()
  for p in cmake libeigen3-dev zlib1g-dev clang-14 libclang-rt-14-dev libomp-14-dev; do
    dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "fuzz: installing ${missing[*]}"
    local sudo=()
    [[ $(id -u) -ne 0 ]] && sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

build() {
  ensure_clang
  mkdir -p "$build_dir"
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
    -DBRISK_CUDA=OFF -DBRISK_WERROR=OFF -DBRISK_BUILD_FUZZ=ON -DBRISK_BUILD_TESTS=OFF -DBRISK_BUILD_BENCH=OFF \
    -DBRISK_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF \
    "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
    > "$build_dir/configure.log" || { cat "$build_dir/configure.log"; exit 1; }
  cmake --build "$build_dir" -j "${BRISK_JOBS:-$(nproc)}" --target $(targets)
}

targets() {
  for f in tests/fuzz/fuzz_*.cpp; do basename "$f" .cpp; done
}

run_target() { # name scratch_corpus args...
  local name=$1 scratch=$2
  shift 2
  mkdir -p "$corpus_root/${name#fuzz_}"
  # New inputs go to the first (scratch) folder; the checked-in seeds are only read.
  "$root/$build_dir/fuzz/$name" "${limits[@]}" -print_final_stats=1 -artifact_prefix="$scratch/" \
    "$@" "$scratch" "$corpus_root/${name#fuzz_}"
}

case ${1:-} in
  build) build ;;
  list) targets ;;
  smoke)
    seconds=${2:-10}
    build
    failed=()
    for t in $(targets); do
      scratch=$(mktemp -d)
      echo "fuzz: $t for ${seconds}s"
      if ! run_target "$t" "$scratch" -max_total_time="$seconds" > "$scratch/log" 2>&1; then
        tail -n 60 "$scratch/log"
        echo "fuzz: $t FAILED (artifacts kept in $scratch)" >&2
        failed+=("$t")
        continue
      fi
      grep -E '^(stat::number_of_executed_units|Done )' "$scratch/log" || true
      rm -rf "$scratch"
    done
    if ((${#failed[@]})); then
      echo "fuzz: failed: ${failed[*]}" >&2
      exit 1
    fi
    ;;
  run)
    name=${2:?usage: scripts/fuzz.sh run NAME [libFuzzer args...]}
    name=fuzz_${name#fuzz_}
    shift 2
    build
    scratch=$(mktemp -d)
    log=$scratch/log
    start=$(date +%s)
    if ! run_target "$name" "$scratch" "$@" 2>&1 | tee "$log"; then
      echo "fuzz: $name FAILED (artifacts in $scratch)" >&2
      exit 1
    fi
    mkdir -p tests/fuzz/stats
    {
      echo "# $name: libFuzzer campaign"
      echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  commit: $(git rev-parse --short HEAD 2> /dev/null || echo unknown)"
      echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
      echo "# command: scripts/fuzz.sh run ${name#fuzz_} $*  (limits: ${limits[*]})"
      echo "# wall time: $(($(date +%s) - start)) s"
      grep -E '^(#[0-9]+\s+DONE|Done [0-9]+ runs|stat::)' "$log"
    } > "tests/fuzz/stats/${name#fuzz_}.txt"
    echo "fuzz: statistics written to tests/fuzz/stats/${name#fuzz_}.txt"
    ;;
  *)
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
