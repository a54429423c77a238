// The CUDA kernels of csrc/cuda/, run on the CPU thread by thread (see host_shim.h), as the
// ops blosa_emulated::fwd / bwd. Kernel choice, template arguments and launch geometry come
// from csrc/cuda/dispatch.h, exactly as on the GPU; only the launch itself differs. Built on the
// fly by tests/test_cuda_emulated.py.
#include "host_shim.h"  // first: defines the CUDA keywords the kernel headers use

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <atomic>

#include "../../csrc/cuda/dispatch.h"

namespace {

using blosa::cuda::Geometry;

// Launches (of persistent kernels, of dense ones, of dense ones with their loads first, of
// forwards with reciprocal_newton, of staged small-block kernels, of all) so far, for tests of
// the dispatcher's choices.
std::atomic<int64_t> persistent_launches{0};
std::atomic<int64_t> dense_launches{0};
std::atomic<int64_t> loads_first_launches{0};
std::atomic<int64_t> fma_reciprocal_launches{0};
std::atomic<int64_t> staged_launches{0};
std::atomic<int64_t> launches{0};  // every launch

// Runs every thread of the grid; thread blocks in parallel (their writes are disjoint), the
// threads of one as fibers (host_shim.h). A persistent kernel's grid is cut to
// persistent_blocks thread blocks (where a GPU holds as many as fit at once), so that its
// threads loop over several blocks of work each.
struct EmulatedLaunch {
  int64_t persistent_blocks = 1;

  template <typename Kernel, typename... KernelArgs>
  void operator()(Kernel kernel, const Geometry& whole, const KernelArgs&... args) const {
    Geometry g = whole;
    if (g.persistent) {
      g.gx = std::min(g.gx, persistent_blocks);
      ++persistent_launches;
    }
    if (g.dense) ++dense_launches;
    if (g.loads_first) ++loads_first_launches;
    if (g.fma_reciprocal) ++fma_reciprocal_launches;
    if (g.staged) ++staged_launches;
    ++launches;
    at::parallel_for(0, g.gx * g.gy, 1, [&](int64_t begin, int64_t end) {
      gridDim = {static_cast<unsigned int>(g.gx), static_cast<unsigned int>(g.gy), 1};
      blockDim = {static_cast<unsigned int>(g.bx), static_cast<unsigned int>(g.by), 1};
      const std::function<void()> thread = [&] { kernel(args...); };
      for (int64_t b = begin; b < end; ++b) {
        blockIdx = {static_cast<unsigned int>(b % g.gx), static_cast<unsigned int>(b / g.gx), 0};
        emulation::run_thread_block(blockDim, thread);
      }
    });
  }
};

std::tuple<at::Tensor, at::Tensor> fwd(const at::Tensor& dep_in, const at::Tensor& head_in,
                                       const at::Tensor& value_in,
                                       const std::optional<at::Tensor>& bias,
                                       const std::optional<at::Tensor>& mask, int64_t block_len,
                                       c10::string_view direction, double scale, int64_t tile,
                                       bool staged, bool compute_lse, int64_t small_vec,
                                       int64_t persistent_blocks, bool small_dense,
                                       bool small_loads_first, bool small_fma_reciprocal,
                                       bool small_staged, int64_t small_staged_blocks) {
  const at::Tensor dep = dep_in.contiguous(), head = head_in.contiguous(),
                   value = value_in.contiguous();
  const auto bias_c = blosa::contiguous(bias), mask_c = blosa::contiguous(mask);
  // NaN-filled, so an element no thread writes fails the comparison with the reference.
  at::Tensor out = at::full_like(dep, NAN);
  at::Tensor lse = compute_lse ? at::full(dep.sizes(), NAN,
                                          dep.options().dtype(blosa::lse_dtype(dep.scalar_type())))
                               : blosa::no_lse(dep);
  if (dep.numel() == 0) return {out, lse};
  blosa::cuda::KernelOptions opt{static_cast<int>(tile), false, staged,
                                 static_cast<int>(small_vec), persistent_blocks > 0,
                                 small_dense, small_loads_first, small_fma_reciprocal};
  opt.small_staged_forward = small_staged;
  opt.small_staged_blocks = static_cast<int>(small_staged_blocks);
  blosa::cuda::run_forward(dep, head, value, bias_c, mask_c, block_len, std::string(direction),
                           scale, opt, out, lse, EmulatedLaunch{persistent_blocks});
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> bwd(
    const at::Tensor& grad_out_in, const at::Tensor& dep_in, const at::Tensor& head_in,
    const at::Tensor& value_in, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& mask, const at::Tensor& out_in, const at::Tensor& lse_in,
    int64_t block_len, c10::string_view direction, double scale, int64_t tile, bool fused,
    int64_t small_vec, int64_t persistent_blocks, bool small_dense, bool small_loads_first,
    bool column_sums_one_pass, bool small_staged, int64_t small_staged_blocks) {
  const at::Tensor grad_out = grad_out_in.contiguous(), dep = dep_in.contiguous(),
                   head = head_in.contiguous(), value = value_in.contiguous(),
                   out = out_in.contiguous(), lse = lse_in.contiguous();
  const auto bias_c = blosa::contiguous(bias), mask_c = blosa::contiguous(mask);
  at::Tensor d_dep = at::full_like(dep, NAN), d_head = at::full_like(dep, NAN),
             d_value = at::full_like(dep, NAN),
             d_bias = at::full({bias ? dep.size(2) : 0}, NAN, dep.options());
  if (dep.numel() == 0) return {d_dep, d_head, d_value, d_bias.zero_()};
  blosa::cuda::KernelOptions opt{static_cast<int>(tile), fused, false,
                                 static_cast<int>(small_vec), persistent_blocks > 0,
                                 small_dense, small_loads_first};
  opt.column_sums_one_pass = column_sums_one_pass;
  opt.small_staged_backward = small_staged;
  opt.small_staged_blocks = static_cast<int>(small_staged_blocks);
  blosa::cuda::run_backward(grad_out, dep, head, value, bias_c, mask_c, out, lse, block_len,
                            std::string(direction), scale, opt, d_dep, d_head, d_value, d_bias,
                            EmulatedLaunch{persistent_blocks});
  return {d_dep, d_head, d_value, d_bias};
}

// The vector width the small-block forward takes for dep (as dep, head, value and out) when
// asked for small_vec: cuda::small_vec, which the launch uses.
int64_t small_vec_for(const at::Tensor& dep, int64_t small_vec) {
  int64_t vec = 0;
  blosa::cuda::with_base_args(dep, dep, dep, std::nullopt, std::nullopt, 1, "forward", 5.0,
                              [&](auto a) {
    a.out = const_cast<typename decltype(a)::Scalar*>(a.dep);
    vec = blosa::cuda::small_vec(a, {8, false, false, static_cast<int>(small_vec)});
  });
  return vec;
}

// cuda::sum_columns of x ([rows, d], rows >= 1) into a [d] tensor of dtype out_dtype, with x's
// accumulation type, as run_backward makes d_bias: its kernels and its chunking of the rows
// (one_pass: KernelOptions::column_sums_one_pass).
at::Tensor column_sums(const at::Tensor& x_in, at::ScalarType out_dtype, bool one_pass) {
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::full({x.size(1)}, NAN, x.options().dtype(out_dtype));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "column_sums", [&] {
    using In = scalar_t;
    const In* const rows = x.data_ptr<In>();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out_dtype, "column_sums", [&] {
      blosa::cuda::sum_columns<blosa::cuda::Accumulate<In>>(
          rows, x.size(0), x.size(1), out.data_ptr<scalar_t>(), x.options(), one_pass,
          EmulatedLaunch{});
    });
  });
  return out;
}

int64_t persistent_launch_count() { return persistent_launches.load(); }
int64_t dense_launch_count() { return dense_launches.load(); }
int64_t loads_first_launch_count() { return loads_first_launches.load(); }
int64_t fma_reciprocal_launch_count() { return fma_reciprocal_launches.load(); }
int64_t staged_launch_count() { return staged_launches.load(); }
int64_t launch_count() { return launches.load(); }

// blosa::reciprocal_newton<steps> of every element of x (float32).
at::Tensor reciprocal_newton(const at::Tensor& x_in, int64_t steps) {
  TORCH_CHECK(x_in.scalar_type() == at::kFloat && steps >= 1 && steps <= 3);
  const at::Tensor x = x_in.contiguous();
  at::Tensor r = at::empty_like(x);
  const float* src = x.data_ptr<float>();
  float* dst = r.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    dst[i] = steps == 1   ? blosa::reciprocal_newton<1>(src[i])
             : steps == 2 ? blosa::reciprocal_newton<2>(src[i])
                          : blosa::reciprocal_newton<3>(src[i]);
  }
  return r;
}

// FastDivisor::of(divisor).div(n) for every element of n (int64 values in [0, 2^31)).
at::Tensor fast_div(int64_t divisor, const at::Tensor& n) {
  const auto f = blosa::cuda::FastDivisor::of(static_cast<uint32_t>(divisor));
  at::Tensor q = at::empty_like(n);
  const auto in = n.contiguous();
  const int64_t* src = in.data_ptr<int64_t>();
  int64_t* dst = q.data_ptr<int64_t>();
  for (int64_t i = 0; i < in.numel(); ++i) dst[i] = f.div(static_cast<uint32_t>(src[i]));
  return q;
}

}  // namespace

TORCH_LIBRARY(blosa_emulated, m) {
  m.def("fast_div(int divisor, Tensor n) -> Tensor");
  m.def("small_vec_for(Tensor dep, int small_vec) -> int");
  m.def("persistent_launch_count() -> int", &persistent_launch_count);  // no tensor: catch-all
  m.def("dense_launch_count() -> int", &dense_launch_count);
  m.def("loads_first_launch_count() -> int", &loads_first_launch_count);
  m.def("fma_reciprocal_launch_count() -> int", &fma_reciprocal_launch_count);
  m.def("staged_launch_count() -> int", &staged_launch_count);
  m.def("reciprocal_newton(Tensor x, int steps) -> Tensor");
  m.def("launch_count() -> int", &launch_count);
  m.def("column_sums(Tensor x, ScalarType out_dtype, bool one_pass=False) -> Tensor");
  m.def(
      "fwd(Tensor dep, Tensor head, Tensor value, Tensor? bias, Tensor? mask, int block_len, "
      "str direction, float scale, int tile, bool staged, bool compute_lse=True, int small_vec=1, "
      "int persistent_blocks=0, bool small_dense=True, bool small_loads_first=False, "
      "bool small_fma_reciprocal=False, bool small_staged=False, int small_staged_blocks=1) "
      "-> (Tensor, Tensor)");
  m.def(
      "bwd(Tensor grad_out, Tensor dep, Tensor head, Tensor value, Tensor? bias, Tensor? mask, "
      "Tensor out, Tensor lse, int block_len, str direction, float scale, int tile, bool fused, "
      "int small_vec=1, int persistent_blocks=0, bool small_dense=True, bool small_loads_first=False, "
      "bool column_sums_one_pass=False, bool small_staged=False, int small_staged_blocks=1) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(blosa_emulated, CPU, m) {
  m.impl("fwd", &fwd);
  m.impl("fast_div", &fast_div);
  m.impl("reciprocal_newton", &reciprocal_newton);
  m.impl("small_vec_for", &small_vec_for);
  m.impl("bwd", &bwd);
  m.impl("column_sums", &column_sums);
}
