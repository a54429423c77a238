// Which kernel of csrc/cuda/*.cuh runs a call, with which template arguments and launch
// geometry. Host code with no CUDA API in it: masked_block_attn_cuda.cu launches the chosen
// kernel on the GPU, and tests/cuda_emulation/ runs the very same choice thread by thread on
// the CPU, so CI checks the kernels' indexing, tiling and masking on every run.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "../op_checks.h"
#include "column_sums.cuh"
#include "fused_backward.cuh"
#include "small_blocks.cuh"
#include "staged_forward.cuh"
#include "staged_small.cuh"
#include "tiled.cuh"

namespace blosa::cuda {

// How the kernels run; masked_block_attn_cuda.cu reads it from BLOSA_CUDA_TILE,
// BLOSA_CUDA_BACKWARD, BLOSA_CUDA_FORWARD, BLOSA_CUDA_SMALL_VEC, BLOSA_CUDA_SMALL_PERSISTENT,
// BLOSA_CUDA_SMALL_DENSE, BLOSA_CUDA_SMALL_LOADS_FIRST, BLOSA_CUDA_SMALL_RCP,
// BLOSA_CUDA_COLUMN_SUMS, BLOSA_CUDA_SMALL_STAGED and BLOSA_CUDA_SMALL_STAGED_BLOCKS, for
// tuning.
struct KernelOptions {
  // Rows (queries, or keys in backward) per thread: 4 or 8. 8 was the fastest forward+backward
  // on an H200 (bench/HISTORY.md); 16 was slower everywhere and is gone.
  int tile = 8;
  // Backward of the tiled blocks in one pass (fused_backward.cuh) rather than two kernels
  // (tiled.cuh), for blocks of at most kMaxSpans spans; float accumulation only (its
  // shared memory is sized for float sums). It computes each pair's tanh and exp once instead
  // of twice, for a scratch of 3 · spans · B · n · d floats (at most 24 · B · n · d). On an
  // H200 at B=64, n=384, d=300, one block: forward+backward 1.35-1.52x faster, peak memory
  // +703 MiB instead of +197 MiB (float32; bench/HISTORY.md, 2026-11-27). A call whose scratch
  // does not fit in memory takes the split backward (run_backward).
  bool fused_backward = true;
  // Forward of the tiled blocks with the keys staged through shared memory by the whole
  // thread block (staged_forward.cuh) rather than loaded by each warp: 1.23-1.28x faster on an
  // H200 at one block of 384 (bench/HISTORY.md, 2026-11-27).
  bool staged_forward = true;
  // Features per thread (1 or 2) of the small-block forward and recomputing backward, where
  // small_vec() allows it: one load of 2 · sizeof(T) bytes per row instead of two. Off (1):
  // 0.99-1.07x the one-feature kernels on an H200 at r = 8 (bench/HISTORY.md, 2026-11-27).
  int small_vec = 1;
  // The small-block forward and recomputing backward as persistent kernels (for_small_blocks in
  // small_blocks.cuh): as many threads as fit on the GPU at once, each looping over blocks with
  // the next block's loads in flight while it computes this one. For the constant pivot and
  // float accumulation (the other calls keep the one-shot kernels). Off: 0.80-0.97x the
  // one-shot kernels on an H200 at r = 8 (bench/HISTORY.md, 2026-11-27).
  bool small_persistent = false;
  // The small-block forward and recomputing backward compiled for calls with no mask and every
  // block of kSmallMax tokens (small_dense), where that is so: the block length and the mask are
  // then constants, and the compiler drops their tests. On an H200 at r = 8 (bench/HISTORY.md,
  // 2026-11-27, second run): forward+backward 1.05x (float32) and 1.15x (bfloat16) the general
  // kernels, the forward 0.91x / 1.00x. Off, every call takes the general kernels.
  bool small_dense = true;
  // The dense small-block forward and recomputing backward (float accumulation) with every
  // load issued before any of the math (loads_first_gate in small_blocks.cuh): one round trip
  // to memory a thread instead of several, the same registers but in float32's forward
  // (32 -> 40); the forward 2-4% more instructions, the backward 3-5% fewer (it also holds d in
  // a register: small_offset). On an H200 at r = 8 (bench/HISTORY.md, 2026-11-28): the forward
  // 1.12x (float32) and 1.16x (bfloat16) the plain dense kernels' rate, forward+backward 1.06x
  // and 1.10x.
  bool small_loads_first = true;
  // The dense small-block forward with its loads first, for 16-bit inputs, takes each row's
  // 1 / sum from Newton steps on the FMA pipe (reciprocal_newton) instead of the
  // special-function unit, which that kernel keeps 68% busy with 28 tanh, 28 exp2 and 7
  // reciprocals a thread (Nsight Compute, H200, 2026-11-28: its largest stall waits for that
  // unit's queue): 7 of its 63 special-function operations go, for 28 (bfloat16) or 42
  // (float16) FMAs. On an H200 at r = 8 (bench/HISTORY.md, 2026-11-28, third run): the
  // bfloat16 forward 0.0201 -> 0.0193 ms (1.04x; 1.34e12 score elements/s), forward+backward
  // 0.0591 -> 0.0579 ms. Off, the division's MUFU.RCP.
  bool small_fma_reciprocal = true;
  // d_bias's column sums of up to kTallMaxRows rows (the r = 8 benchmark's per-block sums,
  // 3072 rows) in one launch of tall thread blocks instead of two (column_sums.cuh). Off until
  // measured (gpu_rates variant sums-one).
  bool column_sums_one_pass = false;
  // The dense small-block forward / recomputing backward with each block's rows staged through
  // shared memory as 16-byte vectors by a thread block of d threads (staged_small.cuh), where
  // small_staged allows it: whole sectors in address order instead of 64-byte row accesses
  // that are mostly not sector-aligned at d = 300. Off until measured (gpu_rates variant
  // small-staged).
  bool small_staged_forward = false;
  bool small_staged_backward = false;
  // Blocks each staged thread block runs in turn (>= 1): from the second on, a block's copy
  // into shared memory overlaps the math of the one before (16-bit inputs), and the
  // backward's d_bias sums come in that many times fewer rows. Off until measured (1; gpu_rates
  // variant small-staged+staged-blocks8).
  int small_staged_blocks = 1;
};

// The type inputs of type T accumulate in: float (double for double).
template <typename T>
using Accumulate = std::conditional_t<std::is_same_v<T, double>, double, float>;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T>
const T* data_or_null(const std::optional<at::Tensor>& t) {
  return t.has_value() ? t->data_ptr<T>() : nullptr;
}

// Calls f(args): the Args of dep's dtype (inputs of type T accumulate in Accumulate<T>) with
// the fields forward and backward share, from contiguous tensors; f sets its own pointers.
template <typename F>
void with_base_args(const at::Tensor& dep, const at::Tensor& head, const at::Tensor& value,
                    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& mask,
                    int64_t block_len, const std::string& direction, double scale, F&& f) {
  const auto dtype = dep.scalar_type();  // checked to be floating by the op, before any work
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "masked_block_attn", [&] {
    using T = scalar_t;
    using A = Accumulate<T>;
    Args<T, A> a{};
    a.dep = dep.data_ptr<T>();
    a.head = head.data_ptr<T>();
    a.value = value.data_ptr<T>();
    a.bias = data_or_null<T>(bias);
    a.mask = data_or_null<bool>(mask);
    a.B = dep.size(0);
    a.n = dep.size(1);
    a.d = dep.size(2);
    a.r = resolve_block_len(block_len, a.n);
    a.nblocks = ceil_div(a.n, a.r);
    a.dir = direction_from_string(direction);
    a.c = static_cast<A>(scale);
    a.inv_c = static_cast<A>(1.0 / scale);
    a.a = static_cast<A>(scale * kLog2e);
    f(a);
  });
}

// A launch: grid (gx, gy) of thread blocks of (bx, by) threads. The tiled kernels also take
// the number of tiles per sequence block and in all. A persistent kernel's threads loop over
// the work of gx · bx threads, so the launcher may run fewer thread blocks than gx: as many as
// the GPU holds at once.
struct Geometry {
  int64_t gx, gy, bx, by;
  int64_t tiles_per_block = 0, total = 0;
  bool persistent = false;
  bool dense = false;  // a dense small-block kernel (small_dense): the emulation's tests count them
  bool loads_first = false;  // one with its loads first (small_loads_first): counted too
  bool fma_reciprocal = false;  // a forward with reciprocal_newton (small_fma_reciprocal): too
  bool staged = false;  // a staged small-block kernel (small_staged): counted too
};

// a set up for the small kernels' thread index at vector width vec (small_index_at).
template <typename T, typename A>
Args<T, A> with_small_index(Args<T, A> a, int vec) {
  const int64_t threads = a.B * a.nblocks * (a.d / vec);
  a.index32 = threads < (int64_t(1) << 31);
  if (a.index32) {  // then d / vec and nblocks are below 2^31 too
    a.groups_div = FastDivisor::of(static_cast<uint32_t>(a.d / vec));
    a.nblocks_div = FastDivisor::of(static_cast<uint32_t>(a.nblocks));
  }
  return a;
}

template <typename T, typename A>
Geometry small_geometry(const Args<T, A>& a, int vec = 1, bool persistent = false,
                        bool dense = false, bool loads_first = false) {
  const int64_t blocks = ceil_div(a.B * a.nblocks * (a.d / vec), kSmallThreads);
  TORCH_CHECK(persistent || blocks <= std::numeric_limits<int>::max(),
              "masked_block_attn: input too large");
  // small_offset's rows in 32-bit arithmetic (the CUDA op allows d <= 65535 · 32).
  TORCH_CHECK(a.d * kSmallMax <= std::numeric_limits<int>::max(),
              "masked_block_attn: d too large for blocks of at most ", kSmallMax);
  Geometry g{blocks, 1, kSmallThreads, 1};
  g.persistent = persistent;
  g.dense = dense;
  g.loads_first = loads_first;
  return g;
}

// Whether the small kernels of this call run persistent (KernelOptions::small_persistent).
template <typename A>
bool small_persistent(KernelOptions opt, bool fixed) {
  return opt.small_persistent && fixed && std::is_same_v<A, float>;
}

// Whether a small-block kernel of this call at vector width vec takes the dense variant
// (KernelOptions::small_dense): no mask, every block of exactly kSmallMax tokens, the constant
// pivot, one feature a thread, one-shot, and (the forward) no lse to write. Only the default
// kernels of the usual scales are compiled dense (each variant is one more kernel per type and
// direction): the vector and persistent ones are off, measured slower, and the running-max
// pivot serves only scales above FixedPivotLimit.
template <typename T, typename A>
bool small_dense(const Args<T, A>& a, KernelOptions opt, bool fixed, int vec, bool persistent) {
  return opt.small_dense && fixed && vec == 1 && !persistent && a.mask == nullptr &&
         a.lse == nullptr && a.r == kSmallMax && a.n % kSmallMax == 0;
}

// Whether the dense small-block kernels of this call issue their loads first (small_loads_first).
template <typename A>
bool small_loads_first(KernelOptions opt, bool dense) {
  return opt.small_loads_first && dense && std::is_same_v<A, float>;
}

// Whether this call's small-block forward takes its reciprocals from the FMA pipe
// (small_fma_reciprocal): the dense kernel with its loads first or staged, 16-bit inputs.
template <typename T>
bool small_fma_reciprocal(KernelOptions opt, bool loads_first_or_staged) {
  return opt.small_fma_reciprocal && loads_first_or_staged && sizeof(T) == 2;
}

// Whether p is aligned for loads of `bytes` bytes (null counts as aligned: not used).
inline bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Whether every [B, n, d] tensor of a (the small kernels' inputs and outputs) is aligned for
// loads of `bytes` bytes.
template <typename T, typename A>
bool tensors_aligned(const Args<T, A>& a, size_t bytes) {
  for (const void* ptr : {static_cast<const void*>(a.dep), static_cast<const void*>(a.head),
                          static_cast<const void*>(a.value), static_cast<const void*>(a.out),
                          static_cast<const void*>(a.grad_out), static_cast<const void*>(a.d_dep),
                          static_cast<const void*>(a.d_head), static_cast<const void*>(a.d_value)}) {
    if (!aligned(ptr, bytes)) return false;
  }
  return true;
}

// Whether this call's dense small-block kernel runs staged (staged_small.cuh; `wanted`:
// KernelOptions::small_staged_forward or small_staged_backward): float accumulation, d <=
// kStagedMaxD, and every [B, n, d] tensor the kernel touches on a 16-byte boundary, so that
// each block's run does too (kSmallMax · sizeof(T) is a multiple of 16 bytes).
template <typename T, typename A>
bool small_staged(const Args<T, A>& a, bool wanted, bool dense) {
  return wanted && dense && std::is_same_v<A, float> && a.d <= kStagedMaxD &&
         tensors_aligned(a, 16);
}

// Thread blocks of d threads, each running `per` sequence blocks in turn (the staged kernels).
template <typename T, typename A>
Geometry staged_geometry(const Args<T, A>& a, int64_t per) {
  Geometry g{ceil_div(a.B * a.nblocks, per), 1, a.d, 1};
  TORCH_CHECK(g.gx <= std::numeric_limits<int>::max(), "masked_block_attn: input too large");
  g.dense = true;
  g.staged = true;
  return g;
}

template <typename T, typename A>
Geometry tiled_geometry(const Args<T, A>& a, int tile) {
  Geometry g{0, ceil_div(a.d, 32), 32, kWarps};
  g.tiles_per_block = ceil_div(a.r, tile);
  g.total = a.B * a.nblocks * g.tiles_per_block;
  g.gx = ceil_div(g.total, kWarps);
  TORCH_CHECK(g.gx <= std::numeric_limits<int>::max() && g.gy <= 65535,
              "masked_block_attn: input too large");
  return g;
}

// Spans of the fused backward for this call, or 0 where the split backward runs.
template <typename T, typename A>
int64_t fused_spans(const Args<T, A>& a, KernelOptions opt) {
  if (!std::is_same_v<A, float> || !opt.fused_backward || a.r <= kSmallMax) return 0;
  const int64_t spans = ceil_div(a.r, int64_t(kWarps) * opt.tile);
  return spans <= kMaxSpans ? spans : 0;
}

// Thread blocks of (32, kWarps) threads, one per (span, 32 features) of every sequence block.
template <typename T, typename A>
Geometry span_geometry(const Args<T, A>& a, int64_t spans) {
  const Geometry g{a.B * a.nblocks * spans, ceil_div(a.d, 32), 32, kWarps};
  TORCH_CHECK(g.gx <= std::numeric_limits<int>::max() && g.gy <= 65535,
              "masked_block_attn: input too large");
  return g;
}

template <typename T, typename A>
Geometry elementwise_geometry(const Args<T, A>& a) {
  const int64_t blocks = ceil_div(a.B * a.n * a.d, kSumThreads);
  TORCH_CHECK(blocks <= std::numeric_limits<int>::max(), "masked_block_attn: input too large");
  return {blocks, 1, kSumThreads, 1};
}

// out ([d], type Out) = the column sums of x ([rows, d], rows >= 1, type In), accumulated in A:
// one launch of column_sums where the rows fit one chunk, else one per chunk into a
// [chunks, d] scratch of A (allocated with `options`' device) and one that adds the chunks;
// with one_pass (KernelOptions::column_sums_one_pass), up to kTallMaxRows rows in one launch of
// the tall shape.
template <typename A, typename In, typename Out, typename Launch>
void sum_columns(const In* x, int64_t rows, int64_t d, Out* out, const at::TensorOptions& options,
                 bool one_pass, Launch&& launch) {
  const int64_t chunk = std::max(kColumnRows, ceil_div(rows, kMaxChunks));
  const int64_t chunks = ceil_div(rows, chunk);
  const auto geometry = [d](int64_t gx) { return Geometry{gx, ceil_div(d, 32), 32, kColumnLanes}; };
  if (one_pass && chunks > 1 && rows <= kTallMaxRows) {
    launch(column_sums<In, A, Out, kTallCols, kTallLanes>,
           Geometry{1, ceil_div(d, kTallCols), kTallCols, kTallLanes}, x, rows, d, rows, out);
    return;
  }
  if (chunks == 1) {
    launch(column_sums<In, A, Out>, geometry(1), x, rows, d, chunk, out);
    return;
  }
  const at::Tensor partial =
      at::empty({chunks, d}, options.dtype(c10::CppTypeToScalarType<A>::value));
  A* const sums = partial.data_ptr<A>();
  launch(column_sums<In, A, A>, geometry(chunks), x, rows, d, chunk, sums);
  launch(column_sums<A, A, Out>, geometry(1), static_cast<const A*>(sums), chunks, d, chunks, out);
}

// Calls f(std::integral_constant<Direction, dir>) so kernels can take the direction as a
// template argument.
template <typename F>
void with_direction(Direction dir, F&& f) {
  switch (dir) {
    case Direction::kForward: f(std::integral_constant<Direction, Direction::kForward>{}); break;
    case Direction::kBackward: f(std::integral_constant<Direction, Direction::kBackward>{}); break;
    case Direction::kDiag: f(std::integral_constant<Direction, Direction::kDiag>{}); break;
    default: f(std::integral_constant<Direction, Direction::kAll>{}); break;
  }
}

// The vector width V of the small-block kernels for this call: opt.small_vec where every row
// of every [B, n, d] tensor the kernels touch starts on a V-element boundary (d % V == 0,
// aligned pointers) and T is not double (no 16-byte packs), else 1.
template <typename T, typename A>
int small_vec(const Args<T, A>& a, KernelOptions opt) {
  if (opt.small_vec == 1 || std::is_same_v<T, double> || a.d % opt.small_vec != 0) return 1;
  return tensors_aligned(a, sizeof(T) * opt.small_vec) ? opt.small_vec : 1;
}

// The template arguments of a small-block kernel besides T, A and the direction.
template <int V, bool kFixed, bool kPersistent, bool kDense, bool kLoadsFirst = false>
struct SmallVariant {
  static constexpr int width = V;  // features per thread (small_vec)
  static constexpr bool fixed = kFixed, persistent = kPersistent, dense = kDense,
                        loads_first = kLoadsFirst;
};

// Calls f(SmallVariant<...>{}) for a small-block kernel of vector width vec (small_vec), pivot,
// shape (small_persistent), dense variant (small_dense) and load order (small_loads_first).
// Only what the dispatcher can pick is instantiated: width 2 not for double, persistent
// kernels for the fixed pivot and float accumulation, dense ones for the fixed pivot at width
// 1, with their loads first for float accumulation.
template <typename T, typename A, typename F>
void with_small_variant(int vec, bool fixed, bool persistent, bool dense, bool loads_first,
                        F&& f) {
  const auto at_width = [&](auto width) {
    constexpr int V = decltype(width)::value;
    if constexpr (std::is_same_v<A, float>) {
      if (persistent) return f(SmallVariant<V, true, true, false>{});
    }
    if constexpr (V == 1) {
      if constexpr (std::is_same_v<A, float>) {
        if (fixed && dense && loads_first) return f(SmallVariant<V, true, false, true, true>{});
      }
      if (fixed && dense) return f(SmallVariant<V, true, false, true>{});
    }
    if (fixed) return f(SmallVariant<V, true, false, false>{});
    f(SmallVariant<V, false, false, false>{});
  };
  if constexpr (!std::is_same_v<T, double>) {
    if (vec == 2) return at_width(std::integral_constant<int, 2>{});
  }
  at_width(std::integral_constant<int, 1>{});
}

// Calls f(std::integral_constant<int, kT>) for the tile size kT in {4, 8}.
template <typename F>
void with_tile(int tile, F&& f) {
  if (tile == 4) {
    f(std::integral_constant<int, 4>{});
  } else {
    f(std::integral_constant<int, 8>{});
  }
}

// Runs the forward: launch(kernel, geometry, kernel arguments...) once. Blocks of up to
// kSmallMax tokens use the register-resident kernels, longer ones the tiled kernels as `opt`
// says; scales up to FixedPivotLimit use the constant pivot.
template <typename T, typename A, typename Launch>
void dispatch_forward(const Args<T, A>& a, double scale, KernelOptions opt, Launch&& launch) {
  const bool fixed = use_fixed_pivot<A>(scale);
  if (a.r <= kSmallMax) {
    const int vec = small_vec(a, opt);
    const bool persistent = small_persistent<A>(opt, fixed);
    const bool dense = small_dense(a, opt, fixed, vec, persistent);
    if constexpr (std::is_same_v<A, float>) {
      if (small_staged(a, opt.small_staged_forward, dense)) {
        const int64_t per = opt.small_staged_blocks;
        Geometry g = staged_geometry(a, per);
        g.fma_reciprocal = small_fma_reciprocal<T>(opt, /*loads_first_or_staged=*/true);
        with_direction(a.dir, [&](auto dc) {
          constexpr Direction D = decltype(dc)::value;
          if constexpr (sizeof(T) == 2) {
            if (g.fma_reciprocal) {
              return launch(forward_small_staged<T, A, D, kReciprocalSteps<T>>, g, a, per);
            }
          }
          launch(forward_small_staged<T, A, D, 0>, g, a, per);
        });
        return;
      }
    }
    const bool loads_first = small_loads_first<A>(opt, dense);
    Geometry g = small_geometry(a, vec, persistent, dense, loads_first);
    g.fma_reciprocal = small_fma_reciprocal<T>(opt, loads_first);
    with_direction(a.dir, [&](auto dc) {
      constexpr Direction D = decltype(dc)::value;
      with_small_variant<T, A>(vec, fixed, persistent, dense, loads_first, [&](auto variant) {
        using S = decltype(variant);
        if constexpr (S::loads_first && sizeof(T) == 2) {
          if (g.fma_reciprocal) {
            return launch(forward_small<T, A, D, S::fixed, S::width, S::persistent, S::dense,
                                        S::loads_first, kReciprocalSteps<T>>,
                          g, with_small_index(a, S::width));
          }
        }
        launch(forward_small<T, A, D, S::fixed, S::width, S::persistent, S::dense,
                             S::loads_first>,
               g, with_small_index(a, S::width));
      });
    });
  } else if (opt.staged_forward) {
    with_tile(opt.tile, [&](auto tc) {
      constexpr int kT = decltype(tc)::value;
      const int64_t spans = ceil_div(a.r, span_len<kT>());
      const Geometry g = span_geometry(a, spans);
      if (fixed) {
        launch(forward_staged<T, A, true, kT>, g, a, spans);
      } else {
        launch(forward_staged<T, A, false, kT>, g, a, spans);
      }
    });
  } else {
    const Geometry g = tiled_geometry(a, opt.tile);
    with_tile(opt.tile, [&](auto tc) {
      constexpr int kT = decltype(tc)::value;
      if (fixed) {
        launch(forward_tiled<T, A, true, kT>, g, a, g.tiles_per_block, g.total);
      } else {
        launch(forward_tiled<T, A, false, kT>, g, a, g.tiles_per_block, g.total);
      }
    });
  }
}

// Blocks the forward may leave without lse are ones backward_small_recompute takes.
static_assert(kRecomputeMaxBlock <= kSmallMax);

// Runs the backward: one launch for small blocks (recomputing out and lse when a.lse_in is
// null); for longer ones, whose a.lse_in run_backward provides, two (query tiles, key tiles),
// or, when spans = fused_spans(a, opt) > 0, the fused kernel (then head_sums holds
// 3 · spans · B · n · d floats when spans > 1, and head_grad_from_sums adds them up).
// Returns the rows of a.d_bias_part the small-block kernels wrote (B · nblocks, fewer staged).
template <typename T, typename A, typename Launch>
int64_t dispatch_backward(const Args<T, A>& a, double scale, KernelOptions opt, int64_t spans,
                          A* head_sums, Launch&& launch) {
  if (a.r <= kSmallMax) {
    const bool fixed = use_fixed_pivot<A>(scale);
    const int vec = a.lse_in != nullptr ? 1 : small_vec(a, opt);
    const bool persistent = a.lse_in == nullptr && small_persistent<A>(opt, fixed);
    const bool dense = a.lse_in == nullptr && small_dense(a, opt, fixed, vec, persistent);
    if constexpr (std::is_same_v<A, float>) {
      if (small_staged(a, opt.small_staged_backward, dense)) {
        const int64_t per = opt.small_staged_blocks;
        const Geometry g = staged_geometry(a, per);
        with_direction(a.dir, [&](auto dc) {
          launch(backward_small_staged<T, A, decltype(dc)::value>, g, a, per);
        });
        return g.gx;
      }
    }
    const bool loads_first = small_loads_first<A>(opt, dense);
    const Geometry g = small_geometry(a, vec, persistent, dense, loads_first);
    with_direction(a.dir, [&](auto dc) {
      constexpr Direction D = decltype(dc)::value;
      if (a.lse_in != nullptr) {
        launch(backward_small<T, A, D>, g, with_small_index(a, 1));
        return;
      }
      with_small_variant<T, A>(vec, fixed, persistent, dense, loads_first, [&](auto variant) {
        using S = decltype(variant);
        launch(backward_small_recompute<T, A, D, S::fixed, S::width, S::persistent, S::dense,
                                        S::loads_first>,
               g, with_small_index(a, S::width));
      });
    });
    return a.B * a.nblocks;
  } else if (spans > 0) {
    if constexpr (std::is_same_v<A, float>) {
      with_tile(opt.tile, [&](auto tc) {
        constexpr int kT = decltype(tc)::value;
        launch(backward_fused_tiled<T, A, kT>, span_geometry(a, spans), a, spans, head_sums);
        if (spans > 1) {
          launch(head_grad_from_sums<T, A, kT>, elementwise_geometry(a), a, spans, head_sums);
        }
      });
    }
  } else {
    const Geometry g = tiled_geometry(a, opt.tile);
    with_tile(opt.tile, [&](auto tc) {
      constexpr int kT = decltype(tc)::value;
      launch(backward_query_tiled<T, A, kT>, g, a, g.tiles_per_block, g.total);
      launch(backward_key_tiled<T, A, kT>, g, a, g.tiles_per_block, g.total);
    });
  }
  return 0;
}

// The forward on contiguous tensors, into out and lse allocated by the caller ([B, n, d], lse in
// lse_dtype; an empty lse is not written: the kernels skip its stores).
template <typename Launch>
void run_forward(const at::Tensor& dep, const at::Tensor& head, const at::Tensor& value,
                 const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& mask,
                 int64_t block_len, const std::string& direction, double scale, KernelOptions opt,
                 at::Tensor& out, at::Tensor& lse, Launch&& launch) {
  const auto forward = [&](auto a) {
    using T = typename decltype(a)::Scalar;
    a.out = out.data_ptr<T>();
    a.lse = lse.numel() ? lse.data_ptr<typename decltype(a)::Accumulator>() : nullptr;
    dispatch_forward(a, scale, opt, launch);
  };
  with_base_args(dep, head, value, bias, mask, block_len, direction, scale, forward);
}

// The backward on contiguous tensors, into d_dep, d_head, d_value and, when bias is given,
// d_bias ([d]) allocated by the caller. An empty lse (is_no_lse) means the forward saved
// neither out nor lse: small blocks recompute them inside the backward kernel; longer ones run
// the forward first, into temporaries. d_bias sums d_head over batch and queries
// (sum_columns): for small blocks the kernel's per-block sums (float, unrounded), otherwise
// d_head itself.
template <typename Launch>
void run_backward(const at::Tensor& grad_out, const at::Tensor& dep, const at::Tensor& head,
                  const at::Tensor& value, const std::optional<at::Tensor>& bias,
                  const std::optional<at::Tensor>& mask, const at::Tensor& out,
                  const at::Tensor& lse, int64_t block_len, const std::string& direction,
                  double scale, KernelOptions opt, at::Tensor& d_dep, at::Tensor& d_head,
                  at::Tensor& d_value, at::Tensor& d_bias, Launch&& launch) {
  const auto backward = [&](auto a) {
    using T = typename decltype(a)::Scalar;
    using A = typename decltype(a)::Accumulator;
    at::Tensor saved_out = out, saved_lse = lse;
    if (is_no_lse(lse) && a.r > kSmallMax) {
      saved_out = at::empty(dep.sizes(), dep.options());
      saved_lse = at::empty(dep.sizes(), dep.options().dtype(lse_dtype(dep.scalar_type())));
      auto f = a;
      f.out = saved_out.data_ptr<T>();
      f.lse = saved_lse.data_ptr<A>();
      dispatch_forward(f, scale, opt, launch);
    }
    a.grad_out = grad_out.data_ptr<T>();
    const bool saved = !is_no_lse(saved_lse);
    a.out_in = saved ? saved_out.data_ptr<T>() : nullptr;
    a.lse_in = saved ? saved_lse.data_ptr<A>() : nullptr;
    a.d_dep = d_dep.data_ptr<T>();
    a.d_head = d_head.data_ptr<T>();
    a.d_value = d_value.data_ptr<T>();
    const bool block_sums = bias.has_value() && a.r <= kSmallMax;
    const at::Tensor d_bias_part =
        block_sums ? at::empty({a.B * a.nblocks, a.d}, dep.options().dtype(lse_dtype(dep.scalar_type())))
                   : at::Tensor();
    a.d_bias_part = block_sums ? d_bias_part.data_ptr<A>() : nullptr;
    // The fused backward's per-span sums, when a block has several spans: up to 24 floats an
    // element. Where they do not fit in memory, the split backward runs, which needs none.
    int64_t spans = fused_spans(a, opt);
    at::Tensor head_sums;
    if (spans > 1) {
      try {
        head_sums = at::empty({spans * 3 * dep.numel()}, dep.options().dtype(at::kFloat));
      } catch (const c10::OutOfMemoryError&) {
        spans = 0;
      }
    }
    const int64_t part_rows = dispatch_backward(
        a, scale, opt, spans, spans > 1 ? head_sums.data_ptr<A>() : nullptr, launch);
    if (block_sums) {
      sum_columns<A>(static_cast<const A*>(a.d_bias_part), part_rows, a.d,
                     d_bias.data_ptr<T>(), dep.options(), opt.column_sums_one_pass, launch);
    } else if (bias.has_value()) {
      sum_columns<A>(static_cast<const T*>(a.d_head), a.B * a.n, a.d, d_bias.data_ptr<T>(),
                     dep.options(), opt.column_sums_one_pass, launch);
    }
  };
  with_base_args(dep, head, value, bias, mask, block_len, direction, scale, backward);
}

}  // namespace blosa::cuda
