// The dense small-block forward and recomputing backward with each block's rows staged through
// shared memory (KernelOptions::small_staged_forward / small_staged_backward,
// BLOSA_CUDA_SMALL_STAGED; off until measured on a GPU).
//
// Why: the one-shot kernels of small_blocks.cuh give a thread one feature of a block and load
// its rows one element at a time, so a warp's access to a row is 64 bytes of bfloat16 at a
// row pitch of 2·d bytes (600 at d = 300), mostly not aligned to the 32-byte sectors: most of
// its sectors are requested by two warps. On an H200 (bench/HISTORY.md, 2026-11-28) the
// bfloat16 r = 8 recomputing backward kept L2 86% busy with a 64% hit rate for DRAM's 53%.
// A dense call's block (no mask, kSmallMax tokens, small_dense in dispatch.h) is one run of
// kSmallMax·d elements, kSmallMax·sizeof(T) = 16 bytes (16-bit T) or 32 (float) a feature, so
// it starts on a 16-byte boundary wherever the tensor does. Here a thread block of d threads,
// thread k owning feature k, runs `per` consecutive blocks (KernelOptions::small_staged_blocks),
// for each:
//  1. it copies each input's run into shared memory as 16-byte vectors (cp.async: no register
//     holds them), kStagedVectors<T> a thread: whole sectors, in address order;
//  2. each thread reads its feature's rows from there (2-byte accesses by consecutive threads:
//     no bank conflict) and runs the block's math of the one-shot kernels unchanged
//     (forward_small_block, backward_small_recompute_block with kStaged), which write the
//     outputs into the same tiles (the inputs are in registers by then: one barrier between);
//  3. it copies the outputs' runs to global memory as 16-byte vectors.
// With 16-bit inputs the next block's step 1 goes into a second set of tiles before this
// block's step 2, so that its copy overlaps the math (for_staged_blocks). The cost: three
// barriers a block, a shared store and load per element, and idle lanes in the last warp
// where d is not a multiple of 32 (20 of 320 at d = 300).
#pragma once

#include "small_blocks.cuh"

namespace blosa::cuda {

// The widest d a staged thread block takes (one thread a feature; the paper's d = 300 fits);
// wider calls run the one-shot kernels. Its tiles: 20 KiB (bfloat16) or 40 KiB (float) for the
// backward's four tensors.
constexpr int kStagedMaxD = 320;

// Thread blocks per SM the staged backward's registers must allow (0: no bound). Unbounded, the
// bfloat16 kernel of direction "forward" takes 79 registers (bench/gpu_tools/small_variants.py), so an
// SM holds two thread blocks of 10 warps (d = 300); bounded to 3 it gets 64 and compiles
// without a spill in directions "forward" and "backward" (Bi-BloSA's) for 16-bit inputs.
// Bounded, "diag" and "all" spilled 24-56 bytes, and float32's "forward" 24: those and the
// rest of float32 are not bounded (93-95 registers in 16 bits, 91-142 in float32).
template <typename T, Direction D>
constexpr int kStagedBackwardBlocksPerSM =
    sizeof(T) == 2 && (D == Direction::kForward || D == Direction::kBackward) ? 3 : 0;

// 16-byte vectors a thread copies per tensor: a block's run of kSmallMax·d elements is d of
// them for 16-bit T, 2·d for float.
template <typename T>
constexpr int kStagedVectors = kSmallMax * int(sizeof(T)) / 16;

// The 16-byte word the staged kernels copy rows as.
using Vector16 = PackWord<16>::type;

// f(t, at) for each of the 16-byte vectors `at` of the block's runs of kN tensors t that the
// thread copies: thread x the vectors x, x + d, ... (kStagedVectors<T> of them a tensor).
template <typename T, int kN, typename F>
__device__ __forceinline__ void for_thread_vectors(int d, F&& f) {
#pragma unroll
  for (int t = 0; t < kN; ++t) {
#pragma unroll
    for (int u = 0; u < kStagedVectors<T>; ++u) f(t, int(threadIdx.x) + u * d);
  }
}

// Shared memory of a staged kernel: kN tiles, each a block's kSmallMax rows of d elements of
// one tensor, row-major with row pitch d as in global memory.
template <typename T, int kN>
struct SmallStage {
  alignas(16) T tiles[kN][kSmallMax * kStagedMaxD];
};

// 16 bytes from global to shared memory without a register: cp.async (sm_80 on), whose
// copies land while the thread goes on, until async_wait_all. Elsewhere (older GPUs, the CPU
// emulation) a plain copy, done by the time it returns.
__device__ __forceinline__ void copy_16_async(void* shared_to, const void* global_from) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto to = static_cast<unsigned>(__cvta_generic_to_shared(shared_to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(global_from)
               : "memory");
#else
  *static_cast<Vector16*>(shared_to) = load_input(static_cast<const Vector16*>(global_from));
#endif
}

// Ends the thread's group of copy_16_async copies.
__device__ __forceinline__ void async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits for every copy_16_async of the thread (the barrier after it makes everyone's visible).
__device__ __forceinline__ void async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// Step 1: starts copying a block's run (element `first` on, kSmallMax · d elements) of each of
// kN tensors into the tiles, as 16-byte vectors (for_thread_vectors).
template <typename T, int kN>
__device__ __forceinline__ void stage_in(SmallStage<T, kN>& sh, const T* const (&from)[kN],
                                         int64_t first, int d) {
  for_thread_vectors<T, kN>(d, [&](int t, int at) {
    copy_16_async(reinterpret_cast<Vector16*>(sh.tiles[t]) + at,
                  reinterpret_cast<const Vector16*>(from[t] + first) + at);
  });
  async_commit();
}

// Step 3: copies the first kOut tiles to the block's runs of the tensors `to`, as stage_in's
// vectors (each thread reads back only vectors it copies in).
template <typename T, int kN, int kOut>
__device__ __forceinline__ void stage_out(const SmallStage<T, kN>& sh, T* const (&to)[kOut],
                                          int64_t first, int d) {
  static_assert(kOut <= kN);
  for_thread_vectors<T, kOut>(d, [&](int t, int at) {
    store_output(reinterpret_cast<Vector16*>(to[t] + first) + at,
                 reinterpret_cast<const Vector16*>(sh.tiles[t])[at]);
  });
}

// Step 2's reads: feature k of the block's rows of each tile, as load_small_block would have
// loaded them for a dense call (every mask byte 1), and the feature's bias (loaded once, before
// the loop over blocks: a load of it per block compiled to two copies of the loop in float32).
template <typename T, int kN>
__device__ __forceinline__ SmallLoads<T, 1, kN> staged_rows(const SmallStage<T, kN>& sh, int k,
                                                            int d, T bias) {
  SmallLoads<T, 1, kN> l;
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) {
#pragma unroll
    for (int t = 0; t < kN; ++t) l.rows[t][i].x[0] = sh.tiles[t][i * d + k];
    l.mask[i] = 1;
  }
  l.bias[0] = bias;
  return l;
}

// Tile sets a staged kernel holds: two for 16-bit inputs, so that the next block's copy lands
// in one while the thread block computes the other; one for float, whose two would pass the
// 48 KiB of static shared memory a thread block may have (2 · 40 KiB for the backward).
template <typename T>
constexpr int kStagedStages = sizeof(T) == 2 ? 2 : 1;

// Runs the thread block's blocks [blockIdx.x · per, + per) (of the B · nblocks), thread k
// owning feature k: steps 1-3 for each, body(s, in, real, tiles) computing one from its rows
// `in` (every one real: dense) into `tiles` (its outputs in the first kOut tiles, which step 3
// copies to `to`). With two tile sets, block bb + 1's copy is started before block bb's math,
// into the other set.
// Barriers: one after a block's copy has landed, one once every thread has read its rows
// (the tiles then take the outputs), one before the outputs are copied out.
template <typename T, typename A, int kN, int kOut, int kStages, typename Body>
__device__ __forceinline__ void for_staged_blocks(const Args<T, A>& p, int64_t per,
                                                  SmallStage<T, kN> (&sh)[kStages],
                                                  const T* const (&from)[kN],
                                                  T* const (&to)[kOut], Body&& body) {
  const int d = static_cast<int>(p.d);
  const int64_t first_block = int64_t(blockIdx.x) * per;
  const int64_t end = min(first_block + per, p.B * p.nblocks);
  const int64_t run = kSmallMax * p.d;  // elements of one block of a tensor
  stage_in(sh[0], from, first_block * run, d);
  const T bias = p.bias != nullptr ? p.bias[threadIdx.x] : T(0);
  bool real[kSmallMax];
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) real[i] = true;
  int stage = 0;  // the tile set of block bb: alternating with two, always 0 with one
#pragma unroll 1  // one copy of the block math (nvcc peeled a second in float32)
  for (int64_t bb = first_block; bb < end; ++bb) {
    // One tile set: block bb's copy once block bb - 1's outputs are out.
    if (kStages == 1 && bb > first_block) stage_in(sh[0], from, bb * run, d);
    async_wait_all();
    __syncthreads();  // block bb's rows are in sh[stage]
    const int64_t k = threadIdx.x;  // the thread's feature, and its offset in a tile row
    const SmallIndex s{bb, k, bb * kSmallMax, k, kSmallMax};
    const SmallLoads<T, 1, kN> in = staged_rows(sh[stage], static_cast<int>(s.k), d, bias);
    if (kStages == 2 && bb + 1 < end) stage_in(sh[stage ^ 1], from, (bb + 1) * run, d);
    __syncthreads();  // every thread holds its rows: sh[stage] takes the outputs
    body(s, in, real, sh[stage]);
    __syncthreads();
    stage_out(sh[stage], to, bb * run, d);
    stage ^= kStages - 1;
  }
}

// forward_small (dense, fixed pivot, one feature a thread) staged: a grid of
// ceil(B · nblocks / per) thread blocks of d threads, each running `per` blocks in turn
// (staged_geometry in dispatch.h). kRcpSteps: forward_small_block's.
template <typename T, typename A, Direction D, int kRcpSteps>
__global__ void __launch_bounds__(kStagedMaxD) forward_small_staged(const Args<T, A> p,
                                                                    int64_t per) {
  __shared__ SmallStage<T, 3> sh[kStagedStages<T>];
  for_staged_blocks(p, per, sh, {p.dep, p.value, p.head}, {p.out},
                    [&](const SmallIndex& s, const SmallLoads<T, 1, 3>& in,
                        const bool(&real)[kSmallMax], SmallStage<T, 3>& tiles) {
                      Args<T, A> q = p;
                      q.out = tiles.tiles[0];
                      forward_small_block<T, A, D, true, 1, true, kRcpSteps, true>(q, s, in, real);
                    });
}

// backward_small_recompute (dense, fixed pivot, one feature a thread) staged, as
// forward_small_staged. Each thread adds its feature's block sums over the thread block's
// blocks (in order) and stores them in row blockIdx.x of p.d_bias_part: ceil(B · nblocks /
// per) rows, `per` times fewer than the one-shot kernels write for the column sums to add.
template <typename T, typename A, Direction D>
__global__ void __launch_bounds__(kStagedMaxD, (kStagedBackwardBlocksPerSM<T, D>))
    backward_small_staged(const Args<T, A> p, int64_t per) {
  __shared__ SmallStage<T, 4> sh[kStagedStages<T>];
  A d_bias = A(0);
  for_staged_blocks(
      p, per, sh, {p.dep, p.value, p.head, p.grad_out}, {p.d_dep, p.d_value, p.d_head},
      [&](const SmallIndex& s, const SmallLoads<T, 1, 4>& in, const bool(&real)[kSmallMax],
          SmallStage<T, 4>& tiles) {
        Args<T, A> q = p;
        q.d_dep = tiles.tiles[kDep];
        q.d_value = tiles.tiles[kValue];
        q.d_head = tiles.tiles[kHead];
        A block_sum[1];
        // Row offsets from d held in a register (small_offset's kHeld): without it, bounded
        // to 3 thread blocks an SM, bfloat16's direction "backward" spilled 8 bytes.
        backward_small_recompute_block<T, A, D, true, 1, false, true, true, true>(q, s, in, real,
                                                                                   block_sum);
        d_bias += block_sum[0];
      });
  if (p.d_bias_part != nullptr) p.d_bias_part[int64_t(blockIdx.x) * p.d + threadIdx.x] = d_bias;
}

}  // namespace blosa::cuda
