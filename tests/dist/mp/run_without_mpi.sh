#!/usr/bin/env bash
# A single brisk process needs no MPI:
#  1. neither the program nor libbrisk_dist links libmpi (only the dlopen'd plugin does);
#  2. the program runs as a world of one with no launcher in its environment;
#  3. where a private mount namespace can be made (root + unshare), OpenMPI's library is
#     hidden (bind-mounted over with /dev/null) and the program still runs; under a launcher's
#     environment init() then fails with a message saying what to install.
#   run_without_mpi.sh WORKER LIBBRISK_DIST
set -u
worker=$1 lib=$2
clean=(env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u SLURM_PROCID -u SLURM_NTASKS)
fail=0
if ldd "$worker" "$lib" | grep -q libmpi; then
  echo "FAIL: a brisk program or libbrisk_dist links libmpi:"; ldd "$worker" "$lib" | grep libmpi; fail=1
else
  echo "ok: $(basename "$worker") and $(basename "$lib") do not link libmpi"
fi
"${clean[@]}" "$worker" single || { echo "FAIL: single process"; fail=1; }
plugin=$(dirname "$lib")/libbrisk_dist_mpi.so
libmpi=$(ldd "$plugin" 2>/dev/null | awk '/libmpi\.so/ {print $3; exit}')
if [[ $(id -u) -eq 0 && -n $libmpi ]] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
  real=$(readlink -f "$libmpi")
  unshare -m bash -c "mount --bind /dev/null '$real' || exit 77
    echo \"ok: $real is hidden in this mount namespace\"
    ${clean[*]} '$worker' single || exit 1
    ${clean[*]} OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 '$worker' launcher_without_mpi || exit 1"
  rc=$?
  if [[ $rc -eq 77 ]]; then
    echo "note: could not bind-mount over libmpi here; checked ldd and the plain single process only"
  elif [[ $rc -ne 0 ]]; then
    echo "FAIL: with libmpi hidden"; fail=1
  fi
else
  echo "note: hiding libmpi needs root and unshare(1); checked ldd and the plain single process only"
fi
[[ $fail -eq 0 ]] && echo PASS
exit $fail
