// CUDA entry points of masked_block_attn_fwd / _bwd: check, make contiguous, allocate, launch
// the kernels of attn_kernels.cuh on the current stream. Same meaning and edge cases as the CPU
// kernels (csrc/cpu/): a query with no allowed key gets out = 0 and lse = +inf, decided from the
// mask and the block structure, never from values. Inputs float32, float16, bfloat16 (float
// accumulation) or float64; outputs in the input dtype, lse float32 (float64 for float64).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#include "../op_checks.h"
#include "attn_kernels.cuh"

namespace blosa {
namespace {

using cuda::Args;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_cuda_inputs(const at::Tensor& dep) {
  TORCH_CHECK_VALUE(dep.is_cuda(), "the CUDA kernels of masked_block_attn need CUDA tensors, got ",
                    dep.device());
  const auto t = dep.scalar_type();
  TORCH_CHECK_TYPE(t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16,
                   "the CUDA kernels of masked_block_attn take float32, float16, bfloat16 or "
                   "float64 inputs, got ",
                   t, " (dep)");
  TORCH_CHECK_VALUE(dep.size(2) <= int64_t(65535) * 32,
                    "masked_block_attn on CUDA supports d <= 2097120, got d = ", dep.size(2));
}

template <typename T>
const T* data_or_null(const std::optional<at::Tensor>& t) {
  return t.has_value() ? t->data_ptr<T>() : nullptr;
}

// c10::cuda::getCurrentCUDAStream is at::cuda::getCurrentCUDAStream; its header is used instead
// of ATen/cuda/CUDAContext.h, which needs the cuSPARSE/cuBLAS headers that a bare toolkit (the
// CI's pip-installed one) lacks.

// Fields shared by forward and backward.
template <typename T, typename A>
Args<T, A> base_args(const at::Tensor& dep, const at::Tensor& head, const at::Tensor& value,
                     const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& mask,
                     int64_t block_len, const std::string& direction, double scale) {
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
  return a;
}

// Calls f(std::integral_constant<Direction, dir>) so kernels can take the direction as a
// template argument.
template <typename F>
void with_direction(Direction dir, F&& f) {
  switch (dir) {
    case Direction::kForward:
      f(std::integral_constant<Direction, Direction::kForward>{});
      break;
    case Direction::kBackward:
      f(std::integral_constant<Direction, Direction::kBackward>{});
      break;
    case Direction::kDiag:
      f(std::integral_constant<Direction, Direction::kDiag>{});
      break;
    default:
      f(std::integral_constant<Direction, Direction::kAll>{});
      break;
  }
}

unsigned int small_grid(int64_t B, int64_t nblocks, int64_t d) {
  const int64_t blocks = ceil_div(B * nblocks * d, cuda::kSmallThreads);
  TORCH_CHECK(blocks <= std::numeric_limits<int>::max(), "masked_block_attn: input too large");
  return static_cast<unsigned int>(blocks);
}

// Queries (keys) per thread of the tiled kernels. More rows per thread reuse each loaded key
// more often and give more independent special-function ops in flight; fewer leave more warps
// per SM (fewer registers). 8 is the default the first H200 run measured (bench/RESULTS.md);
// BLOSA_CUDA_TILE=4|8|16 overrides it, read at every launch so that a benchmark can compare
// the three in one process (bench/gpu_rates.py --cuda-tiles).
constexpr int kDefaultTile = 8;

int tiled_rows_per_thread() {
  const char* env = std::getenv("BLOSA_CUDA_TILE");
  if (env == nullptr || *env == '\0') return kDefaultTile;
  const std::string tile(env);
  TORCH_CHECK_VALUE(tile == "4" || tile == "8" || tile == "16",
                    "BLOSA_CUDA_TILE must be 4, 8 or 16, got '", tile, "'");
  return std::stoi(tile);
}

// Calls f(std::integral_constant<int, kT>) for the tile size kT in {4, 8, 16}.
template <typename F>
void with_tile(int tile, F&& f) {
  switch (tile) {
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 16: f(std::integral_constant<int, 16>{}); break;
    default: f(std::integral_constant<int, 8>{}); break;
  }
}

struct TiledLaunch {
  dim3 grid, block;
  int64_t tiles_per_block, total;
};

TiledLaunch tiled_launch(int64_t B, int64_t nblocks, int64_t r, int64_t d, int tile) {
  TiledLaunch l;
  l.tiles_per_block = ceil_div(r, tile);
  l.total = B * nblocks * l.tiles_per_block;
  const int64_t gx = ceil_div(l.total, cuda::kWarps);
  TORCH_CHECK(gx <= std::numeric_limits<int>::max(), "masked_block_attn: input too large");
  l.grid = dim3(static_cast<unsigned int>(gx), static_cast<unsigned int>(ceil_div(d, 32)));
  l.block = dim3(32, cuda::kWarps);
  return l;
}

template <typename T, typename A>
void launch_forward(const Args<T, A>& a, double scale, int tile, cudaStream_t stream) {
  const bool fixed = use_fixed_pivot<A>(scale);
  if (a.r <= cuda::kSmallMax) {
    const unsigned int grid = small_grid(a.B, a.nblocks, a.d);
    with_direction(a.dir, [&](auto dc) {
      constexpr Direction D = decltype(dc)::value;
      if (fixed) {
        cuda::forward_small<T, A, D, true><<<grid, cuda::kSmallThreads, 0, stream>>>(a);
      } else {
        cuda::forward_small<T, A, D, false><<<grid, cuda::kSmallThreads, 0, stream>>>(a);
      }
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  } else {
    const TiledLaunch l = tiled_launch(a.B, a.nblocks, a.r, a.d, tile);
    with_tile(tile, [&](auto tc) {
      constexpr int kT = decltype(tc)::value;
      if (fixed) {
        cuda::forward_tiled<T, A, true, kT>
            <<<l.grid, l.block, 0, stream>>>(a, l.tiles_per_block, l.total);
      } else {
        cuda::forward_tiled<T, A, false, kT>
            <<<l.grid, l.block, 0, stream>>>(a, l.tiles_per_block, l.total);
      }
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
}

template <typename T, typename A>
void launch_backward(const Args<T, A>& a, int tile, cudaStream_t stream) {
  if (a.r <= cuda::kSmallMax) {
    const unsigned int grid = small_grid(a.B, a.nblocks, a.d);
    with_direction(a.dir, [&](auto dc) {
      constexpr Direction D = decltype(dc)::value;
      cuda::backward_small<T, A, D><<<grid, cuda::kSmallThreads, 0, stream>>>(a);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  } else {
    const TiledLaunch l = tiled_launch(a.B, a.nblocks, a.r, a.d, tile);
    with_tile(tile, [&](auto tc) {
      constexpr int kT = decltype(tc)::value;
      cuda::backward_query_tiled<T, A, kT>
          <<<l.grid, l.block, 0, stream>>>(a, l.tiles_per_block, l.total);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      cuda::backward_key_tiled<T, A, kT>
          <<<l.grid, l.block, 0, stream>>>(a, l.tiles_per_block, l.total);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
}

std::tuple<at::Tensor, at::Tensor> forward_cuda(const at::Tensor& dep_in, const at::Tensor& head_in,
                                                const at::Tensor& value_in,
                                                const std::optional<at::Tensor>& bias_in,
                                                const std::optional<at::Tensor>& mask_in,
                                                int64_t block_len, c10::string_view direction,
                                                double scale) {
  const std::string dir(direction);
  check_attn_args(dep_in, head_in, value_in, bias_in, mask_in, dir, scale);
  check_cuda_inputs(dep_in);
  const int tile = tiled_rows_per_thread();
  const c10::cuda::CUDAGuard guard(dep_in.device());
  const at::Tensor dep = dep_in.contiguous(), head = head_in.contiguous(),
                   value = value_in.contiguous();
  const auto bias = contiguous(bias_in);
  const auto mask = contiguous(mask_in);
  // Every element of out and lse is written by the kernels (no zero-fill pass).
  at::Tensor out = at::empty(dep.sizes(), dep.options());
  at::Tensor lse = at::empty(dep.sizes(), dep.options().dtype(lse_dtype(dep.scalar_type())));
  if (dep.numel() == 0) return {out, lse};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, dep.scalar_type(), "masked_block_attn_fwd_cuda", [&] {
        using A = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
        Args<scalar_t, A> a =
            base_args<scalar_t, A>(dep, head, value, bias, mask, block_len, dir, scale);
        a.out = out.data_ptr<scalar_t>();
        a.lse = lse.data_ptr<A>();
        launch_forward(a, scale, tile, stream);
      });
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_cuda(
    const at::Tensor& grad_out_in, const at::Tensor& dep_in, const at::Tensor& head_in,
    const at::Tensor& value_in, const std::optional<at::Tensor>& bias_in,
    const std::optional<at::Tensor>& mask_in, const at::Tensor& out_in, const at::Tensor& lse_in,
    int64_t block_len, c10::string_view direction, double scale) {
  const std::string dir(direction);
  check_attn_args(dep_in, head_in, value_in, bias_in, mask_in, dir, scale);
  check_cuda_inputs(dep_in);
  check_saved_tensors(grad_out_in, out_in, lse_in, dep_in);
  const int tile = tiled_rows_per_thread();
  const c10::cuda::CUDAGuard guard(dep_in.device());
  const at::Tensor grad_out = grad_out_in.contiguous(), dep = dep_in.contiguous(),
                   head = head_in.contiguous(), value = value_in.contiguous(),
                   out = out_in.contiguous(), lse = lse_in.contiguous();
  const auto bias = contiguous(bias_in);
  const auto mask = contiguous(mask_in);
  at::Tensor d_dep = at::empty(dep.sizes(), dep.options()),
             d_head = at::empty(dep.sizes(), dep.options()),
             d_value = at::empty(dep.sizes(), dep.options());
  if (dep.numel() == 0) return {d_dep, d_head, d_value};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, dep.scalar_type(), "masked_block_attn_bwd_cuda", [&] {
        using A = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
        Args<scalar_t, A> a =
            base_args<scalar_t, A>(dep, head, value, bias, mask, block_len, dir, scale);
        a.grad_out = grad_out.data_ptr<scalar_t>();
        a.out_in = out.data_ptr<scalar_t>();
        a.lse_in = lse.data_ptr<A>();
        a.d_dep = d_dep.data_ptr<scalar_t>();
        a.d_head = d_head.data_ptr<scalar_t>();
        a.d_value = d_value.data_ptr<scalar_t>();
        launch_backward(a, tile, stream);
      });
  return {d_dep, d_head, d_value};
}

}  // namespace

TORCH_LIBRARY_IMPL(blosa, CUDA, m) {
  m.impl("masked_block_attn_fwd", &forward_cuda);
  m.impl("masked_block_attn_bwd", &backward_cuda);
}

}  // namespace blosa
