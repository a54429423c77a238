// CUDA kernels of masked_block_attn (forward and backward). dispatch.h picks the kernel and its
// launch; masked_block_attn_cuda.cu launches it; the per-element math is csrc/blosa_math.h,
// shared with the CPU.
//
// Every (query j, feature k) is an independent 1-D softmax over the keys i of j's block, so a
// thread owns one feature k and a few queries (or keys) and loops over the rest in registers:
// no shared memory, no atomics, every sum in a fixed order (deterministic backward), and extra
// memory O(B·n·d) (out, lse, gradients). (fused_backward.cuh is the one kernel that trades
// this for fewer special-function ops: its warps share partial sums through shared memory.)
// tests/cuda_emulation/ runs all of them exactly on the CPU, thread by thread, in every CI
// run. Lanes of a warp hold consecutive features, so every load and store is coalesced along
// d. Two layouts:
//
//  * small blocks (r <= kSmallMax): one thread per (batch, block, feature) holds the whole
//    block in registers; the (query, key) pairs are unrolled at compile time for the direction,
//    so only allowed pairs cost a tanh and an exp. These kernels are memory-bound (each input
//    is read once, each output written once, no zero-fill pass). A differentiable call's
//    forward writes no lse here, and backward_small_recompute recomputes out and lse from the
//    block it holds (no tanh or exp more, and two [B, n, d] reads fewer); backward_small reads
//    a saved out and lse, where a caller of the forward op asked for them. Calls with no mask
//    and whole blocks of kSmallMax take those two compiled with kDense, which know the block
//    length and that no row is padding (small_dense in dispatch.h); staged_small.cuh runs the
//    same block math on rows a thread block copies through shared memory as 16-byte vectors.
//  * larger blocks (full DiSA included): a warp owns a tile of kT consecutive queries of one
//    block for 32 features (kT = 4 or 8, a template argument the launcher picks) and
//    streams the block's keys through L1 (the kWarps warps of a thread block share their
//    keys). Keys allowed to every query of the tile take the fast unpredicated path; only the
//    <= kT keys on the tile's diagonal are tested per pair.
//    Backward runs two such kernels: one per query tile (d_head) and one per key tile (d_dep,
//    d_value), each recomputing p = exp(s - lse); or, with BLOSA_CUDA_BACKWARD=fused, the one
//    kernel of fused_backward.cuh.
//
// d_head is g · (a - r·s) (head_grad in blosa_math.h): float sums over the query's keys that
// correct the saved output o by r = sum_i p (v_i - o). For float16/bfloat16, o is rounded to the
// input dtype, and that rounding would survive the cancellation in sum_i p (v_i - o) (1 - t²).
// d_dep and d_value use the saved o as is (no such cancellation on the key side).
//
// Scores are bounded (|s| <= c), so for c <= 40 the softmax uses the constant pivot c: one
// tanh and one exp per element (KERNEL_NOTES.md §1); larger scales use a running maximum.
// float/half/bfloat16 accumulate in float with tanh.approx / ex2.approx (see blosa_math.h for
// their error); double uses the exact functions (for gradcheck).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "../blosa_math.h"

namespace blosa::cuda {

constexpr int kSmallMax = 8;         // longest block of the register-resident kernels
constexpr int kSmallThreads = 256;   // threads per block of those kernels
constexpr int kWarps = 8;            // warps per thread block in the tiled kernels

// a * b / 2^32 of 32-bit unsigned integers.
__device__ __forceinline__ uint32_t umulhi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

// n / divisor for a divisor fixed at launch, in a multiply-high, an add and a shift (Granlund
// and Montgomery's method, as PyTorch's IntDivider): exact for n < 2^31. The small kernels'
// thread index took three 64-bit divisions, a long instruction sequence (with a MUFU.RCP
// each) beside a thread's 28 pairs at r = 8.
struct FastDivisor {
  uint32_t magic = 1, shift = 0;

  static FastDivisor of(uint32_t divisor) {  // host side; divisor >= 1
    FastDivisor f;
    while ((uint64_t(1) << f.shift) < divisor) ++f.shift;
    // < 2^32, since 2^shift < 2 · divisor.
    f.magic = static_cast<uint32_t>(
        ((uint64_t(1) << 32) * ((uint64_t(1) << f.shift) - divisor)) / divisor + 1);
    return f;
  }

  // t <= n, so t + n < 2^32 for n < 2^31.
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    return (umulhi32(n, magic) + n) >> shift;
  }
};

// Everything a kernel needs; pointers not used by a kernel are null. All tensors are
// contiguous [B, n, d] (bias [d], mask [B, n]); lse is float (double for double inputs).
template <typename T, typename A>
struct Args {
  using Scalar = T;
  using Accumulator = A;
  const T* dep;
  const T* head;
  const T* value;
  const T* bias;      // null: zeros
  const bool* mask;   // null: all real
  const T* grad_out;  // backward inputs
  const T* out_in;
  const A* lse_in;
  T* out;             // forward outputs
  A* lse;             // null: not written (no gradient wanted)
  T* d_dep;           // backward outputs
  T* d_head;
  T* d_value;
  A* d_bias_part;     // small blocks: d_head summed over each block's queries, unrounded,
                      // [B · nblocks, d] (null: not wanted); the caller sums it over blocks
  int64_t B, n, d;
  int64_t r;          // resolved block length, 1 <= r <= n
  int64_t nblocks;    // ceil(n / r)
  Direction dir;
  A c, inv_c, a;      // scale, 1 / scale, scale * log2(e)
  // The small kernels' thread index (with_small_index in dispatch.h): when index32, every
  // thread index is below 2^31 and divides by these, else by 64-bit division.
  bool index32;
  FastDivisor groups_div, nblocks_div;  // by d / V, by nblocks
};

template <typename A>
__device__ __forceinline__ A pos_inf() {
  return std::numeric_limits<A>::infinity();
}


// Keeps a loaded value's load where the source puts it: an empty asm that reads and writes x's
// bits, so the compiler cannot sink the load into the branch that uses it (it did, and undid
// the early loads of stream_rows and of the small kernels). Emits no instruction and no wait.
// A 16-bit value goes through a 32-bit register: pinned as 16 bits ("h"), the compiler packed
// two of them into one register, and the packing instruction (PRMT) waited for the load right
// after it (the float16/bfloat16 diagonal loops then read a row a few instructions after its
// load, even two rows ahead).
template <typename V>
__device__ __forceinline__ void pin(V& x) {
#if defined(__CUDA_ARCH__)
  static_assert(sizeof(V) == 2 || sizeof(V) == 4 || sizeof(V) == 8);
  if constexpr (sizeof(V) == 2) {
    unsigned short half_bits;
    memcpy(&half_bits, &x, 2);
    unsigned int bits = half_bits;
    asm volatile("" : "+r"(bits));
    half_bits = static_cast<unsigned short>(bits);
    memcpy(&x, &half_bits, 2);
  } else if constexpr (sizeof(V) == 4) {
    unsigned int bits;
    memcpy(&bits, &x, 4);
    asm volatile("" : "+r"(bits));
    memcpy(&x, &bits, 4);
  } else {
    unsigned long long bits;
    memcpy(&bits, &x, 8);
    asm volatile("" : "+l"(bits));
    memcpy(&x, &bits, 8);
  }
#endif
}

// A row's mask byte as an int (nonzero: real), tested only where it is used.
__device__ __forceinline__ int mask_byte(const bool* mask, int64_t row) {
  return mask == nullptr ? 1 : reinterpret_cast<const unsigned char*>(mask)[row];
}

__device__ __forceinline__ bool is_real(const bool* mask, int64_t row) {
  return mask_byte(mask, row) != 0;
}

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
// is scheduled as "forward" is (bench/sass_loads.py --whole, bench/RESULTS.md). A query's own
// sums do not depend on the order; the keys' gradient sums over queries run in this order.
template <Direction D>
__device__ constexpr int small_query(int jj) {
  return D == Direction::kBackward ? kSmallMax - 1 - jj : jj;
}

// Run-time rule: may query j attend key i of the block [start, end)?
__device__ __forceinline__ bool pair_allowed(Direction dir, int64_t i, int64_t j, int64_t start,
                                             int64_t end) {
  int64_t lo, hi;
  key_range(dir, j, start, end, &lo, &hi);
  return i >= lo && i < hi && !(skips_self(dir) && i == j);
}

// The rule seen from the key side: the queries that attend key i are the keys of i under it.
__host__ __device__ constexpr Direction transposed(Direction dir) {
  return dir == Direction::kForward    ? Direction::kBackward
         : dir == Direction::kBackward ? Direction::kForward
                                       : dir;
}

// Per-query softmax state in the log2 domain. Fixed pivot: m2 = c·log2(e) throughout.
template <typename A, bool kFixed>
struct Softmax {
  A m2, sum, acc;
  __device__ __forceinline__ void init(A a) {
    m2 = kFixed ? a : -a;  // running max starts at -c, a lower bound of every score
    sum = A(0);
    acc = A(0);
  }
  __device__ __forceinline__ void add(A t, A v, A a) {
    if constexpr (kFixed) {
      softmax_accumulate(shifted_exp2(t, a, a), v, sum, acc);
    } else {
      online_softmax_update_exp2(a * t, v, m2, sum, acc);
    }
  }
  // Whether any key was added: sum >= 2^-116 then with the fixed pivot (FixedPivotLimit), and
  // >= 1 with a running maximum (its key adds exp2(0)); a NaN sum counts, so NaN propagates.
  __device__ __forceinline__ bool has_keys() const { return sum != A(0); }
  __device__ __forceinline__ A out() const { return acc / sum; }
  __device__ __forceinline__ A lse() const { return log_sum_exp2(m2, sum); }
};

// Rows as loaded (KeyLoad, QueryLoad) hold the raw inputs, and their mask byte travels beside
// them (mask_byte). The kernels load rows ahead of their use (stream_rows, and the small
// kernels' load loops) and convert them where they use them (key_values, query_values):
// converting at the load would wait for the load right there.

// One key row as loaded: dep and value.
template <typename T>
struct KeyLoad {
  T dep, value;
  __device__ __forceinline__ void pin_loads() {
    pin(dep);
    pin(value);
  }
};

// A key row's values as the kernels use them: xk = dep / c, and value.
template <typename A>
struct KeyRow {
  A xk, v;
};

template <typename T, typename A>
__device__ __forceinline__ KeyLoad<T> load_key(const Args<T, A>& p, int64_t row, int64_t k) {
  const int64_t off = row * p.d + k;
  return {p.dep[off], p.value[off]};
}

template <typename T, typename A>
__device__ __forceinline__ KeyRow<A> key_values(const Args<T, A>& p, const KeyLoad<T>& raw) {
  return {static_cast<A>(raw.dep) * p.inv_c, static_cast<A>(raw.value)};
}

// xq = (head + bias) / c of a query row.
template <typename T, typename A>
__device__ __forceinline__ A query_x(const Args<T, A>& p, T head, A qbias) {
  return (static_cast<A>(head) + qbias) * p.inv_c;
}

// One query row as loaded for the backward kernels: head, grad_out, the saved output and lse.
// A padding row's values are loaded (the rows exist) but never used.
template <typename T, typename A>
struct QueryLoad {
  T head, grad_out, out;
  A lse;
  __device__ __forceinline__ void pin_loads() {
    pin(head);
    pin(grad_out);
    pin(out);
    pin(lse);
  }
};

// A query row's values as the backward kernels use them: xq, the upstream gradient g, the
// saved output o, and the saved lse in base 2.
template <typename A>
struct QueryRow {
  A xq, g, o, l2;
};

template <typename T, typename A>
__device__ __forceinline__ QueryLoad<T, A> load_query(const Args<T, A>& p, int64_t row,
                                                      int64_t k) {
  const int64_t off = row * p.d + k;
  return {p.head[off], p.grad_out[off], p.out_in[off], p.lse_in[off]};
}

template <typename T, typename A>
__device__ __forceinline__ QueryRow<A> query_values(const Args<T, A>& p,
                                                    const QueryLoad<T, A>& raw, A qbias) {
  return {query_x(p, raw.head, qbias), static_cast<A>(raw.grad_out), static_cast<A>(raw.out),
          raw.lse * static_cast<A>(kLog2e)};
}

// ---------------------------------------------------------------------------------------------
// Small blocks: one thread per (batch, block, V consecutive features); grid covers
// B · nblocks · d / V threads, or, for the persistent forward_small and
// backward_small_recompute, what the GPU holds at once, each thread looping over several
// (for_small_blocks). V (1 or 2) is the vector width of those two (dispatch.h picks it and
// whether they are persistent); backward_small has V = 1.
// ---------------------------------------------------------------------------------------------

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
// streams; bench/RESULTS.md). Callers check d % V == 0 and the pointers' alignment.
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
// DRAM bandwidth, most stalls on loads; bench/RESULTS.md). Rows past a short last block
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
// every tensor, a chain of integer instructions per row and tensor (bench/RESULTS.md, "Fewer
// instructions in the small-block kernels").
// kHeld: with d held in an ordinary register (held_in_register), so that the row offsets
// i · d are ordinary registers too and each row's address is one IMAD.WIDE; from the uniform d
// ptxas builds every offset in the uniform datapath and adds it to the row pointer in two IADD3
// (the recomputing backward with its loads first: 4-7% fewer instructions, the same registers;
// bench/RESULTS.md). Not everywhere: in other small kernels it cost registers (dense
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
// warp's instructions against the general kernel's 13.4, Nsight Compute, bench/RESULTS.md). A
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
// 23-41% of an H200's bandwidth with most stalls on global loads (bench/RESULTS.md).
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
      // edge, after this block's math (checked in the SASS: bench/sass_loads.py).
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
// `if (j < s.len)` it folds back to p.a). kHeld where that pays (bench/sass_loads.py --whole,
// bench/RESULTS.md): two features a thread, the forward 2-9% fewer instructions and the
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
// with no spill (`bench/sass_loads.py --whole`: stack 0). "diag" and "all" (twice the pairs)
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

// ---------------------------------------------------------------------------------------------
// Tiled kernels: block (32, kWarps), grid (ceil(tiles / kWarps), ceil(d / 32)). Warp w of
// grid.x index X owns tile X·kWarps + w; a tile is kT consecutive rows (queries, or keys in
// backward_key_tiled) of one block, for the 32 features of grid.y.
// ---------------------------------------------------------------------------------------------

struct Tile {
  int64_t base;        // b · n
  int64_t start, end;  // the block [start, end)
  int64_t j0;          // first row of the tile
  int nq;              // rows in the tile, 1..kT
};

// `heavy_last`: later tiles of a block have more work (queries under "forward"); they are then
// numbered first so the grid ends on light tiles (shorter tail).
template <int kT>
__device__ __forceinline__ bool tile_at(int64_t n, int64_t r, int64_t nblocks,
                                        int64_t tiles_per_block, int64_t total, bool heavy_last,
                                        Tile& t) {
  const int64_t idx = int64_t(blockIdx.x) * kWarps + threadIdx.y;
  if (idx >= total) return false;
  const int64_t bb = idx / tiles_per_block;
  int64_t ti = idx - bb * tiles_per_block;
  if (heavy_last) ti = tiles_per_block - 1 - ti;
  t.start = (bb % nblocks) * r;
  t.end = min(t.start + r, n);
  t.j0 = t.start + ti * kT;
  if (t.j0 >= t.end) return false;  // the last block is shorter
  t.nq = static_cast<int>(min(int64_t(kT), t.end - t.j0));
  t.base = (bb / nblocks) * n;
  return true;
}

// Keys of the block as seen by the tile's rows [j0, j0 + nq): the "full" ranges hold keys that
// every row of the tile may attend, the edge range the keys to test pair by pair.
struct Ranges {
  int64_t f1_lo, f1_hi, f2_lo, f2_hi, e_lo, e_hi;
};

__device__ __forceinline__ Ranges ranges_of(Direction dir, const Tile& t) {
  Ranges g{t.start, t.start, t.end, t.end, t.j0, t.j0};  // all empty
  switch (dir) {
    case Direction::kForward:  // keys [start, j): all rows take [start, j0)
      g.f1_hi = t.j0;
      g.e_hi = t.j0 + t.nq - 1;
      break;
    case Direction::kBackward:  // keys [j + 1, end): all rows take [j0 + nq, end)
      g.f1_lo = t.j0 + t.nq;
      g.f1_hi = t.end;
      g.e_lo = t.j0 + 1;
      g.e_hi = t.j0 + t.nq;
      break;
    case Direction::kDiag:  // every key but j
      g.f1_hi = t.j0;
      g.f2_lo = t.j0 + t.nq;
      g.e_hi = t.j0 + t.nq;
      break;
    default:  // kAll
      g.f1_hi = t.end;
      break;
  }
  return g;
}

// Streams rows [lo, hi) of the sequence whose first row is `base`: use(i, row) for each real
// row i, where row = load(base + i) is the row as loaded (KeyLoad, QueryLoad), held in
// registers with its mask byte. Row i + 2 is loaded before row i's math runs, so its latency
// hides behind the math of two rows: with no rows ahead, Nsight Compute showed the tiled
// kernels waiting on L1 loads for over half of their cycles at 4 warps per scheduler
// (bench/RESULTS.md). The rows all exist, so the last one is loaded again rather than tested.
//
// Why two rows ahead: the loads are pinned (pin_loads) where they are issued, else the compiler
// sinks them into the branch that uses them, but ptxas still moves a load past one branch on a
// row's mask. One row ahead, with the loop unrolled by two, it issued every other row's loads 12
// instructions before their use (SASS of forward_tiled, sm_90). Two ahead, every row's loads
// are issued at least one row's math (34 to 125 instructions) before their first use, which
// tests/test_cuda_schedule.py checks on the build.
template <typename Load, typename Use>
__device__ __forceinline__ void stream_rows(const bool* mask, int64_t base, int64_t lo,
                                            int64_t hi, Load&& load, Use&& use) {
  if (lo >= hi) return;
  auto next = load(base + lo);
  int next_real = mask_byte(mask, base + lo);
  auto after = load(base + min(lo + 1, hi - 1));
  int after_real = mask_byte(mask, base + min(lo + 1, hi - 1));
  for (int64_t i = lo; i < hi; ++i) {
    const auto row = next;
    const int real = next_real;
    next = after;
    next_real = after_real;
    const int64_t following = base + min(i + 2, hi - 1);
    after = load(following);
    after_real = mask_byte(mask, following);
    after.pin_loads();
    pin(after_real);
    if (real != 0) use(i, row);
  }
}

template <typename T, typename A, bool kFixed, int kT>
__global__ void __launch_bounds__(kWarps * 32)
    forward_tiled(const Args<T, A> p, int64_t tiles_per_block, int64_t total) {
  Tile t;
  if (!tile_at<kT>(p.n, p.r, p.nblocks, tiles_per_block, total, p.dir == Direction::kForward, t))
    return;
  const int64_t k = int64_t(blockIdx.y) * 32 + threadIdx.x;
  if (k >= p.d) return;
  const A qbias = p.bias ? static_cast<A>(p.bias[k]) : A(0);
  A xq[kT];
  Softmax<A, kFixed> sm[kT];
  int keys[kT];
  bool real[kT];
  bool any_real = false;
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    real[q] = false;
    xq[q] = A(0);
    if (q < t.nq) {
      real[q] = is_real(p.mask, t.base + t.j0 + q);
      xq[q] = query_x(p, p.head[(t.base + t.j0 + q) * p.d + k], qbias);
    }
    sm[q].init(p.a);
    keys[q] = 0;
    any_real |= real[q];
  }
  if (any_real) {
    const Ranges g = ranges_of(p.dir, t);
    int full = 0;  // real keys that every row of the tile attends
    const auto key_at = [&](int64_t row) { return load_key(p, row, k); };
    const auto every_row = [&](int64_t, const KeyLoad<T>& raw) {
      ++full;
      const KeyRow<A> key = key_values(p, raw);
#pragma unroll
      for (int q = 0; q < kT; ++q) {
        sm[q].add(tanh_fast(key.xk + xq[q]), key.v, p.a);
      }
    };
    stream_rows(p.mask, t.base, g.f1_lo, g.f1_hi, key_at, every_row);
    stream_rows(p.mask, t.base, g.f2_lo, g.f2_hi, key_at, every_row);
    const auto allowed_rows = [&](int64_t i, const KeyLoad<T>& raw) {  // pair by pair
      const KeyRow<A> key = key_values(p, raw);
#pragma unroll
      for (int q = 0; q < kT; ++q) {
        if (q < t.nq && pair_allowed(p.dir, i, t.j0 + q, t.start, t.end)) {
          ++keys[q];
          sm[q].add(tanh_fast(key.xk + xq[q]), key.v, p.a);
        }
      }
    };
    stream_rows(p.mask, t.base, g.e_lo, g.e_hi, key_at, allowed_rows);  // the <= kT diagonal keys
#pragma unroll
    for (int q = 0; q < kT; ++q) keys[q] += full;
  }
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    if (q < t.nq) {
      const int64_t off = (t.base + t.j0 + q) * p.d + k;
      const bool has_keys = real[q] && keys[q] > 0;
      p.out[off] = static_cast<T>(has_keys ? sm[q].out() : A(0));
      if (p.lse != nullptr) p.lse[off] = has_keys ? sm[q].lse() : pos_inf<A>();
    }
  }
}

// d_head: per query tile, the head_grad sums (ha, hs, hr) over its keys. Rows of the tile that
// are padding or past the block have o = l2 = 0 and are never written back, so their (finite or
// not) sums do not matter; a real row with an allowed real key has a finite lse.
template <typename T, typename A, int kT>
__global__ void __launch_bounds__(kWarps * 32)
    backward_query_tiled(const Args<T, A> p, int64_t tiles_per_block, int64_t total) {
  Tile t;
  if (!tile_at<kT>(p.n, p.r, p.nblocks, tiles_per_block, total, p.dir == Direction::kForward, t))
    return;
  const int64_t k = int64_t(blockIdx.y) * 32 + threadIdx.x;
  if (k >= p.d) return;
  const A qbias = p.bias ? static_cast<A>(p.bias[k]) : A(0);
  const A log2e = static_cast<A>(kLog2e);
  A xq[kT], o[kT], l2[kT], ha[kT], hs[kT], hr[kT];
  bool real[kT];
  bool any_real = false;
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    real[q] = false;
    xq[q] = o[q] = l2[q] = ha[q] = hs[q] = hr[q] = A(0);
    if (q < t.nq) {
      const int64_t off = (t.base + t.j0 + q) * p.d + k;
      real[q] = is_real(p.mask, t.base + t.j0 + q);
      xq[q] = query_x(p, p.head[off], qbias);
      if (real[q]) {
        o[q] = static_cast<A>(p.out_in[off]);
        l2[q] = p.lse_in[off] * log2e;
      }
    }
    any_real |= real[q];
  }
  if (any_real) {
    const Ranges r = ranges_of(p.dir, t);
    const auto add_key = [&](int q, const KeyRow<A>& key) {
      const A th = tanh_fast(key.xk + xq[q]);
      head_grad_accumulate(shifted_exp2(th, p.a, l2[q]), key.v, o[q], th, ha[q], hs[q], hr[q]);
    };
    const auto key_at = [&](int64_t row) { return load_key(p, row, k); };
    const auto every_row = [&](int64_t, const KeyLoad<T>& raw) {
      const KeyRow<A> key = key_values(p, raw);
#pragma unroll
      for (int q = 0; q < kT; ++q) add_key(q, key);
    };
    stream_rows(p.mask, t.base, r.f1_lo, r.f1_hi, key_at, every_row);
    stream_rows(p.mask, t.base, r.f2_lo, r.f2_hi, key_at, every_row);
    const auto allowed_rows = [&](int64_t i, const KeyLoad<T>& raw) {  // pair by pair
      const KeyRow<A> key = key_values(p, raw);
#pragma unroll
      for (int q = 0; q < kT; ++q) {
        if (real[q] && pair_allowed(p.dir, i, t.j0 + q, t.start, t.end)) add_key(q, key);
      }
    };
    stream_rows(p.mask, t.base, r.e_lo, r.e_hi, key_at, allowed_rows);  // the <= kT diagonal keys
  }
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    if (q < t.nq) {
      const int64_t off = (t.base + t.j0 + q) * p.d + k;
      A dh = A(0);
      if (real[q]) dh = head_grad(static_cast<A>(p.grad_out[off]), ha[q], hs[q], hr[q]);
      p.d_head[off] = static_cast<T>(dh);
    }
  }
}

// d_dep, d_value: per key tile, sum over the queries that attend each key. Padding queries
// are skipped (their grad_out and lse are never read).
template <typename A, int kT>
__device__ __forceinline__ void dkey_one_query(const QueryRow<A>& query, A a, const A (&xk)[kT],
                                               const A (&v)[kT], A (&dd)[kT], A (&dv)[kT],
                                               const bool* allow) {
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    if (allow == nullptr || allow[q]) {
      const A th = tanh_fast(xk[q] + query.xq);
      const A pr = shifted_exp2(th, a, query.l2);
      dd[q] += grad_z(pr, query.g, v[q], query.o, th);
      dv[q] += pr * query.g;
    }
  }
}

template <typename T, typename A, int kT>
__global__ void __launch_bounds__(kWarps * 32)
    backward_key_tiled(const Args<T, A> p, int64_t tiles_per_block, int64_t total) {
  const Direction kdir = transposed(p.dir);  // which queries attend a key
  Tile t;  // here rows j0.. are keys
  if (!tile_at<kT>(p.n, p.r, p.nblocks, tiles_per_block, total, kdir == Direction::kForward, t))
    return;
  const int64_t k = int64_t(blockIdx.y) * 32 + threadIdx.x;
  if (k >= p.d) return;
  const A qbias = p.bias ? static_cast<A>(p.bias[k]) : A(0);
  A xk[kT], v[kT], dd[kT], dv[kT];
  bool real[kT];
  bool any_real = false;
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    real[q] = false;
    xk[q] = v[q] = dd[q] = dv[q] = A(0);
    if (q < t.nq) {
      real[q] = is_real(p.mask, t.base + t.j0 + q);
      const KeyRow<A> key = key_values(p, load_key(p, t.base + t.j0 + q, k));
      xk[q] = key.xk;
      v[q] = key.v;
    }
    any_real |= real[q];
  }
  if (any_real) {
    const Ranges r = ranges_of(kdir, t);
    const auto query_at = [&](int64_t row) { return load_query(p, row, k); };
    const auto every_key = [&](int64_t, const QueryLoad<T, A>& raw) {
      dkey_one_query(query_values(p, raw, qbias), p.a, xk, v, dd, dv, nullptr);
    };
    stream_rows(p.mask, t.base, r.f1_lo, r.f1_hi, query_at, every_key);
    stream_rows(p.mask, t.base, r.f2_lo, r.f2_hi, query_at, every_key);
    const auto allowed_keys = [&](int64_t j, const QueryLoad<T, A>& raw) {  // pair by pair
      bool allow[kT];
#pragma unroll
      for (int q = 0; q < kT; ++q) {
        allow[q] = q < t.nq && pair_allowed(p.dir, t.j0 + q, j, t.start, t.end);
      }
      dkey_one_query(query_values(p, raw, qbias), p.a, xk, v, dd, dv, allow);
    };
    stream_rows(p.mask, t.base, r.e_lo, r.e_hi, query_at, allowed_keys);  // the diagonal queries
  }
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    if (q < t.nq) {
      const int64_t off = (t.base + t.j0 + q) * p.d + k;
      p.d_dep[off] = static_cast<T>(real[q] ? dd[q] : A(0));
      p.d_value[off] = static_cast<T>(real[q] ? dv[q] : A(0));
    }
  }
}

}  // namespace blosa::cuda
