#!/usr/bin/env bash
# Builds brisk's .deb and checks that it works on this machine from a clean state:
#   1. configures a portable Release build (BRISK_NATIVE=OFF: the x86-64 baseline, the hot CPU
#      kernels also for AVX2 / AVX-512, chosen at run time) in a temporary folder, builds the
#      libraries and the CLI, and runs `cpack -G DEB`;
#   2. removes the build tree, so nothing can be found there any more;
#   3. dpkg -i the package (its dependencies must be installed: dpkg says which are missing), and
#      checks from /usr: `brisk --version`, `brisk env` (with the CPU kernels' instruction set, and
#      BRISK_CPU_ISA=baseline honoured), and that no installed file refers to the build tree;
#   4. checks the installed libraries with scripts/check-portable.sh (only the AVX2/AVX-512 copies
#      of the kernels use AVX registers);
#   5. builds tests/install/consumer (find_package(brisk), brisk::brisk) against /usr and runs it;
#   6. dpkg -r brisk (also when a step failed).
# Needs root and dpkg; otherwise exits 77 (CTest: skipped). Refuses to run when a brisk package
# is installed already (it would replace it). docs/installing.md.
# BRISK_PACKAGE_KEEP=DIR keeps a copy of the .deb there.
# Usage: scripts/package-test.sh [-j JOBS]   (default 2 jobs; TMPDIR picks the temporary folders:
# the build goes to $TMPDIR/brisk-package-build.XXXXXX, so TMPDIR=<source dir> lets ccache reuse
# the objects of a portable build tree configured there, e.g. build-port/)
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=2
[[ ${1:-} == -j ]] && jobs=$2
if [[ $(id -u) != 0 ]] || ! command -v dpkg > /dev/null || ! command -v cpack > /dev/null; then
  echo "package-test: needs root, dpkg and cpack (skipped)"
  exit 77
fi
if [[ $(dpkg-query -W -f '${Status}' brisk 2> /dev/null) == *" installed" ]]; then
  echo "package-test: a brisk package is installed already ($(dpkg-query -W -f '${Version}' brisk)); remove it first (dpkg -r brisk)" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/brisk-package.XXXXXX")
build=$(mktemp -d "${TMPDIR:-/tmp}/brisk-package-build.XXXXXX")
installed=0
cleanup() {
  if ((installed)); then
    echo "== dpkg -r brisk (--purge: no state left behind)"
    dpkg --purge brisk > /dev/null || echo "package-test: dpkg --purge brisk failed" >&2
  fi
  rm -rf "$work" "$build"
}
trap cleanup EXIT
step() { echo "== $*"; }
fail() {
  echo "package-test: FAILED: $*" >&2
  exit 1
}

step "configure and build a portable Release build in $build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRISK_CUDA=OFF -DBRISK_NATIVE=OFF \
  -DBRISK_BUILD_TESTS=OFF -DBRISK_BUILD_BENCH=OFF -DBRISK_BUILD_EXAMPLES=OFF > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configure"; }
cmake --build "$build" -j "$jobs" > "$work/build.log" 2>&1 || { tail -50 "$work/build.log"; fail "build"; }
step "cpack -G DEB"
(cd "$build" && cpack -G DEB > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$build"/brisk_*.deb)
cp "$deb" "$work/"
deb=$work/$(basename "$deb")
dpkg-deb -f "$deb"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libopenblas0-pthread zlib1g libgomp1 libstdc++6; do
  [[ $depends == *"$lib"* ]] || fail "Depends lacks $lib (dpkg-shlibdeps over the linked libraries): $depends"
done
[[ -z ${BRISK_PACKAGE_KEEP:-} ]] || { cp "$deb" "$BRISK_PACKAGE_KEEP/" && echo "kept in $BRISK_PACKAGE_KEEP"; }
step "remove the build tree"
rm -rf "$build"

step "dpkg -i $(basename "$deb")"
installed=1
dpkg -i "$deb" || fail "dpkg -i (missing dependencies? apt-get install the packages dpkg names)"
command -v brisk > /dev/null || fail "no brisk on PATH after dpkg -i"
[[ $(command -v brisk) == /usr/bin/brisk ]] || fail "brisk found at $(command -v brisk), not /usr/bin/brisk"
version=$(brisk --version) || fail "brisk --version"
echo "$version"
want=$(dpkg-deb -f "$deb" Version)
[[ $version == *"$want"* ]] || fail "brisk --version says '$version', the package is $want"
env_out=$(brisk env) || fail "brisk env"
echo "$env_out" | head -20
grep -q '^- CPU kernels: .*portable build' <<< "$env_out" || fail "brisk env does not report a portable build's CPU kernels"
BRISK_CPU_ISA=baseline brisk env | grep -q '^- CPU kernels: baseline' || fail "BRISK_CPU_ISA=baseline not honoured"
step "no installed file refers to the removed build tree"
if dpkg -L brisk | while read -r f; do [[ -f $f ]] && grep -l -F "$build" "$f"; done | grep .; then
  fail "installed files above refer to $build"
fi
step "only the AVX2 / AVX-512 copies of the kernels use AVX registers"
bash "$src/scripts/check-portable.sh" $(dpkg -L brisk | grep -E '/libbrisk_[a-z_]+\.so$') || fail "check-portable"

step "build and run a find_package(brisk) consumer against /usr"
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_BUILD_TYPE=Release > "$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; fail "configuring the consumer"; }
cmake --build "$work/consumer" >> "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "building the consumer"; }
grep -q '/usr/lib.*cmake/brisk' "$work/consumer/CMakeCache.txt" || fail "the consumer did not find brisk under /usr"
out=$("$work/consumer/consumer") || fail "the consumer program: $out"
echo "$out"
[[ $out == *"consumer ok"* ]] || fail "the consumer program said: $out"
echo "package-test: all passed ($(basename "$deb"))"
