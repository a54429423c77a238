// The backward of the tiled blocks in one pass over the (query, key) pairs (the default for
// blocks of at most kMaxSpans spans; BLOSA_CUDA_BACKWARD=split runs the split one). The split
// backward (tiled.cuh) recomputes each pair's tanh and exp twice, once for the query side
// (d_head) and once for the key side (d_dep, d_value): four special-function ops per element,
// which caps forward+backward at a third of the forward's bound. Here each pair's t and p are
// computed once and feed both sides, at the price of one reduction across warps per query.
//
// A thread block owns a span of kWarps·kT consecutive keys of one sequence block, for 32
// features: warp w holds keys [k0 + w·kT, k0 + (w+1)·kT) in registers (one feature a lane, as
// in the other kernels) and accumulates their d_dep and d_value over all queries, so those are
// final. The queries that attend the span stream past in chunks of kWarps:
//  1. the thread block stages the chunk's query rows in shared memory (warp w loads row
//     c0 + w, one chunk ahead, so the loads' latency hides behind a whole chunk of math);
//  2. every warp computes its keys' pairs with each query of the chunk and leaves, per query,
//     its part of the head_grad sums (a, s, r) in shared memory;
//  3. after a barrier, warp w adds the kWarps parts of query c0 + w in warp order.
// A block of at most kWarps·kT keys is one span, and d_head is written in step 3. Longer
// blocks (up to kMaxSpans spans) leave each span's sums in a float scratch buffer, and
// head_grad_from_sums adds the spans in order and writes d_head. Every sum is in a fixed order
// (deterministic), and no float atomics are used.
//
// tests/cuda_emulation/ runs these kernels on the CPU with one fiber per thread, switching at
// each __syncthreads, so CI checks them exactly like the others.
#pragma once

#include "spans.cuh"

namespace blosa::cuda {

// Longest block the fused backward takes, in spans: the scratch buffer holds 3 sums per span
// for every element, so it is at most 3·kMaxSpans·B·n·d floats. Longer blocks (full DiSA of
// long sequences) use the split backward, whose extra memory is none.
constexpr int kMaxSpans = 8;

// Shared memory of the fused kernel: the staged query rows of two chunks (the one in use and
// the next) and the warps' parts of the head_grad sums of the chunk in use.
template <typename A>
struct FusedShared {
  A query[2][4][kWarps][32];  // [chunk parity][xq, g, o, l2][query of the chunk][lane]
  alignas(8) unsigned char real[2][kWarps];  // the query is real and in the range (0 or 1)
  A sums[kWarps][3][kWarps][32];  // [warp][a, s, r][query of the chunk][lane]
};

template <typename T, typename A, int kT>
__global__ void __launch_bounds__(kWarps * 32)
    backward_fused_tiled(const Args<T, A> p, int64_t spans, A* head_sums) {
  __shared__ FusedShared<A> sh;
  const int lane = threadIdx.x, w = threadIdx.y;
  // The span's keys, and the queries that attend them.
  const SpanBlock t = span_block<kT>(p, spans, transposed(p.dir), false);
  const Span& sp = t.span;
  if (sp.lo >= sp.hi) return;  // the whole thread block: no keys in this span
  const A qbias = p.bias ? static_cast<A>(p.bias[t.kc]) : A(0);

  // This warp's keys.
  const int64_t i0 = sp.lo + int64_t(w) * kT;
  const int nk = static_cast<int>(max(int64_t(0), min(int64_t(kT), sp.hi - i0)));
  A xk[kT], v[kT], dd[kT], dv[kT];
  unsigned keys = 0;  // bit q: key i0 + q exists and is real
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    xk[q] = v[q] = dd[q] = dv[q] = A(0);
    if (q < nk) {
      const KeyRow<A> key = key_values(p, load_key(p, t.base + i0 + q, t.kc));
      xk[q] = key.xk;
      v[q] = key.v;
      keys |= unsigned(is_real(p.mask, t.base + i0 + q)) << q;
    }
  }
  constexpr unsigned kAllKeys = (1u << kT) - 1u;

  // Step 1: the queries, staged converted. The warps skip a padding row (or one past the
  // range); its g = 0 makes its d_head 0.
  const auto load = [&](int64_t row) { return load_query(p, row, t.kc); };
  const auto stage = [&](int half, const QueryLoad<T, A>& raw, int real) {
    const QueryRow<A> row = query_values(p, raw, qbias);
    sh.query[half][0][w][lane] = row.xq;
    sh.query[half][1][w][lane] = real ? row.g : A(0);
    sh.query[half][2][w][lane] = row.o;
    sh.query[half][3][w][lane] = row.l2;
    if (lane == 0) sh.real[half][w] = static_cast<unsigned char>(real);
  };
  // Step 2: this warp's part of each query's sums; a chunk of real queries that all attend all
  // of the warp's keys needs no test per query.
  const auto work = [&](int64_t c0, int half) {
    const uint64_t reals = chunk_flags(sh.real[half]);
    const bool whole_chunk =
        all_rows_real(reals) && chunk_meets_all<kT>(p.dir, c0, t.start, t.end, i0, keys);
    // Query jj + 1's staged values are read before query jj's math, so that math hides their
    // latency (read where they are used, each query's first pair waited for them).
    const auto staged = [&](int jj) {
      return QueryRow<A>{sh.query[half][0][jj][lane], sh.query[half][1][jj][lane],
                         sh.query[half][2][jj][lane], sh.query[half][3][jj][lane]};
    };
    QueryRow<A> next = staged(0);
#pragma unroll 1
    for (int jj = 0; jj < kWarps; ++jj) {
      const QueryRow<A> query = next;
      next = staged(min(jj + 1, kWarps - 1));
      A a = A(0), sum_w = A(0), r = A(0);
      const unsigned bits =
          whole_chunk              ? kAllKeys
          : row_is_real(reals, jj) ? pair_bits<kT>(p.dir, c0 + jj, t.start, t.end, i0, keys)
                                   : 0u;
      if (bits != 0u) {
        const auto pair = [&](int q) {
          const A th = tanh_fast(xk[q] + query.xq);
          pair_grad_accumulate(shifted_exp2(th, p.a, query.l2), th, v[q], query.o, query.g, a,
                               sum_w, r, dd[q], dv[q]);
        };
        if (bits == kAllKeys) {  // the common case: no test per pair
#pragma unroll
          for (int q = 0; q < kT; ++q) pair(q);
        } else {  // keys on the query's diagonal, padding keys, the span's last warp
#pragma unroll
          for (int q = 0; q < kT; ++q) {
            if (bits >> q & 1u) pair(q);
          }
        }
      }
      sh.sums[w][0][jj][lane] = a;
      sh.sums[w][1][jj][lane] = sum_w;
      sh.sums[w][2][jj][lane] = r;
    }
  };
  // Step 3 (past the barrier): warp w adds up query c0 + w.
  const auto add_up = [&](int64_t c0, int half) {
    const int64_t j = c0 + w;
    if (j < sp.meet_hi && t.writes) {
      A a = A(0), sum_w = A(0), r = A(0);
#pragma unroll
      for (int u = 0; u < kWarps; ++u) {
        a += sh.sums[u][0][w][lane];
        sum_w += sh.sums[u][1][w][lane];
        r += sh.sums[u][2][w][lane];
      }
      const int64_t off = (t.base + j) * p.d + t.k;
      if (spans == 1) {
        const A g = sh.query[half][1][w][lane];  // 0 for padding: d_head 0
        p.d_head[off] = static_cast<T>(head_grad(g, a, sum_w, r));
      } else {
        const int64_t numel = p.B * p.n * p.d;
        head_sums[(t.index * 3 + 0) * numel + off] = a;
        head_sums[(t.index * 3 + 1) * numel + off] = sum_w;
        head_sums[(t.index * 3 + 2) * numel + off] = r;
      }
    }
    __syncthreads();  // sh.sums and this chunk's half of sh.query are free again
  };
  stream_chunks(p.mask, t.base, sp.meet_lo, sp.meet_hi, load, stage, work, add_up);

  if (!t.writes) return;
  if (spans == 1) {  // the block's queries that attend no key: d_head 0
    for (int64_t j = t.start + w; j < t.end; j += kWarps) {
      if (j < sp.meet_lo || j >= sp.meet_hi) {
        p.d_head[(t.base + j) * p.d + t.k] = static_cast<T>(A(0));
      }
    }
  }
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    if (q < nk) {
      const int64_t off = (t.base + i0 + q) * p.d + t.k;
      const bool real = keys >> q & 1u;
      p.d_dep[off] = static_cast<T>(real ? dd[q] : A(0));
      p.d_value[off] = static_cast<T>(real ? dv[q] : A(0));
    }
  }
}

// d_head of blocks of several spans: one thread per element adds the sums of the spans whose
// query range holds it, in span order.
constexpr int kSumThreads = 256;

template <typename T, typename A, int kT>
__global__ void __launch_bounds__(kSumThreads)
    head_grad_from_sums(const Args<T, A> p, int64_t spans, const A* head_sums) {
  const int64_t numel = p.B * p.n * p.d;
  const int64_t off = int64_t(blockIdx.x) * kSumThreads + threadIdx.x;
  if (off >= numel) return;
  const int64_t row = off / p.d;
  const int64_t j = row % p.n;
  const int64_t start = j / p.r * p.r, end = min(start + p.r, p.n);
  A a = A(0), sum_w = A(0), r = A(0), g = A(0);
  if (is_real(p.mask, row)) {
    g = static_cast<A>(p.grad_out[off]);
    for (int64_t s = 0; s < spans; ++s) {
      const Span sp = span_of<kT>(transposed(p.dir), start, end, s);
      if (j >= sp.meet_lo && j < sp.meet_hi) {
        a += head_sums[(s * 3 + 0) * numel + off];
        sum_w += head_sums[(s * 3 + 1) * numel + off];
        r += head_sums[(s * 3 + 2) * numel + off];
      }
    }
  }
  p.d_head[off] = static_cast<T>(head_grad(g, a, sum_w, r));
}

}  // namespace blosa::cuda
