#!/usr/bin/env bash
# Gathers, on a Debian/Ubuntu machine with brisk's build dependencies installed (scripts/setup.sh),
# what a GPU machine without Debian's development packages and without a network lacks to build
# and run brisk, into one folder (about 45 MiB) to copy there; scripts/gpu-build.sh DIR then builds.
#   DIR/eigen3        Eigen's headers and CMake package (libeigen3-dev)
#   DIR/googletest    GoogleTest's sources (googletest), built there by gpu-build.sh
#   DIR/benchmark     Google Benchmark as Debian builds it: headers, libbenchmark.so, CMake package
#                     (runs where glibc >= 2.32 and libstdc++ >= GCC 12's; else gpu-build.sh skips bench/)
#   DIR/zlib          zlib's headers and library, for a machine without zlib1g-dev
#   DIR/openssl       OpenSSL 3's headers and libcrypto (libssl-dev), for checkpoint hashing, for a
#                     machine without libssl-dev (its own libcrypto.so.3 is used when it has one)
#   DIR/yaml-cpp      yaml-cpp's headers, shared library and CMake package (libyaml-cpp-dev), so
#                     that config files can be read there
#   DIR/cuda-include  cudnn*.h and nccl*.h from this machine's CUDA, for pip wheels that ship no headers
#   DIR/fashion-mnist the four Fashion-MNIST files (dataset-fashion-mnist), for scripts/train.sh
# Usage: scripts/gpu-deps.sh DIR      Env: CUDA_HOME (default /usr/local/cuda).
set -euo pipefail

if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
  if [[ $# -eq 1 ]]; then exit 0; else exit 2; fi
fi
dir=$1
cuda=${CUDA_HOME:-/usr/local/cuda}
arch=$(gcc -print-multiarch 2> /dev/null || echo x86_64-linux-gnu)

die() {
  echo "gpu-deps: $*" >&2
  exit 1
}
# The files of an installed Debian package, or an error saying what to install.
package_files() {
  dpkg -L "$1" 2> /dev/null || die "package $1 is not installed (apt-get install $1, or run scripts/setup.sh)"
}

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# Eigen: headers plus its CMake package, laid out as under /usr so the package's relative paths hold.
package_files libeigen3-dev > /dev/null
rm -rf "$dir/eigen3"
mkdir -p "$dir/eigen3/include/eigen3" "$dir/eigen3/share/eigen3"
cp -r /usr/include/eigen3/Eigen /usr/include/eigen3/signature_of_eigen3_matrix_library "$dir/eigen3/include/eigen3/"
cp -r /usr/share/eigen3/cmake "$dir/eigen3/share/eigen3/"

# GoogleTest: Debian ships the sources; googlemock is not used by brisk.
[[ -d /usr/src/googletest/googletest ]] || die "/usr/src/googletest is missing (apt-get install googletest libgtest-dev)"
rm -rf "$dir/googletest"
mkdir -p "$dir/googletest"
cp /usr/src/googletest/CMakeLists.txt "$dir/googletest/"
cp -r /usr/src/googletest/googletest "$dir/googletest/"

# Google Benchmark: Debian ships only the built library (no sources); carry it with its CMake
# package in the same layout as under /usr.
package_files libbenchmark-dev > /dev/null
rm -rf "$dir/benchmark"
mkdir -p "$dir/benchmark/include" "$dir/benchmark/lib/$arch/cmake"
cp -r /usr/include/benchmark "$dir/benchmark/include/"
cp -r "/usr/lib/$arch/cmake/benchmark" "$dir/benchmark/lib/$arch/cmake/"
cp -a /usr/lib/"$arch"/libbenchmark.so* /usr/lib/"$arch"/libbenchmark_main.a "$dir/benchmark/lib/$arch/"

# zlib: headers and the shared library (used there only when the machine has no zlib of its own).
package_files zlib1g-dev > /dev/null
rm -rf "$dir/zlib"
mkdir -p "$dir/zlib/include" "$dir/zlib/lib"
cp /usr/include/zlib.h /usr/include/zconf.h "$dir/zlib/include/"
zlib_so=$(readlink -f "/usr/lib/$arch/libz.so")
cp "$zlib_so" "$dir/zlib/lib/"
ln -sf "$(basename "$zlib_so")" "$dir/zlib/lib/libz.so.1"
ln -sf libz.so.1 "$dir/zlib/lib/libz.so"

# OpenSSL: the headers (the arch-specific configuration headers merged in) and libcrypto.so.3.
package_files libssl-dev > /dev/null
rm -rf "$dir/openssl"
mkdir -p "$dir/openssl/include" "$dir/openssl/lib"
cp -r /usr/include/openssl "$dir/openssl/include/"
cp /usr/include/"$arch"/openssl/*.h "$dir/openssl/include/openssl/"
crypto_so=$(readlink -f "/usr/lib/$arch/libcrypto.so")
cp "$crypto_so" "$dir/openssl/lib/"
ln -sf "$(basename "$crypto_so")" "$dir/openssl/lib/libcrypto.so"

# yaml-cpp: headers, the shared library and its CMake package, laid out as under /usr (the package
# finds the library relative to itself).
package_files libyaml-cpp-dev > /dev/null
rm -rf "$dir/yaml-cpp"
mkdir -p "$dir/yaml-cpp/include" "$dir/yaml-cpp/lib/$arch/cmake"
cp -r /usr/include/yaml-cpp "$dir/yaml-cpp/include/"
cp -a /usr/lib/"$arch"/libyaml-cpp.so* "$dir/yaml-cpp/lib/$arch/"
cp -r "/usr/lib/$arch/cmake/yaml-cpp" "$dir/yaml-cpp/lib/$arch/cmake/"

# cuDNN and NCCL headers, for when the GPU machine's pip wheels hold the libraries only.
rm -rf "$dir/cuda-include"
mkdir -p "$dir/cuda-include"
if compgen -G "$cuda/include/cudnn*.h" > /dev/null; then
  cp "$cuda"/include/cudnn*.h "$dir/cuda-include/"
else
  echo "gpu-deps: no cudnn*.h under $cuda/include: the GPU machine's cuDNN must bring its own headers" >&2
fi
if [[ -f $cuda/include/nccl.h ]]; then
  cp -r "$cuda"/include/nccl*.h "$dir/cuda-include/"
  if [[ -d $cuda/include/nccl_device ]]; then cp -r "$cuda/include/nccl_device" "$dir/cuda-include/"; fi
else
  echo "gpu-deps: no nccl.h under $cuda/include: the GPU machine's NCCL must bring its own headers" >&2
fi

# Fashion-MNIST for the main example.
rm -rf "$dir/fashion-mnist"
mkdir -p "$dir/fashion-mnist"
found=0
while read -r f; do
  if [[ $f == *-ubyte.gz && -f $f ]]; then
    cp "$f" "$dir/fashion-mnist/"
    found=$((found + 1))
  fi
done < <(package_files dataset-fashion-mnist)
[[ $found -eq 4 ]] || die "expected the 4 Fashion-MNIST files in dataset-fashion-mnist, found $found"

cat > "$dir/README.txt" << EOF
Build dependencies for brisk on a GPU machine without Debian's development packages, gathered by
scripts/gpu-deps.sh on $(. /etc/os-release 2> /dev/null && echo "$PRETTY_NAME") ($(date -u +%Y-%m-%d)).
Copy this folder to the GPU machine and run there, in brisk's checkout:  scripts/gpu-build.sh $(basename "$dir")
EOF

size=$(du -sm "$dir" | cut -f1)
echo "gpu-deps: $dir holds ${size} MiB:"
du -sh "$dir"/* | sed 's/^/  /'
if ((size > 56)); then die "$dir is ${size} MiB: too close to the 64 MiB a copy to the GPU machine may carry"; fi
