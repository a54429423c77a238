// The tiled kernels, for blocks longer than kSmallMax, full DiSA included (kernel_common.cuh has
// what all the kernels share). A warp owns a tile of kT consecutive queries of one block for 32
// features (kT = 4 or 8, a template argument the launcher picks) and streams the block's keys
// through L1 (the kWarps warps of a thread block share their keys). Keys allowed to every query
// of the tile take the fast unpredicated path; only the <= kT keys on the tile's diagonal are
// tested per pair. Backward runs two such kernels: one per query tile (d_head) and one per key
// tile (d_dep, d_value), each recomputing p = exp(s - lse); or, with BLOSA_CUDA_BACKWARD=fused,
// the one kernel of fused_backward.cuh.
//
// Block (32, kWarps), grid (ceil(tiles / kWarps), ceil(d / 32)). Warp w of grid.x index X owns
// tile X·kWarps + w; a tile is kT consecutive rows (queries, or keys in backward_key_tiled) of
// one block, for the 32 features of grid.y.
#pragma once

#include <cstdint>

#include "kernel_common.cuh"

namespace blosa::cuda {

constexpr int kWarps = 8;  // warps per thread block in the tiled kernels (and the span kernels)

// Run-time rule: may query j attend key i of the block [start, end)?
__device__ __forceinline__ bool pair_allowed(Direction dir, int64_t i, int64_t j, int64_t start,
                                             int64_t end) {
  int64_t lo, hi;
  key_range(dir, j, start, end, &lo, &hi);
  return i >= lo && i < hi && !(skips_self(dir) && i == j);
}

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
// (bench/HISTORY.md). The rows all exist, so the last one is loaded again rather than tested.
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
