// CPU entry points of masked_block_attn_fwd / _bwd: check, make contiguous, allocate, and run
// the fused loops of attn_kernels.cpp. Extra memory is O(B·n·d): out, lse and the gradients.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>

#include "../op_checks.h"
#include "attn_kernels.h"

namespace blosa {
namespace {

cpu::AttnShape shape_of(const at::Tensor& dep, int64_t block_len, const std::string& direction,
                        double scale) {
  const int64_t n = dep.size(1);
  return {dep.size(0), n, dep.size(2), resolve_block_len(block_len, n),
          direction_from_string(direction), scale};
}

void check_cpu_dtype(const at::Tensor& dep) {
  TORCH_CHECK_TYPE(dep.scalar_type() == at::kFloat || dep.scalar_type() == at::kDouble,
                   "the CPU kernels of masked_block_attn take float32 or float64 inputs, got ",
                   dep.scalar_type(), " (dep)");
}

template <typename T>
const T* data_or_null(const std::optional<at::Tensor>& t) {
  return t.has_value() ? t->data_ptr<T>() : nullptr;
}

std::tuple<at::Tensor, at::Tensor> forward_cpu(const at::Tensor& dep_in, const at::Tensor& head_in,
                                               const at::Tensor& value_in,
                                               const std::optional<at::Tensor>& bias_in,
                                               const std::optional<at::Tensor>& mask_in,
                                               int64_t block_len, c10::string_view direction,
                                               double scale, bool compute_lse) {
  const std::string dir(direction);
  check_attn_args(dep_in, head_in, value_in, bias_in, mask_in, dir, scale);
  check_cpu_dtype(dep_in);
  const at::Tensor dep = dep_in.contiguous(), head = head_in.contiguous(),
                   value = value_in.contiguous();
  const auto bias = contiguous(bias_in);
  const auto mask = contiguous(mask_in);
  at::Tensor out = at::zeros_like(dep);
  // +inf marks queries without keys, so that backward's exp(s - lse) is 0 there.
  at::Tensor lse = compute_lse ? at::full_like(dep, std::numeric_limits<double>::infinity(),
                                               dep.options().dtype(lse_dtype(dep.scalar_type())))
                               : no_lse(dep);
  if (dep.numel() == 0) return {out, lse};
  const cpu::AttnShape s = shape_of(dep, block_len, dir, scale);
  AT_DISPATCH_FLOATING_TYPES(dep.scalar_type(), "masked_block_attn_fwd_cpu", [&] {
    cpu::forward<scalar_t>(s, dep.data_ptr<scalar_t>(), head.data_ptr<scalar_t>(),
                           value.data_ptr<scalar_t>(), data_or_null<scalar_t>(bias),
                           data_or_null<bool>(mask), out.data_ptr<scalar_t>(),
                           compute_lse ? lse.data_ptr<scalar_t>() : nullptr);
  });
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward_cpu(
    const at::Tensor& grad_out_in, const at::Tensor& dep_in, const at::Tensor& head_in,
    const at::Tensor& value_in, const std::optional<at::Tensor>& bias_in,
    const std::optional<at::Tensor>& mask_in, const at::Tensor& out_in, const at::Tensor& lse_in,
    int64_t block_len, c10::string_view direction, double scale) {
  const std::string dir(direction);
  check_attn_args(dep_in, head_in, value_in, bias_in, mask_in, dir, scale);
  check_cpu_dtype(dep_in);
  check_saved_tensors(grad_out_in, out_in, lse_in, dep_in);
  const at::Tensor grad_out = grad_out_in.contiguous(), dep = dep_in.contiguous(),
                   head = head_in.contiguous(), value = value_in.contiguous(),
                   out = out_in.contiguous(), lse = lse_in.contiguous();
  const auto bias = contiguous(bias_in);
  const auto mask = contiguous(mask_in);
  at::Tensor d_dep = at::zeros_like(dep), d_head = at::zeros_like(dep),
             d_value = at::zeros_like(dep);
  // z = dep_i + head_j + bias, so d_bias is d_head summed over batch and queries.
  const auto bias_grad = [&] {
    return bias ? d_head.sum(at::IntArrayRef{0, 1}) : at::empty({0}, dep.options());
  };
  if (dep.numel() == 0) return {d_dep, d_head, d_value, bias_grad()};
  const cpu::AttnShape s = shape_of(dep, block_len, dir, scale);
  const bool saved = !is_no_lse(lse);  // else the kernels recompute out and lse
  AT_DISPATCH_FLOATING_TYPES(dep.scalar_type(), "masked_block_attn_bwd_cpu", [&] {
    cpu::backward<scalar_t>(s, grad_out.data_ptr<scalar_t>(), dep.data_ptr<scalar_t>(),
                            head.data_ptr<scalar_t>(), value.data_ptr<scalar_t>(),
                            data_or_null<scalar_t>(bias), data_or_null<bool>(mask),
                            saved ? out.data_ptr<scalar_t>() : nullptr,
                            saved ? lse.data_ptr<scalar_t>() : nullptr,
                            d_dep.data_ptr<scalar_t>(), d_head.data_ptr<scalar_t>(),
                            d_value.data_ptr<scalar_t>());
  });
  return {d_dep, d_head, d_value, bias_grad()};
}

}  // namespace

TORCH_LIBRARY_IMPL(blosa, CPU, m) {
  m.impl("masked_block_attn_fwd", &forward_cpu);
  m.impl("masked_block_attn_bwd", &backward_cpu);
}

}  // namespace blosa
