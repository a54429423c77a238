// The small-block kernels (r <= kSmallMax; kernel_common.cuh has what all the kernels share).
// One thread per (batch, block, V consecutive features) holds the whole block in registers; the
// (query, key) pairs are unrolled at compile time for the direction, so only allowed pairs cost
// a tanh and an exp. These kernels are memory-bound (each input is read once, each output
// written once, no zero-fill pass). A differentiable call's forward writes no lse here, and
// backward_small_recompute recomputes out and lse from the block it holds (no tanh or exp more,
// and two [B, n, d] reads fewer); backward_small reads a saved out and lse, where a caller of
// the forward op asked for them. Calls with no mask and whole blocks of kSmallMax take those two
// compiled with kDense, which know the block length and that no row is padding (small_dense in
// dispatch.h); staged_small.cuh runs the same block math on rows a thread block copies through
// shared memory as 16-byte vectors.
//
// Grid: B · nblocks · d / V threads, or, for the persistent forward_small and
// backward_small_recompute, what the GPU holds at once, each thread looping over several
// (for_small_blocks). V (1 or 2) is the vector width of those two (dispatch.h picks it and
// whether they are persistent); backward_small has V = 1.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernel_common.cuh"

namespace blosa::cuda {

constexpr int kSmallMax = 8;         // longest block of the register-resident kernels
constexpr int kSmallThreads = 256;   // threads per block of those kernels

// Compile-time direction rule for the unrolled small-block kernels (same as key_range).
template <Direction D>
__device__ constexpr bool pair_ok(int i, int j) {
  return D == Direction::kForward    ? i < j
         : D == Direction::kBackward ? i > j
         : D == Direction::kDiag     ? i != j
                                     : true;
}

// Whether query j of a block of kSmallMax real tokens (the dense kernels') has a key under D:
// a constant in their unrolled loops, where testing the query's sum costs instructions.
template <Direction D>
__device__ constexpr bool has_key_in_whole_block(int j) {
  return D == Direction::kForward    ? j > 0
         : D == Direction::kBackward ? j < kSmallMax - 1
                                     : kSmallMax > 1;
}

// The query that step jj of the small kernels' loop over a block's queries computes: in order,
// or last first under "backward" (keys after the query), so that every direction starts with
// the queries that have the fewest keys. In order, "backward"'s SASS issued two rows 45-107
// instructions after the block's other loads, behind waits for those (forward_small bfloat16:
// 22 of 30 loads read before the last one; the recomputing backward 36 of 38); last first it
// is scheduled as "forward" is (bench/gpu_tools/sass_loads.py --whole, bench/HISTORY.md). A query's own
// sums do not depend on the order; the keys' gradient sums over queries run in this order.
template <Direction D>
__device__ constexpr int small_query(int jj) {
  return D == Direction::kBackward ? kSmallMax - 1 - jj : jj;
}

struct SmallIndex {
  int64_t bb, k, row0;  // b · nblocks + block; first feature; row (b·n + position) of its
                        // first token
  int64_t at;           // row0 · d + k: the offset of the thread's first element
  int len;              // tokens in this block (the last one may be shorter)
};

// The work of thread index gid: false past the last (batch, block, features). kDense: every
// block has kSmallMax tokens (small_dense in dispatch.h), so s.len is that constant.
template <int V = 1, bool kDense = false, typename T, typename A>
__device__ __forceinline__ bool small_index_at(const Args<T, A>& p, int64_t gid, SmallIndex& s) {
  const int64_t groups = p.d / V;  // d % V == 0 (dispatch.h)
  if (gid >= p.B * p.nblocks * groups) return false;
  int64_t b, block;
  if (p.index32) {
    const uint32_t g = static_cast<uint32_t>(gid);
    const uint32_t bb = p.groups_div.div(g);
    const uint32_t b32 = p.nblocks_div.div(bb);
    s.bb = bb;
    s.k = int64_t(g - bb * static_cast<uint32_t>(groups)) * V;
    b = b32;
    block = bb - b32 * static_cast<uint32_t>(p.nblocks);
  } else {
    s.bb = gid / groups;
    s.k = (gid - s.bb * groups) * V;
    b = s.bb / p.nblocks;
    block = s.bb - b * p.nblocks;
  }
  const int64_t start = block * (kDense ? kSmallMax : p.r);
  s.len = kDense ? kSmallMax : static_cast<int>(min(p.r, p.n - start));
  s.row0 = b * p.n + start;
  s.at = s.row0 * p.d + s.k;
  return true;
}

// V consecutive features of one row, loaded or stored as one V · sizeof(T)-byte access: at
// V = 2 a warp's load of bfloat16 moves 128 bytes (a whole cache line) instead of 64, so
// the same threads keep twice the bytes in flight (the small kernels are latency-bound memory
// streams; bench/HISTORY.md). Callers check d % V == 0 and the pointers' alignment.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T x[V];
};

// The word a Pack moves as, one access: a struct copy may be split into one access per field,
// and an 8-byte integer was too (two 4-byte loads for float packs); CUDA's uint2 is not.
template <size_t kBytes> struct PackWord;
template <> struct PackWord<2> { using type = unsigned short; };
template <> struct PackWord<4> { using type = unsigned int; };
#if defined(__CUDACC__)
template <> struct PackWord<8> { using type = uint2; };
template <> struct PackWord<16> { using type = uint4; };
#else
template <> struct PackWord<8> { using type = unsigned long long; };
struct alignas(16) HostWord16 {
  unsigned int x, y, z, w;
};
template <> struct PackWord<16> { using type = HostWord16; };
#endif

// A load of an input no kernel writes, through the read-only path (ld.global.nc). It also
// keeps the load global (LDG) where the compiler cannot trace the pointer to a kernel argument
// (a pinned one, as load_small_block's): a plain load through it compiled to a generic one (LD).
template <typename W>
__device__ __forceinline__ W load_input(const W* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

template <int V, typename T, typename I>
__device__ __forceinline__ Pack<T, V> load_pack(const T* base, I off) {
  using Word = typename PackWord<sizeof(Pack<T, V>)>::type;
  const Word word = load_input(reinterpret_cast<const Word*>(base + off));
  Pack<T, V> v;
  memcpy(&v, &word, sizeof(v));
  return v;
}

// A global store (st.global.wb, what a plain store to global memory is), kept global where
// the pointer is a pinned one, as load_input's loads.
template <typename W>
__device__ __forceinline__ void store_output(W* p, W value) {
#if defined(__CUDA_ARCH__)
  __stwb(p, value);
#else
  *p = value;
#endif
}

template <int V, typename T, typename I>
__device__ __forceinline__ void store_pack(T* base, I off, const Pack<T, V>& v) {
  using Word = typename PackWord<sizeof(Pack<T, V>)>::type;
  Word word;
  memcpy(&word, &v, sizeof(v));
  store_output(reinterpret_cast<Word*>(base + off), word);
}

// One element as store_pack stores it (a 16-bit T has no st.global of its own type).
template <typename T, typename I>
__device__ __forceinline__ void store_element(T* base, I off, T value) {
  store_pack<1>(base, off, Pack<T, 1>{{value}});
}

// p + at, pinned (as load_small_block's first rows, for the same reason); p is not null.
template <typename T>
__device__ __forceinline__ T* first_row(T* p, int64_t at) {
  T* first = p + at;
  pin(first);
  return first;
}

// The first row of a small kernel's output: first_row in global memory, or, kStaged (the
// kernels of staged_small.cuh, whose outputs go to the thread block's shared tiles before
// they are copied out), p + at as is: pinned, the pointer would lose its address space and the
// stores would compile to generic ones.
template <bool kStaged, typename T>
__device__ __forceinline__ T* output_first(T* p, int64_t at) {
  return kStaged ? p + at : first_row(p, at);
}

// A small kernel's store of one row's pack: store_pack to global memory, or, kStaged, a plain
// store to the shared tile.
template <bool kStaged, int V, typename T, typename I>
__device__ __forceinline__ void store_row(T* base, I off, const Pack<T, V>& v) {
  if constexpr (kStaged) {
    *reinterpret_cast<Pack<T, V>*>(base + off) = v;
  } else {
    store_pack<V>(base, off, v);
  }
}

// Row i of the thread's block, counted from its first row and clamped to its last. The small
// kernels load every row without a branch, so all their loads are in flight at once; a branch
// per row (i < len) made each row's loads wait for the row before (Nsight Compute: 43-46% of
// DRAM bandwidth, most stalls on loads; bench/HISTORY.md). Rows past a short last block
// repeat its last row and are never used.
__device__ __forceinline__ int small_row(const SmallIndex& s, int i) { return min(i, s.len - 1); }

// x in a register that ptxas does not know to hold the same value in every thread (an asm
// result, which it does not look into).
__device__ __forceinline__ int held_in_register(int x) {
#if defined(__CUDA_ARCH__)
  asm("mov.b32 %0, %1;" : "=r"(x) : "r"(x));
#endif
  return x;
}

// Offset of row i of the thread's block from its first row (s.at), in elements: i · d, below
// 2^31 (dispatch.h's small_geometry checks d · kSmallMax), so in 32-bit arithmetic, and
// pointer + offset is one multiply-add. Before, nvcc computed every row's 64-bit offset for
// every tensor, a chain of integer instructions per row and tensor (bench/HISTORY.md, "Fewer
// instructions in the small-block kernels").
// kHeld: with d held in an ordinary register (held_in_register), so that the row offsets
// i · d are ordinary registers too and each row's address is one IMAD.WIDE; from the uniform d
// ptxas builds every offset in the uniform datapath and adds it to the row pointer in two IADD3
// (the recomputing backward with its loads first: 4-7% fewer instructions, the same registers;
// bench/HISTORY.md). Not everywhere: in other small kernels it cost registers (dense
// recomputing backward in direction "backward" 64 -> 80) or early reads (backward_small).
template <bool kHeld = false, typename T, typename A>
__device__ __forceinline__ int small_offset(const Args<T, A>& p, int i) {
  const int d = static_cast<int>(p.d);
  return i * (kHeld ? held_in_register(d) : d);
}

// A small block's loads as issued: the rows of kN tensors, V features each, the rows' mask
// bytes (tested by real_rows only where the rows are used: testing them here would wait for
// the loads here), and the V features' bias (unset without one: read it with small_bias).
template <typename T, int V, int kN>
struct SmallLoads {
  Pack<T, V> rows[kN][kSmallMax];
  int mask[kSmallMax];
  T bias[V];
};

// Loads the rows of the thread's block of the kN tensors `from` into l.rows[t], their mask
// bytes and the bias. Every load is issued first (and pinned there), so all are in flight
// together; a row past a short last block repeats its last row (small_row). kDense: no mask
// (every mask byte the constant 1). kHeldStride: the rows' offsets as small_offset's kHeld.
template <int V, bool kDense, bool kHeldStride, int kN, typename T, typename A>
__device__ __forceinline__ void load_small_block(const Args<T, A>& p, const SmallIndex& s,
                                                 const T* const (&from)[kN],
                                                 SmallLoads<T, V, kN>& l) {
  // The first row's address in each tensor (and in the mask), pinned: else the compiler folds
  // s.at back into every row's offset, in 64-bit arithmetic again.
  const T* first[kN];
#pragma unroll
  for (int t = 0; t < kN; ++t) first[t] = first_row(from[t], s.at);
  const bool masked = !kDense && p.mask != nullptr;
  const auto* mask =
      masked ? first_row(reinterpret_cast<const unsigned char*>(p.mask), s.row0) : nullptr;
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) {
    const int row = small_row(s, i);
#pragma unroll
    for (int t = 0; t < kN; ++t) {
      l.rows[t][i] = load_pack<V>(first[t], small_offset<kHeldStride>(p, row));
      pin(l.rows[t][i]);
    }
    if (masked) {
      l.mask[i] = load_input(mask + row);  // mask_byte
      pin(l.mask[i]);
    } else {
      l.mask[i] = 1;  // unpinned: a constant the compiler folds into every test of it
    }
  }
  // Without a bias l.bias is left unset (small_bias reads it only with one): a select of 0 here
  // read the loaded register, so the thread waited for the load right after issuing it
  // (backward_small_recompute's SASS).
  if (p.bias != nullptr) {
#pragma unroll
    for (int f = 0; f < V; ++f) {
      l.bias[f] = p.bias[s.k + f];
      pin(l.bias[f]);
    }
  }
}

// Feature f's bias, as load_small_block loaded it, or 0 without one.
template <typename T, typename A, int V, int kN>
__device__ __forceinline__ A small_bias(const Args<T, A>& p, const SmallLoads<T, V, kN>& l,
                                        int f) {
  return p.bias != nullptr ? static_cast<A>(l.bias[f]) : A(0);
}

// The tensors of SmallLoads: every small kernel loads dep, value and head first.
enum SmallTensor { kDep, kValue, kHead, kGrad, kOut };

// Feature f of the block's rows as the kernels use them: xk = dep / c, v, and
// xq = (head + bias) / c.
template <typename T, typename A, int V, int kN>
__device__ __forceinline__ void small_block_values(const Args<T, A>& p,
                                                   const SmallLoads<T, V, kN>& in, int f,
                                                   A (&xk)[kSmallMax], A (&v)[kSmallMax],
                                                   A (&xq)[kSmallMax]) {
  const A qbias = small_bias(p, in, f);
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) {
    const KeyRow<A> kv =
        key_values(p, KeyLoad<T>{in.rows[kDep][i].x[f], in.rows[kValue][i].x[f]});
    xk[i] = kv.xk;
    v[i] = kv.v;
    xq[i] = query_x(p, in.rows[kHead][i].x[f], qbias);
  }
}

// Which rows of the block are real tokens: inside the block and not padding.
__device__ __forceinline__ void real_rows(const SmallIndex& s, const int (&mask)[kSmallMax],
                                          bool (&real)[kSmallMax]) {
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) real[i] = i < s.len && mask[i] != 0;
}

// Whether the small kernels read row i of SmallTensor t under direction D: dep and value of a
// key some query attends, head of a query that attends a key, and every grad_out row (a query
// with no key still reads its g: d_head = g · 0, which the compiler may not fold). The
// compiler loads no other row.
template <Direction D>
__device__ constexpr bool small_row_read(int t, int i) {
  bool read = t == kGrad;
  for (int o = 0; o < kSmallMax; ++o) {
    read = read || (t == kDep || t == kValue ? pair_ok<D>(i, o) : t == kHead && pair_ok<D>(o, i));
  }
  return read;
}

// A test that holds for no dense call but that the compiler cannot decide, placed between the
// small kernels' loads and their math so that every load is issued before any of the math. It
// multiplies p.r − kSmallMax (0: a dense call's blocks all have kSmallMax tokens) by the bits of
// every row the kernel reads (small_row_read), so the branch needs all of them, and the math
// behind it starts once they have all arrived: one round trip to memory a thread. Left to
// itself, ptxas interleaves loads and math (the dense kernels at r = 8 read 14-31 loads before
// the last one is issued; the bfloat16 forward then waited on its loads: 23.6 cycles between a
// warp's instructions against the general kernel's 13.4, Nsight Compute, bench/HISTORY.md). A
// test of p.r alone did not do it: ptxas moved it above the loads in the backward, and the
// forward took 48 registers instead of 32. A row outside the product would be loaded after the
// branch, and a row no kernel reads would be loaded for it (tests/test_cuda_schedule.py checks
// both).
template <Direction D, typename T, typename A, int V, int kN>
__device__ __forceinline__ bool loads_first_gate(const Args<T, A>& p,
                                                 const SmallLoads<T, V, kN>& l) {
  using Word = typename PackWord<sizeof(Pack<T, V>)>::type;
  static_assert(sizeof(Word) <= 4, "one word a row");
  unsigned bits = 0;
#pragma unroll
  for (int t = 0; t < kN; ++t) {
#pragma unroll
    for (int i = 0; i < kSmallMax; ++i) {
      if (small_row_read<D>(t, i)) {
        Word word;
        memcpy(&word, &l.rows[t][i], sizeof(word));
        bits |= word;
      }
    }
  }
  return (p.r - kSmallMax) * int64_t(bits) != 0;
}

// Runs body(s, loads, real) on the thread's small blocks, loads (SmallLoads) of the kN
// tensors `from`. kDense (small_dense in dispatch.h: no mask, every block of kSmallMax
// tokens): s.len and every mask byte are constants, so the compiler drops the tests of both
// (the short-block clamps, the per-row `j < s.len` and `real` branches, the mask loads).
// One-shot (kPersistent false): the block of the thread's index, loaded, then computed, as a
// grid of one thread per block. Persistent: a grid of only as many threads as the GPU holds at
// once (the launcher caps it, Geometry::persistent), each taking blocks gid, gid + threads, ...
// and issuing the next block's loads before computing this one, so that its loads are in
// flight while it computes. The one-shot kernels load, compute and exit, and at r = 8 ran at
// 23-41% of an H200's bandwidth with most stalls on global loads (bench/HISTORY.md).
// kLoadsFirst (the one-shot dense kernels; KernelOptions::small_loads_first): every load is
// issued before any of the math (loads_first_gate). Direction D says which rows the kernels
// read (small_row_read). kHeldStride: the loads' row offsets from d held in a register
// (small_offset).
template <Direction D, int V, bool kPersistent, bool kDense, bool kLoadsFirst, bool kHeldStride,
          int kN, typename T, typename A, typename Body>
__device__ __forceinline__ void for_small_blocks(const Args<T, A>& p, const T* const (&from)[kN],
                                                 Body&& body) {
  static_assert(!kLoadsFirst || (kDense && !kPersistent));
  int64_t gid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  SmallIndex s;
  if (!small_index_at<V, kDense>(p, gid, s)) return;
  SmallLoads<T, V, kN> next;
  load_small_block<V, kDense, kHeldStride>(p, s, from, next);
  if constexpr (kLoadsFirst) {
    if (loads_first_gate<D>(p, next)) return;  // never (see there)
  }
  if constexpr (!kPersistent) {
    bool real[kSmallMax];
    real_rows(s, next.mask, real);
    body(s, next, real);
  } else {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (;;) {
      // The copies read the loaded registers; the compiler places them at the loop's back
      // edge, after this block's math (checked in the SASS: bench/gpu_tools/sass_loads.py).
      const SmallIndex cur = s;
      const SmallLoads<T, V, kN> loaded = next;
      gid += stride;
      const bool more = small_index_at<V, kDense>(p, gid, s);
      if (more) load_small_block<V, kDense, kHeldStride>(p, s, from, next);
      bool real[kSmallMax];
      real_rows(cur, loaded.mask, real);
      body(cur, loaded, real);
      if (!more) return;
    }
  }
}

// p.a (c · log2 e) as the small kernels' pairs use it. Handed p.a, ptxas reloads the kernel
// parameter (an LDC) before nearly every pair: 28 to 35 times a thread at one feature. A value
// selected on s.len (never 0 for a block a thread computes) it cannot reload, so that stays in a
// register, provided the select is made once, before the loops over the block's rows (inside
// `if (j < s.len)` it folds back to p.a). kHeld where that pays (bench/gpu_tools/sass_loads.py --whole,
// bench/HISTORY.md): two features a thread, the forward 2-9% fewer instructions and the
// recomputing backward up to 3%; the persistent recomputing backward, up to 2.4%. The one-shot
// kernels at one feature a thread keep p.a: held, it cost the float32 forward a thread block per
// SM (40 -> 48 registers) and the recomputing backward of direction "backward" 3% more
// instructions (builds with it held everywhere). Those read p.a at each use, through
// operator()'s p, as before: even a local copy of it changed their registers.
template <bool kHeld, typename T, typename A>
struct SmallScale {
  A held;
  __device__ __forceinline__ SmallScale(const Args<T, A>& p, const SmallIndex& s)
      : held(s.len > 0 ? p.a : A(0)) {}
  __device__ __forceinline__ A operator()(const Args<T, A>& p) const {
    return kHeld ? held : p.a;
  }
};

// forward_small's work on one block: out (and lse, when wanted; never under kDense) of its
// rows, from the rows of dep, value and head. kRcpSteps > 0 (float accumulation): each row's
// acc / sum takes 1 / sum from reciprocal_newton<kRcpSteps> on the FMA pipe rather than from
// the special-function unit (KernelOptions::small_fma_reciprocal). kStaged (dense only):
// p.out is the shared tile of forward_small_staged and s.at the thread's feature in it.
template <typename T, typename A, Direction D, bool kFixed, int V, bool kDense, int kRcpSteps = 0,
          bool kStaged = false>
__device__ __forceinline__ void forward_small_block(const Args<T, A>& p, const SmallIndex& s,
                                                    const SmallLoads<T, V, 3>& in,
                                                    const bool (&real)[kSmallMax]) {
  static_assert(kRcpSteps == 0 || std::is_same_v<A, float>);
  static_assert(!kStaged || kDense);
  Pack<T, V> out[kSmallMax];
  const SmallScale<V == 2, T, A> scale(p, s);
  T* const out_first = output_first<kStaged>(p.out, s.at);
  A* const lse_first = !kDense && p.lse ? first_row(p.lse, s.at) : nullptr;
#pragma unroll
  for (int f = 0; f < V; ++f) {  // each feature's softmaxes in turn
    A xk[kSmallMax], xq[kSmallMax], v[kSmallMax];
    small_block_values(p, in, f, xk, v, xq);
#pragma unroll
    for (int jj = 0; jj < kSmallMax; ++jj) {
      const int j = small_query<D>(jj);
      if (j < s.len) {
        Softmax<A, kFixed> sm;
        sm.init(scale(p));
        if (real[j]) {
#pragma unroll
          for (int i = 0; i < kSmallMax; ++i) {
            if (pair_ok<D>(i, j) && real[i]) sm.add(tanh_fast(xk[i] + xq[j]), v[i], scale(p));
          }
        }
        // Dense: known for each (unrolled) query, so the sum is not tested: 8-24 instructions
        // fewer a thread, and float32's forward in direction "forward" 40 -> 32 registers.
        const bool has_keys = kDense ? has_key_in_whole_block<D>(j) : sm.has_keys();
        if constexpr (kRcpSteps > 0) {
          out[j].x[f] =
              static_cast<T>(has_keys ? sm.acc * reciprocal_newton<kRcpSteps>(sm.sum) : A(0));
        } else {
          out[j].x[f] = static_cast<T>(has_keys ? sm.out() : A(0));
        }
        // The last feature completes the row's pack: stored at once, as at V = 1.
        if (f == V - 1) store_row<kStaged, V>(out_first, small_offset(p, j), out[j]);
        if (lse_first != nullptr) {
          store_output(lse_first + small_offset(p, j) + f, has_keys ? sm.lse() : pos_inf<A>());
        }
      }
    }
  }
}

// Thread blocks per SM that forward_small's registers must allow (0: no bound), in directions
// "forward" and "backward" (Bi-BloSA's) at one feature a thread. Persistent, it took 80 to 101
// registers unbounded, and 3 blocks of 256 threads fit only at <= 80: bounded, it fits in 80
// with no spill (`bench/gpu_tools/sass_loads.py --whole`: stack 0). "diag" and "all" (twice the pairs)
// spilled 54-106 bytes when bounded (a build with the bound edited), so they are not. The
// 16-bit dense kernel with its loads first (kLoadsFirst) took 40 registers in direction
// "forward" unbounded, the plain one 32: bounded to 8 blocks (32), it has no spill; float32's
// spilled 8 bytes bounded, so it has no bound: 40 registers (6 blocks) in direction "backward",
// 32 in "forward" since has_key_in_whole_block (bounded, "backward" still spills 8 bytes).
template <typename T, Direction D, int V, bool kPersistent, bool kLoadsFirst>
constexpr int kForwardSmallBlocksPerSM =
    V != 1 || !(D == Direction::kForward || D == Direction::kBackward) ? 0
    : kPersistent                                                     ? 3
    : kLoadsFirst && sizeof(T) == 2                                   ? 8
                                                                      : 0;

// kDense: the call has no mask, every block kSmallMax tokens, and wants no lse (small_dense
// in dispatch.h). kLoadsFirst: for_small_blocks'. kRcpSteps: forward_small_block's.
template <typename T, typename A, Direction D, bool kFixed, int V, bool kPersistent,
          bool kDense = false, bool kLoadsFirst = false, int kRcpSteps = 0>
__global__ void __launch_bounds__(kSmallThreads,
                                  (kForwardSmallBlocksPerSM<T, D, V, kPersistent, kLoadsFirst>))
    forward_small(const Args<T, A> p) {
  for_small_blocks<D, V, kPersistent, kDense, kLoadsFirst, false>(
      p, {p.dep, p.value, p.head},
      [&](const SmallIndex& s, const SmallLoads<T, V, 3>& in, const bool(&real)[kSmallMax]) {
        forward_small_block<T, A, D, kFixed, V, kDense, kRcpSteps>(p, s, in, real);
      });
}

// Newton steps of the reciprocal in forward_small for outputs of type T
// (KernelOptions::small_fma_reciprocal): 2 for bfloat16's 8-bit significand (relative error
// 1.1e-4 against its half unit in the last place, 2^-8 = 3.9e-3), 3 for float16 and float.
template <typename T>
constexpr int kReciprocalSteps = std::numeric_limits<T>::digits <= 8 ? 2 : 3;

// backward_small's work on one block, from the rows of dep, value, head, grad_out and the saved
// out (SmallLoads) and the saved lse, which it loads first. Writes d_dep, d_head, d_value and
// the block's d_head sum (d_bias's part; z = dep_i + head_j + bias, so d_bias = sum of d_head),
// summed unrounded here so that the caller adds r times fewer numbers, none of them rounded
// to T.
template <typename T, typename A, Direction D>
__device__ __forceinline__ void backward_small_block(const Args<T, A>& p, const SmallIndex& s,
                                                     const SmallLoads<T, 1, 5>& in,
                                                     const bool (&real)[kSmallMax]) {
  const A* const lse_first = first_row(p.lse_in, s.at);
  A lse[kSmallMax];
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) {  // in flight with the rows, before any is used
    lse[i] = load_input(lse_first + small_offset(p, small_row(s, i)));
    pin(lse[i]);
  }
  A xk[kSmallMax], xq[kSmallMax], v[kSmallMax], g[kSmallMax], o[kSmallMax], l2[kSmallMax];
  A dd[kSmallMax], dv[kSmallMax];
  A d_bias = A(0);  // this block's d_head summed, for d_bias
  small_block_values(p, in, 0, xk, v, xq);
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) {
    // A padding row's saved values are never used, and its d_head is head_grad(g = 0, ...) = 0
    // whatever its grad_out holds.
    g[i] = real[i] ? static_cast<A>(in.rows[kGrad][i].x[0]) : A(0);
    o[i] = real[i] ? static_cast<A>(in.rows[kOut][i].x[0]) : A(0);
    l2[i] = real[i] ? lse[i] * static_cast<A>(kLog2e) : A(0);
    dd[i] = dv[i] = A(0);
  }
  T* const d_head_first = first_row(p.d_head, s.at);
#pragma unroll
  for (int jj = 0; jj < kSmallMax; ++jj) {
    const int j = small_query<D>(jj);
    if (j < s.len) {
      A ha = A(0), hs = A(0), hr = A(0);  // head_grad sums
      if (real[j]) {
#pragma unroll
        for (int i = 0; i < kSmallMax; ++i) {
          if (pair_ok<D>(i, j) && real[i]) {
            const A t = tanh_fast(xk[i] + xq[j]);
            const A pr = shifted_exp2(t, p.a, l2[j]);
            head_grad_accumulate(pr, v[i], o[j], t, ha, hs, hr);
            dd[i] += grad_z(pr, g[j], v[i], o[j], t);
            dv[i] += pr * g[j];
          }
        }
      }
      const A dh = head_grad(g[j], ha, hs, hr);
      store_element(d_head_first, small_offset(p, j), static_cast<T>(dh));
      d_bias += dh;
    }
  }
  T* const d_dep_first = first_row(p.d_dep, s.at);
  T* const d_value_first = first_row(p.d_value, s.at);
#pragma unroll
  for (int i = 0; i < kSmallMax; ++i) {
    if (i < s.len) {
      store_element(d_dep_first, small_offset(p, i), static_cast<T>(dd[i]));
      store_element(d_value_first, small_offset(p, i), static_cast<T>(dv[i]));
    }
  }
  if (p.d_bias_part != nullptr) p.d_bias_part[s.bb * p.d + s.k] = d_bias;
}

template <typename T, typename A, Direction D>
__global__ void __launch_bounds__(kSmallThreads) backward_small(const Args<T, A> p) {
  for_small_blocks<D, 1, false, false, false, false>(
      p, {p.dep, p.value, p.head, p.grad_out, p.out_in},
      [&](const SmallIndex& s, const SmallLoads<T, 1, 5>& in, const bool(&real)[kSmallMax]) {
        backward_small_block<T, A, D>(p, s, in, real);
      });
}

// backward_small for a forward that saved neither out nor lse (blocks of at most
// kRecomputeMaxBlock tokens, csrc/op_checks.h). Each query's softmax is recomputed from its
// keys: the pairs' t and unnormalized p are computed once, kept in registers, summed, and
// reused by the gradient loop, so a pair still costs one tanh and one exp (and a query one
// reciprocal), while the kernel reads grad_out, dep, head and value only: no out, no lse.
// The gradients take each pair's unnormalized weight and the query's g / sum
// (recomputed_pair_grad_accumulate): the recomputed output needs no correction for d_head.
// kFixed picks the pivot as forward_small's does; V is its vector width too; kHeldScale is
// SmallScale's choice, kHeldStride small_offset's kHeld. Like backward_small it writes the
// block's d_head sums for d_bias. kStaged (dense only): p.d_dep, p.d_head and p.d_value are
// the shared tiles of backward_small_staged and s.at the thread's feature in them, and the
// block's sums go to block_sums (that kernel adds them up over its blocks).
template <typename T, typename A, Direction D, bool kFixed, int V, bool kHeldScale,
          bool kHeldStride, bool kDense, bool kStaged = false>
__device__ __forceinline__ void backward_small_recompute_block(
    const Args<T, A>& p, const SmallIndex& s, const SmallLoads<T, V, 4>& in,
    const bool (&real)[kSmallMax], A* block_sums = nullptr) {
  static_assert(!kStaged || kDense);
  Pack<T, V> d_dep[kSmallMax], d_value[kSmallMax], d_head[kSmallMax];
  T* const d_dep_first = output_first<kStaged>(p.d_dep, s.at);
  T* const d_head_first = output_first<kStaged>(p.d_head, s.at);
  T* const d_value_first = output_first<kStaged>(p.d_value, s.at);
  const SmallScale<kHeldScale, T, A> scale(p, s);
#pragma unroll
  for (int f = 0; f < V; ++f) {  // each feature's softmaxes and gradients in turn
    A xk[kSmallMax], xq[kSmallMax], v[kSmallMax], g[kSmallMax];
    A dd[kSmallMax], dv[kSmallMax];
    A d_bias = A(0);  // this block's d_head summed, for d_bias
    small_block_values(p, in, f, xk, v, xq);
#pragma unroll
    for (int i = 0; i < kSmallMax; ++i) {
      // a padding row passes no gradient
      g[i] = real[i] ? static_cast<A>(in.rows[kGrad][i].x[f]) : A(0);
      dd[i] = dv[i] = A(0);
    }
#pragma unroll
    for (int jj = 0; jj < kSmallMax; ++jj) {
      const int j = small_query<D>(jj);
      if (j < s.len) {
        A dh = A(0);
        if (real[j]) {
          A t[kSmallMax], e[kSmallMax];
          A m2 = kFixed ? scale(p) : -scale(p);  // the pivot (log2 domain): c, or the largest score
#pragma unroll
          for (int i = 0; i < kSmallMax; ++i) {
            if (pair_ok<D>(i, j) && real[i]) {
              t[i] = tanh_fast(xk[i] + xq[j]);
              if constexpr (!kFixed) {
                const A s2 = scale(p) * t[i];
                m2 = s2 > m2 ? s2 : m2;
              }
            }
          }
          A sum = A(0), acc = A(0);
#pragma unroll
          for (int i = 0; i < kSmallMax; ++i) {
            if (pair_ok<D>(i, j) && real[i]) {
              e[i] = shifted_exp2(t[i], scale(p), m2);
              softmax_accumulate(e[i], v[i], sum, acc);
            }
          }
          // sum > 0 exactly when the query has a key (each e >= 2^-116, see FixedPivotLimit);
          // dense, that is known for each (unrolled) query, as in forward_small_block.
          const bool has_keys = kDense ? has_key_in_whole_block<D>(j) : sum > A(0);
          const A inv_sum = has_keys ? A(1) / sum : A(0);
          const A o = acc * inv_sum;
          const A gs = g[j] * inv_sum;
          A a = A(0);
#pragma unroll
          for (int i = 0; i < kSmallMax; ++i) {
            if (pair_ok<D>(i, j) && real[i]) {
              recomputed_pair_grad_accumulate(e[i], t[i], v[i], o, gs, a, dd[i], dv[i]);
            }
          }
          dh = a * gs;
        }
        d_head[j].x[f] = static_cast<T>(dh);
        // The last feature completes the row's pack: stored at once, as at V = 1.
        if (f == V - 1) {
          store_row<kStaged, V>(d_head_first, small_offset<kHeldStride>(p, j), d_head[j]);
        }
        d_bias += dh;
      }
    }
#pragma unroll
    for (int i = 0; i < kSmallMax; ++i) {
      d_dep[i].x[f] = static_cast<T>(dd[i]);
      d_value[i].x[f] = static_cast<T>(dv[i]);
      if (f == V - 1 && i < s.len) {
        store_row<kStaged, V>(d_dep_first, small_offset<kHeldStride>(p, i), d_dep[i]);
        store_row<kStaged, V>(d_value_first, small_offset<kHeldStride>(p, i), d_value[i]);
      }
    }
    if constexpr (kStaged) {
      block_sums[f] = d_bias;
    } else if (p.d_bias_part != nullptr) {
      p.d_bias_part[s.bb * p.d + s.k + f] = d_bias;
    }
  }
}

// kDense: the call has no mask and every block kSmallMax tokens (small_dense in dispatch.h).
// kLoadsFirst: for_small_blocks'; such a kernel also addresses its rows from d held in a
// register (small_offset's kHeld).
template <typename T, typename A, Direction D, bool kFixed, int V, bool kPersistent,
          bool kDense = false, bool kLoadsFirst = false>
__global__ void __launch_bounds__(kSmallThreads) backward_small_recompute(const Args<T, A> p) {
  for_small_blocks<D, V, kPersistent, kDense, kLoadsFirst, kLoadsFirst>(
      p, {p.dep, p.value, p.head, p.grad_out},
      [&](const SmallIndex& s, const SmallLoads<T, V, 4>& in, const bool(&real)[kSmallMax]) {
        backward_small_recompute_block<T, A, D, kFixed, V, V == 2 || kPersistent, kLoadsFirst,
                                       kDense>(p, s, in, real);
      });
}

}  // namespace blosa::cuda
