#!/usr/bin/env bash
# Gets a Debian/Ubuntu machine ready for brisk and builds it: installs the apt packages that
# are missing (no network needed when all are present), then configures and builds into
# build/ (Release; the CUDA kernels too when a CUDA toolkit is found).
# Usage: scripts/setup.sh [extra cmake -D options...]
# Env: BRISK_BUILD_DIR, BRISK_JOBS, BRISK_CUDA_ARCHITECTURES (e.g. 90; CMake's list syntax).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(build-essential cmake libeigen3-dev libgtest-dev libbenchmark-dev zlib1g-dev libssl-dev
          libopenmpi-dev openmpi-bin dataset-fashion-mnist ccache libopenblas-pthread-dev fortunes)
packages+=(libyaml-cpp-dev)  # reads config files (optional: the build works without it)
packages+=(doxygen)          # the `docs` target, the API reference (optional: no target without it)
packages+=(gnuplot-nox)      # `brisk plot` (optional: found on PATH when it runs; its test skips without it)
packages+=(dpkg-dev)         # cpack -G DEB's dpkg-shlibdeps (scripts/package-test.sh; build-essential brings it too)
packages+=(gdb)              # a test that times out reports its processes' stacks (optional: brisk_test_job)
# slurm-wlm and munge are not installed here: scripts/slurm-test.sh (the opt-in `slurm` test) installs them.

if command -v dpkg-query > /dev/null; then
  missing=()
  for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]})); then
    echo "setup: installing missing packages: ${missing[*]}"
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
      ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; then
      echo "setup: apt-get could not install ${missing[*]}. On a GPU machine without a network, gather the" \
        "dependencies on a Debian machine with scripts/gpu-deps.sh DIR and build here with scripts/gpu-build.sh DIR" \
        "(README: Building on a GPU machine)" >&2
      exit 1
    fi
  fi
else
  echo "setup: dpkg-query not found (not Debian/Ubuntu?): install these yourself: ${packages[*]}" >&2
fi

# nvcc often lives outside PATH; point CMake at it so CUDA is detected.
if ! command -v nvcc > /dev/null && [[ -z ${CUDACXX:-} && -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

build_dir=${BRISK_BUILD_DIR:-build}
jobs=${BRISK_JOBS:-$(nproc 2> /dev/null || echo 2)}
cuda_args=()
# The GPU architectures to compile for (default: this machine's GPUs, or sm_90 when none is
# visible; a portable build, -DBRISK_NATIVE=OFF, every supported one: CMakeLists.txt).
if [[ -n ${BRISK_CUDA_ARCHITECTURES:-} ]]; then cuda_args+=("-DCMAKE_CUDA_ARCHITECTURES=$BRISK_CUDA_ARCHITECTURES"); fi
# Ninja when it is installed (a folder configured before keeps the generator it was made with):
# it starts each target's compiles without waiting for the libraries it links to be linked.
generator=()
if [[ ! -f $build_dir/CMakeCache.txt && -z ${CMAKE_GENERATOR:-} ]] && command -v ninja > /dev/null; then
  generator=(-G Ninja)
fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DBRISK_BUILD_TESTS=ON -DBRISK_BUILD_EXAMPLES=ON "${cuda_args[@]}" "$@"
cmake --build "$build_dir" -j "$jobs"
