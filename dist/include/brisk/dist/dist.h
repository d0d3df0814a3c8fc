// The dist layer: process groups (MPI for CPU tensors, NCCL for CUDA tensors), brisk's own
// collective algorithms, the launcher environment, the data-parallel Reducer and BRISK_TRACE.
// Loads MPI only under a launcher.
#pragma once
#include "brisk/dist/launch_env.h"
#include "brisk/dist/process_group.h"
#include "brisk/dist/reducer.h"
