"""The float32 tanh of the Triton kernels (blosa_kernels._math.tanh_f32 without FAST, with POLY and
without), alone, the candidate reciprocal that bench/gpu_tools/sfu_peak.py times for it, and the Newton
reciprocal of the per-pair kernels' sums (_math.reciprocal_newton, configs.PAIRS_RECIPROCAL =
"newton") and the polynomial exp2 of the row-tile forward (_math.exp2_poly, configs.ROWS_EXP2 =
"half-poly"), and the conversion of every result the kernels store in 16 bits
(_math.store_result).

Every float32 call on a GPU, and every call in the interpreter, computes its scores with tanh_f32,
so the op's tests check it through the outputs; this checks its error directly, against float64,
over the whole range the kernels meet (its clamp at |x| = 15 included).
"""
import math
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from blosa_kernels._math import exp2_poly, reciprocal_newton, store_result, tanh_f32
from triton_testing import DEVICE

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu_tools"))

from sfu_peak import reciprocal_fma  # noqa: E402

# Absolute error bound: 1 - 2 / (e + 1) loses about an ulp of 1 to the reciprocal and one to
# the subtraction, and on a GPU exp2 (ex2.approx, 2 ulp) adds its own: about 5e-7 at most.
TANH_ATOL = 1e-6


@triton.jit
def _tanh_kernel(x_ptr, out_ptr, n, POLY: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tanh_f32(tl.load(x_ptr + offs, mask=m, other=0.0), False, POLY), mask=m)


@triton.jit
def _reciprocal_kernel(y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, reciprocal_fma(tl.load(y_ptr + offs, mask=m, other=1.0)), mask=m)


@triton.jit
def _newton_kernel(y_ptr, out_ptr, n, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    y = tl.load(y_ptr + offs, mask=m, other=1.0)
    tl.store(out_ptr + offs, reciprocal_newton(y, STEPS), mask=m)


@triton.jit
def _exp2_poly_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, exp2_poly(tl.load(x_ptr + offs, mask=m, other=0.0)), mask=m)


@triton.jit
def _store_result_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    store_result(out_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0.0), m)


def _apply(kernel, x, out_dtype=None, **constexprs):
    """kernel(x_ptr, out_ptr, n, BLOCK) over x [N], into a new tensor of x's dtype or out_dtype."""
    out = torch.empty_like(x, dtype=out_dtype)
    block = 1024
    kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block, **constexprs)
    return out


def _tanh_arguments(gen):
    """float32 x over the range the kernels meet, small |x| (large scales) and the clamp."""
    return torch.cat([torch.linspace(-20, 20, 40001, dtype=torch.float64),
                      torch.randn(20000, generator=gen, dtype=torch.float64) * 4,
                      torch.randn(2000, generator=gen, dtype=torch.float64) * 1e-3,
                      torch.rand(4000, generator=gen, dtype=torch.float64) * 1.3 - 0.65,
                      10 ** (torch.rand(2000, generator=gen, dtype=torch.float64) * -30),
                      torch.tensor([0.0, -0.0, 0.625, -0.625, 15.0, -15.0, 1e30, -1e30],
                                   dtype=torch.float64)]).float()


@pytest.mark.parametrize("poly", [False, True], ids=["exact", "poly"])
def test_exact_tanh_is_within_a_few_ulps_of_one(poly):
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    x32 = _tanh_arguments(gen)
    got = _apply(_tanh_kernel, x32.to(DEVICE), POLY=poly).cpu().double()
    want = torch.tanh(x32.double())
    err = (got - want).abs()
    assert err.max().item() <= TANH_ATOL, f"max error {err.max().item():.3g} at x = {x32[err.argmax()].item()}"
    assert torch.equal(got[x32 >= 15], torch.ones_like(got[x32 >= 15]))  # tanh(15) rounds to 1


def test_poly_tanh_error_is_relative():
    # What large scales need (the score c·t multiplies t's error by c): with POLY, |x| < 0.625
    # within 2^-23 of the result, relatively (FMAs only, no special-function op), and beyond it
    # the exact form's TANH_ATOL relative to tanh(0.625). Without POLY the small |x| fail.
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    x32 = _tanh_arguments(gen)
    want = torch.tanh(x32.double())
    small = x32.abs() < 0.625
    bound = torch.where(small, 2 * 2.0 ** -24, TANH_ATOL / math.tanh(0.625)).double()
    for poly in (True, False):
        got = _apply(_tanh_kernel, x32.to(DEVICE), POLY=poly).cpu().double()
        rel = torch.where(want == 0, got.abs(), (got - want).abs() / want.abs())
        assert torch.equal(got[x32 == 0], torch.zeros_like(got[x32 == 0]))
        worst, at = (rel / bound).max(dim=0)
        if poly:
            assert worst <= 1, f"relative error {rel[at].item():.3g} at x = {x32[at].item()}"
            flipped = _apply(_tanh_kernel, -x32.to(DEVICE), POLY=True).cpu().double()
            assert torch.equal(got[small], -flipped[small])  # the polynomial is odd
        else:
            assert worst > 100, "the exact form alone should lose the small tanh's relative precision"


def test_fma_reciprocal_is_within_an_ulp_or_two():
    # What bench/gpu_tools/sfu_peak.py's "fwd exact fma" loop times must be a float32 reciprocal, or its
    # rate says nothing (two Newton steps instead of three leave 6.6e-6). Its whole range: 1
    # (x = -15, where exp2 gives almost 0) to 2^44 (above e^30 + 1).
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    y = torch.cat([torch.linspace(1, 4, 30001, dtype=torch.float64),
                   2.0 ** (torch.rand(30000, generator=gen, dtype=torch.float64) * 44),
                   torch.tensor([1.0, 2.0, 2.0 ** 44], dtype=torch.float64)]).float()
    got = _apply(_reciprocal_kernel, y.to(DEVICE)).cpu().double()
    rel = (got * y.double() - 1).abs()
    assert rel.max().item() <= 2.5e-7, f"max relative error {rel.max().item():.3g}"


def test_newton_reciprocal_error_per_step():
    # The range of the sums it takes: the fixed pivot's smallest term, exp(-2 · 40) > 2^-116, up
    # to 8 (eight terms of at most 1), and more binades both sides. The magic first guess is
    # within 5.1% everywhere (the same in every binade), and each step squares the error: 2
    # steps (bfloat16 outputs) 6.6e-6, 3 (float16 outputs, gradients) an ulp or two.
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    y = torch.cat([2.0 ** (torch.rand(40000, generator=gen, dtype=torch.float64) * 160 - 126),
                   torch.linspace(1, 4, 20001, dtype=torch.float64),
                   torch.tensor([2.0 ** -116, 1.0, 8.0], dtype=torch.float64)]).float()
    for steps, bound in ((0, 0.052), (1, 2.6e-3), (2, 6.7e-6), (3, 2.5e-7)):
        got = _apply(_newton_kernel, y.to(DEVICE), STEPS=steps).cpu().double()
        rel = (got * y.double() - 1).abs()
        assert rel.max().item() <= bound, f"{steps} steps: max relative error {rel.max().item():.3g}"


def test_exp2_poly_relative_error():
    # The range the row-tile forward gives it: c·log2(e)·(t - 1) for t in [-1, 1] and c <= 40,
    # down to -115.4, and a little above 0 (the rounding of t). Integers and half-integers, where
    # the rounding to n switches, included; the largest relative error against float64 stays
    # under 4e-7 (the Taylor polynomial of the same degree would fail, at 2.4e-6).
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    x = torch.cat([torch.rand(60000, generator=gen, dtype=torch.float64) * -116,
                   torch.rand(2000, generator=gen, dtype=torch.float64) * 2 - 1,
                   torch.arange(-116, 1, 0.5, dtype=torch.float64),
                   torch.tensor([0.0, -0.5, 0.49999997, -115.4, 1e-7], dtype=torch.float64)]).float()
    got = _apply(_exp2_poly_kernel, x.to(DEVICE)).cpu().double()
    want = torch.exp2(x.double())
    rel = ((got - want) / want).abs()
    assert rel.max().item() <= 4e-7, f"max relative error {rel.max().item():.3g} at x = {x[rel.argmax()].item()}"


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16), ids=str)
def test_results_round_to_nearest_even(dtype):
    # torch's conversion rounds to nearest, ties to even, as the GPU's does: store_result must give
    # its bits, in the interpreter too (whose own float32 -> bfloat16 conversion truncates:
    # 1 - 1e-7 became 0.99609375). Random values over every binade of the dtype and below it,
    # the 64ths of an ulp around 1, every tie between two neighbours in [1, 2) scaled by a power
    # of 2 (to even: both ways), the largest finite value and a quarter (down to it) and half an
    # ulp (a tie: up to inf) above it, subnormals, signed zeros, infinities and NaN.
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    info = torch.finfo(dtype)
    low, high = math.log2(info.smallest_normal) - 12, math.log2(info.max)
    exponents = low + (high - low) * torch.rand(20000, generator=gen, dtype=torch.float64)
    random = torch.randn(20000, generator=gen, dtype=torch.float64).sign() * 2.0 ** exponents
    near_one = 1 + torch.arange(-600, 600, dtype=torch.float64) * info.eps / 64
    halves = torch.arange(0.5, 1 / info.eps, dtype=torch.float64)
    ties = (1 + halves * info.eps) * 2.0 ** torch.randint(-12, 12, halves.shape, generator=gen)
    top_ulp = info.eps * 2.0 ** math.floor(math.log2(info.max))  # the ulp of the largest values
    special = torch.tensor([0.0, -0.0, 1 - 1e-7, info.max, info.max + top_ulp / 4, info.max + top_ulp / 2,
                            info.smallest_normal / 3, info.smallest_normal / 2**5, math.inf],
                           dtype=torch.float64)
    x = torch.cat([random, near_one, ties, special]).float()
    x = torch.cat([x, -x, torch.tensor([math.nan])])
    got, want = _apply(_store_result_kernel, x.to(DEVICE), out_dtype=dtype).cpu(), x.to(dtype)
    assert torch.isnan(got[-1])
    wrong = (got[:-1].view(torch.int16) != want[:-1].view(torch.int16)).nonzero().flatten()
    assert not len(wrong), (f"{len(wrong)} of {x.numel() - 1} differ, e.g. {x[wrong[0]].item()!r} "
                            f"-> {got[wrong[0]].item()!r}, not {want[wrong[0]].item()!r}")
