// CUDA entry points of masked_block_attn_fwd / _bwd: check, make contiguous, allocate, launch
// the kernel that dispatch.h chooses (small_blocks.cuh, tiled.cuh and the others of this folder)
// on the current stream. Same meaning and edge cases as the CPU kernels (csrc/cpu/): a query
// with no allowed key gets out = 0 and lse = +inf, decided from the mask and the block
// structure, never from values. Inputs float32, float16, bfloat16 (float accumulation) or
// float64; outputs in the input dtype, lse float32 (float64 for float64).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "../op_checks.h"
#include "dispatch.h"

namespace blosa {
namespace {

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

// c10::cuda::getCurrentCUDAStream is at::cuda::getCurrentCUDAStream; its header is used instead
// of ATen/cuda/CUDAContext.h, which needs the cuSPARSE/cuBLAS headers that a bare toolkit (the
// CI's pip-installed one) lacks.

// Tuning switches of the tiled kernels, read at every call so that a benchmark can compare
// their values in one process (bench/gpu_tools/gpu_rates.py --cuda-variants):
//   BLOSA_CUDA_TILE=4|8             rows per thread. More rows reuse each loaded key more often
//                                   and keep more independent special-function ops in flight;
//                                   fewer leave more warps per SM (fewer registers).
//   BLOSA_CUDA_BACKWARD=split|fused the backward in one kernel that computes each pair's tanh
//                                   and exp once (fused_backward.cuh; default), or in two that
//                                   need no scratch memory (split: lowest memory).
//   BLOSA_CUDA_FORWARD=stream|staged the thread block stages the keys in shared memory
//                                   (staged_forward.cuh; default), or each warp streams its own.
//   BLOSA_CUDA_SMALL_VEC=1|2        features per thread of the small-block forward and
//                                   recomputing backward (blocks of at most 8): 2 loads each
//                                   row's two features in one access.
//   BLOSA_CUDA_SMALL_PERSISTENT=0|1 those two kernels as persistent ones: a grid the GPU holds
//                                   at once, each thread looping over blocks with the next
//                                   block's loads in flight while it computes.
//   BLOSA_CUDA_SMALL_DENSE=0|1      those two kernels compiled for calls with no mask and every
//                                   block 8 tokens long (default 1), where a call is so.
//   BLOSA_CUDA_SMALL_LOADS_FIRST=0|1 those dense kernels with every load issued before any
//                                   math (default 1; float accumulation).
//   BLOSA_CUDA_SMALL_RCP=mufu|fma   the dense forward with its loads first, 16-bit inputs: each
//                                   row's 1 / sum from the special-function unit or from
//                                   Newton steps on the FMA pipe (default).
//   BLOSA_CUDA_COLUMN_SUMS=two|one  d_bias's column sums of up to 4096 rows in two launches
//                                   (default) or one (column_sums.cuh).
//   BLOSA_CUDA_SMALL_STAGED=0|1|forward|backward  the dense forward, backward, both (1) or
//                                   neither (default) with each block's rows staged through
//                                   shared memory as 16-byte vectors (staged_small.cuh).
//   BLOSA_CUDA_SMALL_STAGED_BLOCKS=N  blocks each staged thread block runs in turn (default 1).
// The value of tuning variable `name`, which must be one of `allowed`; nullopt where it is
// unset.
std::optional<std::string> tuning_choice(const char* name,
                                         std::initializer_list<const char*> allowed) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  const std::string v(value);
  bool found = false;
  std::string choices;  // "a or b", "a, b, c or d"
  size_t i = 0;
  for (const char* a : allowed) {
    found = found || v == a;
    choices += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + std::string(a);
    ++i;
  }
  TORCH_CHECK_VALUE(found, name, " must be ", choices, ", got '", v, "'");
  return v;
}

cuda::KernelOptions kernel_options_from_env() {
  cuda::KernelOptions opt;  // the defaults, where a variable is unset
  if (const auto v = tuning_choice("BLOSA_CUDA_TILE", {"4", "8"})) opt.tile = std::stoi(*v);
  if (const auto v = tuning_choice("BLOSA_CUDA_BACKWARD", {"split", "fused"})) {
    opt.fused_backward = *v == "fused";
  }
  if (const auto v = tuning_choice("BLOSA_CUDA_FORWARD", {"stream", "staged"})) {
    opt.staged_forward = *v == "staged";
  }
  if (const auto v = tuning_choice("BLOSA_CUDA_SMALL_VEC", {"1", "2"})) {
    opt.small_vec = std::stoi(*v);
  }
  if (const auto v = tuning_choice("BLOSA_CUDA_SMALL_PERSISTENT", {"0", "1"})) {
    opt.small_persistent = *v == "1";
  }
  if (const auto v = tuning_choice("BLOSA_CUDA_SMALL_DENSE", {"0", "1"})) {
    opt.small_dense = *v == "1";
  }
  if (const auto v = tuning_choice("BLOSA_CUDA_SMALL_LOADS_FIRST", {"0", "1"})) {
    opt.small_loads_first = *v == "1";
  }
  if (const auto v = tuning_choice("BLOSA_CUDA_SMALL_RCP", {"mufu", "fma"})) {
    opt.small_fma_reciprocal = *v == "fma";
  }
  if (const auto v = tuning_choice("BLOSA_CUDA_COLUMN_SUMS", {"two", "one"})) {
    opt.column_sums_one_pass = *v == "one";
  }
  if (const auto v = tuning_choice("BLOSA_CUDA_SMALL_STAGED", {"0", "1", "forward", "backward"})) {
    opt.small_staged_forward = *v == "1" || *v == "forward";
    opt.small_staged_backward = *v == "1" || *v == "backward";
  }
  if (const char* v = std::getenv("BLOSA_CUDA_SMALL_STAGED_BLOCKS"); v != nullptr && *v != '\0') {
    const std::string s(v);
    const bool digits = s.size() <= 4 && s.find_first_not_of("0123456789") == std::string::npos;
    TORCH_CHECK_VALUE(digits && std::stoi(s) >= 1,
                      "BLOSA_CUDA_SMALL_STAGED_BLOCKS must be a whole number from 1 to 9999, got '",
                      s, "'");
    opt.small_staged_blocks = std::stoi(s);
  }
  return opt;
}

// Thread blocks of `threads` threads of `kernel` that the current device holds at once (all
// its SMs, as many per SM as the kernel's registers allow), cached per kernel, block size and
// device.
int64_t resident_blocks(const void* kernel, int threads) {
  static std::mutex lock;
  static std::map<std::tuple<const void*, int, int>, int64_t> cache;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> guard(lock);
  const auto key = std::make_tuple(kernel, threads, device);
  if (const auto hit = cache.find(key); hit != cache.end()) return hit->second;
  int sms = 0, per_sm = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  const int64_t blocks = int64_t(sms) * std::max(per_sm, 1);
  cache.emplace(key, blocks);
  return blocks;
}

// Launches a kernel chosen by dispatch_forward / dispatch_backward on `stream`.
struct GpuLaunch {
  cudaStream_t stream;
  template <typename Kernel, typename... KernelArgs>
  void operator()(Kernel kernel, const cuda::Geometry& g, const KernelArgs&... args) const {
    int64_t gx = g.gx;
    if (g.persistent) {
      gx = std::min(gx, resident_blocks(reinterpret_cast<const void*>(kernel),
                                        static_cast<int>(g.bx * g.by)));
    }
    const dim3 grid(static_cast<unsigned int>(gx), static_cast<unsigned int>(g.gy));
    const dim3 block(static_cast<unsigned int>(g.bx), static_cast<unsigned int>(g.by));
    kernel<<<grid, block, 0, stream>>>(args...);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
};

std::tuple<at::Tensor, at::Tensor> forward_cuda(const at::Tensor& dep_in, const at::Tensor& head_in,
                                                const at::Tensor& value_in,
                                                const std::optional<at::Tensor>& bias_in,
                                                const std::optional<at::Tensor>& mask_in,
                                                int64_t block_len, c10::string_view direction,
                                                double scale, bool compute_lse) {
  const std::string dir(direction);
  check_attn_args(dep_in, head_in, value_in, bias_in, mask_in, dir, scale);
  check_cuda_inputs(dep_in);
  const cuda::KernelOptions opt = kernel_options_from_env();
  const c10::cuda::CUDAGuard guard(dep_in.device());
  const at::Tensor dep = dep_in.contiguous(), head = head_in.contiguous(),
                   value = value_in.contiguous();
  const auto bias = contiguous(bias_in);
  const auto mask = contiguous(mask_in);
  // Every element of out and lse is written by the kernels (no zero-fill pass).
  at::Tensor out = at::empty(dep.sizes(), dep.options());
  at::Tensor lse = compute_lse ? at::empty(dep.sizes(),
                                           dep.options().dtype(lse_dtype(dep.scalar_type())))
                               : no_lse(dep);
  if (dep.numel() == 0) return {out, lse};
  cuda::run_forward(dep, head, value, bias, mask, block_len, dir, scale, opt, out, lse,
                    GpuLaunch{c10::cuda::getCurrentCUDAStream()});
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward_cuda(
    const at::Tensor& grad_out_in, const at::Tensor& dep_in, const at::Tensor& head_in,
    const at::Tensor& value_in, const std::optional<at::Tensor>& bias_in,
    const std::optional<at::Tensor>& mask_in, const at::Tensor& out_in, const at::Tensor& lse_in,
    int64_t block_len, c10::string_view direction, double scale) {
  const std::string dir(direction);
  check_attn_args(dep_in, head_in, value_in, bias_in, mask_in, dir, scale);
  check_cuda_inputs(dep_in);
  check_saved_tensors(grad_out_in, out_in, lse_in, dep_in);
  const cuda::KernelOptions opt = kernel_options_from_env();
  const c10::cuda::CUDAGuard guard(dep_in.device());
  const at::Tensor grad_out = grad_out_in.contiguous(), dep = dep_in.contiguous(),
                   head = head_in.contiguous(), value = value_in.contiguous(),
                   out = out_in.contiguous(), lse = lse_in.contiguous();
  const auto bias = contiguous(bias_in);
  const auto mask = contiguous(mask_in);
  at::Tensor d_dep = at::empty(dep.sizes(), dep.options()),
             d_head = at::empty(dep.sizes(), dep.options()),
             d_value = at::empty(dep.sizes(), dep.options()),
             d_bias = at::empty({bias ? dep.size(2) : 0}, dep.options());
  if (dep.numel() == 0) return {d_dep, d_head, d_value, d_bias.zero_()};
  cuda::run_backward(grad_out, dep, head, value, bias, mask, out, lse, block_len, dir, scale, opt,
                     d_dep, d_head, d_value, d_bias, GpuLaunch{c10::cuda::getCurrentCUDAStream()});
  return {d_dep, d_head, d_value, d_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(blosa, CUDA, m) {
  m.impl("masked_block_attn_fwd", &forward_cuda);
  m.impl("masked_block_attn_bwd", &backward_cuda);
}

}  // namespace blosa
