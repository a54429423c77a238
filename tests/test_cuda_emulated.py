"""The CUDA C++ kernels, run on the CPU thread by thread, against the float64 reference.

tests/cuda_emulation/ builds csrc/cuda/*.cuh and dispatch.h for the CPU: the same kernel
choice, template arguments, launch geometry, indexing, tiling, masking, shared memory and
barriers as on a GPU, with exact tanh/exp2 instead of tanh.approx/ex2.approx (host_shim.h says
why running the threads one after another, switching at each barrier, is exact for these
kernels). So every CI run checks the CUDA kernels' logic, for every tile size and tuning
switch, without a GPU; tests/test_cuda.py checks the real thing on a GPU.
Outputs start as NaN, so an element that no thread writes fails.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from torch.utils import cpp_extension

from attn_cases import (DIRECTIONS, MASK_KINDS, RESULTS, assert_d_bias_within_rounding,
                        assert_grad_out_padding_ignored, assert_padding_ignored, generator_for,
                        make_mask)
from blosa import masked_block_attn_ref

HERE = Path(__file__).resolve().parent / "cuda_emulation"
# (n, block_len): register-resident blocks (r <= 8) and tiled ones; 5 and 20 leave a short last
# block, 13 a partial last tile for every tile size, 0 is one block. (16, 8) has only whole
# blocks of 8: without a mask, the dense small-block kernels (small_dense in dispatch.h).
SMALL_SHAPES = ((11, 1), (11, 3), (11, 5), (45, 8), (16, 8))
TILED_SHAPES = ((11, 11), (11, 16), (37, 13), (45, 20), (45, 0))
TILES = (4, 8)
# Error allowed relative to max(1, max |reference|): the emulation computes in float (double for
# float64) with exact tanh/exp2, so only rounding differs from the reference. d_head cancels
# to much less than its terms (whose size is that of the inputs, about 1 here), so its rounding
# is judged against 1, not against its own size. Index or mask bugs give errors of the size of
# the result.
REL = {torch.float64: 1e-10, torch.float32: 2e-5}


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """torch.ops.blosa_emulated (fwd, bwd), compiled for this test session."""
    cpp_extension.load(
        name="blosa_cuda_emulation",
        sources=[str(HERE / "emulate.cpp")],
        extra_cflags=["-O2", "-std=c++20", "-fopenmp", "-Wno-unknown-pragmas"],
        extra_ldflags=["-fopenmp"],
        build_directory=str(tmp_path_factory.mktemp("cuda_emulation")),
        is_python_module=False,
    )
    return torch.ops.blosa_emulated


def make_case(B, n, d, gen, with_bias, mask_kind, spread=2.0):
    """float64 dep, head, value, bias (or None), the mask and grad_out."""
    def draw(*shape, s=spread):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * s

    inputs = [draw(B, n, d), draw(B, n, d), draw(B, n, d), draw(d) if with_bias else None]
    return inputs, make_mask(mask_kind, B, n, gen), draw(B, n, d, s=1.0)


def reference(inputs, mask, grad_out, settings, dtype=torch.float64):
    """out, d_dep, d_head, d_value (and d_bias, given a bias) of the plain PyTorch reference
    computed in dtype."""
    leaves = [None if t is None else t.to(dtype).requires_grad_() for t in inputs]
    out = masked_block_attn_ref(*leaves, mask, *settings)
    present = [t for t in leaves if t is not None]
    return [out.detach(), *torch.autograd.grad(out, present, grad_out.to(dtype))]


def run_emulated(ops, inputs, mask, grad_out, dtype, settings, tile, fused=False, staged=False,
                 recompute=False, small_vec=1, persistent=0, small_dense=True,
                 small_loads_first=False, small_fma_reciprocal=False, column_sums_one_pass=False,
                 small_staged=False, small_staged_blocks=1):
    """out, d_dep, d_head, d_value, d_bias ([0] without a bias) of the emulated kernels on
    inputs cast to dtype. recompute:
    the forward saves no lse, and the backward gets empty out and lse (it recomputes them).
    small_vec: features per thread of the small-block kernels that allow it. persistent: thread
    blocks of the persistent small-block kernels (0: the one-shot ones). small_dense: whether
    calls that allow them take the dense small-block kernels; small_loads_first: whether those
    issue their loads first; small_fma_reciprocal: whether the forward of those, for 16-bit
    inputs, divides by Newton steps on the FMA pipe; column_sums_one_pass: whether d_bias's
    column sums take one launch of the tall shape where the rows allow it; small_staged: whether
    the dense forward and recomputing backward run staged (staged_small.cuh) where they may,
    small_staged_blocks blocks a thread block."""
    xs = [None if t is None else t.to(dtype) for t in inputs]
    out, lse = ops.fwd(*xs, mask, *settings, tile, staged, not recompute, small_vec, persistent,
                       small_dense, small_loads_first, small_fma_reciprocal, small_staged,
                       small_staged_blocks)
    saved_out = out.new_empty(0) if recompute else out
    grads = ops.bwd(grad_out.to(dtype), *xs, mask, saved_out, lse, *settings, tile, fused,
                    small_vec, persistent, small_dense, small_loads_first, column_sums_one_pass,
                    small_staged, small_staged_blocks)
    return [out, *grads], lse


def check(ops, dtype, direction, n, block_len, mask_kind, tile, B=3, d=70, scale=None,
          spread=2.0, fused=False, staged=False, recompute=False, small_vec=1, persistent=0,
          **dense_options):
    """Emulated kernels (tile rows per thread; the fused backward or the split one, the staged
    forward or the streaming one, a backward from saved out and lse or recomputing them; the
    dense kernels' run_emulated options) against the reference, out and the three input
    gradients. Returns the case and what the kernels gave: (inputs, mask, grad_out, settings,
    [out, d_dep, d_head, d_value, d_bias])."""
    gen = generator_for("emulated", dtype, direction, n, block_len, mask_kind, tile, d, scale,
                        fused, staged, recompute, small_vec, persistent, *dense_options.items())
    with_bias = bool(torch.randint(0, 2, (1,), generator=gen))
    if scale is None:
        scale = (0.5, 5.0, 17.0, 100.0)[int(torch.randint(0, 4, (1,), generator=gen))]
    inputs, mask, grad_out = make_case(B, n, d, gen, with_bias, mask_kind, spread)
    settings = (block_len, direction, scale)
    got, lse = run_emulated(ops, inputs, mask, grad_out, dtype, settings, tile, fused, staged,
                            recompute, small_vec, persistent, **dense_options)
    want = reference(inputs, mask, grad_out, settings)
    low = dtype in (torch.float16, torch.bfloat16)
    if low:  # the flash-attention rule: at most twice the error of the reference in dtype
        same = reference(inputs, mask, grad_out, settings, dtype)
    for i, name in enumerate(RESULTS[:len(want)]):
        g, w = got[i], want[i]
        assert g.dtype == dtype and torch.isfinite(g).all(), f"{name}: unwritten or non-finite"
        err = (g.double() - w).abs().max().item() if g.numel() else 0.0
        size = w.abs().max().item() if w.numel() else 0.0
        if low:
            ref_err = (same[i].double() - w).abs().max().item() if w.numel() else 0.0
            # Plus the float accumulation's own rounding (REL float32 against inputs of size
            # 1): it shows alone where both references give exactly 0 (at r = 1, direction
            # "all", a query's one key is itself, and d_dep is 0 but for rounding).
            bound = 2 * ref_err + torch.finfo(dtype).eps * max(size, 1e-3) + REL[torch.float32]
        else:
            bound = REL[dtype] * max(size, 1.0)
        assert err <= bound, (f"{name} ({dtype}, {direction}, n={n}, r={block_len}, {mask_kind}, "
                              f"tile {tile}, fused {fused}, staged {staged}, recompute {recompute}, "
                              f"vec {small_vec}, persistent {persistent}, c={scale}): "
                              f"error {err:.3g} > {bound:.3g}")
    if mask is not None:  # padding queries: out 0, no gradient, lse +inf
        pad = ~mask
        assert (got[0][pad] == 0).all() and (got[2][pad] == 0).all()
        assert recompute or torch.isinf(lse[pad]).all()
    return inputs, mask, grad_out, settings, got


CASES = [(n, r, 8) for n, r in SMALL_SHAPES] + [(n, r, t) for n, r in TILED_SHAPES for t in TILES]


@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("n, block_len, tile", CASES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_float64_matches_reference(emulated, direction, n, block_len, tile, mask_kind):
    check(emulated, torch.float64, direction, n, block_len, mask_kind, tile)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16), ids=str)
@pytest.mark.parametrize("n, block_len, tile", CASES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_float_types_match_reference(emulated, direction, n, block_len, tile, dtype):
    check(emulated, dtype, direction, n, block_len, "holes", tile)


@pytest.mark.parametrize("scale", (0.5, 5.0, 39.0, 41.0, 100.0))  # both pivot paths
@pytest.mark.parametrize("n, block_len, tile", ((13, 4, 8), (40, 0, 4), (40, 0, 8)))
def test_every_scale(emulated, n, block_len, tile, scale):
    for direction in ("forward", "all"):
        check(emulated, torch.float32, direction, n, block_len, "holes", tile, d=33, scale=scale,
              spread=min(scale, 8.0))


# A backward with no saved out and lse, what a differentiable call in blocks of at most
# kRecomputeMaxBlock = 8 runs on CUDA: backward_small_recompute, and for longer blocks (a call
# of masked_block_attn_fwd with compute_lse=False) the forward first, then the usual backward.
RECOMPUTE_CASES = [(n, r, 8) for n, r in SMALL_SHAPES] + [(45, 20, 4), (40, 0, 8)]


@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("n, block_len, tile", RECOMPUTE_CASES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_recomputing_backward_matches_reference(emulated, direction, n, block_len, tile,
                                                mask_kind):
    check(emulated, torch.float64, direction, n, block_len, mask_kind, tile, recompute=True)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16), ids=str)
@pytest.mark.parametrize("n, block_len, tile", RECOMPUTE_CASES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_recomputing_backward_float_types(emulated, direction, n, block_len, tile, dtype):
    check(emulated, dtype, direction, n, block_len, "holes", tile, recompute=True)


@pytest.mark.parametrize("scale", (0.5, 5.0, 39.0, 41.0, 100.0))  # both pivot paths
@pytest.mark.parametrize("block_len", (1, 4, 8))
def test_recomputing_backward_every_scale(emulated, block_len, scale):
    for direction in DIRECTIONS:
        check(emulated, torch.float32, direction, 13, block_len, "holes", 8, d=33, scale=scale,
              spread=min(scale, 8.0), recompute=True)


# Two features per thread in the small-block forward and recomputing backward
# (BLOSA_CUDA_SMALL_VEC=2): d = 70 takes them; odd d, float64 and the backward from a saved lse
# fall back to one.
@pytest.mark.parametrize("recompute", [True, False])
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16, torch.float64),
                         ids=str)
@pytest.mark.parametrize("n, block_len, d", [(11, 1, 70), (11, 3, 70), (45, 8, 70), (11, 5, 33),
                                             (9, 8, 2)])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_two_features_per_thread(emulated, direction, n, block_len, d, dtype, recompute):
    check(emulated, dtype, direction, n, block_len, "holes", 8, d=d, recompute=recompute,
          small_vec=2)


@pytest.mark.parametrize("scale", (5.0, 100.0))  # both pivot paths
def test_two_features_per_thread_every_mask(emulated, scale):
    for mask_kind in MASK_KINDS:
        for direction in DIRECTIONS:
            check(emulated, torch.float32, direction, 13, 4, mask_kind, 8, d=34, scale=scale,
                  spread=min(scale, 8.0), recompute=True, small_vec=2)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16), ids=str)
def test_two_features_per_thread_where_rows_allow(emulated, dtype):
    # The tests above see two features per thread only where the dispatcher takes them: even d
    # and rows on a pair boundary; one otherwise, and always for float64.
    def width(x, asked=2):
        return emulated.small_vec_for(x, asked)

    x = torch.zeros(2, 5, 70, dtype=dtype)
    assert width(x) == 2 and width(x, 1) == 1
    assert width(torch.zeros(2, 5, 33, dtype=dtype)) == 1  # odd d
    shifted = torch.zeros(2 * 5 * 70 + 1, dtype=dtype)[1:].view(2, 5, 70)  # rows off by one
    assert shifted.is_contiguous() and width(shifted) == 1
    assert width(torch.zeros(2, 5, 70, dtype=torch.float64)) == 1


# The persistent small-block kernels (BLOSA_CUDA_SMALL_PERSISTENT=1): a grid cut to `persistent`
# thread blocks of 256 threads, so at d = 70 each thread loops over several blocks of work (3 ·
# 11 · 70 = 2310 at r = 1), at d = 33 some threads take two and others one, and at d = 2 every
# thread at most one. Constant pivot and float accumulation only: scale 100 and float64 take
# the one-shot kernels.
PERSISTENT_SHAPES = [(11, 1, 70), (11, 3, 70), (45, 8, 70), (11, 5, 33), (9, 8, 2)]


@pytest.mark.parametrize("small_vec", [1, 2])
@pytest.mark.parametrize("recompute", [True, False])
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16), ids=str)
@pytest.mark.parametrize("n, block_len, d", PERSISTENT_SHAPES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_persistent_small_kernels(emulated, direction, n, block_len, d, dtype, recompute,
                                  small_vec):
    check(emulated, dtype, direction, n, block_len, "holes", 8, d=d, scale=5.0,
          recompute=recompute, small_vec=small_vec, persistent=1)


@pytest.mark.parametrize("blocks", [1, 2, 3])
def test_persistent_small_kernels_every_mask(emulated, blocks):
    for mask_kind in MASK_KINDS:
        for direction in DIRECTIONS:
            check(emulated, torch.float32, direction, 23, 6, mask_kind, 8, d=37, scale=17.0,
                  recompute=True, persistent=blocks)


def test_persistent_small_kernels_where_they_apply(emulated):
    # The tests above run the persistent kernels only where the dispatcher takes them: the
    # forward and the recomputing backward at the constant pivot with float accumulation.
    gen = generator_for("persistent-dispatch")
    inputs, mask, grad_out = make_case(2, 9, 6, gen, True, "holes")

    def launches(dtype, scale, recompute):
        before = emulated.persistent_launch_count()
        run_emulated(emulated, inputs, mask, grad_out, dtype, (4, "forward", scale), 8,
                     recompute=recompute, persistent=1)
        return emulated.persistent_launch_count() - before

    assert launches(torch.float32, 5.0, True) == 2  # forward and backward
    assert launches(torch.bfloat16, 5.0, False) == 1  # forward; backward from a saved lse
    assert launches(torch.float32, 100.0, True) == 0  # running-max pivot
    assert launches(torch.float64, 5.0, True) == 0


@pytest.mark.parametrize("dtype", (torch.float64, torch.float32, torch.bfloat16, torch.float16),
                         ids=str)
@pytest.mark.parametrize("n, block_len", ((16, 8), (8, 0), (24, 8)))
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_dense_small_kernels_match_reference(emulated, direction, n, block_len, dtype):
    # No mask and whole blocks of 8 (one block of 8 at n = 8), in training (no lse saved), at a
    # constant-pivot scale: the dense forward and recomputing backward.
    check(emulated, dtype, direction, n, block_len, "none", 8, scale=5.0, recompute=True)


def test_dense_small_kernels_where_they_apply(emulated):
    # Where the dispatcher takes the dense small-block kernels: no mask, whole blocks of 8, the
    # constant pivot, one feature a thread, one-shot, and for the forward no lse to write.
    gen = generator_for("dense-dispatch")

    def launches(n=16, block_len=8, mask_kind="none", dtype=torch.float32, scale=5.0,
                 recompute=True, **options):
        inputs, mask, grad_out = make_case(2, n, 6, gen, True, mask_kind)
        before = emulated.dense_launch_count()
        run_emulated(emulated, inputs, mask, grad_out, dtype, (block_len, "forward", scale), 8,
                     recompute=recompute, **options)
        return emulated.dense_launch_count() - before

    assert launches() == 2  # the forward and the recomputing backward
    assert launches(dtype=torch.bfloat16) == 2 and launches(dtype=torch.float64) == 2
    assert launches(n=8, block_len=0) == 2  # one block of 8 is a whole block too
    assert launches(recompute=False) == 0  # a forward that writes lse; backward from it
    assert launches(mask_kind="right_pad") == 0
    assert launches(n=13) == 0 and launches(block_len=4) == 0  # a short block; blocks of 4
    assert launches(scale=100.0) == 0  # running-max pivot
    assert launches(small_vec=2) == 0 and launches(persistent=1) == 0
    assert launches(small_dense=False) == 0


def test_loads_first_kernels_where_they_apply(emulated):
    # Where the dispatcher takes the dense kernels with their loads first (small_loads_first in
    # dispatch.h): asked for, on a call the dense kernels take, with float accumulation.
    gen = generator_for("loads-first-dispatch")

    def launches(mask_kind="none", dtype=torch.float32, small_loads_first=True, **options):
        inputs, mask, grad_out = make_case(2, 16, 6, gen, True, mask_kind)
        before = emulated.loads_first_launch_count(), emulated.dense_launch_count()
        run_emulated(emulated, inputs, mask, grad_out, dtype, (8, "forward", 5.0), 8,
                     recompute=True, small_loads_first=small_loads_first, **options)
        return (emulated.loads_first_launch_count() - before[0],
                emulated.dense_launch_count() - before[1])

    assert launches() == (2, 2)  # the forward and the recomputing backward
    assert launches(dtype=torch.bfloat16) == (2, 2) and launches(dtype=torch.float16) == (2, 2)
    assert launches(dtype=torch.float64) == (0, 2)  # double accumulation: the plain dense ones
    assert launches(small_loads_first=False) == (0, 2)
    assert launches(mask_kind="right_pad") == (0, 0) and launches(small_dense=False) == (0, 0)


@pytest.mark.parametrize("variant", [dict(small_vec=2), dict(persistent=1),
                                     dict(small_vec=2, persistent=1), dict(small_dense=False),
                                     dict(small_loads_first=True)],
                         ids=str)
def test_small_kernel_variants_give_the_same_bits(emulated, variant):
    # Two features a thread, or a persistent grid: each feature's arithmetic is the same, in the
    # same order, whichever thread does it: bitwise equal to the default kernels. The dense
    # kernels (the default here: no mask, whole blocks of 8) against the general ones: they
    # leave out only tests whose outcome they know; and the dense ones against those with their
    # loads first, which add only a test that never holds.
    gen = generator_for("small-variants", *variant.items())
    dense_call = variant.get("small_dense") is False or variant.get("small_loads_first", False)
    inputs, mask, grad_out = make_case(3, 24 if dense_call else 21, 40, gen, True,
                                       "none" if dense_call else "holes")
    for direction in DIRECTIONS:
        settings = (8, direction, 5.0)
        default, _ = run_emulated(emulated, inputs, mask, grad_out, torch.bfloat16, settings, 8,
                                  recompute=True)
        varied, _ = run_emulated(emulated, inputs, mask, grad_out, torch.bfloat16, settings, 8,
                                 recompute=True, **variant)
        for name, a, b in zip(RESULTS, default, varied):
            assert torch.equal(a, b), (direction, name)


@pytest.mark.parametrize("steps, bound", [(1, 0.0103), (2, 1.1e-4), (3, 2.4e-7)])
def test_reciprocal_newton_error(emulated, steps, bound):
    # reciprocal_newton (csrc/blosa_math.h), the code the GPU runs, against float64's 1 / x:
    # random floats over the whole normal range, the sums the r = 8 forward divides by (one
    # key's exp2 at least 2^-116, at most 8 keys of at most 1), powers of two and the ends.
    gen = generator_for("reciprocal-newton", steps)
    spread = 2.0 ** (torch.rand(200_000, generator=gen, dtype=torch.float64) * 252 - 126)
    sums = 2.0 ** (torch.rand(200_000, generator=gen, dtype=torch.float64) * 119 - 116)
    edges = torch.tensor([torch.finfo(torch.float32).tiny, 1.0, 2.0, 0.5, 8.0, 7.999999,
                          torch.finfo(torch.float32).max / 4], dtype=torch.float64)
    x = torch.cat([spread, sums, 2.0 ** torch.arange(-126, 126, dtype=torch.float64), edges])
    x = x.float()
    r = emulated.reciprocal_newton(x, steps)
    error = (r.double() * x.double() - 1).abs().max().item()
    assert error <= bound, (steps, error)
    assert torch.isnan(emulated.reciprocal_newton(torch.tensor([float("nan")]), steps)).all()


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16), ids=str)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_fma_reciprocal_forward(emulated, direction, dtype):
    # The dense forward with its loads first dividing by reciprocal_newton: against the
    # reference as every kernel is, and against the same kernel dividing by 1 / sum: out within
    # one unit in the last place of dtype (the quotients differ by at most 1.1e-4 relative),
    # the gradients of the recomputing backward, which does not change, bitwise equal.
    options = dict(recompute=True, small_loads_first=True)
    inputs, mask, grad_out, settings, newton = check(
        emulated, dtype, direction, 24, 8, "none", 8, d=40, scale=5.0, small_fma_reciprocal=True,
        **options)
    divided, _ = run_emulated(emulated, inputs, mask, grad_out, dtype, settings, 8, **options)
    ulp = torch.finfo(dtype).eps * divided[0].double().abs().clamp_min(torch.finfo(dtype).tiny)
    assert ((newton[0].double() - divided[0].double()).abs() <= ulp).all()
    for name, a, b in zip(RESULTS[1:], newton[1:], divided[1:]):
        assert torch.equal(a, b), name


def test_fma_reciprocal_where_it_applies(emulated):
    # The dispatcher takes reciprocal_newton (small_fma_reciprocal) for the dense forward with
    # its loads first, 16-bit inputs, and nowhere else (not the backward, not float32).
    gen = generator_for("fma-reciprocal-dispatch")

    def launches(mask_kind="none", dtype=torch.bfloat16, small_fma_reciprocal=True, **options):
        inputs, mask, grad_out = make_case(2, 16, 6, gen, True, mask_kind)
        options = dict(dict(small_loads_first=True), **options)
        before = emulated.fma_reciprocal_launch_count()
        run_emulated(emulated, inputs, mask, grad_out, dtype, (8, "forward", 5.0), 8,
                     recompute=True, small_fma_reciprocal=small_fma_reciprocal, **options)
        return emulated.fma_reciprocal_launch_count() - before

    assert launches() == 1 and launches(dtype=torch.float16) == 1  # the forward only
    assert launches(dtype=torch.float32) == 0 and launches(dtype=torch.float64) == 0
    assert launches(small_fma_reciprocal=False) == 0
    assert launches(small_loads_first=False) == 0 and launches(small_dense=False) == 0
    assert launches(mask_kind="right_pad") == 0


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16), ids=str)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("d, per", [(37, 1), (64, 1), (37, 4)])
def test_staged_small_kernels_match_reference(emulated, direction, dtype, d, per):
    # The dense r = 8 kernels staged through shared memory (staged_small.cuh): thread blocks of
    # d threads (d odd, and a whole number of warps) running `per` blocks each (of 2 · 5 here:
    # at 4, the last thread block runs 2), copying 16-byte vectors in and out, the next block's
    # in before this one's math. Against the reference, then against the one-shot dense kernels
    # with their loads first (the default, whose block math they share), with and without the
    # forward's Newton reciprocal: out and the input gradients bit for bit; d_bias too at one
    # block a thread block, else (each thread adds its blocks' sums, the column sums fewer rows)
    # within rounding, as test_backward_with_one_pass_column_sums. Two launches of them, the
    # forward and the backward.
    options = dict(recompute=True, small_loads_first=True)
    before = emulated.staged_launch_count()
    inputs, mask, grad_out, settings, _ = check(
        emulated, dtype, direction, 40, 8, "none", 8, B=2, d=d, scale=5.0, small_staged=True,
        small_staged_blocks=per, small_fma_reciprocal=True, **options)
    assert emulated.staged_launch_count() - before == 2
    if inputs[3] is None:  # compare d_bias too
        inputs[3] = torch.randn(d, dtype=torch.float64, generator=generator_for("staged", d))
    for newton in (True, False):
        staged, one_shot = (run_emulated(emulated, inputs, mask, grad_out, dtype, settings, 8,
                                         small_fma_reciprocal=newton, small_staged=on,
                                         small_staged_blocks=per, **options)[0]
                            for on in (True, False))
        for name, a, b in zip(RESULTS[:4], staged, one_shot):
            assert torch.equal(a, b), (newton, name)
        if per == 1:
            assert torch.equal(staged[4], one_shot[4]), newton
        else:
            d_head = reference(inputs, mask, grad_out, settings)[2]
            assert_d_bias_within_rounding(staged[4], one_shot[4], d_head)


def test_staged_small_kernels_where_they_apply(emulated):
    # The dispatcher stages a dense small-block call (small_staged in dispatch.h) where asked,
    # with float accumulation, d <= kStagedMaxD (320) and every tensor on a 16-byte boundary.
    gen = generator_for("staged-small-dispatch")

    def launches(mask_kind="none", dtype=torch.float32, d=6, small_staged=True, **options):
        inputs, mask, grad_out = make_case(2, 16, d, gen, True, mask_kind)
        before = emulated.staged_launch_count()
        run_emulated(emulated, inputs, mask, grad_out, dtype, (8, "forward", 5.0), 8,
                     recompute=True, small_staged=small_staged, **options)
        return emulated.staged_launch_count() - before

    assert launches() == 2 and launches(dtype=torch.bfloat16) == 2  # the forward and backward
    assert launches(d=320) == 2 and launches(d=321) == 0
    assert launches(dtype=torch.float64) == 0 and launches(small_staged=False) == 0
    assert launches(mask_kind="right_pad") == 0 and launches(small_dense=False) == 0
    # Not a forward that saves lse (not dense), nor the running-max pivot (c > 40), nor inputs
    # 8 bytes past a 16-byte boundary (dep a contiguous view into a larger tensor), which the
    # one-shot kernels compute.
    dep, head, value = (torch.randn(2, 16, 8, generator=gen) for _ in range(3))
    fwd_options = (8, False)  # tile, the tiled forward's staging (unused at r = 8)
    flags = (1, 0, True, True, False, True)  # small_vec ... small_staged=True

    def staged_forward(dep, compute_lse, scale):
        before = emulated.staged_launch_count()
        out, _ = emulated.fwd(dep, head, value, None, None, 8, "all", scale, *fwd_options,
                              compute_lse, *flags)
        want = masked_block_attn_ref(dep.double(), head.double(), value.double(), None, None,
                                     8, "all", scale)
        bound = REL[torch.float32] * max(want.abs().max().item(), 1.0)
        assert (out.double() - want).abs().max().item() <= bound
        return emulated.staged_launch_count() - before

    assert staged_forward(dep, False, 5.0) == 1
    assert staged_forward(dep, True, 5.0) == 0 and staged_forward(dep, False, 100.0) == 0
    shifted = torch.empty(dep.numel() + 2)[2:].view_as(dep).copy_(dep)
    assert shifted.data_ptr() % 16 == 8 and staged_forward(shifted, False, 5.0) == 0


# The fused backward (float accumulation only) and the staged forward, in blocks of one span
# and of several: a span is 8 warps of `tile` rows (32 or 64), so 100 and 150 take several.
SPAN_SHAPES = ((11, 11), (37, 13), (45, 20), (45, 0), (100, 70), (150, 0))
SPAN_VARIANTS = {"fused": dict(fused=True), "staged": dict(staged=True),
                 "staged+fused": dict(staged=True, fused=True)}


@pytest.mark.parametrize("variant", SPAN_VARIANTS)
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("n, block_len", SPAN_SHAPES)
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_span_kernels_match_reference(emulated, direction, tile, n, block_len, mask_kind,
                                      variant):
    check(emulated, torch.float32, direction, n, block_len, mask_kind, tile, d=40,
          **SPAN_VARIANTS[variant])


# float64 takes the split backward (the fused kernel's shared memory holds float sums).
@pytest.mark.parametrize("variant", SPAN_VARIANTS)
@pytest.mark.parametrize("dtype", (torch.float64, torch.bfloat16, torch.float16), ids=str)
@pytest.mark.parametrize("n, block_len, tile", ((37, 13, 8), (100, 0, 4), (150, 0, 8)))
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_span_kernels_other_dtypes(emulated, direction, n, block_len, tile, dtype, variant):
    check(emulated, dtype, direction, n, block_len, "holes", tile, d=40,
          **SPAN_VARIANTS[variant])


@pytest.mark.parametrize("n, block_len, tile", ((45, 0, 8), (100, 0, 4), (300, 0, 4)))
def test_fused_backward_runs_where_it_applies(emulated, n, block_len, tile):
    # Same inputs through both backwards: both match the reference (above), and they round
    # differently (the fused one forms grad_z as (p w (v - o)) g), so equal float32 gradients
    # mean the fused kernel did not run. Past kMaxSpans spans (300 keys in 32-key spans) the
    # split backward runs for both.
    gen = generator_for("fused-or-split", n, block_len, tile)
    inputs, mask, grad_out = make_case(2, n, 24, gen, True, "holes")
    settings = (block_len, "forward", 5.0)
    fused, _ = run_emulated(emulated, inputs, mask, grad_out, torch.float32, settings, tile, True)
    split, _ = run_emulated(emulated, inputs, mask, grad_out, torch.float32, settings, tile)
    same = all(torch.equal(a, b) for a, b in zip(fused[1:], split[1:]))
    assert same == (n == 300)


@pytest.mark.parametrize("fill", (float("nan"), float("inf")))
@pytest.mark.parametrize("n, block_len, variant", [
    (11, 3, {}), (45, 8, {}), (45, 8, dict(small_vec=2)), (37, 13, {}),
    (37, 13, dict(staged=True, fused=True)), (150, 0, dict(fused=True)), (150, 0, dict(recompute=True))])
def test_what_padding_holds_does_not_matter(emulated, fill, n, block_len, variant):
    """As for the CPU op (test_op_cpu.py): inf or NaN in dep, head and value at padding (padded
    batches hold garbage) gives bit for bit the outputs and gradients of finite padding."""
    gen = generator_for("emulated padding holds", fill, n, block_len, *variant.items())
    inputs, mask, grad_out = make_case(3, n, 24, gen, True, "holes")
    settings = (block_len, "forward", 5.0)
    assert_padding_ignored(
        lambda xs: run_emulated(emulated, xs, mask, grad_out, torch.float32, settings, 8, **variant)[0],
        inputs, mask, fill)


@pytest.mark.parametrize("n, block_len, variant", [
    (11, 3, {}), (16, 8, {}), (45, 8, dict(small_vec=2)), (37, 13, {}),
    (37, 13, dict(staged=True, fused=True)), (150, 0, dict(fused=True)), (150, 0, dict(recompute=True))])
def test_what_grad_out_holds_at_padding_does_not_matter(emulated, n, block_len, variant):
    """Padded queries pass no gradient: NaN or inf in the upstream gradient there (a later
    layer's 0 / 0 at padding, say) gives bit for bit the gradients of a finite one."""
    gen = generator_for("emulated grad_out at padding", n, block_len, *variant.items())
    inputs, mask, grad_out = make_case(3, n, 24, gen, True, "holes")
    settings = (block_len, "all", 5.0)
    assert_grad_out_padding_ignored(
        lambda g: run_emulated(emulated, inputs, mask, g, torch.float32, settings, 8, **variant)[0],
        grad_out, mask)


@pytest.mark.parametrize("scale", (0.5, 39.0, 41.0, 100.0))  # both pivot paths
def test_staged_forward_every_scale(emulated, scale):
    for direction in ("forward", "diag"):
        check(emulated, torch.float32, direction, 70, 0, "holes", 4, d=33, scale=scale,
              spread=min(scale, 8.0), staged=True)


def test_staged_forward_runs(emulated):
    # Under "diag" forward_tiled adds a tile's diagonal keys last, the staged kernel in key
    # order: equal float32 outputs would mean the staged kernel did not run.
    gen = generator_for("staged-or-stream")
    inputs, mask, grad_out = make_case(2, 45, 24, gen, True, "holes")
    settings = (0, "diag", 5.0)
    staged, _ = run_emulated(emulated, inputs, mask, grad_out, torch.float32, settings, 8,
                             staged=True)
    stream, _ = run_emulated(emulated, inputs, mask, grad_out, torch.float32, settings, 8)
    assert not torch.equal(staged[0], stream[0])


@pytest.mark.parametrize("case", range(80))
def test_random_switch_combinations(emulated, case):
    # The tests above vary one tuning switch at a time; here every switch, shape, dtype, mask
    # and scale is drawn at once, so that the switches' interactions (staged and persistent,
    # two features a thread and one-pass column sums, ...) are checked too: on every call, the
    # dispatch honours what applies and ignores the rest. A third of the cases are calls the
    # dense kernels may take (no mask, whole blocks of 8, the forward without lse, c <= 40),
    # which a free draw would seldom give. float16/bfloat16 get d >= 33: the 2x rule is a
    # statistic over many elements, and with a handful the reference in that dtype can be right
    # by chance (d = 1, r = 4: over 2x in 47 of 300 draws, recomputing or not).
    rng = random.Random(f"switches-{case}")
    dtype = rng.choice((torch.float64, torch.float32, torch.bfloat16, torch.float16))
    small = dtype in (torch.float64, torch.float32)
    d = rng.choice((1, 5, 32, 33, 70) if small else (33, 64, 70))
    if rng.random() < 1 / 3:
        n, block_len, mask_kind, recompute = rng.choice((8, 16, 64)), 8, "none", True
        scale = rng.choice((0.3, 5.0, 40.0, rng.uniform(0.1, 40.0)))
    else:
        n = rng.choice((1, 2, 7, 9, 16, 17, 33, 65, 100))
        block_len = rng.choice((0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 64, n, n + 1))
        mask_kind, recompute = rng.choice(MASK_KINDS), rng.random() < 0.4
        scale = rng.choice((0.3, 5.0, 40.0, 41.0, rng.uniform(0.1, 200.0)))
    check(emulated, dtype, rng.choice(DIRECTIONS), n, block_len, mask_kind, rng.choice(TILES),
          B=rng.randint(1, 3), d=d, scale=scale, spread=min(scale, rng.choice((0.5, 2.0, 8.0))),
          fused=rng.random() < 0.5, staged=rng.random() < 0.5, recompute=recompute,
          small_vec=rng.choice((1, 2)), persistent=rng.choice((0, 1, 3)),
          small_dense=rng.random() < 0.7, small_loads_first=rng.random() < 0.5,
          small_fma_reciprocal=rng.random() < 0.5, column_sums_one_pass=rng.random() < 0.5,
          small_staged=rng.random() < 0.5, small_staged_blocks=rng.choice((1, 2, 8)))


@pytest.mark.parametrize("n, d", [(1, 1), (1, 5), (2, 3), (9, 1), (64, 33), (129, 3)])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_odd_sizes(emulated, direction, n, d):
    for block_len, tile in ((3, 8), (8, 8), (9, 4), (0, 8)):
        check(emulated, torch.float64, direction, n, block_len, "holes", tile, B=2, d=d)
        check(emulated, torch.float32, direction, n, block_len, "holes", tile, B=2, d=d,
              fused=True, staged=True)


def test_fast_divisor_divides_exactly(emulated):
    # The small kernels' thread index divides by d / V and by the number of blocks with
    # FastDivisor (multiply-high, add, shift), exact for dividends below 2^31.
    gen = generator_for("fast-divisor")
    top = 2**31 - 1
    divisors = [1, 2, 3, 7, 35, 48, 150, 300, 4096, 65535, 2**30, 2**31 - 1]
    divisors += torch.randint(1, top, (20,), generator=gen).tolist()
    for divisor in divisors:
        multiple = divisor * min(5, top // divisor)  # the largest of 5 · divisor in range
        n = torch.cat([torch.randint(0, top, (2000,), generator=gen),
                       torch.tensor([0, 1, divisor - 1, divisor, min(divisor + 1, top), top - 1, top]),
                       torch.arange(multiple - 3, min(multiple + 3, top + 1)).clamp(min=0)])
        assert torch.equal(emulated.fast_div(divisor, n), n // divisor), divisor


# (rows, d): one chunk (rows <= 64, one launch) or several (two); 64 chunks of more than 64 rows
# each, the last one short, from 4097 rows; d a whole number of warps or not.
COLUMN_SHAPES = ((1, 1), (7, 33), (64, 32), (65, 5), (384, 300), (1000, 40), (5000, 3))
# (input, output) dtypes of d_bias's sums: the small-block backward's float sums into d_bias,
# or d_head into d_bias.
COLUMN_DTYPES = ((torch.float64, torch.float64), (torch.float32, torch.float32),
                 (torch.float32, torch.bfloat16), (torch.float32, torch.float16),
                 (torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16))


@pytest.mark.parametrize("one_pass", [False, True], ids=["two-pass", "one-pass"])
@pytest.mark.parametrize("dtypes", COLUMN_DTYPES, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("rows, d", COLUMN_SHAPES)
def test_column_sums_match_a_float64_sum(emulated, rows, d, dtypes, one_pass):
    # d_bias's reduction (column_sums.cuh): every column's sum, once rounded to the output
    # dtype, within the accumulation's rounding of the exact sum; bitwise repeatable. One
    # launch where the rows fit a chunk, or with one_pass (the tall shape) up to 4096 rows.
    x_dtype, out_dtype = dtypes
    x = (torch.randn(rows, d, generator=generator_for("column-sums", rows, d, dtypes, one_pass),
                     dtype=torch.float64) * 3).to(x_dtype)
    before = emulated.launch_count()
    got = emulated.column_sums(x, out_dtype, one_pass)
    assert emulated.launch_count() - before == (1 if rows <= 64 or one_pass and rows <= 4096
                                                else 2)
    want = x.double().sum(0)
    # Each value goes through at most 39 additions (two passes: chunks of up to 79 rows, 8
    # lanes a chunk, then up to 64 chunks, 24; the tall shape: up to 32 rows a lane of its 128,
    # then the 7 levels of its tree): 64 roundings of the accumulation type bound the error
    # with room, and a lost or doubled row exceeds it.
    unit = torch.finfo(torch.float64 if x_dtype == torch.float64 else torch.float32).eps / 2
    accumulated = 64 * unit * x.double().abs().sum(0)
    rounded = torch.finfo(out_dtype).eps * want.abs()
    assert got.dtype == out_dtype and got.shape == (d,)
    assert ((got.double() - want).abs() <= accumulated + rounded).all(), (got, want)
    assert torch.equal(got, emulated.column_sums(x, out_dtype, one_pass))


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("block_len, n", [(8, 200), (0, 70)])
def test_backward_with_one_pass_column_sums(emulated, dtype, block_len, n):
    # KernelOptions::column_sums_one_pass through the whole backward: d_bias from one launch of
    # the tall column sums (at r = 8 of the 75 per-block sums, for one block of d_head's 210
    # rows) within rounding of the two launches' d_bias (the same float terms added in another
    # order: 64 roundings of float32 on their magnitudes, and one unit of dtype's last place),
    # which the other tests hold to the reference; one launch fewer, the rest bitwise equal.
    gen = generator_for("one-pass column sums", dtype, block_len, n)
    inputs, mask, grad_out = make_case(3, n, 12, gen, True, "right_pad")
    settings = (block_len, "forward", 5.0)
    before = emulated.launch_count()
    two, _ = run_emulated(emulated, inputs, mask, grad_out, dtype, settings, 8, recompute=True)
    between = emulated.launch_count()
    one, _ = run_emulated(emulated, inputs, mask, grad_out, dtype, settings, 8, recompute=True,
                          column_sums_one_pass=True)
    assert emulated.launch_count() - between == between - before - 1
    assert all(torch.equal(a, b) for a, b in zip(one[:4], two[:4]))
    assert_d_bias_within_rounding(one[4], two[4], reference(inputs, mask, grad_out, settings)[2])


def test_matches_the_cpu_kernels(emulated):
    # The CPU kernels (csrc/cpu/) and the CUDA kernels share blosa_math.h; on the same float64
    # inputs they must agree to rounding, lse included (+inf where a query has no key).
    gen = generator_for("emulated-vs-cpu")
    inputs, mask, _ = make_case(2, 30, 17, gen, True, "empty_row")
    for block_len in (4, 0):
        want = torch.ops.blosa.masked_block_attn_fwd(*inputs, mask, block_len, "diag", 5.0)
        got = emulated.fwd(*inputs, mask, block_len, "diag", 5.0, 8, False)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n, block_len, tile, staged", [
    (45, 8, 8, False),   # forward_small
    (45, 20, 4, False),  # forward_tiled
    (45, 0, 8, False),
    (37, 13, 8, True),   # forward_staged
    (45, 0, 8, True),
])
def test_forward_without_lse_writes_the_same_output(emulated, n, block_len, tile, staged, dtype):
    # compute_lse=False: the kernels get a null lse and skip its stores; out starts as NaN, so
    # an output the skipped branch would leave unwritten fails too.
    gen = generator_for("emulated-no-lse", n, block_len, tile, staged, dtype)
    inputs, mask, _ = make_case(2, n, 21, gen, True, "empty_row")
    xs = [t.to(dtype) for t in inputs]
    for direction in DIRECTIONS:
        out, lse = emulated.fwd(*xs, mask, block_len, direction, 5.0, tile, staged, False)
        want, _ = emulated.fwd(*xs, mask, block_len, direction, 5.0, tile, staged)
        assert lse.shape == (0,)
        assert torch.equal(out, want), direction


@pytest.mark.parametrize("persistent", [0, 1])
@pytest.mark.parametrize("scale", (5.0, 100.0))  # both pivot paths
@pytest.mark.parametrize("n, block_len, tile", [(23, 8, 8), (23, 3, 8), (45, 20, 4), (45, 0, 8)])
def test_nan_input_gives_nan_where_the_reference_does(emulated, n, block_len, tile, scale,
                                                      persistent):
    # A NaN in one key's dep must reach the output of every query that attends that key,
    # exactly where the reference's does, and no other: the kernels decide "has keys" from the
    # mask and the blocks, and from a softmax sum that a NaN keeps nonzero.
    gen = generator_for("emulated-nan", n, block_len, tile, scale, persistent)
    inputs, mask, _ = make_case(2, n, 13, gen, False, "holes")
    real = torch.nonzero(mask.flatten()).flatten()
    row = real[int(torch.randint(0, len(real), (1,), generator=gen))]
    inputs[0].view(-1, 13)[row, 4] = float("nan")
    for direction in DIRECTIONS:
        out, _ = emulated.fwd(*inputs[:3], None, mask, block_len, direction, scale, tile, False,
                              True, 1, persistent)
        want = masked_block_attn_ref(*inputs[:3], None, mask, block_len, direction, scale)
        if direction == "all":  # the key's own query attends it: the case is not vacuous
            assert torch.isnan(want).any()
        assert torch.equal(torch.isnan(out), torch.isnan(want)), direction
