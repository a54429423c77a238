// The forward of the tiled blocks with the keys staged through shared memory (the default;
// BLOSA_CUDA_FORWARD=stream runs forward_tiled instead). forward_tiled (tiled.cuh) has
// every warp load its keys itself, rows ahead, and holds them in registers: over 100 registers,
// which caps it at 16 warps per SM, where Nsight Compute found it waiting on loads
// (bench/HISTORY.md). Here the warps of a thread block share one stream of keys:
//  1. a thread block owns a span of kWarps·kT consecutive queries of one sequence block for 32
//     features, warp w the queries [lo + w·kT, lo + (w+1)·kT), with their softmax state in
//     registers as in forward_tiled;
//  2. the keys that any of those queries attend stream past in chunks of kWarps: warp w loads
//     key c0 + w of the next chunk while the thread block works on this one, and stores it,
//     scaled and converted, in shared memory; one barrier a chunk;
//  3. every warp adds each key of the chunk to the queries of its tile that attend it, without
//     a test per pair where the whole chunk is allowed to all of them (chunk_meets_all).
// Each key is loaded from memory once per thread block instead of once per warp.
#pragma once

#include "spans.cuh"

namespace blosa::cuda {

// Shared memory of forward_staged: the staged keys of two chunks (in use, and next).
template <typename A>
struct StagedKeys {
  A key[2][2][kWarps][32];                   // [chunk parity][xk, value][key of the chunk][lane]
  alignas(8) unsigned char real[2][kWarps];  // the key exists and is real (0 or 1)
};

template <typename T, typename A, bool kFixed, int kT>
__global__ void __launch_bounds__(kWarps * 32)
    forward_staged(const Args<T, A> p, int64_t spans) {
  __shared__ StagedKeys<A> sh;
  const int lane = threadIdx.x, w = threadIdx.y;
  // The span's queries, and the keys they attend. Under "forward" later queries have more keys.
  const SpanBlock t = span_block<kT>(p, spans, p.dir, p.dir == Direction::kForward);
  const Span& sp = t.span;
  if (sp.lo >= sp.hi) return;  // the whole thread block: no queries in this span
  const A qbias = p.bias ? static_cast<A>(p.bias[t.kc]) : A(0);

  // This warp's queries.
  const int64_t j0 = sp.lo + int64_t(w) * kT;
  const int nq = static_cast<int>(max(int64_t(0), min(int64_t(kT), sp.hi - j0)));
  A xq[kT];
  Softmax<A, kFixed> sm[kT];
  unsigned queries = 0;  // bit q: query j0 + q exists and is real
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    xq[q] = A(0);
    sm[q].init(p.a);
    if (q < nq) {
      xq[q] = query_x(p, p.head[(t.base + j0 + q) * p.d + t.kc], qbias);
      queries |= unsigned(is_real(p.mask, t.base + j0 + q)) << q;
    }
  }
  constexpr unsigned kAllQueries = (1u << kT) - 1u;
  unsigned seen = 0;  // bit q: query j0 + q has attended a key

  // Step 2: the keys, staged scaled and converted.
  const auto load = [&](int64_t row) { return load_key(p, row, t.kc); };
  const auto stage = [&](int half, const KeyLoad<T>& raw, int real) {
    const KeyRow<A> key = key_values(p, raw);
    sh.key[half][0][w][lane] = key.xk;
    sh.key[half][1][w][lane] = key.v;
    if (lane == 0) sh.real[half][w] = static_cast<unsigned char>(real);
  };
  // Step 3. A chunk of real keys that all the warp's queries attend needs no test per pair.
  const auto work = [&](int64_t c0, int half) {
    const uint64_t reals = chunk_flags(sh.real[half]);
    if (all_rows_real(reals) &&
        chunk_meets_all<kT>(transposed(p.dir), c0, t.start, t.end, j0, queries)) {
      seen = kAllQueries;
#pragma unroll 2
      for (int kk = 0; kk < kWarps; ++kk) {
        const A xk = sh.key[half][0][kk][lane], v = sh.key[half][1][kk][lane];
#pragma unroll
        for (int q = 0; q < kT; ++q) sm[q].add(tanh_fast(xk + xq[q]), v, p.a);
      }
    } else {  // the chunk holds padding keys, or keys on the diagonal of the warp's queries
#pragma unroll 1
      for (int kk = 0; kk < kWarps; ++kk) {
        const unsigned bits =
            row_is_real(reals, kk)
                ? pair_bits<kT>(transposed(p.dir), c0 + kk, t.start, t.end, j0, queries)
                : 0u;
        if (bits == 0u) continue;
        seen |= bits;
        const A xk = sh.key[half][0][kk][lane], v = sh.key[half][1][kk][lane];
#pragma unroll
        for (int q = 0; q < kT; ++q) {
          if (bits >> q & 1u) sm[q].add(tanh_fast(xk + xq[q]), v, p.a);
        }
      }
    }
  };
  stream_chunks(p.mask, t.base, sp.meet_lo, sp.meet_hi, load, stage, work,
                [](int64_t, int) {});

  if (!t.writes) return;
#pragma unroll
  for (int q = 0; q < kT; ++q) {
    if (q < nq) {
      const int64_t off = (t.base + j0 + q) * p.d + t.k;
      const bool has_keys = seen >> q & 1u;  // a padding query attends no key
      p.out[off] = static_cast<T>(has_keys ? sm[q].out() : A(0));
      if (p.lse != nullptr) p.lse[off] = has_keys ? sm[q].lse() : pos_inf<A>();
    }
  }
}

}  // namespace blosa::cuda
