// Shared pieces of the CUDA kernels of masked_block_attn: their arguments (Args), the mask and
// direction rules, the per-query softmax state and the row loads. dispatch.h picks the kernel
// and its launch; masked_block_attn_cuda.cu launches it; the per-element math is
// csrc/blosa_math.h, shared with the CPU.
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
//  * small blocks (r <= kSmallMax): small_blocks.cuh, one thread per (batch, block, feature)
//    holding the whole block in registers; staged_small.cuh runs the same block math on rows
//    that a thread block copies through shared memory.
//  * larger blocks, full DiSA included: tiled.cuh, a warp per tile of consecutive queries (or
//    keys) of one block for 32 features, the block's other rows streaming past; the span
//    kernels of staged_forward.cuh and fused_backward.cuh stream them through shared memory.
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

}  // namespace blosa::cuda
