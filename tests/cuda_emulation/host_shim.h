// Lets a C++ compiler build csrc/cuda/attn_kernels.cuh for the CPU, to run its kernels one
// thread at a time (emulate.cpp). This is exact for these kernels because they use no shared
// memory, barriers, warp operations or atomics: each thread reads the inputs and writes its
// own outputs, so running the threads one after another computes what the GPU computes, with
// the exact tanh/exp2 of blosa_math.h's host path in place of tanh.approx/ex2.approx.
#pragma once

#include <algorithm>
#include <cstdint>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

// The built-in index variables, set by the emulated launch before each thread runs.
struct EmulatedDim3 {
  unsigned int x = 1, y = 1, z = 1;
};
inline thread_local EmulatedDim3 blockIdx, threadIdx, blockDim, gridDim;

// CUDA's device-side min for the integer types the kernels use.
template <typename T>
inline T min(T a, T b) {
  return std::min(a, b);
}
