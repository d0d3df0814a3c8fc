// Portability macros shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define BRISK_HOST_DEVICE __host__ __device__
#else
#define BRISK_HOST_DEVICE
#endif
