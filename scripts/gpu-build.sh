#!/usr/bin/env bash
# Configures and builds brisk with its CUDA kernels on a GPU machine that has the CUDA toolkit,
# CMake, a C++ compiler and a python3 whose pip wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13, as
# PyTorch installs them) hold cuDNN and NCCL, but no Debian development packages and no network.
# DIR is the folder scripts/gpu-deps.sh filled on a Debian machine (Eigen, GoogleTest, Google
# Benchmark, zlib, cuDNN/NCCL headers, Fashion-MNIST). The build (build/, for this machine's GPU
# architecture only) finds cuDNN and NCCL through build/_gpu/{cudnn,nccl}: links to the wheels'
# files plus the unversioned names and headers the wheels may lack. It writes build/gpu-env.sh
# (data folder and library path), which scripts/train.sh reads.
# Usage: scripts/gpu-build.sh DIR [extra cmake -D options...]
# Env: BRISK_BUILD_DIR (build), BRISK_JOBS (all cores), CUDA_HOME (/usr/local/cuda), PYTHON (python3),
#      CUDNN_ROOT / NCCL_HOME (use these instead of the wheels), BRISK_CUDA_ARCHITECTURES (e.g. 90a),
#      BRISK_BUILD_TARGETS (build only these, e.g. "fashion_mnist brisk_cli"), BRISK_CARRIED_ONLY=1
#      (use DIR's GoogleTest and zlib even where the system has its own: to try this script on Debian).
set -euo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
  if [[ $# -ge 1 ]]; then exit 0; else exit 2; fi
fi
deps=$(cd "$1" && pwd) || exit 1
shift
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

die() {
  echo "gpu-build: $*" >&2
  exit 1
}
say() { echo "gpu-build: $*"; }

[[ -f $deps/README.txt && -d $deps/eigen3 ]] || die "$deps was not filled by scripts/gpu-deps.sh"
build=${BRISK_BUILD_DIR:-build}
mkdir -p "$build"
build=$(cd "$build" && pwd)
prep=$build/_gpu
jobs=${BRISK_JOBS:-$(nproc 2> /dev/null || echo 8)}
cuda=${CUDA_HOME:-/usr/local/cuda}
python=${PYTHON:-python3}
arch=$(gcc -print-multiarch 2> /dev/null || true)
arch=${arch:-x86_64-linux-gnu}

# --- tools ----------------------------------------------------------------------------------------
command -v cmake > /dev/null || die "cmake not found"
command -v g++ > /dev/null || die "g++ not found (nvcc needs a host compiler)"
if [[ -z ${CUDACXX:-} ]]; then
  if command -v nvcc > /dev/null; then
    CUDACXX=$(command -v nvcc)
  elif [[ -x $cuda/bin/nvcc ]]; then
    CUDACXX=$cuda/bin/nvcc
  else
    die "nvcc not found on PATH or in $cuda/bin (set CUDA_HOME or CUDACXX)"
  fi
fi
export CUDACXX
generator=()
if [[ ! -f $build/CMakeCache.txt ]]; then
  if command -v ninja > /dev/null; then
    generator=(-G Ninja)
  elif ! command -v make > /dev/null; then
    die "neither ninja nor make found"
  fi
fi

# --- cuDNN and NCCL -----------------------------------------------------------------------------
# Folders that may hold a pip wheel's files: the nvidia.<name> package's own path(s), then every
# site-packages' nvidia/ folder.
wheel_roots() {
  "$python" - "$1" << 'EOF' 2> /dev/null || true
import importlib.util, os, site, sys
name = sys.argv[1]
try:
    spec = importlib.util.find_spec("nvidia." + name)
    if spec is not None:
        for p in (spec.submodule_search_locations or [os.path.dirname(spec.origin or "")]):
            print(p)
except Exception:
    pass
dirs = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
for d in dirs:
    if d and os.path.isdir(os.path.join(d, "nvidia")):
        print(os.path.join(d, "nvidia"))
EOF
}

# prepare NAME LIBGLOB HEADER: fills $prep/NAME/{lib,include} with links to the library files
# (plus unversioned names) and the headers, from the wheels, else the headers gpu-deps.sh carried.
prepare() {
  local name=$1 libglob=$2 header=$3 libdir="" incdir="" r f
  while read -r r; do
    [[ -n $r && -d $r ]] || continue
    f=$(find -L "$r" -name "$libglob" -print -quit 2> /dev/null)
    if [[ -n $f ]]; then
      libdir=$(dirname "$f")
      incdir=$(dirname "$(find -L "$r" -name "$header" -print -quit 2> /dev/null)" 2> /dev/null || true)
      break
    fi
  done < <(wheel_roots "$name")
  [[ -n $libdir ]] || die "no $libglob in $python's pip wheels (nvidia-$name-cu13); install that wheel, or point" \
    "CUDNN_ROOT / NCCL_HOME at a folder with include/ and lib/"
  rm -rf "${prep:?}/$name"
  mkdir -p "$prep/$name/lib" "$prep/$name/include"
  for f in "$libdir"/lib"$name"*.so*; do
    [[ -e $f ]] || continue
    local base
    base=$(basename "$f")
    ln -sf "$f" "$prep/$name/lib/$base"
    # libcudnn.so.9 -> also libcudnn.so, which the linker looks for.
    if [[ $base =~ ^(lib[^.]+\.so)\.[0-9.]+$ && ! -e $prep/$name/lib/${BASH_REMATCH[1]} ]]; then
      ln -sf "$f" "$prep/$name/lib/${BASH_REMATCH[1]}"
    fi
  done
  if [[ -n $incdir && $incdir != . && -f $incdir/$header ]]; then
    for f in "$incdir"/"$name"*; do ln -sf "$f" "$prep/$name/include/"; done
    say "$name: $libdir (headers from the wheel)"
  else
    local carried=0
    for f in "$deps"/cuda-include/*; do
      case $(basename "$f") in "$name"*) ln -sf "$f" "$prep/$name/include/" && carried=1 ;; esac
    done
    [[ $carried -eq 1 ]] || die "the $name wheel has no $header and $deps/cuda-include has none either"
    say "$name: $libdir (headers carried by gpu-deps.sh; check their version matches the library)"
  fi
}

if [[ -n ${CUDNN_ROOT:-} ]]; then
  cudnn_root=$CUDNN_ROOT
elif [[ -f $cuda/include/cudnn.h ]] && compgen -G "$cuda/lib64/libcudnn.so*" > /dev/null; then
  cudnn_root=$cuda
else
  prepare cudnn 'libcudnn.so.*' cudnn.h
  cudnn_root=$prep/cudnn
fi
if [[ -n ${NCCL_HOME:-} ]]; then
  nccl_root=$NCCL_HOME
elif [[ -f $cuda/include/nccl.h ]] && compgen -G "$cuda/lib64/libnccl.so*" > /dev/null; then
  nccl_root=$cuda
else
  prepare nccl 'libnccl.so.*' nccl.h
  nccl_root=$prep/nccl
fi
# dist/ and accelerate/ look for NCCL (and cuDNN's version header) through these.
export NCCL_HOME=$nccl_root CUDNN_HOME=$cudnn_root
if ! compgen -G "$cuda/lib64/libcublas.so*" > /dev/null && ! compgen -G "$cuda/targets/*/lib/libcublas.so*" > /dev/null; then
  say "warning: no libcublas under $cuda: CMake's CUDA::cublas may not be found"
fi

# --- the other dependencies ---------------------------------------------------------------------
opts=(-DEigen3_DIR="$deps/eigen3/share/eigen3/cmake")

carried_only=${BRISK_CARRIED_ONLY:-0}
if [[ $carried_only != 1 ]] && compgen -G "/usr/lib/$arch/cmake/GTest/GTestConfig.cmake" > /dev/null; then
  say "GoogleTest: the system's"
else
  gtest_prefix=$build/_deps/googletest
  if [[ ! -f $gtest_prefix/lib/cmake/GTest/GTestConfig.cmake ]]; then
    say "GoogleTest: building $deps/googletest"
    mkdir -p "$build/_deps"
    cmake -S "$deps/googletest" -B "$build/_deps/googletest-build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON -DCMAKE_INSTALL_PREFIX="$gtest_prefix" -DCMAKE_INSTALL_LIBDIR=lib \
      -DCMAKE_POSITION_INDEPENDENT_CODE=ON > "$build/_deps/googletest.log"
    cmake --build "$build/_deps/googletest-build" -j "$jobs" >> "$build/_deps/googletest.log"
    cmake --install "$build/_deps/googletest-build" >> "$build/_deps/googletest.log"
  fi
  opts+=(-DGTest_DIR="$gtest_prefix/lib/cmake/GTest")
fi

# Debian's Google Benchmark library: used when it links and runs here (glibc and libstdc++ at least
# Debian 12's), else the benchmarks are left out.
bench_lib=$deps/benchmark/lib/$arch
probe=$build/_deps/benchmark-probe
mkdir -p "$probe"
printf '#include <benchmark/benchmark.h>\nstatic void b(benchmark::State& s) { for (auto _ : s) {} }\nBENCHMARK(b);\nBENCHMARK_MAIN();\n' > "$probe/probe.cpp"
if g++ -std=c++17 -I"$deps/benchmark/include" "$probe/probe.cpp" -o "$probe/probe" -L"$bench_lib" -lbenchmark -lpthread \
  -Wl,-rpath,"$bench_lib" 2> "$probe/log" && "$probe/probe" --benchmark_list_tests > /dev/null 2>> "$probe/log"; then
  opts+=(-Dbenchmark_DIR="$bench_lib/cmake/benchmark")
  say "Google Benchmark: $bench_lib"
else
  opts+=(-DBRISK_BUILD_BENCH=OFF)
  say "Google Benchmark: the carried library does not run here ($(head -c 200 "$probe/log")); bench/ is left out"
fi

zlib_lib=""
if [[ $carried_only != 1 && -f /usr/include/zlib.h ]] && compgen -G "/usr/lib/$arch/libz.so" > /dev/null; then
  say "zlib: the system's"
else
  zlib_lib=$(ldconfig -p 2> /dev/null | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')
  zlib_lib=${zlib_lib:-$deps/zlib/lib/libz.so.1}
  opts+=(-DZLIB_INCLUDE_DIR="$deps/zlib/include" -DZLIB_LIBRARY="$zlib_lib")
  say "zlib: headers from $deps/zlib, library $zlib_lib"
fi

# OpenSSL's libcrypto (checkpoint hashing): the system's when it has the headers; else the carried
# headers with the system's libcrypto.so.3 (the same ABI), else the carried library.
if [[ $carried_only != 1 && -f /usr/include/openssl/evp.h ]]; then
  say "OpenSSL: the system's"
else
  crypto_lib=$(ldconfig -p 2> /dev/null | awk '/libcrypto\.so\.3 .*x86-64/ {print $NF; exit}')
  crypto_lib=${crypto_lib:-$deps/openssl/lib/libcrypto.so.3}
  opts+=(-DOPENSSL_INCLUDE_DIR="$deps/openssl/include" -DOPENSSL_CRYPTO_LIBRARY="$crypto_lib")
  say "OpenSSL: headers from $deps/openssl, library $crypto_lib"
fi

# yaml-cpp (reading config files): the system's when CMake finds it, else the carried one.
yaml_lib=""
if [[ $carried_only != 1 ]] && compgen -G "/usr/lib/$arch/cmake/yaml-cpp/yaml-cpp-config.cmake" > /dev/null; then
  say "yaml-cpp: the system's"
elif [[ -d $deps/yaml-cpp ]]; then
  yaml_lib=$deps/yaml-cpp/lib/$arch
  opts+=(-Dyaml-cpp_DIR="$yaml_lib/cmake/yaml-cpp")
  say "yaml-cpp: $deps/yaml-cpp"
else
  say "yaml-cpp: none (config files cannot be read; gpu-deps.sh carries it)"
fi

# This machine's GPU architecture(s) only: "9.0" -> 90.
archs=${BRISK_CUDA_ARCHITECTURES:-}
if [[ -z $archs ]]; then
  archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | tr -d ' .' | sort -u | paste -sd ';' || true)
  archs=${archs:-native}
fi
say "CUDA architectures: $archs; cuDNN: $cudnn_root; NCCL: $nccl_root"

# --- configure and build ------------------------------------------------------------------------
# Warnings stay warnings here: this machine's compiler may be newer than the one CI checks with.
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DBRISK_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" -DCUDNN_ROOT="$cudnn_root" -DBRISK_WERROR=OFF \
  -DBRISK_BUILD_TESTS=ON -DBRISK_BUILD_EXAMPLES=ON "${opts[@]}" "$@"
targets=()
for t in ${BRISK_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"

libpath=$cudnn_root/lib:$nccl_root/lib
if [[ $zlib_lib == "$deps"/* ]]; then libpath+=:$deps/zlib/lib; fi
if [[ ${crypto_lib:-} == "$deps"/* ]]; then libpath+=:$deps/openssl/lib; fi
if [[ -n $yaml_lib ]]; then libpath+=:$yaml_lib; fi
cat > "$build/gpu-env.sh" << EOF
# Written by scripts/gpu-build.sh: what brisk's programs need at run time on this machine.
# scripts/train.sh reads it; in a shell: source $build/gpu-env.sh
export BRISK_FASHION_MNIST_DIR=\${BRISK_FASHION_MNIST_DIR:-$deps/fashion-mnist}
export LD_LIBRARY_PATH=$libpath\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
EOF
say "built into $build; run the tests with: source $build/gpu-env.sh && ctest --test-dir $build -j8"
if [[ -x $build/bin/brisk ]]; then
  # shellcheck source=/dev/null
  source "$build/gpu-env.sh"
  "$build/bin/brisk" env | sed -n '/^- Build/,/^- MPI/p'
fi
