// Argument checks of the masked_block_attn ops, shared by every device's entry points.
// They mirror python/blosa/_validate.py and name the argument at fault.
#pragma once

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>
#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "blosa_math.h"

namespace blosa {

inline Direction direction_from_string(const std::string& direction) {
  if (direction == "forward") return Direction::kForward;
  if (direction == "backward") return Direction::kBackward;
  if (direction == "diag") return Direction::kDiag;
  if (direction == "all") return Direction::kAll;
  TORCH_CHECK_VALUE(false, "direction must be one of 'forward', 'backward', 'diag', 'all'; got '",
                    direction, "'");
}

// An ordinary dense tensor: the kernels read strided memory, and a nested or sparse tensor
// would otherwise fail in the dispatcher (or in sym_sizes()) without naming the argument.
inline void check_dense(const char* name, const at::Tensor& t) {
  TORCH_CHECK_TYPE(!t.is_nested(), name, " is a nested tensor; blosa takes padded tensors and a ",
                   "[B, n] mask: pass ", name, ".to_padded_tensor(0.0) and mask[b, i] = i < ",
                   "length of sequence b");
  TORCH_CHECK_TYPE(t.layout() == at::kStrided, name, " must be a dense (strided) tensor, got layout ",
                   t.layout());
}

// The dtype the kernels compute in and keep the saved log-sum-exp in: float64 for float64
// inputs, float32 otherwise (python/blosa/_validate.py's lse_dtype says the same).
inline at::ScalarType lse_dtype(at::ScalarType input) {
  return input == at::kDouble ? at::kDouble : at::kFloat;
}

// The kernels compute with c and 1/c in double for float64 inputs and in float for every other
// dtype: outside [smallest normal, sqrt(max)] of that type the output or the gradients are NaN
// or inf (python/blosa/_validate.py's SCALE_RANGE, which says why, is the same range).
template <typename A>
void check_scale_in(double scale, const char* compute) {
  const double low = std::numeric_limits<A>::min();
  const double high = std::sqrt(static_cast<double>(std::numeric_limits<A>::max()));
  if (scale >= low && scale <= high) return;
  std::ostringstream range;  // 3 significant digits, as Python's "{:.3g}"
  range << std::setprecision(3) << "[" << low << ", " << high << "]";
  TORCH_CHECK_VALUE(false, "scale must lie in ", range.str(), ", where the kernels' c and 1/c ",
                    "are finite in ", compute, ", got ", scale);
}

inline void check_scale_range(double scale, at::ScalarType input) {
  if (lse_dtype(input) == at::kDouble) {
    check_scale_in<double>(scale, "torch.float64");
  } else {
    check_scale_in<float>(scale, "torch.float32");
  }
}

// Sizes are read as SymInts: under torch.compile with dynamic shapes, these checks of the
// composite op then add guards relating B, n and d (equalities the shapes already satisfy)
// instead of fixing them to the traced values, which would recompile for every new length.
inline void check_attn_args(const at::Tensor& dep, const at::Tensor& head, const at::Tensor& value,
                            const std::optional<at::Tensor>& bias,
                            const std::optional<at::Tensor>& mask, const std::string& direction,
                            double scale) {
  check_dense("dep", dep);
  check_dense("head", head);
  check_dense("value", value);
  if (bias.has_value()) check_dense("bias", *bias);
  if (mask.has_value()) check_dense("mask", *mask);
  TORCH_CHECK_VALUE(dep.dim() == 3, "dep must be 3-D [B, n, d], got shape ", dep.sym_sizes());
  TORCH_CHECK_VALUE(head.dim() == 3, "head must be 3-D [B, n, d], got shape ", head.sym_sizes());
  TORCH_CHECK_VALUE(value.dim() == 3, "value must be 3-D [B, n, d], got shape ",
                    value.sym_sizes());
  TORCH_CHECK_VALUE(head.sym_sizes() == dep.sym_sizes() && value.sym_sizes() == dep.sym_sizes(),
                    "dep, head and value must have the same shape [B, n, d], got dep ",
                    dep.sym_sizes(), ", head ", head.sym_sizes(), ", value ", value.sym_sizes());
  TORCH_CHECK_TYPE(dep.is_floating_point(), "dep must be a floating-point tensor, got ",
                   dep.scalar_type());
  TORCH_CHECK_TYPE(head.scalar_type() == dep.scalar_type(), "head has dtype ", head.scalar_type(),
                   " but dep has ", dep.scalar_type(), "; use one dtype");
  TORCH_CHECK_TYPE(value.scalar_type() == dep.scalar_type(), "value has dtype ",
                   value.scalar_type(), " but dep has ", dep.scalar_type(), "; use one dtype");
  TORCH_CHECK_VALUE(head.device() == dep.device(), "head is on ", head.device(),
                    " but dep is on ", dep.device(), "; use one device");
  TORCH_CHECK_VALUE(value.device() == dep.device(), "value is on ", value.device(),
                    " but dep is on ", dep.device(), "; use one device");
  const c10::SymInt B = dep.sym_size(0), n = dep.sym_size(1), d = dep.sym_size(2);
  if (bias.has_value()) {
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->sym_size(0) == d, "bias must have shape [d] = [",
                      d, "], got ", bias->sym_sizes());
    TORCH_CHECK_TYPE(bias->scalar_type() == dep.scalar_type(), "bias has dtype ",
                     bias->scalar_type(), " but dep has ", dep.scalar_type(), "; use one dtype");
    TORCH_CHECK_VALUE(bias->device() == dep.device(), "bias is on ", bias->device(),
                      " but dep is on ", dep.device(), "; use one device");
  }
  if (mask.has_value()) {
    TORCH_CHECK_TYPE(mask->scalar_type() == at::kBool,
                     "mask must be a bool tensor (True = real token), got ", mask->scalar_type());
    TORCH_CHECK_VALUE(mask->dim() == 2 && mask->sym_size(0) == B && mask->sym_size(1) == n,
                      "mask must have shape [B, n] = [", B, ", ", n, "], got ", mask->sym_sizes());
    TORCH_CHECK_VALUE(mask->device() == dep.device(), "mask is on ", mask->device(),
                      " but dep is on ", dep.device(), "; use one device");
  }
  direction_from_string(direction);
  TORCH_CHECK_VALUE(std::isfinite(scale) && scale > 0,
                    "scale must be a finite positive number, got ", scale);
  check_scale_range(scale, dep.scalar_type());
}

// The lse masked_block_attn_fwd returns when called with compute_lse=false: empty, [0] in
// lse_dtype (as torch's efficient attention does without compute_log_sumexp).
inline at::Tensor no_lse(const at::Tensor& dep) {
  return at::empty({0}, dep.options().dtype(lse_dtype(dep.scalar_type())));
}

// Whether lse is the empty one of no_lse: the forward saved no lse (nor out), and
// masked_block_attn_bwd recomputes both.
inline bool is_no_lse(const at::Tensor& lse) { return lse.dim() == 1 && lse.size(0) == 0; }

// Checks of masked_block_attn_bwd's extra inputs against dep: grad_out [B, n, d] in dep's dtype
// on dep's device; lse in lse_dtype on dep's device, either [B, n, d] with out like grad_out, or
// empty (is_no_lse), when out is not read and may be empty too.
inline void check_saved_tensors(const at::Tensor& grad_out, const at::Tensor& out,
                                const at::Tensor& lse, const at::Tensor& dep) {
  const auto like_dep = [&](const at::Tensor& t) {
    return t.sizes() == dep.sizes() && t.scalar_type() == dep.scalar_type() &&
           t.device() == dep.device();
  };
  TORCH_CHECK_VALUE(like_dep(grad_out), "grad_out must match dep's shape, dtype and device, got ",
                    grad_out.sizes(), " ", grad_out.scalar_type(), " on ", grad_out.device());
  const auto want = lse_dtype(dep.scalar_type());
  TORCH_CHECK_VALUE((lse.sizes() == dep.sizes() || is_no_lse(lse)) &&
                        lse.scalar_type() == want && lse.device() == dep.device(),
                    "lse must have dep's shape (or be empty, [0]: recomputed), dtype ", want,
                    " and dep's device, got ", lse.sizes(), " ", lse.scalar_type(), " on ",
                    lse.device());
  const bool out_unused = is_no_lse(lse) && out.numel() == 0 && out.device() == dep.device();
  TORCH_CHECK_VALUE(out_unused || like_dep(out),
                    "out must match dep's shape, dtype and device (or be empty when lse is), got ",
                    out.sizes(), " ", out.scalar_type(), " on ", out.device());
}

// On CUDA, blocks of at most this many tokens train without lse: the public op's forward saves
// neither out nor lse, and the backward recomputes them. The CUDA kernel of such blocks
// (backward_small_recompute in csrc/cuda/small_blocks.cuh) holds each query's keys in
// registers, so it recomputes the softmax with no extra tanh or exp and skips reading out and
// lse: at r = 8 in bfloat16 that is 44 of the backward's 147 MB, and the forward's 29 MB of
// lse (bench/HISTORY.md). The CPU backward recomputes with a second tanh and exp per pair, so
// there a differentiable call keeps saving lse (recomputing made forward+backward 10% slower:
// bench/gpu_tools/cpu_lse_recompute.py).
constexpr int64_t kRecomputeMaxBlock = 8;

// Whether the forward of a differentiable call on dep's device saves lse. n = dep's length may
// be symbolic (torch.compile with dynamic shapes): then this guards on n > kRecomputeMaxBlock
// at most.
inline bool forward_saves_lse(const at::Tensor& dep, int64_t block_len) {
  if (!dep.is_cuda()) return true;
  if (block_len > 0 && block_len <= kRecomputeMaxBlock) return false;  // r <= block_len
  // r is block_len (> the limit) where it is shorter than n, else n.
  return dep.sym_size(1) > kRecomputeMaxBlock;
}

inline std::optional<at::Tensor> contiguous(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional<at::Tensor>(t->contiguous()) : std::nullopt;
}

// Block length actually used: <= 0 or >= n means one block over the whole sequence.
inline int64_t resolve_block_len(int64_t block_len, int64_t n) {
  return (block_len <= 0 || block_len >= n) ? n : block_len;
}

}  // namespace blosa
