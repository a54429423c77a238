"""The CUDA C++ kernels (csrc/cuda/) against the float64 reference, on a GPU.

Every test is skipped, with the reason, where there is no GPU or the build has no CUDA kernels.
float64 must match the reference tightly. float32 runs tanh.approx / ex2.approx (see
csrc/blosa_math.h), so it gets an absolute slack scaled by the size of the result.
float16/bfloat16 are judged the flash-attention way: the kernel's error against float64 must
be at most twice the error of the reference computed in that dtype, plus a small slack.
Set BLOSA_CUDA_ERR_LOG=FILE to write the largest measured error per dtype to FILE (JSON).
"""
from __future__ import annotations

import json
import os

import pytest
import torch

from attn_cases import (DIRECTIONS, MASK_KINDS, RESULTS, assert_d_bias_within_rounding,
                        assert_padding_ignored, generator_for, make_mask)
from blosa import masked_block_attn, masked_block_attn_ref
from blosa.ops import cuda_kernels_built

if not torch.cuda.is_available():
    pytest.skip("no CUDA device: torch.cuda.is_available() is False", allow_module_level=True)
if not cuda_kernels_built():
    pytest.skip("this build of blosa._C has no CUDA kernels (rebuild with BLOSA_CUDA=1)",
                allow_module_level=True)

DEV = torch.device("cuda")
LOW = (torch.float16, torch.bfloat16)
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
# Slack relative to max |reference| (per output or gradient), on top of the 2x rule. The
# float kernels' tanh.approx has a relative error up to ~2^-11, which also enters the 1 - t^2
# of the gradients where tanh saturates (small scales), where the low-precision references
# round t to exactly 1: hence ~1e-2. Index or masking bugs give errors of order 1. Tighten
# these with the errors measured on a GPU (BLOSA_CUDA_ERR_LOG).
SLACK = {torch.float64: 1e-9, torch.float32: 1e-2, torch.bfloat16: 1e-2, torch.float16: 1e-2}
# (n, block_len): 1, 3, 5 (does not divide 11), 11 (= n), 16 (> n); at n = 45: 8 (largest
# register-resident block), 20 (tiled, last block shorter) and 0 (one block, tiled).
SHAPES = ((11, 1), (11, 3), (11, 5), (11, 11), (11, 16), (45, 8), (45, 20), (45, 0))
SCALES = (0.5, 5.0, 17.0, 100.0)  # 100 > 40 takes the running-maximum path

_errors: dict[str, float] = {}


def _record(key: str, err: float) -> None:
    _errors[key] = max(_errors.get(key, 0.0), err)


def teardown_module():
    path = os.environ.get("BLOSA_CUDA_ERR_LOG")
    if path and _errors:
        with open(path, "w") as f:
            json.dump(dict(sorted(_errors.items())), f, indent=1)


def draw(gen, shape, spread=2.0):
    return torch.randn(*shape, generator=gen, dtype=torch.float64) * spread


def make_case(B, n, d, gen, with_bias, mask_kind, spread=2.0):
    """float64 CPU leaves dep, head, value, bias (or None), the mask and grad_out."""
    dep, head, value = (draw(gen, (B, n, d), spread) for _ in range(3))
    bias = draw(gen, (d,), spread) if with_bias else None
    mask = make_mask(mask_kind, B, n, gen)
    grad_out = draw(gen, (B, n, d), 1.0)
    return [dep, head, value, bias], mask, grad_out


def run(fn, inputs, mask, grad_out, dtype, *settings):
    """out and gradients of every non-None input, with inputs cast to dtype on the GPU."""
    xs = [None if t is None else t.to(DEV, dtype).requires_grad_() for t in inputs]
    m = None if mask is None else mask.to(DEV)
    out = fn(*xs, m, *settings)
    present = [t for t in xs if t is not None]
    gs = torch.autograd.grad(out, present, grad_out.to(DEV, dtype))
    return [out.detach()] + list(gs)


def err(a, b):
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def public_op(*args):
    return masked_block_attn(*args, backend="cuda")


def forward_op(compute_lse):
    """The op's forward with compute_lse set (autograd then saves lse, or recomputes it)."""
    return lambda *args: torch.ops.blosa.masked_block_attn_fwd(*args, compute_lse=compute_lse)[0]


def check(dtype, direction, block_len, mask_kind, B=3, n=11, d=70, scale=None, with_bias=None,
          spread=2.0, kern=public_op):
    gen = generator_for("cuda", dtype, direction, block_len, mask_kind, n, d, scale, with_bias)
    if with_bias is None:
        with_bias = bool(torch.randint(0, 2, (1,), generator=gen))
    if scale is None:
        scale = SCALES[int(torch.randint(0, len(SCALES), (1,), generator=gen))]
    inputs, mask, grad_out = make_case(B, n, d, gen, with_bias, mask_kind, spread)
    settings = (block_len, direction, scale)
    got = run(kern, inputs, mask, grad_out, dtype, *settings)
    want = run(masked_block_attn_ref, inputs, mask, grad_out, torch.float64, *settings)
    same_dtype = run(masked_block_attn_ref, inputs, mask, grad_out, dtype, *settings)
    for name, g, w, s in zip(RESULTS, got, want, same_dtype):
        assert g.dtype == dtype and g.shape == w.shape, name
        assert torch.isfinite(g).all(), f"{name}: non-finite values"
        e, e_ref = err(g, w), err(s, w)
        scale_of = w.abs().max().item() if w.numel() else 0.0
        bound = 2 * e_ref + SLACK[dtype] * max(scale_of, 1e-3)
        _record(f"{dtype}/{name}/abs", e)
        if scale_of > 0:
            _record(f"{dtype}/{name}/rel_to_max", e / scale_of)
        assert e <= bound, (f"{name} ({dtype}, {direction}, r={block_len}, {mask_kind}, "
                            f"c={scale}): error {e:.3g} > bound {bound:.3g} "
                            f"(reference in {dtype}: {e_ref:.3g}, max |ref| {scale_of:.3g})")
    if mask is not None:  # padding queries give exactly 0 and pass no gradient
        pad = ~mask.to(DEV)
        assert (got[0][pad] == 0).all()
        assert (got[2][pad] == 0).all()  # d_head


@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("n, block_len", SHAPES)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_reference(dtype, direction, n, block_len, mask_kind):
    check(dtype, direction, block_len, mask_kind, n=n)


@pytest.mark.parametrize("fill", (float("nan"), float("inf")))
@pytest.mark.parametrize("n, block_len", ((11, 3), (45, 8), (45, 20), (150, 0)))
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_what_padding_holds_does_not_matter(dtype, n, block_len, fill):
    """As on the CPU and under emulation (test_cuda_emulated.py): inf or NaN in dep, head and
    value at padding gives bit for bit the outputs and gradients of finite padding."""
    gen = generator_for("cuda padding holds", dtype, n, block_len, fill)
    inputs, mask, grad_out = make_case(3, n, 70, gen, True, "holes")
    settings = (block_len, "forward", 5.0)
    assert_padding_ignored(lambda xs: run(public_op, xs, mask, grad_out, dtype, *settings), inputs, mask, fill)


@pytest.mark.parametrize("n, block_len", ((11, 1), (11, 3), (45, 8), (45, 20), (45, 0)))
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_saved_and_recomputed_lse(dtype, direction, n, block_len):
    # The public op trains blocks of at most 8 without lse (backward_small_recompute) and longer
    # ones with it; here each block length also runs the other way: backward_small from a saved
    # lse, and the tiled backward after a forward that recomputes out and lse.
    compute_lse = block_len in (1, 3, 8)
    check(dtype, direction, block_len, "holes", n=n, kern=forward_op(compute_lse))


@pytest.mark.parametrize("n, block_len, d", ((11, 1, 70), (11, 3, 70), (45, 8, 70), (11, 5, 33)))
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_two_features_per_thread(monkeypatch, dtype, direction, n, block_len, d):
    # BLOSA_CUDA_SMALL_VEC=2: the small-block forward and recomputing backward load two
    # features per access (d = 33 and float64 fall back to one), training and inference.
    monkeypatch.setenv("BLOSA_CUDA_SMALL_VEC", "2")
    check(dtype, direction, block_len, "holes", n=n, d=d)
    with torch.no_grad():
        forward_without_lse = forward_op(False)
        gen = generator_for("vec2-inference", dtype, direction, n, block_len, d)
        inputs, mask, _ = make_case(2, n, d, gen, True, "holes")
        xs = [t.to(DEV, dtype) for t in inputs]
        got = forward_without_lse(*xs, mask.to(DEV), block_len, direction, 5.0)
        monkeypatch.setenv("BLOSA_CUDA_SMALL_VEC", "1")
        want = forward_without_lse(*xs, mask.to(DEV), block_len, direction, 5.0)
    assert torch.equal(got, want)  # each feature's arithmetic is the same at either width


@pytest.mark.parametrize("vec", ("1", "2"))
@pytest.mark.parametrize("B, n, block_len, d", ((3, 11, 3, 70), (5, 1000, 5, 33)))
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_persistent_small_kernels(monkeypatch, dtype, direction, B, n, block_len, d, vec):
    # BLOSA_CUDA_SMALL_PERSISTENT=1: a grid of what the GPU holds at once, each thread looping
    # over blocks of work (these shapes: one at most). Constant pivot (c = 5): the float types
    # take the persistent kernels, float64 the one-shot ones.
    monkeypatch.setenv("BLOSA_CUDA_SMALL_PERSISTENT", "1")
    monkeypatch.setenv("BLOSA_CUDA_SMALL_VEC", vec)
    check(dtype, direction, block_len, "holes", B=B, n=n, d=d, scale=5.0)


@pytest.mark.parametrize("vec", ("1", "2"))
@pytest.mark.parametrize("direction", ("forward", "backward"))
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_persistent_small_kernels_loop(monkeypatch, dtype, direction, vec):
    # The benchmark's size, B=64, n=384, d=300 at r = 8: 921600 blocks of work (460800 at two
    # features a thread), several for every thread of a grid the GPU holds.
    monkeypatch.setenv("BLOSA_CUDA_SMALL_PERSISTENT", "1")
    monkeypatch.setenv("BLOSA_CUDA_SMALL_VEC", vec)
    check(dtype, direction, 8, "holes", B=64, n=384, d=300, scale=5.0)


def check_dense_and_general(monkeypatch, dtype, direction, B, n, d):
    """No mask and whole blocks of 8 at c = 5: the dense small-block kernels (small_dense in
    csrc/cuda/dispatch.h; tests/test_cuda_emulated.py checks that the dispatcher takes them
    there), in training (forward without lse, recomputing backward), which issue their loads
    first (the default); the same with their loads in the plain order
    (BLOSA_CUDA_SMALL_LOADS_FIRST=0), bit for bit; then the general ones, which
    BLOSA_CUDA_SMALL_DENSE=0 asks for. With a bias: d_bias is column_sums' sum of the
    per-block sums (3072 rows at the benchmark size)."""
    check(dtype, direction, 8, "none", B=B, n=n, d=d, scale=5.0, with_bias=True)
    gen = generator_for("cuda-loads-first", dtype, direction, B, n, d)
    inputs, mask, grad_out = make_case(B, n, d, gen, True, "none")
    settings = (8, direction, 5.0)
    first = run(public_op, inputs, mask, grad_out, dtype, *settings)
    monkeypatch.setenv("BLOSA_CUDA_SMALL_LOADS_FIRST", "0")
    plain = run(public_op, inputs, mask, grad_out, dtype, *settings)
    for name, a, b in zip(RESULTS, plain, first):
        assert torch.equal(a, b), name  # a test that never holds added: the same arithmetic
    monkeypatch.delenv("BLOSA_CUDA_SMALL_LOADS_FIRST")
    monkeypatch.setenv("BLOSA_CUDA_SMALL_DENSE", "0")
    check(dtype, direction, 8, "none", B=B, n=n, d=d, scale=5.0, with_bias=True)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dense_small_kernels(monkeypatch, dtype, direction):
    check_dense_and_general(monkeypatch, dtype, direction, B=3, n=16, d=70)


@pytest.mark.parametrize("direction", ("forward", "backward"))
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_dense_small_kernels_at_the_benchmark_size(monkeypatch, dtype, direction):
    check_dense_and_general(monkeypatch, dtype, direction, B=64, n=384, d=300)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("block_len, B, n", [(8, 64, 384), (0, 3, 96)])
def test_one_pass_column_sums(monkeypatch, dtype, block_len, B, n):
    # BLOSA_CUDA_COLUMN_SUMS=one: d_bias's column sums in one launch of the tall shape (at the
    # benchmark's size at r = 8, its 3072 per-block sums; for one block, d_head's 288 rows):
    # against the reference, and within rounding of the two launches' d_bias (64 float32
    # roundings of the terms' magnitudes, one unit in dtype's last place), the rest bitwise
    # equal.
    monkeypatch.setenv("BLOSA_CUDA_COLUMN_SUMS", "one")
    check(dtype, "forward", block_len, "none", B=B, n=n, d=300, scale=5.0, with_bias=True)
    gen = generator_for("cuda-one-pass-sums", dtype, block_len, B, n)
    inputs, mask, grad_out = make_case(B, n, 300, gen, True, "none")
    settings = (block_len, "forward", 5.0)
    one = run(public_op, inputs, mask, grad_out, dtype, *settings)
    monkeypatch.setenv("BLOSA_CUDA_COLUMN_SUMS", "two")
    two = run(public_op, inputs, mask, grad_out, dtype, *settings)
    assert all(torch.equal(a, b) for a, b in zip(one[:4], two[:4]))
    d_head = run(masked_block_attn_ref, inputs, mask, grad_out, torch.float64, *settings)[2]
    assert_d_bias_within_rounding(one[4], two[4], d_head)


@pytest.mark.parametrize("per", (1, 8))
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16), ids=str)
def test_staged_small_kernels(monkeypatch, dtype, direction, per):
    # BLOSA_CUDA_SMALL_STAGED=1: the dense r = 8 forward and recomputing backward staged
    # through shared memory (staged_small.cuh), d = 300 (10 warps a thread block, the last
    # partly idle) and d = 64, one block or 8 in turn a thread block
    # (BLOSA_CUDA_SMALL_STAGED_BLOCKS; at 8 the last thread block has fewer): against the
    # reference, and against the one-shot dense kernels, whose block math they run
    # (tests/test_cuda_emulated.py checks the same on the CPU): out and the input gradients
    # bit for bit, d_bias too at one block, else within rounding (each thread adds its blocks'
    # sums first). The profiler shows that they ran. At the benchmark's size in direction
    # "forward".
    B, n, d = (64, 384, 300) if direction == "forward" else (3, 40, 300)
    monkeypatch.setenv("BLOSA_CUDA_SMALL_STAGED_BLOCKS", str(per))
    for width in (d, 64):
        monkeypatch.setenv("BLOSA_CUDA_SMALL_STAGED", "1")
        check(dtype, direction, 8, "none", B=B, n=n, d=width, scale=5.0, with_bias=True)
        gen = generator_for("cuda-staged-small", dtype, direction, B, n, width, per)
        inputs, mask, grad_out = make_case(B, n, width, gen, True, "none")
        settings = (8, direction, 5.0)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            staged = run(public_op, inputs, mask, grad_out, dtype, *settings)
        launched = {event.name for event in prof.events()}
        for kernel in ("forward_small_staged", "backward_small_staged"):
            assert any(kernel in name for name in launched), (kernel, sorted(launched))
        monkeypatch.setenv("BLOSA_CUDA_SMALL_STAGED", "0")
        one_shot = run(public_op, inputs, mask, grad_out, dtype, *settings)
        for name, a, b in zip(RESULTS[:4], staged, one_shot):
            assert torch.equal(a, b), (width, name)
        if per == 1:
            assert torch.equal(staged[4], one_shot[4]), width
        else:
            d_head = run(masked_block_attn_ref, inputs, mask, grad_out, torch.float64,
                         *settings)[2]
            assert_d_bias_within_rounding(staged[4], one_shot[4], d_head)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16), ids=str)
def test_fma_reciprocal_forward(monkeypatch, dtype, direction):
    # The dense 16-bit forward with 1 / sum from Newton steps on the FMA pipe
    # (BLOSA_CUDA_SMALL_RCP=fma): against the reference, and against the one that divides
    # (tanh.approx, ex2.approx and the quotient's rounding differ only there): out within one
    # unit in the last place of dtype, the gradients (the recomputing backward, unchanged)
    # bitwise equal. At the benchmark's size in direction "forward".
    B, n, d = (64, 384, 300) if direction == "forward" else (3, 16, 70)
    monkeypatch.setenv("BLOSA_CUDA_SMALL_RCP", "fma")
    check(dtype, direction, 8, "none", B=B, n=n, d=d, scale=5.0, with_bias=True)
    gen = generator_for("cuda-fma-reciprocal", dtype, direction)
    inputs, mask, grad_out = make_case(B, n, d, gen, True, "none")
    settings = (8, direction, 5.0)
    newton = run(public_op, inputs, mask, grad_out, dtype, *settings)
    monkeypatch.setenv("BLOSA_CUDA_SMALL_RCP", "mufu")
    divided = run(public_op, inputs, mask, grad_out, dtype, *settings)
    ulp = torch.finfo(dtype).eps * divided[0].double().abs().clamp_min(torch.finfo(dtype).tiny)
    assert ((newton[0].double() - divided[0].double()).abs() <= ulp).all()
    for name, a, b in zip(RESULTS[1:], newton[1:], divided[1:]):
        assert torch.equal(a, b), name


def test_two_features_per_thread_falls_back_on_misaligned_rows(monkeypatch):
    # A contiguous view one element into its storage: rows no longer start on a two-element
    # boundary, so the kernels must take one feature per thread (a misaligned vector load
    # would fault).
    monkeypatch.setenv("BLOSA_CUDA_SMALL_VEC", "2")
    gen = generator_for("vec2-misaligned")
    B, n, d = 2, 16, 40
    inputs, mask, grad_out = make_case(B, n, d, gen, True, "holes")
    for dtype in (torch.float32, torch.bfloat16):
        def shifted(t):
            storage = torch.empty(t.numel() + 1, device=DEV, dtype=dtype)
            view = storage[1:].view(t.shape)
            view.copy_(t)
            return view.requires_grad_()
        xs = [shifted(t) for t in inputs[:3]] + [inputs[3].to(DEV, dtype).requires_grad_()]
        out = masked_block_attn(*xs, mask.to(DEV), 8, "forward", 5.0, backend="cuda")
        grads = torch.autograd.grad(out, xs, grad_out.to(DEV, dtype))
        want = run(masked_block_attn_ref, inputs, mask, grad_out, torch.float64, 8, "forward", 5.0)
        for g, w in zip([out, *grads], want):
            assert (g.double() - w.to(DEV)).abs().max().item() < 0.1 * max(w.abs().max().item(), 1.0)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float64), ids=str)
def test_tiles_of_4_rows(monkeypatch, dtype, direction):
    # The tiled kernels' tuning switch (8 rows per thread is the default that every other test
    # runs). Blocks of 13 and 20 leave a partial last tile for both sizes; one block of 45 runs
    # long full-key ranges.
    monkeypatch.setenv("BLOSA_CUDA_TILE", "4")
    for n, block_len in ((45, 20), (45, 0), (37, 13)):
        check(dtype, direction, block_len, "holes", n=n)


# (n, block_len, mask) for the span kernels (fused backward, staged forward; the defaults for
# blocks longer than 8): one span (45 rows, or 20 and 13 in blocks), several (150 and 300 rows:
# spans of 32 or 64) and, for the fused backward, more than 8 spans with tile 4 (300 keys; the
# split backward then runs).
SPAN_CASES = ((45, 20, "holes"), (37, 13, "empty_row"), (45, 0, "none"), (150, 0, "right_pad"),
              (300, 0, "holes"))


@pytest.mark.parametrize("backward", ("split", "fused"))
@pytest.mark.parametrize("forward", ("stream", "staged"))
@pytest.mark.parametrize("tile", ("4", "8"))
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16, torch.float64),
                         ids=str)
def test_tiled_forwards_and_backwards(monkeypatch, dtype, direction, tile, forward, backward):
    # Every pairing of the two forwards and two backwards of blocks longer than 8 (the
    # defaults, staged and fused, run in every other test; float64 always takes the split
    # backward), both pivot paths too: the scale is drawn per case.
    monkeypatch.setenv("BLOSA_CUDA_FORWARD", forward)
    monkeypatch.setenv("BLOSA_CUDA_BACKWARD", backward)
    monkeypatch.setenv("BLOSA_CUDA_TILE", tile)
    for n, block_len, mask_kind in SPAN_CASES:
        check(dtype, direction, block_len, mask_kind, n=n, B=2, d=40)


@pytest.mark.parametrize("backward", ("split", "fused"))
@pytest.mark.parametrize("n", (45, 300))
def test_tiled_backwards_are_deterministic(monkeypatch, n, backward):
    monkeypatch.setenv("BLOSA_CUDA_BACKWARD", backward)
    gen = generator_for("det-" + backward, n)
    inputs, mask, grad_out = make_case(4, n, 96, gen, True, "right_pad")
    xs = [t.to(DEV, torch.float32) for t in inputs]
    m, g = mask.to(DEV), grad_out.to(DEV, torch.float32)
    out, lse = torch.ops.blosa.masked_block_attn_fwd(*xs, m, 0, "diag", 5.0)
    first = torch.ops.blosa.masked_block_attn_bwd(g, *xs, m, out, lse, 0, "diag", 5.0)
    for _ in range(3):
        again = torch.ops.blosa.masked_block_attn_bwd(g, *xs, m, out, lse, 0, "diag", 5.0)
        for a, b in zip(first, again):
            assert torch.equal(a, b)


def test_fused_backward_falls_back_to_split_where_its_scratch_does_not_fit(monkeypatch):
    # One block of 512 keys is 8 spans: the fused backward's scratch is 24 floats an element,
    # 192 MiB here. With 96 MiB of room left the split backward (about 40 MiB) must run instead
    # and give its gradients bit for bit; without the limit the fused one runs, whose float32
    # gradients round differently.
    B, n, d = 8, 512, 512
    gen = generator_for("fused-fallback")
    inputs, mask, grad_out = make_case(B, n, d, gen, True, "right_pad")
    xs = [t.to(DEV, torch.float32) for t in inputs]
    m, g = mask.to(DEV), grad_out.to(DEV, torch.float32)
    args = (g, *xs, m, *torch.ops.blosa.masked_block_attn_fwd(*xs, m, 0, "forward", 5.0), 0, "forward", 5.0)
    monkeypatch.setenv("BLOSA_CUDA_BACKWARD", "split")
    split = torch.ops.blosa.masked_block_attn_bwd(*args)
    monkeypatch.delenv("BLOSA_CUDA_BACKWARD")  # the default: fused
    fused = torch.ops.blosa.masked_block_attn_bwd(*args)
    assert not all(torch.equal(a, b) for a, b in zip(fused, split)), "the fused backward did not run"
    del fused
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(DEV).total_memory
    torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + 96 * 2**20) / total)
    try:
        limited = torch.ops.blosa.masked_block_attn_bwd(*args)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    for a, b in zip(limited, split):
        assert torch.equal(a, b)


@pytest.mark.parametrize("variable, value, message", [
    ("BLOSA_CUDA_TILE", "5", "BLOSA_CUDA_TILE must be 4 or 8, got '5'"),
    ("BLOSA_CUDA_TILE", "16", "BLOSA_CUDA_TILE must be 4 or 8, got '16'"),
    ("BLOSA_CUDA_TILE", "eight", "BLOSA_CUDA_TILE must be 4 or 8, got 'eight'"),
    ("BLOSA_CUDA_BACKWARD", "fast", "BLOSA_CUDA_BACKWARD must be split or fused, got 'fast'"),
    ("BLOSA_CUDA_FORWARD", "shared", "BLOSA_CUDA_FORWARD must be stream or staged, got 'shared'"),
    ("BLOSA_CUDA_SMALL_VEC", "4", "BLOSA_CUDA_SMALL_VEC must be 1 or 2, got '4'"),
    ("BLOSA_CUDA_SMALL_PERSISTENT", "yes",
     "BLOSA_CUDA_SMALL_PERSISTENT must be 0 or 1, got 'yes'"),
    ("BLOSA_CUDA_SMALL_DENSE", "on", "BLOSA_CUDA_SMALL_DENSE must be 0 or 1, got 'on'"),
    ("BLOSA_CUDA_SMALL_LOADS_FIRST", "2",
     "BLOSA_CUDA_SMALL_LOADS_FIRST must be 0 or 1, got '2'"),
    ("BLOSA_CUDA_SMALL_STAGED", "both",
     "BLOSA_CUDA_SMALL_STAGED must be 0, 1, forward or backward, got 'both'"),
    ("BLOSA_CUDA_SMALL_STAGED_BLOCKS", "0",
     "BLOSA_CUDA_SMALL_STAGED_BLOCKS must be a whole number from 1 to 9999, got '0'"),
    ("BLOSA_CUDA_SMALL_STAGED_BLOCKS", "eight",
     "BLOSA_CUDA_SMALL_STAGED_BLOCKS must be a whole number from 1 to 9999, got 'eight'"),
])
def test_bad_tuning_switch_is_named(monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    x = torch.randn(1, 12, 3, device=DEV, requires_grad=True)
    with pytest.raises(ValueError, match=message):
        masked_block_attn(x, x, x, None, None, 0, "forward", backend="cuda").sum().backward()


@pytest.mark.parametrize("scale", (0.5, 5.0, 39.0, 41.0, 100.0))
@pytest.mark.parametrize("n, block_len", ((13, 4), (40, 0)))
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.bfloat16), ids=str)
def test_every_scale(dtype, n, block_len, scale):
    # spread = scale reaches tanh saturation; both pivot paths on both kernel layouts.
    for direction in ("forward", "all"):
        check(dtype, direction, block_len, "holes", n=n, d=33, scale=scale, with_bias=True,
              spread=min(scale, 8.0))


@pytest.mark.parametrize("with_bias", (False, True))
@pytest.mark.parametrize("block_len", (0, 1))
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_single_token(direction, block_len, with_bias):
    check(torch.float32, direction, block_len, "none", B=2, n=1, d=5, scale=5.0,
          with_bias=with_bias)


@pytest.mark.parametrize("n, d", [(2, 3), (9, 1), (64, 33), (129, 3)])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_odd_sizes(direction, n, d):
    for block_len in (3, 8, 9, 0):
        check(torch.float64, direction, block_len, "holes", B=2, n=n, d=d, scale=5.0)


@pytest.mark.parametrize("dtype", (torch.float64, torch.float32), ids=str)
@pytest.mark.parametrize("block_len", (3, 0))
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_lse_matches_cpu_and_is_inf_exactly_without_keys(direction, block_len, dtype):
    gen = generator_for("lse", direction, block_len, dtype)
    inputs, mask, _ = make_case(3, 17, 9, gen, True, "holes")
    mask[0] = False
    for scale in (5.0, 100.0):
        cpu = torch.ops.blosa.masked_block_attn_fwd(*[t.to(dtype) for t in inputs], mask,
                                                    block_len, direction, scale)
        gpu = torch.ops.blosa.masked_block_attn_fwd(*[t.to(DEV, dtype) for t in inputs],
                                                    mask.to(DEV), block_len, direction, scale)
        lse_dt = torch.float64 if dtype == torch.float64 else torch.float32
        assert gpu[1].dtype == lse_dt and gpu[0].dtype == dtype
        no_key = torch.isinf(cpu[1])
        assert torch.equal(torch.isinf(gpu[1]).cpu(), no_key)
        assert (gpu[1][no_key.to(DEV)] > 0).all() and (gpu[0][no_key.to(DEV)] == 0).all()
        tol = dict(atol=1e-9, rtol=1e-9) if dtype == torch.float64 else dict(atol=2e-2, rtol=2e-3)
        torch.testing.assert_close(gpu[1].cpu()[~no_key], cpu[1][~no_key].to(lse_dt), **tol)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("block_len", (8, 0))
def test_backward_is_deterministic(block_len, dtype):
    gen = generator_for("det", block_len, dtype)
    inputs, mask, grad_out = make_case(4, 300, 96, gen, True, "right_pad")
    xs = [t.to(DEV, dtype) for t in inputs]
    m, g = mask.to(DEV), grad_out.to(DEV, dtype)
    out, lse = torch.ops.blosa.masked_block_attn_fwd(*xs, m, block_len, "diag", 5.0)
    first = torch.ops.blosa.masked_block_attn_bwd(g, *xs, m, out, lse, block_len, "diag", 5.0)
    for _ in range(3):
        again = torch.ops.blosa.masked_block_attn_bwd(g, *xs, m, out, lse, block_len, "diag", 5.0)
        for a, b in zip(first, again):
            assert torch.equal(a, b)


@pytest.mark.parametrize("block_len", (4, 0))
def test_non_contiguous_inputs(block_len):
    gen = generator_for("strides", block_len)
    big = [torch.randn(4, 20, 30, generator=gen, dtype=torch.float64).to(DEV) for _ in range(3)]
    dep = big[0][::2, :, 1::2]
    head = big[1].transpose(0, 1).contiguous().transpose(0, 1)[::2, :, :15]
    value = big[2][1::2, :, ::2]
    bias = torch.randn(30, generator=gen, dtype=torch.float64).to(DEV)[::2]
    mask = (torch.rand(20, 2, generator=gen) > 0.2).t().to(DEV)
    assert not dep.is_contiguous() and not value.is_contiguous() and not mask.is_contiguous()
    leaves = [t.detach().requires_grad_() for t in (dep, head, value, bias)]
    out = masked_block_attn(*leaves, mask, block_len, "backward", backend="cuda")
    ref = masked_block_attn_ref(*leaves, mask, block_len, "backward")
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-9)
    grad = torch.randn_like(out).transpose(0, 1).contiguous().transpose(0, 1)  # non-contiguous
    for a, b in zip(torch.autograd.grad(out, leaves, grad), torch.autograd.grad(ref, leaves, grad)):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-9)


def sample_args(dtype, block_len, mask_kind="holes", with_bias=True, n=13):
    gen = generator_for("opcheck-cuda", dtype, block_len, mask_kind)
    inputs, mask, _ = make_case(2, n, 5, gen, with_bias, mask_kind)
    xs = [None if t is None else t.to(DEV, dtype).requires_grad_() for t in inputs]
    return (*xs, None if mask is None else mask.to(DEV))


@pytest.mark.parametrize("dtype", (torch.float64, torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("direction, block_len", [("forward", 3), ("backward", 0), ("diag", 10)])
def test_opcheck_fwd(direction, block_len, dtype):
    args = sample_args(dtype, block_len, with_bias=dtype != torch.bfloat16)
    torch.library.opcheck(torch.ops.blosa.masked_block_attn_fwd, (*args, block_len, direction, 5.0))


@pytest.mark.parametrize("block_len", (3, 0))
def test_opcheck_bwd(block_len):
    dep, head, value, bias, mask = (t.detach() if t is not None else None
                                    for t in sample_args(torch.float32, block_len))
    out, lse = torch.ops.blosa.masked_block_attn_fwd(dep, head, value, bias, mask, block_len, "all", 5.0)
    grad_out = torch.randn_like(out)
    torch.library.opcheck(torch.ops.blosa.masked_block_attn_bwd,
                          (grad_out, dep, head, value, bias, mask, out, lse, block_len, "all", 5.0))


def test_torch_compile_fullgraph_matches_eager():
    torch._dynamo.reset()
    lin = torch.nn.Linear(6, 12, dtype=torch.float32, device=DEV)

    def layer(x, mask):
        dep, head = lin(x).chunk(2, dim=-1)
        return torch.ops.blosa.masked_block_attn(dep, head, x, None, mask, 4, "forward", 5.0).relu().sum(dim=1)

    gen = generator_for("compile-cuda")
    x = torch.randn(3, 10, 6, generator=gen).to(DEV).requires_grad_()
    mask = make_mask("right_pad", 3, 10, gen).to(DEV)
    compiled = torch.compile(layer, fullgraph=True)
    got, want = compiled(x, mask), layer(x, mask)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got.sum(), [x, lin.weight]),
                    torch.autograd.grad(want.sum(), [x, lin.weight])):
        torch.testing.assert_close(a, b)


def test_full_disa_8192_linear_memory():
    """One block of n = 8192: checks sampled queries against a direct float64 computation, and
    that peak memory stays O(B·n·d) (a [n, n, d] tensor would be 16 GiB here)."""
    B, n, d, c = 2, 8192, 64, 5.0
    gen = generator_for("disa")
    dep, head, value = (draw(gen, (B, n, d)).float().to(DEV) for _ in range(3))
    bias = draw(gen, (d,)).float().to(DEV)
    leaves = [t.requires_grad_() for t in (dep, head, value, bias)]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = masked_block_attn(*leaves, None, 0, "forward", c, backend="cuda")
    grads = torch.autograd.grad(out, leaves, torch.ones_like(out))
    torch.cuda.synchronize()
    grown = torch.cuda.max_memory_allocated() - base
    bnd = B * n * d * 4
    assert grown < 16 * bnd, f"peak memory grew by {grown / 2**20:.0f} MiB, B·n·d·4 = {bnd / 2**20:.0f} MiB"
    assert all(torch.isfinite(g).all() for g in grads)
    for j in (1, 2, 1000, 4097, n - 1):
        z = dep[:, :j].double() + head[:, j:j + 1].double() + bias.double()
        p = torch.softmax(c * torch.tanh(z / c), dim=1)
        want = (p * value[:, :j].double()).sum(dim=1)
        torch.testing.assert_close(out[:, j].double(), want, atol=1e-2, rtol=0)  # tanh.approx
    assert (out[:, 0] == 0).all()
    # d_value summed over keys is sum_j g_j over queries with a key: every query but the first.
    torch.testing.assert_close(grads[2].double().sum(dim=1), torch.full((B, d), n - 1.0, device=DEV,
                               dtype=torch.float64), rtol=1e-4, atol=0)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("forward", ("stream", "staged"))
@pytest.mark.parametrize("block_len", (8, 20, 0))  # forward_small, then tiled / staged
def test_forward_without_lse_same_output(monkeypatch, block_len, forward, dtype):
    # compute_lse=False (what a call with no gradient to come runs): a null lse, its stores skipped.
    monkeypatch.setenv("BLOSA_CUDA_FORWARD", forward)
    gen = generator_for("no-lse", block_len, forward, dtype)
    inputs, mask, _ = make_case(3, 77, 40, gen, True, "empty_row")
    xs = [t.to(DEV, dtype) for t in inputs]
    for direction in DIRECTIONS:
        args = (*xs, mask.to(DEV), block_len, direction, 5.0)
        out, lse = torch.ops.blosa.masked_block_attn_fwd(*args, compute_lse=False)
        want, _ = torch.ops.blosa.masked_block_attn_fwd(*args)
        assert lse.shape == (0,) and torch.equal(out, want), direction
