// Argument checks of the masked_block_attn ops, shared by every device's entry points.
// They mirror python/blosa/_validate.py and name the argument at fault.
#pragma once

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
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

inline void check_attn_args(const at::Tensor& dep, const at::Tensor& head, const at::Tensor& value,
                            const std::optional<at::Tensor>& bias,
                            const std::optional<at::Tensor>& mask, const std::string& direction,
                            double scale) {
  TORCH_CHECK_VALUE(dep.dim() == 3, "dep must be 3-D [B, n, d], got shape ", dep.sizes());
  TORCH_CHECK_VALUE(head.dim() == 3, "head must be 3-D [B, n, d], got shape ", head.sizes());
  TORCH_CHECK_VALUE(value.dim() == 3, "value must be 3-D [B, n, d], got shape ", value.sizes());
  TORCH_CHECK_VALUE(head.sizes() == dep.sizes() && value.sizes() == dep.sizes(),
                    "dep, head and value must have the same shape [B, n, d], got dep ",
                    dep.sizes(), ", head ", head.sizes(), ", value ", value.sizes());
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
  const int64_t B = dep.size(0), n = dep.size(1), d = dep.size(2);
  if (bias.has_value()) {
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == d, "bias must have shape [d] = [", d,
                      "], got ", bias->sizes());
    TORCH_CHECK_TYPE(bias->scalar_type() == dep.scalar_type(), "bias has dtype ",
                     bias->scalar_type(), " but dep has ", dep.scalar_type(), "; use one dtype");
    TORCH_CHECK_VALUE(bias->device() == dep.device(), "bias is on ", bias->device(),
                      " but dep is on ", dep.device(), "; use one device");
  }
  if (mask.has_value()) {
    TORCH_CHECK_TYPE(mask->scalar_type() == at::kBool,
                     "mask must be a bool tensor (True = real token), got ", mask->scalar_type());
    TORCH_CHECK_VALUE(mask->dim() == 2 && mask->size(0) == B && mask->size(1) == n,
                      "mask must have shape [B, n] = [", B, ", ", n, "], got ", mask->sizes());
    TORCH_CHECK_VALUE(mask->device() == dep.device(), "mask is on ", mask->device(),
                      " but dep is on ", dep.device(), "; use one device");
  }
  direction_from_string(direction);
  TORCH_CHECK_VALUE(std::isfinite(scale) && scale > 0,
                    "scale must be a finite positive number, got ", scale);
}

// dtype of the saved log-sum-exp: float64 for float64 inputs, float32 otherwise
// (python/blosa/ops.py's fake kernel says the same).
inline at::ScalarType lse_dtype(at::ScalarType input) {
  return input == at::kDouble ? at::kDouble : at::kFloat;
}

// The lse masked_block_attn_fwd returns when called with compute_lse=false: empty, [0] in
// lse_dtype (as torch's efficient attention does without compute_log_sumexp).
inline at::Tensor no_lse(const at::Tensor& dep) {
  return at::empty({0}, dep.options().dtype(lse_dtype(dep.scalar_type())));
}

// Checks of masked_block_attn_bwd's extra inputs against dep: grad_out and out [B, n, d] in
// dep's dtype, lse [B, n, d] in lse_dtype, all on dep's device.
inline void check_saved_tensors(const at::Tensor& grad_out, const at::Tensor& out,
                                const at::Tensor& lse, const at::Tensor& dep) {
  for (const auto* t : {&grad_out, &out}) {
    TORCH_CHECK_VALUE(t->sizes() == dep.sizes() && t->scalar_type() == dep.scalar_type() &&
                          t->device() == dep.device(),
                      "grad_out and out must match dep's shape, dtype and device, got ",
                      t->sizes(), " ", t->scalar_type(), " on ", t->device());
  }
  const auto want = lse_dtype(dep.scalar_type());
  TORCH_CHECK_VALUE(lse.sizes() == dep.sizes() && lse.scalar_type() == want &&
                        lse.device() == dep.device(),
                    "lse must have dep's shape, dtype ", want, " and dep's device, got ",
                    lse.sizes(), " ", lse.scalar_type(), " on ", lse.device());
}

inline std::optional<at::Tensor> contiguous(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional<at::Tensor>(t->contiguous()) : std::nullopt;
}

// Block length actually used: <= 0 or >= n means one block over the whole sequence.
inline int64_t resolve_block_len(int64_t block_len, int64_t n) {
  return (block_len <= 0 || block_len >= n) ? n : block_len;
}

}  // namespace blosa
