// Spans: the kWarps·kT consecutive rows of one sequence block that a thread block of the
// staged kernels holds (keys in backward_fused_tiled, queries in forward_staged), one warp per
// kT rows, for 32 features, while the rows they meet stream past through shared memory
// (stream_chunks).
#pragma once

#include "tiled.cuh"  // kWarps

namespace blosa::cuda {

// Rows in a span: kWarps warps of kT rows each.
template <int kT>
constexpr int64_t span_len() {
  return int64_t(kWarps) * kT;
}

// Span s of the block [start, end): its rows [lo, hi), and the rows [meet_lo, meet_hi) of the
// other side that meet any of them, where row x meets the rows key_range(rule, x) (pass the
// direction for a span of queries, which meet their keys, and transposed(direction) for a
// span of keys, which meet the queries that attend them). All empty when a short last block
// has fewer spans.
struct Span {
  int64_t lo, hi, meet_lo, meet_hi;
};

template <int kT>
__device__ __forceinline__ Span span_of(Direction rule, int64_t start, int64_t end, int64_t s) {
  Span sp{start + s * span_len<kT>(), 0, 0, 0};
  sp.hi = min(sp.lo + span_len<kT>(), end);
  if (sp.lo >= sp.hi) return {end, end, end, end};
  // The ranges move monotonically with the row, so the span's first and last rows bound them.
  int64_t lo, hi, unused;
  key_range(rule, sp.lo, start, end, &lo, &unused);
  key_range(rule, sp.hi - 1, start, end, &unused, &hi);
  sp.meet_lo = lo;
  sp.meet_hi = max(lo, hi);
  return sp;
}

// The rows i0 + q (q < kT) that row j meets under `rule` (key_range, and not itself under
// "diag"), as bits, kept where `rows` has them (rows that exist and are real).
template <int kT>
__device__ __forceinline__ unsigned pair_bits(Direction rule, int64_t j, int64_t start,
                                              int64_t end, int64_t i0, unsigned rows) {
  int64_t lo, hi;
  key_range(rule, j, start, end, &lo, &hi);
  const int first = static_cast<int>(max(lo - i0, int64_t(0)));
  const int last = static_cast<int>(min(hi - i0, int64_t(kT)));  // one past
  if (first >= last) return 0u;
  unsigned bits = ((1u << last) - 1u) & ~((1u << first) - 1u);
  if (skips_self(rule) && j >= i0 && j < i0 + kT) bits &= ~(1u << (j - i0));
  return bits & rows;
}

// Whether every row of the chunk [c0, c0 + kWarps) meets all kT rows i0.. under `rule`, which
// must all exist and be real (`rows` has all kT bits): then the chunk needs no test per row.
// The ranges key_range gives move monotonically with the row, so the chunk's first and last
// rows decide, except under "diag" when one of the rows i0.. lies inside the chunk (it does
// not meet itself).
template <int kT>
__device__ __forceinline__ bool chunk_meets_all(Direction rule, int64_t c0, int64_t start,
                                                int64_t end, int64_t i0, unsigned rows) {
  constexpr unsigned kAll = (1u << kT) - 1u;
  return rows == kAll && pair_bits<kT>(rule, c0, start, end, i0, rows) == kAll &&
         pair_bits<kT>(rule, c0 + kWarps - 1, start, end, i0, rows) == kAll &&
         !(skips_self(rule) && c0 < i0 + kT && i0 < c0 + kWarps);
}

// Where a thread block (32, kWarps) of grid (B · nblocks · spans, ceil(d / 32)) works.
struct SpanBlock {
  int64_t base;        // b · n
  int64_t start, end;  // the sequence block
  int64_t index;       // of the span in the block
  Span span;
  int64_t k;    // this lane's feature
  int64_t kc;   // the feature its loads read: k, or d - 1 for lanes past d, which run along
                // (they take part in the barriers) and write nothing
  bool writes;  // k < d
};

// `heavy_last`: later spans have more work; they are then numbered first (a shorter tail).
template <int kT, typename T, typename A>
__device__ __forceinline__ SpanBlock span_block(const Args<T, A>& p, int64_t spans,
                                                Direction rule, bool heavy_last) {
  SpanBlock t;
  const int64_t bb = blockIdx.x / spans;  // b · nblocks + block
  const int64_t x = blockIdx.x - bb * spans;
  const int64_t s = heavy_last ? spans - 1 - x : x;
  t.start = (bb % p.nblocks) * p.r;
  t.end = min(t.start + p.r, p.n);
  t.base = (bb / p.nblocks) * p.n;
  t.index = s;
  t.span = span_of<kT>(rule, t.start, t.end, s);
  t.k = int64_t(blockIdx.y) * 32 + threadIdx.x;
  t.writes = t.k < p.d;
  t.kc = t.writes ? t.k : p.d - 1;
  return t;
}

// The real flags (0 or 1) of the kWarps = 8 rows of a staged chunk, read as one 8-byte word
// (row u's flag in byte u) once per chunk: a flag read from shared memory where it is tested
// makes each row's test wait for its load.
static_assert(kWarps == 8, "a chunk's real flags are read as one 8-byte word");
__device__ __forceinline__ uint64_t chunk_flags(const unsigned char* flags) {
  uint64_t bytes;
  memcpy(&bytes, flags, sizeof(bytes));
  return bytes;
}
__device__ __forceinline__ bool all_rows_real(uint64_t flags) {
  return flags == 0x0101010101010101ull;
}
__device__ __forceinline__ bool row_is_real(uint64_t flags, int u) {
  return (flags >> (8 * u)) & 1u;
}

// Streams the rows [lo, hi) of the sequence whose first row is `base` past a thread block, in
// chunks of kWarps staged in shared memory one chunk ahead. For each chunk c0:
//   work(c0, half)  the block's math on the chunk staged in `half` (0 or 1);
//   stage(half ^ 1, raw, real)  warp w stores row c0 + kWarps + w of the next chunk, loaded
//     (load(row), clamped into the range so that every row read exists) before work ran, so
//     its latency hides behind a whole chunk; `real` says it is in the range and real;
//   a barrier, then after(c0, half).
// Each half is written only after the barrier that ends every read of it.
template <typename Load, typename Stage, typename Work, typename After>
__device__ __forceinline__ void stream_chunks(const bool* mask, int64_t base, int64_t lo,
                                              int64_t hi, Load&& load, Stage&& stage,
                                              Work&& work, After&& after) {
  const int w = threadIdx.y;
  const auto row_of = [&](int64_t c0) { return base + min(c0 + w, hi - 1); };
  const auto real_of = [&](int64_t c0, int mask_bits) { return c0 + w < hi && mask_bits != 0; };
  if (lo < hi) {
    const int64_t row = row_of(lo);
    stage(0, load(row), real_of(lo, mask_byte(mask, row)));
  }
  __syncthreads();
  int half = 0;
  for (int64_t c0 = lo; c0 < hi; c0 += kWarps, half ^= 1) {
    const int64_t c1 = c0 + kWarps;
    // Loaded and tested without a branch, even after the last chunk (the row is clamped into
    // the range): a conditional load, or a test of the mask byte here, put an instruction that
    // waits for the load (a register copy merging it with a default, the compare) before work
    // (SASS, sm_90).
    const int64_t row = row_of(c1);
    auto next = load(row);
    int next_mask = mask_byte(mask, row);
    next.pin_loads();
    pin(next_mask);
    work(c0, half);
    if (c1 < hi) stage(half ^ 1, next, real_of(c1, next_mask));
    __syncthreads();
    after(c0, half);
  }
}

}  // namespace blosa::cuda
