"""float16 / bfloat16 judged the flash-attention way: the kernels' error against the float64
reference is at most twice the error of the reference itself computed in that dtype.

Inputs are drawn once in float64 and rounded to the dtype; both contenders and the float64
oracle see the same rounded inputs. On CUDA this also covers the tanh.approx path
(configs.FAST_TANH_DTYPES); the interpreter runs the exp2-based tanh.
"""
import pytest
import torch

from attn_cases import RESULTS
from blosa.reference import masked_block_attn_ref
from blosa_kernels import configs, masked_block_attn_triton
from triton_testing import (DEVICE, assert_within_twice_reference, make_inputs, record_launches,
                            reference64, run, seed_of, use_path)

CASES = [  # (B, n, d, block_len, direction, mask, path)
    (2, 16, 8, 4, "forward", "holes", "default"),  # per-pair kernels
    (2, 16, 8, 8, "all", "right_pad", "default"),
    (2, 16, 8, 8, "backward", "none", "default"),  # per-pair kernels without mask or row tests
    (2, 16, 8, 4, "backward", "holes", "per-block"),
    (2, 13, 8, 0, "diag", "right_pad", "default"),  # per-block kernels (blocks of 9 to 64)
    (1, 36, 6, 0, "backward", "holes", "rows"),
    (1, 36, 6, 10, "all", "none", "rows"),
    (2, 36, 6, 0, "forward", "holes", "fused"),
    (1, 40, 6, 20, "diag", "right_pad", "fused"),
    (2, 36, 6, 0, "backward", "holes", "trimmed"),
    (1, 40, 6, 20, "diag", "right_pad", "trimmed"),
    (2, 27, 38, 1, "all", "holes", "default"),  # one key a query: gradients 0 but for rounding
    (3, 18, 45, 2, "diag", "none", "default"),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_low_precision_within_twice_reference_error(request, dtype, case):
    B, n, d, block_len, direction, mask_kind, path = case
    use_path(request, path)
    inputs = make_inputs(B, n, d, mask_kind, True, 11, dtype, DEVICE)
    settings = (block_len, direction, 5.0)
    got = run(masked_block_attn_triton, *inputs, *settings)
    low = run(masked_block_attn_ref, *inputs, *settings)  # PyTorch in the same dtype
    want = reference64(*inputs, *settings)
    assert all(g.dtype == dtype for g in got), [g.dtype for g in got]
    assert_within_twice_reference(got, low, want)


RECIPROCAL_CASES = [  # (B, n, d, block_len, direction, mask, scale): per-pair kernels only
    (2, 16, 8, 8, "forward", "none", 5.0),  # dense: no mask, whole blocks (the benchmark's)
    (2, 13, 8, 4, "all", "holes", 5.0),  # a short last block, padding, fully masked rows
    (2, 16, 8, 8, "diag", "right_pad", 100.0),  # the running-max softmax
    (3, 5, 7, 1, "backward", "holes", 5.0),  # block_len 1: no query has a key
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", RECIPROCAL_CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("setting", ["newton", "div"])
def test_reciprocal_settings_within_twice_reference_error(monkeypatch, setting, dtype, case):
    # configs.PAIRS_RECIPROCAL: the per-pair kernels take 1 / sum from Newton steps ("newton",
    # the default: the forward 2 in bfloat16 and 3 in float16, the backward 3) or a division
    # ("div", 0 steps), both judged as every 16-bit result is.
    B, n, d, block_len, direction, mask_kind, scale = case
    monkeypatch.setattr(configs, "PAIRS_RECIPROCAL", setting)
    steps = record_launches(monkeypatch, "RCP_STEPS")
    seed = seed_of(case, dtype)
    inputs = make_inputs(B, n, d, mask_kind, True, seed, dtype, DEVICE)
    settings = (block_len, direction, scale)
    got = run(masked_block_attn_triton, *inputs, *settings)
    if setting == "newton":
        assert steps == [("fwd_pairs", 2 if dtype == torch.bfloat16 else 3), ("bwd_pairs", 3)]
    else:
        assert steps == [("fwd_pairs", 0), ("bwd_pairs", 0)]
    low = run(masked_block_attn_ref, *inputs, *settings)
    assert_within_twice_reference(got, low, reference64(*inputs, *settings))


def test_newton_reciprocal_leaves_float32_to_the_division(monkeypatch):
    monkeypatch.setattr(configs, "PAIRS_RECIPROCAL", "newton")
    steps = record_launches(monkeypatch, "RCP_STEPS")
    inputs = make_inputs(2, 16, 5, "holes", True, 3, torch.float32, DEVICE)
    run(masked_block_attn_triton, *inputs, 8, "forward", 5.0)
    assert steps == [("fwd_pairs", 0), ("bwd_pairs", 0)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", [  # (B, n, d, block_len, direction, mask, path)
    (2, 36, 6, 0, "forward", "holes", "fused"),  # even and odd key ranges, padding
    (1, 37, 5, 0, "all", "none", "rows"),  # an odd count of keys in every tile
    (2, 36, 6, 20, "diag", "right_pad", "rows"),  # blocks that do not divide n, masked rows
    (1, 40, 6, 13, "backward", "holes", "fused"),
], ids=lambda c: "-".join(map(str, c)))
def test_row_tile_polynomial_exp2_within_twice_reference_error(monkeypatch, request, dtype, case):
    # configs.ROWS_EXP2 = "half-poly": the row-tile forward takes every other key's exp2 from
    # exp2_poly (the interpreter too: the polynomial needs no inline PTX), judged as every
    # 16-bit result is; float32 and the running-max pivot (scale > 40) keep the unit's.
    B, n, d, block_len, direction, mask_kind, path = case
    use_path(request, path)
    monkeypatch.setattr(configs, "ROWS_EXP2", "half-poly")
    flags = record_launches(monkeypatch, "POLY_EXP2")
    inputs = make_inputs(B, n, d, mask_kind, True, seed_of(case), dtype, DEVICE)
    settings = (block_len, direction, 5.0)
    got = run(masked_block_attn_triton, *inputs, *settings)
    assert ("fwd_rows", True) in flags, flags
    low = run(masked_block_attn_ref, *inputs, *settings)
    assert_within_twice_reference(got, low, reference64(*inputs, *settings))
    flags.clear()
    run(masked_block_attn_triton, *[None if t is None else t.float() if t.is_floating_point()
                                    else t for t in inputs], *settings)
    assert flags[0] == ("fwd_rows", False)


def two_real_tokens(B: int, n: int, seed: int) -> torch.Tensor:
    """[B, n] mask with two real tokens a row, at random places."""
    gen = torch.Generator().manual_seed(seed)
    keep = torch.rand(B, n, generator=gen).argsort(dim=1)[:, :2]
    return torch.zeros(B, n, dtype=torch.bool).scatter_(1, keep, True)


@pytest.mark.parametrize("case", [  # (B, n, d, block_len, two real tokens a row, path, scale)
    (2, 13, 8, 2, False, "default", 100.0),  # per-pair, running max; the last token has no key
    (2, 13, 8, 2, False, "per-block", 5.0),  # fixed pivot (scale <= 40)
    (1, 37, 6, 2, False, "rows", 5.0),
    (1, 37, 6, 2, False, "fused", 100.0),
    (1, 37, 6, 2, False, "trimmed", 5.0),
    (3, 13, 8, 0, True, "default", 5.0),  # per-block kernels: one block of 13, 11 of them padding
    (3, 40, 6, 0, True, "fused", 100.0),
], ids=lambda c: "-".join(map(str, c)))
def test_one_key_gives_its_value_exactly(request, case):
    # Under "diag" each query here has one key (the other token of its block) or none: its
    # probability is 1, its output that key's value and its key's d_value its grad_out, which
    # the kernels' float32 p = 1 - 1e-7 or so must round back to exactly (to nearest, as the
    # GPU's conversion does), as the float64 reference gets them. Every other gradient is 0 (v_i
    # - out_j = 0), up to float32 rounding where a kernel recomputes out. An output rounded
    # toward zero (the interpreter's float32 -> bfloat16) was an ulp off, and so was d_dep.
    # bfloat16 only: float16's conversion rounds to nearest in the interpreter too.
    B, n, d, block_len, two, path, scale = case
    dtype = torch.bfloat16
    use_path(request, path)
    seed = seed_of(case)
    dep, head, value, bias, _, grad = make_inputs(B, n, d, "none", True, seed, dtype, DEVICE)
    mask = two_real_tokens(B, n, seed).to(DEVICE) if two else None
    inputs, settings = (dep, head, value, bias, mask, grad), (block_len, "diag", scale)
    got = run(masked_block_attn_triton, *inputs, *settings)
    want = reference64(*inputs, *settings)
    assert all(g.dtype == dtype for g in got)
    assert (want[1] == 0).all() and (want[3] != 0).any()  # the case is the one meant
    for name, g, w in zip(RESULTS, got, want):
        exact = name in ("out", "d_value")
        torch.testing.assert_close(g.cpu().double(), w, rtol=0, atol=0 if exact else 1e-5,
                                   msg=lambda m: f"{name}: {m}")
