// The dist layer: process groups (MPI for CPU tensors, NCCL for CUDA tensors), brisk's own
// collective algorithms, and the launcher environment. Loads MPI only under a launcher.
#pragma once
#include "brisk/dist/launch_env.h"
#include "brisk/dist/process_group.h"
