#!/usr/bin/env bash
# Checks that shared libraries of a portable build (BRISK_NATIVE=OFF) run on any x86-64 CPU: no
# function uses AVX registers (%ymm, %zmm) unless it belongs to the AVX2 or AVX-512 copy of the
# hot CPU kernels (namespaces brisk::kernels::cpu::avx2 / ::avx512, chosen at run time only on
# CPUs that have them; kernels/cpu/isa.h). It catches an inline function of a shared header whose
# AVX copy the linker kept instead of the baseline one, and flags such as -march=native leaking
# into a portable build. For libbrisk_kernels it also checks that the AVX2 copy does use them.
# Compiler-made local clones (`[clone .constprop.0]`, .isra, .part, .cold) are left out: they are
# private to the file that made them (an AVX copy's is called by that copy only), and their names
# do not say which file that was; a flag leaking AVX into baseline code shows in its other functions.
# Usage: scripts/check-portable.sh LIB.so...
set -euo pipefail
(($#)) || { echo "usage: $0 LIB.so..." >&2; exit 2; }
status=0
for lib in "$@"; do
  report=$(objdump -d --no-show-raw-insn -C "$lib" | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn); next }
    /%[yz]mm[0-9]/ {
      if (fn ~ /::avx2::/) avx2++
      else if (fn ~ /::avx512::/) avx512++
      else if (fn ~ /\[clone \.(constprop|isra|part|cold)\.[0-9]+\]$/) local++
      else if (!(fn in bad)) { bad[fn] = 1; nbad++ }
    }
    END {
      printf "avx2 %d avx512 %d bad %d\n", avx2, avx512, nbad
      for (f in bad) print "  " f
    }')
  read -r _ avx2 _ avx512 _ nbad <<< "$(head -1 <<< "$report")"
  if ((nbad)); then
    echo "check-portable: $lib: $nbad functions outside the AVX copies of the kernels use AVX registers:"
    tail -n +2 <<< "$report" | head -20
    status=1
  elif [[ $(basename "$lib") == libbrisk_kernels.so* ]] && ((avx2 == 0)); then
    echo "check-portable: $lib: the AVX2 copy of the kernels uses no AVX register (not compiled for AVX2?)"
    status=1
  else
    echo "check-portable: $lib: ok (AVX instructions only in the avx2 ($avx2) and avx512 ($avx512) copies)"
  fi
done
exit $status
