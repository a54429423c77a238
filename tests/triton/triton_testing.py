"""Inputs and comparisons shared by the Triton kernel tests.

(Named uniquely: the test folders have no __init__.py, so a plain `helpers` or `conftest` import
could pick up another folder's module.)
"""
import zlib

import torch

from attn_cases import RESULTS, make_mask  # the mask kinds and result names of every backend's tests
from blosa.reference import masked_block_attn_ref

HAS_CUDA = torch.cuda.is_available()
DEVICE = "cuda" if HAS_CUDA else "cpu"
RTOL = 1e-4  # float32 results against the float64 reference


def float32_atol(scale: float) -> float:
    """Absolute tolerance of float32 results against the float64 reference at score scale c.

    2e-5, plus c · 1.5e-6 for the score's own error on a GPU: the exact float32 tanh there (1 -
    2 / (2^(2x log2 e) + 1) with ex2.approx and a 2-ulp division) is off by a few ulps of 1,
    absolutely, and the score c · tanh(z / c) multiplies that by c. At c = 100 the H200 gave a
    d_head 2.8e-5 off (2026-11-27). The float64 reference with its tanh moved at random by up to
    5e-7, the most test_triton_math.py's analysis expects, gives up to 4.3e-5 at c = 40 and
    1.23e-4 at c = 100 (beyond rtol; worst of 300 draws: `python
    tests/triton/test_triton_tolerance.py`), against 8e-5 and 1.7e-4 here. The interpreter's
    numpy math is correctly rounded, so on CPU the errors stay near 1e-6. Above c = 40 the
    kernels' tanh error is relative (TANH_POLY: a few ulps of |s|, not of c), so there this bound
    is loose; test_large_scales judges scales up to 1e12 by that of c = 20, their inputs' |z|.
    """
    return 2e-5 + 1.5e-6 * scale


def seed_of(*params) -> int:
    """A seed for make_inputs from a test case's parameters: every case draws its own inputs."""
    return zlib.crc32(repr(params).encode()) % 10_000


def distinct_configs(configs_list) -> list:
    """A kernel's autotune configs to test one at a time: every one on a GPU; in the
    interpreter, which has no warps or register caps, one of each tile shape (several configs
    share one)."""
    from blosa_kernels import configs

    return [c for i, c in enumerate(configs_list)
            if not configs.INTERPRET or all(c.kwargs != o.kwargs for o in configs_list[:i])]


def wide_pair_shapes() -> list:
    """(kernel kind, config) of each of configs.PAIRS_WIDE_CONFIGS, to test one at a time."""
    from blosa_kernels import configs

    return [(kind, config) for kind, wide in configs.PAIRS_WIDE_CONFIGS.items() for config in wide]


def use_only_config(monkeypatch, kind: str, config) -> None:
    """Launch kernel `kind` with autotune config `config` alone: in the interpreter its tile, on
    a GPU (where the tests launch the first config, autotuning off) the config compiled, with
    its register cap. The autotuner times a kernel's configs, it does not check them."""
    from blosa_kernels import configs

    monkeypatch.setitem(configs.CONFIGS, kind, ([config], configs.CONFIGS[kind][1]))
    plain_meta = configs.interpreter_meta
    monkeypatch.setattr(configs, "interpreter_meta", lambda k, d, R=1: (
        dict(config.kwargs) if k == kind else plain_meta(k, d, R)))


def record_launches(monkeypatch, flag: str) -> list:
    """(kernel kind, the launch's `flag` argument or None) of every kernel launch the op makes
    from now on, in order: blosa_kernels.op._launch wrapped for the test."""
    from blosa_kernels import op

    seen = []
    launch = op._launch

    def recording(kind, *args, **kwargs):
        seen.append((kind, kwargs.get(flag)))
        launch(kind, *args, **kwargs)

    monkeypatch.setattr(op, "_launch", recording)
    return seen


def make_inputs(B, n, d, mask_kind="none", bias=True, seed=0, dtype=torch.float64, device="cpu"):
    """(dep, head, value, bias, mask) drawn on CPU in float64, then cast and moved."""
    gen = torch.Generator().manual_seed(seed)
    dep, head, value = (torch.randn(B, n, d, generator=gen, dtype=torch.float64) * 2 for _ in range(3))
    b = torch.randn(d, generator=gen, dtype=torch.float64) if bias else None
    mask = make_mask(mask_kind, B, n, gen)
    grad = torch.randn(B, n, d, generator=gen, dtype=torch.float64)

    def cast(t):
        return None if t is None else t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)

    return [cast(t) for t in (dep, head, value, b, mask, grad)]


def run(fn, dep, head, value, bias, mask, grad, *settings):
    """out and the gradients (dep, head, value[, bias]) of fn for upstream gradient `grad`."""
    leaves = [t.detach().clone().requires_grad_() for t in (dep, head, value)]
    if bias is not None:
        leaves.append(bias.detach().clone().requires_grad_())
    b = leaves[3] if bias is not None else None
    out = fn(leaves[0], leaves[1], leaves[2], b, mask, *settings)
    grads = torch.autograd.grad(out, leaves, grad.to(out.dtype))
    return [out.detach(), *grads]


def reference64(dep, head, value, bias, mask, grad, *settings):
    """The oracle: masked_block_attn_ref in float64 on CPU."""
    f64 = [None if t is None else t.detach().cpu().double() if t.is_floating_point() else t.cpu()
           for t in (dep, head, value, bias, mask, grad)]
    return run(masked_block_attn_ref, *f64, *settings)


def check(case, got, want, scale=5.0):
    """float32 results `got` against the float64 reference's `want` (lists in RESULTS' order),
    within float32_atol(scale) and RTOL; `case` names the case in a failure."""
    atol = float32_atol(scale)
    for name, g, w in zip(RESULTS, got, want):
        assert torch.isfinite(g).all(), f"{case}: {name} has NaN/Inf"
        torch.testing.assert_close(g.cpu().double(), w, atol=atol, rtol=RTOL,
                                   msg=lambda m: f"{case} {name}: {m}")


def compare(B, n, d, block_len, direction, mask_kind, bias, scale, seed, atol_scale=None):
    """The Triton op in float32 against the float64 reference on inputs drawn from `seed`:
    out and every gradient. atol_scale: the scale whose float32_atol judges the results
    (default `scale`)."""
    from blosa_kernels import masked_block_attn_triton

    inputs = make_inputs(B, n, d, mask_kind, bias, seed, torch.float32, DEVICE)
    settings = (block_len, direction, scale)
    got = run(masked_block_attn_triton, *inputs, *settings)
    want = reference64(*inputs, *settings)
    check((B, n, d, block_len, direction, mask_kind, bias, scale), got, want,
          scale if atol_scale is None else atol_scale)


def max_err(a, b):
    return (a.detach().cpu().double() - b.detach().cpu().double()).abs().max().item() if a.numel() else 0.0


# Where each query has one key (r = 1 under "all", r = 2 under "diag", "forward" or
# "backward"), p = 1 and v_i - out_j = 0, so d_dep, d_head and d_bias are exactly 0 and the
# 16-bit reference gets them so. The backward kernels recompute out in float32 (e·v times the
# float32 1/e), so v - out is v's float32 rounding, not 0, and summed over rows in d_bias: the
# one-key cases of test_triton_low_precision.py fail a floor of 1e-6 (fp16 and bf16). The
# emulated CUDA kernels' rule (test_cuda_emulated.check) adds float32's own rounding too.
FLOAT32_FLOOR = 1e-5


def assert_within_twice_reference(got, low, want):
    """Flash-attention's criterion for low precision: each result's error against the float64
    oracle `want` is at most twice that of PyTorch in the same dtype (`low`), plus FLOAT32_FLOOR
    for results the low-precision reference gets exact. got, low, want: [out, d_dep, d_head,
    d_value(, d_bias)]."""
    for name, g, lo, w in zip(RESULTS, got, low, want):
        assert torch.isfinite(g).all(), f"{name}: non-finite values"
        err, ref_err = max_err(g, w), max_err(lo, w)
        assert err <= 2 * ref_err + FLOAT32_FLOOR, \
            f"{name}: error {err:.3g} > 2 x reference error {ref_err:.3g}"


def use_path(request, path):
    """Route the test's launches: "rows" / "fused", the row-tile kernels with the split / fused
    backward at every block length ("trimmed": the fused one with its trimmed key loop);
    "per-block", the per-block kernels for blocks of up to 8 too (conftest fixtures);
    "default", the default routing (per-pair kernels for blocks of up to 8, per-block ones up
    to 64, row tiles above)."""
    fixture = {"rows": "rows_kernels", "fused": "fused_backward",
               "trimmed": "trimmed_fused_backward",
               "per-block": "per_block_kernels"}.get(path)
    if fixture:
        request.getfixturevalue(fixture)
