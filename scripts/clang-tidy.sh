#!/usr/bin/env bash
# Runs clang-tidy (clang 14, the checks in .clang-tidy, every finding an error) on brisk's C++ files;
# installs clang-tidy-14 (apt-get, as root) when no clang-tidy is found.
# Usage: scripts/clang-tidy.sh [BASE]   the .cpp files changed since BASE (default: main; git diff BASE...)
#        scripts/clang-tidy.sh --all    every .cpp file of the libraries, the CLI, tests and examples
#        scripts/clang-tidy.sh FILE...  these files
# A changed public header is checked through its library's .cpp files; findings in headers are
# reported for the changed headers only (all of them with --all). The compile commands come from a
# configure-only build (build-tidy/, clang 14, CPU only; nothing is compiled). CUDA sources are skipped.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tidy=${CLANG_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy || true)}
if [[ -z $tidy ]] && [[ $(id -u) == 0 ]] && command -v apt-get > /dev/null; then
  echo "clang-tidy: installing clang-tidy-14 (Debian package)"
  { apt-get install -y --no-install-recommends clang-tidy-14 > /dev/null 2>&1 ||
    { apt-get update > /dev/null 2>&1 && apt-get install -y --no-install-recommends clang-tidy-14 > /dev/null; }; } &&
    tidy=$(command -v clang-tidy-14 || true)
fi
if [[ -z $tidy ]]; then
  echo "clang-tidy: clang-tidy not found (Debian/Ubuntu: apt-get install clang-tidy-14)" >&2
  exit 1
fi
build=${BRISK_TIDY_BUILD_DIR:-build-tidy}
if [[ ! -f $build/compile_commands.json ]]; then
  mkdir -p "$build"
  cc=$(command -v clang-14 || command -v clang) cxx=$(command -v clang++-14 || command -v clang++)
  # File by file (no unity batches): clang-tidy reads each test file's own compile command.
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRISK_CUDA=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DBRISK_UNITY_TESTS=OFF -DBRISK_UNITY_LIBS=OFF \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" > "$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; exit 1; }
fi
files=()
headers=()  # public headers whose findings are reported (others are someone else's change)
if [[ ${1:-} == --all ]]; then
  headers=('.*/include/brisk/.*')
  mapfile -t files < <(git ls-files -- '*.cpp' | grep -v -e '^tests/fuzz/' -e '^kernels/cuda/')
elif (($# > 0)) && [[ -f $1 ]]; then
  files=("$@")
else
  base=${1:-main}
  declare -A seen=()
  while IFS= read -r f; do
    case $f in
      *.cpp) [[ -f $f ]] && seen[$f]=1 ;;
      */include/brisk/*.h) # a header: the sources of its library
        headers+=("$(realpath "$f" | sed 's/[.]/[.]/g')")
        lib=${f%%/include/*}
        for s in "$lib"/src/*.cpp; do [[ -f $s ]] && seen[$s]=1; done ;;
    esac
  done < <(git diff --name-only "$base"... -- '*.cpp' '*.h'; git diff --name-only -- '*.cpp' '*.h')
  files=("${!seen[@]}")
fi
files=($(printf '%s\n' "${files[@]}" | grep -v -e '^tests/fuzz/' -e '^kernels/cuda/' | sort))
# Only what this CPU-only build compiles (e.g. not dist's CUDA support): the rest has no compile command.
compiled=$(grep -o '"file": *"[^"]*"' "$build/compile_commands.json" | sed 's/.*"\([^"]*\)"$/\1/' | sed "s|^$PWD/||")
files=($(printf '%s\n' "${files[@]}" | grep -Fx -f <(echo "$compiled")))
if ((${#files[@]} == 0)); then
  echo "clang-tidy: no C++ files to check"
  exit 0
fi
echo "clang-tidy: checking ${#files[@]} file(s) with $("$tidy" --version | grep -o 'version [0-9.]*')"
filter=$(IFS='|'; echo "${headers[*]}")
printf '%s\0' "${files[@]}" | xargs -0 -n 1 -P "${BRISK_JOBS:-2}" "$tidy" -p "$build" --quiet \
  --header-filter="^(${filter:-NONE})$" 2>&1 |
  grep -v -e '^[0-9]* warnings\? generated' -e '^Suppressed [0-9]* warnings' -e 'Use -header-filter' \
    -e '^Error while processing' > "$build/tidy.log"
status=0
if grep -q -e 'error:' "$build/tidy.log"; then
  cat "$build/tidy.log"
  echo "clang-tidy: findings above (.clang-tidy lists the checks)" >&2
  status=1
else
  echo "clang-tidy: clean"
fi
exit $status
