// The dense small-block forward and recomputing backward with each block's rows staged through
// shared memory (KernelOptions::small_staged_forward / small_staged_backward,
// BLOSA_CUDA_SMALL_STAGED; off until measured on a GPU).
//
// Why: the one-shot kernels of attn_kernels.cuh give a thread one feature of a block and load
// its rows one element at a time, so a warp's access to a row is 64 bytes of bfloat16 at a
// row pitch of 2·d bytes (600 at d = 300), mostly not aligned to the 32-byte sectors: most of
// its sectors are requested by two warps. On an H200 (bench/RESULTS.md, 2026-11-28) the
// bfloat16 r = 8 recomputing backward kept L2 86% busy with a 64% hit rate for DRAM's 53%.
// A dense call's block (no mask, kSmallMax tokens, small_dense in dispatch.h) is one run of
// kSmallMax·d elements, kSmallMax·sizeof(T) = 16 bytes (16-bit T) or 32 (float) a feature, so
// it starts on a 16-byte boundary wherever the tensor does. Here a thread block of d threads,
// thread k owning feature k, runs one block:
//  1. it copies each input's run into shared memory as 16-byte vectors, kStagedVectors<T> a
//     thread: whole sectors, in address order;
//  2. each thread reads its feature's rows from there (2-byte accesses by consecutive threads:
//     no bank conflict) and runs the block's math of the one-shot kernels unchanged
//     (forward_small_block, backward_small_recompute_block with kStaged), which write the
//     outputs into the same tiles (the inputs are in registers by then: one barrier between);
//  3. it copies the outputs' runs to global memory as 16-byte vectors.
// The cost: three barriers, a shared store and load per element, and idle lanes in the last
// warp where d is not a multiple of 32 (20 of 320 at d = 300).
#pragma once

#include "attn_kernels.cuh"

namespace blosa::cuda {

// The widest d a staged thread block takes (one thread a feature; the paper's d = 300 fits);
// wider calls run the one-shot kernels. Its tiles: 20 KiB (bfloat16) or 40 KiB (float) for the
// backward's four tensors.
constexpr int kStagedMaxD = 320;

// Thread blocks per SM the staged backward's registers must allow (0: no bound). Unbounded it
// takes 73-80 registers (bench/small_variants.py), so an SM holds two thread blocks of 10 warps
// (d = 300); bounded to 3 it gets 64, and compiles without a spill in directions "forward" and
// "backward" (Bi-BloSA's) for 16-bit inputs and "forward" for float (float's "backward"
// spilled 24 bytes, "diag" and "all" 8-56 bytes, so those are not bounded).
template <typename T, Direction D>
constexpr int kStagedBackwardBlocksPerSM =
    D == Direction::kForward || (D == Direction::kBackward && sizeof(T) == 2) ? 3 : 0;

// 16-byte vectors a thread copies per tensor: a block's run of kSmallMax·d elements is d of
// them for 16-bit T, 2·d for float.
template <typename T>
constexpr int kStagedVectors = kSmallMax * int(sizeof(T)) / 16;

// Shared memory of a staged kernel: kN tiles, each a block's kSmallMax rows of d elements of
// one tensor, row-major with row pitch d as in global memory.
template <typename T, int kN>
struct SmallStage {
  alignas(16) T tiles[kN][kSmallMax * kStagedMaxD];
};

// Steps 1 and 3: copies a block's run (element `first` on, kSmallMax · d elements) of each of
// kN tensors between global memory and the tiles, as 16-byte vectors: thread x moves vectors
// x, x + d, ... Every load is issued before the first shared store.
template <typename T, int kN>
__device__ __forceinline__ void stage_in(SmallStage<T, kN>& sh, const T* const (&from)[kN],
                                         int64_t first, int d) {
  using Vec = typename PackWord<16>::type;
  constexpr int kV = kStagedVectors<T>;
  Vec v[kN][kV];
#pragma unroll
  for (int t = 0; t < kN; ++t) {
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      v[t][u] = load_input(reinterpret_cast<const Vec*>(from[t] + first) + threadIdx.x + u * d);
    }
  }
#pragma unroll
  for (int t = 0; t < kN; ++t) {
#pragma unroll
    for (int u = 0; u < kV; ++u) reinterpret_cast<Vec*>(sh.tiles[t])[threadIdx.x + u * d] = v[t][u];
  }
}

template <typename T, int kN, int kOut>
__device__ __forceinline__ void stage_out(const SmallStage<T, kN>& sh, T* const (&to)[kOut],
                                          int64_t first, int d) {
  static_assert(kOut <= kN);
  using Vec = typename PackWord<16>::type;
  constexpr int kV = kStagedVectors<T>;
#pragma unroll
  for (int t = 0; t < kOut; ++t) {
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const int at = threadIdx.x + u * d;
      store_output(reinterpret_cast<Vec*>(to[t] + first) + at,
                   reinterpret_cast<const Vec*>(sh.tiles[t])[at]);
    }
  }
}

// Step 2's reads: feature k of the block's rows of each tile, as load_small_block would have
// loaded them for a dense call (every mask byte 1), and the feature's bias.
template <typename T, typename A, int kN>
__device__ __forceinline__ SmallLoads<T, 1, kN> staged_rows(const Args<T, A>& p,
                                                            const SmallStage<T, kN>& sh, int k,
                                                            int d) {
  SmallLoads<T, 1, kN> l;
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) {
#pragma unroll
    for (int t = 0; t < kN; ++t) l.rows[t][i].x[0] = sh.tiles[t][i * d + k];
    l.mask[i] = 1;
  }
  if (p.bias != nullptr) l.bias[0] = p.bias[k];
  return l;
}

// The thread's SmallIndex in a staged kernel: block blockIdx.x, feature threadIdx.x, whose
// first element in the tiles is at offset k.
__device__ __forceinline__ SmallIndex staged_index() {
  const int64_t bb = blockIdx.x;
  return SmallIndex{bb, int64_t(threadIdx.x), bb * kSmallMax, int64_t(threadIdx.x), kSmallMax};
}

// forward_small (dense, fixed pivot, one feature a thread) staged: a grid of B · nblocks thread
// blocks of d threads (staged_geometry in dispatch.h). kRcpSteps: forward_small_block's.
template <typename T, typename A, Direction D, int kRcpSteps>
__global__ void __launch_bounds__(kStagedMaxD) forward_small_staged(const Args<T, A> p) {
  __shared__ SmallStage<T, 3> sh;
  const int d = static_cast<int>(p.d);
  const SmallIndex s = staged_index();
  const int64_t first = s.row0 * p.d;
  stage_in(sh, {p.dep, p.value, p.head}, first, d);
  __syncthreads();
  const SmallLoads<T, 1, 3> in = staged_rows(p, sh, static_cast<int>(s.k), d);
  __syncthreads();  // every thread holds its rows: tile 0 takes out
  Args<T, A> q = p;
  q.out = sh.tiles[0];
  bool real[kSmallMax];
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) real[i] = true;  // dense: every row a real token
  forward_small_block<T, A, D, true, 1, true, kRcpSteps, true>(q, s, in, real);
  __syncthreads();
  stage_out(sh, {p.out}, first, d);
}

// backward_small_recompute (dense, fixed pivot, one feature a thread) staged, as
// forward_small_staged; its block sums go to p.d_bias_part as that kernel's do.
template <typename T, typename A, Direction D>
__global__ void __launch_bounds__(kStagedMaxD, (kStagedBackwardBlocksPerSM<T, D>))
    backward_small_staged(const Args<T, A> p) {
  __shared__ SmallStage<T, 4> sh;
  const int d = static_cast<int>(p.d);
  const SmallIndex s = staged_index();
  const int64_t first = s.row0 * p.d;
  stage_in(sh, {p.dep, p.value, p.head, p.grad_out}, first, d);
  __syncthreads();
  const SmallLoads<T, 1, 4> in = staged_rows(p, sh, static_cast<int>(s.k), d);
  __syncthreads();  // every thread holds its rows: tiles 0-2 take d_dep, d_value and d_head
  Args<T, A> q = p;
  q.d_dep = sh.tiles[kDep];
  q.d_value = sh.tiles[kValue];
  q.d_head = sh.tiles[kHead];
  bool real[kSmallMax];
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) real[i] = true;  // dense: every row a real token
  // Row offsets from d held in a register (small_offset's kHeld): 63 registers instead of 73
  // unbounded in bfloat16's direction "forward", and no spill bounded in its "backward".
  backward_small_recompute_block<T, A, D, true, 1, false, true, true, true>(q, s, in, real);
  __syncthreads();
  stage_out(sh, {p.d_dep, p.d_value, p.d_head}, first, d);
}

}  // namespace blosa::cuda
