// Lets a C++ compiler build csrc/cuda/*.cuh for the CPU, to run their kernels thread by thread
// (emulate.cpp). Each thread of a thread block runs as a fiber (ucontext) of one OS thread:
// threads run one after another up to their next __syncthreads, where each hands over to the
// next, and all of them have arrived before any goes on. __shared__ variables are per OS
// thread, so the fibers of a thread block share them. This is exact for these kernels, which
// use no warp operations or atomics, only barriers and shared memory: what a thread reads was
// written before the barrier it passed, as on the GPU, with the exact tanh/exp2 of
// blosa_math.h's host path in place of tanh.approx/ex2.approx.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

// The built-in index variables, set by the emulated launch before each thread runs.
struct EmulatedDim3 {
  unsigned int x = 1, y = 1, z = 1;
};
inline thread_local EmulatedDim3 blockIdx, threadIdx, blockDim, gridDim;

// CUDA's device-side min and max for the integer types the kernels use.
template <typename T>
inline T min(T a, T b) {
  return std::min(a, b);
}
template <typename T>
inline T max(T a, T b) {
  return std::max(a, b);
}

namespace emulation {

struct Fiber {
  ucontext_t context;
  EmulatedDim3 index;  // threadIdx
  int barriers = 0;    // __syncthreads calls so far
  bool done = false;
};

// The thread block this OS thread is running.
struct ThreadBlock {
  ucontext_t scheduler;
  std::vector<Fiber> fibers;
  std::vector<std::vector<char>> stacks;
  Fiber* current = nullptr;
  const std::function<void()>* body = nullptr;
};
inline thread_local ThreadBlock block;

inline void fiber_main() {
  (*block.body)();
  block.current->done = true;
}  // then uc_link returns to the scheduler

inline void barrier() {
  Fiber* fiber = block.current;
  ++fiber->barriers;
  swapcontext(&fiber->context, &block.scheduler);
}

// Runs body() once for each thread of a thread block of `dim` threads (threadIdx set), as
// described above. Threads that return early no longer take part in barriers, as on the GPU;
// live threads at different barriers (a barrier in divergent code) are an error.
inline void run_thread_block(EmulatedDim3 dim, const std::function<void()>& body) {
  constexpr size_t kStackBytes = 64 << 10;
  const size_t count = size_t(dim.x) * dim.y * dim.z;
  block.fibers.assign(count, Fiber{});  // never moved after getcontext: contexts point into
                                        // themselves
  if (block.stacks.size() < count) block.stacks.resize(count, std::vector<char>(kStackBytes));
  block.body = &body;
  for (size_t i = 0; i < count; ++i) {
    Fiber& fiber = block.fibers[i];
    fiber.index = {static_cast<unsigned int>(i % dim.x),
                   static_cast<unsigned int>(i / dim.x % dim.y),
                   static_cast<unsigned int>(i / (size_t(dim.x) * dim.y))};
    getcontext(&fiber.context);
    fiber.context.uc_stack.ss_sp = block.stacks[i].data();
    fiber.context.uc_stack.ss_size = kStackBytes;
    fiber.context.uc_link = &block.scheduler;
    makecontext(&fiber.context, fiber_main, 0);
  }
  for (;;) {
    for (Fiber& fiber : block.fibers) {
      if (fiber.done) continue;
      block.current = &fiber;
      threadIdx = fiber.index;
      swapcontext(&block.scheduler, &fiber.context);
    }
    int arrived = -1;  // the barrier every live thread waits at
    for (const Fiber& fiber : block.fibers) {
      if (fiber.done) continue;
      if (arrived >= 0 && fiber.barriers != arrived) {
        throw std::logic_error("emulated kernel: threads of a block wait at different barriers");
      }
      arrived = fiber.barriers;
    }
    if (arrived < 0) return;
  }
}

}  // namespace emulation

inline void __syncthreads() { emulation::barrier(); }
