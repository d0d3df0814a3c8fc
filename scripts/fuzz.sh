#!/usr/bin/env bash
# libFuzzer campaigns over brisk's readers of untrusted bytes (tests/fuzz/fuzz_*.cpp), built with
# clang 14, AddressSanitizer and UndefinedBehaviorSanitizer into build-fuzz/ (CPU only). The same
# build folder holds the sanitizer build of the tests (scripts/sanitize.sh): the libraries are
# compiled once for both (-fsanitize=address,undefined; the readers' libraries also with
# fuzzer-no-link coverage, tests/fuzz/CMakeLists.txt).
#
# Usage:
#   scripts/fuzz.sh configure             configure build-fuzz/ (installs clang-14 if missing)
#   scripts/fuzz.sh build                 build every target
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
  for p in cmake libeigen3-dev zlib1g-dev libgtest-dev libopenmpi-dev openmpi-bin clang-14 libclang-rt-14-dev \
    libomp-14-dev; do
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

# -O1 with line tables: the usual sanitizer setting, and the cheapest to compile (kernels/cpu/
# elementwise.cpp: 126 s of CPU against 213 s at -O2 -g); the tests and the fuzz targets share
# it. No -DNDEBUG: assertions stay on. -Wno-pass-failed: clang's loop vectorizer does not run at
# -O1, so it reports every `#pragma omp simd` loop as not vectorized (not a fault in the code). The CUDA folder's tests (host checks of device code, run
# by the main suite) are not built here.
configure() {
  ensure_clang
  mkdir -p "$build_dir"
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_COMPILER=clang++-14 \
    -DBRISK_CUDA=OFF -DBRISK_BUILD_FUZZ=ON -DBRISK_BUILD_TESTS=ON -DBRISK_BUILD_BENCH=OFF \
    -DBRISK_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=ON \
    "-DCMAKE_CXX_FLAGS_SANITIZE=-O1 -gline-tables-only -Wno-pass-failed" \
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
    -DBRISK_BUILD_CUDA_TESTS=OFF -DBRISK_FAULT_TIME_LIMIT=30 -DBRISK_TEST_LANES=1 \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" \
    > "$build_dir/configure.log" || { cat "$build_dir/configure.log"; exit 1; }
}

build() {
  configure
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
  configure) configure ;;
  build) build ;;
  list) targets ;;
  smoke)
    seconds=${2:-10}
    build
    # BRISK_JOBS targets at a time (default: the number of cores), each on one core.
    parallel=${BRISK_JOBS:-$(nproc)}
    failed=()
    names=() dirs=() pids=()
    for t in $(targets); do
      scratch=$(mktemp -d)
      echo "fuzz: $t for ${seconds}s"
      run_target "$t" "$scratch" -max_total_time="$seconds" > "$scratch/log" 2>&1 &
      names+=("$t") dirs+=("$scratch") pids+=($!)
      while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
    done
    for i in "${!pids[@]}"; do
      t=${names[$i]} scratch=${dirs[$i]}
      if ! wait "${pids[$i]}"; then
        tail -n 60 "$scratch/log"
        echo "fuzz: $t FAILED (artifacts kept in $scratch)" >&2
        failed+=("$t")
        continue
      fi
      echo "fuzz: $t: $(grep -E '^stat::(number_of_executed_units|slowest_unit_time_sec)' "$scratch/log" | tr '\n' ' ' || echo '?')"
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
    sed -n '2,15p' "$0"
    exit 2
    ;;
esac
