// Schemas of the blosa ops and the device-independent public entry point.
//
// masked_block_attn is a composite of masked_block_attn_fwd, which returns the output and the
// per-(query, feature) log-sum-exp that masked_block_attn_bwd needs. The backward returns
// d_bias too ([d], or [0] without a bias): the sum of d_head, which the kernels of short
// blocks add up as they go. Autograd is registered on the _fwd op (csrc/autograd.cpp), so
// every device's kernels get it.
#include <Python.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <torch/library.h>

#include "op_checks.h"

// Makes `import blosa._C` work; the module itself is empty, its import registers the ops.
extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}

namespace blosa {
namespace {

at::Tensor masked_block_attn(const at::Tensor& dep, const at::Tensor& head,
                             const at::Tensor& value, const std::optional<at::Tensor>& bias,
                             const std::optional<at::Tensor>& mask, int64_t block_len,
                             const std::string& direction, double scale) {
  check_attn_args(dep, head, value, bias, mask, direction, scale);
  static auto fwd = c10::Dispatcher::singleton()
                        .findSchemaOrThrow("blosa::masked_block_attn_fwd", "")
                        .typed<std::tuple<at::Tensor, at::Tensor>(
                            const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                            int64_t, c10::string_view, double, bool)>();
  // lse is only for backward: a call that no gradient will reach skips it, a third of the
  // forward's memory traffic at the paper's r = 8 in bfloat16 (the rule of torch's
  // scaled_dot_product_attention for its log-sum-exp). Short blocks on CUDA skip it even then:
  // their backward recomputes out and lse for free (forward_saves_lse).
  const bool grad_wanted =
      at::GradMode::is_enabled() && (dep.requires_grad() || head.requires_grad() ||
                                     value.requires_grad() || (bias && bias->requires_grad()));
  const bool compute_lse = grad_wanted && forward_saves_lse(dep, block_len);
  return std::get<0>(
      fwd.call(dep, head, value, bias, mask, block_len, direction, scale, compute_lse));
}

}  // namespace

TORCH_LIBRARY(blosa, m) {
  m.def(
      "masked_block_attn(Tensor dep, Tensor head, Tensor value, Tensor? bias, Tensor? mask, "
      "int block_len, str direction, float scale=5.0) -> Tensor");
  m.def(
      "masked_block_attn_fwd(Tensor dep, Tensor head, Tensor value, Tensor? bias, Tensor? mask, "
      "int block_len, str direction, float scale, bool compute_lse=True) "
      "-> (Tensor out, Tensor lse)");
  m.def(
      "masked_block_attn_bwd(Tensor grad_out, Tensor dep, Tensor head, Tensor value, "
      "Tensor? bias, Tensor? mask, Tensor out, Tensor lse, int block_len, str direction, "
      "float scale) -> (Tensor d_dep, Tensor d_head, Tensor d_value, Tensor d_bias)");
}

TORCH_LIBRARY_IMPL(blosa, CompositeImplicitAutograd, m) {
  m.impl("masked_block_attn", &masked_block_attn);
}

}  // namespace blosa
