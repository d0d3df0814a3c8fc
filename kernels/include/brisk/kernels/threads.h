// CPU thread count for brisk's kernels (OpenMP underneath). It changes the speed only: every CPU
// kernel gives the same bits on any thread count (docs/how-brisk-works.md, "Determinism").
#pragma once

namespace brisk {

// Threads the CPU kernels may use; set_num_threads(n <= 0) restores the default
// (the first count in OMP_NUM_THREADS, else the number of cores); an OMP_NUM_THREADS that is not
// a whole number from 1 to 65536 throws brisk::Error naming it.
void set_num_threads(int n);
int get_num_threads();

}  // namespace brisk
