"""Triton kernels against the float64 reference: forward and every gradient, float32.

Case matrix as for the CPU op: the four directions; block_len 1, 3, one that does not divide n,
= n, > n, 0 (one block); masks none, right padding, random holes, an all-False row; n = 1; bias
None and given; scales on both sides of the fixed-pivot limit (40). Every tiling runs: the
per-pair kernels (blocks of up to 8), the per-block kernels (up to 64; forced on short blocks
too by the `per_block_kernels` fixture) and, forced by the `rows_kernels` fixture, the row-tile
kernels used for longer blocks and full DiSA (n = 36 with 16-row tiles reaches their inner key
ranges, tiles that straddle blocks and, with block_len 7, partial last blocks), with either
backward: split, or fused (`fused_backward`; block_len 20 and 0 give blocks of two and three
16-row query tiles, 20 a last block of one tile and an empty one). Each autotune shape on its
own: test_triton_config_shapes.py.
"""
import pytest
import torch

import blosa
from blosa_kernels import configs, masked_block_attn_triton, masked_block_attn_triton_fwd
from attn_cases import (MASK_KINDS, assert_grad_out_padding_ignored, assert_padding_ignored,
                        assert_zero_at_padding)
from triton_testing import (DEVICE, HAS_CUDA, RTOL, check, compare, float32_atol, make_inputs,
                            record_launches, reference64, run, seed_of, use_path)

DIRECTIONS = ("forward", "backward", "diag", "all")


# n = 13: block_len 1, 3, 5 (does not divide 13), 13 (= n), 20 (> n), 0 (one block).
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("block_len", [1, 3, 5, 13, 20, 0])
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
def test_block_kernels(direction, block_len, mask_kind):
    seed = seed_of(direction, block_len, mask_kind)
    compare(2, 13, 6, block_len, direction, mask_kind, bias=seed % 2 == 0, scale=5.0, seed=seed)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("block_len", [1, 5, 0])
def test_block_kernels_in_the_other_arrangement(monkeypatch, direction, block_len):
    # The per-block kernels keep a block's rows on the tile axis that the installed triton
    # needs (configs.BLOCK_ROW_AXIS); the other arrangement must compute the same.
    monkeypatch.setattr(configs, "BLOCK_ROW_AXIS", 1 - configs.BLOCK_ROW_AXIS)
    seed = seed_of(direction, block_len, "other arrangement")
    compare(2, 13, 6, block_len, direction, "holes", bias=True, scale=5.0, seed=seed)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("block_len", [0, 7, 1, 20])
@pytest.mark.parametrize("mask_kind", ["none", "holes"])
@pytest.mark.parametrize("backward", ["rows", "fused", "trimmed"])
def test_row_kernels(request, backward, direction, block_len, mask_kind):
    use_path(request, backward)
    seed = seed_of(direction, block_len, mask_kind, "rows", backward)
    compare(1, 36, 5, block_len, direction, mask_kind, bias=seed % 2 == 1, scale=5.0, seed=seed)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("block_len", [1, 3, 5, 8])
@pytest.mark.parametrize("mask_kind", ["none", "holes"])
def test_per_block_kernels_on_short_blocks(per_block_kernels, direction, block_len, mask_kind):
    # Blocks of up to 8 take the per-pair kernels; the per-block ones must still compute them
    # (BLOSA_TRITON_PAIRS=0, and the benchmark's variant "per-block").
    seed = seed_of(direction, block_len, mask_kind, "per-block")
    compare(2, 13, 6, block_len, direction, mask_kind, bias=seed % 2 == 0, scale=5.0, seed=seed)


@pytest.mark.parametrize("block_len, n, kernels", [
    (1, 13, ("fwd_pairs", "bwd_pairs")), (5, 13, ("fwd_pairs", "bwd_pairs")),
    (8, 16, ("fwd_pairs", "bwd_pairs")), (9, 13, ("fwd_blocks", "bwd_blocks")),
    (0, 64, ("fwd_blocks", "bwd_blocks")), (0, 65, ("fwd_rows", "bwd_fused", "bwd_dkv_sums")),
])
def test_kernels_by_block_length(monkeypatch, launches, block_len, n, kernels):
    # Which kernels a differentiable call launches: per-pair for blocks of up to 8 (R <= 8),
    # per-block up to 64, row tiles above (the fused backward, the forward saving lse).
    monkeypatch.setattr(configs, "BACKWARD", "fused")
    compare(1, n, 3, block_len, "forward", "holes", True, 5.0, seed=n + block_len)
    assert tuple(kind for kind, _ in launches) == kernels
    monkeypatch.setattr(configs, "PAIRS_MAX", 0)
    launches.clear()
    compare(1, n, 3, block_len, "forward", "holes", True, 5.0, seed=n + block_len)
    per_block = tuple(k.replace("pairs", "blocks") for k in kernels)
    assert tuple(kind for kind, _ in launches) == per_block


# No mask and blocks that all have R tokens (r = 2, 4, 8 dividing n; one block of 8): the
# per-pair kernels compiled without the mask and the row tests (DENSE), as the benchmark runs.
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("n, block_len", [(16, 8), (24, 4), (16, 2), (8, 0)])
@pytest.mark.parametrize("scale", [5.0, 100.0])
def test_dense_pair_kernels(monkeypatch, launches, direction, n, block_len, scale):
    seed = seed_of(direction, n, block_len, scale, "dense")
    inputs = make_inputs(3, n, 6, "none", True, seed, torch.float32, DEVICE)
    settings = (block_len, direction, scale)
    got = run(masked_block_attn_triton, *inputs, *settings)
    check(("dense", n, block_len, direction, scale), got, reference64(*inputs, *settings), scale)
    assert launches == [("fwd_pairs", True), ("bwd_pairs", True)]
    # The same bits as the general per-pair kernels (in the interpreter, which runs both through
    # the same arithmetic; compiled, ptxas may order them differently).
    monkeypatch.setattr(configs, "PAIRS_DENSE", False)
    general = run(masked_block_attn_triton, *inputs, *settings)
    assert launches[2:] == [("fwd_pairs", False), ("bwd_pairs", False)]
    if configs.INTERPRET:
        assert all(torch.equal(a, b) for a, b in zip(got, general))


def test_dense_pair_kernels_make_no_ones_mask(monkeypatch):
    # Without a mask the kernels are given an all-ones one (torch.ones: an allocation and a fill
    # kernel per forward and backward), but the dense ones read none, so none is made for them.
    made = []
    ones = torch.ones

    def recording(*args, **kwargs):
        made.append(kwargs.get("dtype"))
        return ones(*args, **kwargs)

    monkeypatch.setattr(torch, "ones", recording)
    compare(2, 16, 5, 8, "forward", "none", True, 5.0, seed=4)  # dense
    assert torch.uint8 not in made
    compare(2, 13, 5, 8, "forward", "none", True, 5.0, seed=5)  # a short last block: general
    assert made.count(torch.uint8) == 2


@pytest.mark.parametrize("mask_kind, n, block_len",
                         [("holes", 16, 8), ("none", 13, 8), ("none", 12, 3)])
def test_dense_pair_kernels_only_where_they_apply(launches, mask_kind, n, block_len):
    # A mask, a short last block (13 = 8 + 5), or r below its R (3 < 4): the general ones.
    compare(1, n, 3, block_len, "forward", mask_kind, True, 5.0, seed=n + block_len)
    assert launches == [("fwd_pairs", False), ("bwd_pairs", False)]


@pytest.mark.parametrize("mask_kind, n, block_len, direction", [
    ("holes", 13, 5, "diag"), ("right_pad", 24, 8, "backward"), ("none", 24, 8, "forward")])
def test_pair_kernels_with_int64_indices(monkeypatch, mask_kind, n, block_len, direction):
    # Past configs.PAIRS_INDEX32_MAX (B · nblk · d) elements the per-pair kernels index them in
    # int64 (INDEX64); lowered to 0 here, small cases take that variant, general and dense (the
    # last case). The indexing does not depend on the direction: one each, fewer GPU compiles.
    monkeypatch.setattr(configs, "PAIRS_INDEX32_MAX", 0)
    flags = record_launches(monkeypatch, "INDEX64")
    seed = seed_of(direction, mask_kind, n, block_len, "int64")
    compare(3, n, 7, block_len, direction, mask_kind, bias=True, scale=5.0, seed=seed)
    assert flags == [("fwd_pairs", True), ("bwd_pairs", True)]


@pytest.mark.parametrize("B, n, d, block_len", [(3, 40, 9, 8), (2, 21, 33, 4), (5, 7, 5, 3)])
def test_pair_kernels_across_programs(launches, B, n, d, block_len):
    # Each program takes a run of (block, feature) elements of the flattened [B · nblk, d]
    # grid (32 in the interpreter): these shapes have several programs, whose runs start and
    # end inside blocks and sequences, d above and below the run, and short last blocks.
    seed = seed_of(B, n, d, block_len, "programs")
    compare(B, n, d, block_len, "diag", "holes", bias=True, scale=5.0, seed=seed)
    assert [kind for kind, _ in launches] == ["fwd_pairs", "bwd_pairs"]


@pytest.mark.parametrize("scale", [0.5, 40.0, 100.0])  # 100 > 40: running-max softmax
@pytest.mark.parametrize("path", ["default", "per-block", "rows", "fused", "trimmed"])
def test_scales(request, scale, path):
    use_path(request, path)
    block_len = 8 if path in ("default", "per-block") else 0
    compare(2, 24, 7, block_len, "forward", "holes", True, scale, seed=int(scale * 10))


@pytest.mark.parametrize("scale", [1e3, 1e6, 1e12])
@pytest.mark.parametrize("path", ["default", "per-block", "rows", "fused", "trimmed"])
def test_large_scales(request, scale, path):
    # c·tanh(z / c) -> z: the exact tanh's absolute error of a few ulps of 1 would be c times
    # that in the score (each case fails without TANH_POLY); its polynomial keeps the error
    # relative, a few ulps of |s| <= |z| < 20 for these inputs, which float32_atol(20) holds.
    use_path(request, path)
    block_len = 8 if path in ("default", "per-block") else 0
    compare(2, 24, 7, block_len, "all", "holes", True, scale, seed_of("large", scale, path),
            atol_scale=20.0)


def test_exact_tanh_takes_its_polynomial_only_above_forty(monkeypatch):
    # The kernels' flags: TANH_POLY for the exact tanh at scales above the fixed pivot's limit,
    # never with tanh.approx (configs.FAST_TANH_DTYPES, on a GPU) and never at c <= 40, whose
    # kernels are those of before it.
    seen = record_launches(monkeypatch, "TANH_POLY")
    inputs = make_inputs(1, 9, 4, "none", True, 3, torch.float32, DEVICE)
    for scale in (5.0, 40.0, 40.5, 1e6):
        run(masked_block_attn_triton, *inputs, 4, "forward", scale)
        assert seen and all(poly == (scale > 40) for _, poly in seen), (scale, seen)
        seen.clear()
    if HAS_CUDA:
        half = [t.bfloat16() if t is not None and t.is_floating_point() else t for t in inputs]
        run(masked_block_attn_triton, *half, 4, "forward", 1e6)
        assert seen and not any(poly for _, poly in seen)


@pytest.mark.parametrize("path", ["default", "per-block", "rows", "fused"])
def test_bias_sum_forms(monkeypatch, request, path):
    # configs.BIAS_SUM: d_bias as a product with ones ("mv", the default) or by ATen's sum
    # ("sum"), of the per-pair and per-block kernels' per-block sums or the row-tile kernels'
    # d_head: both against the reference, the same bits on a second run, within float32
    # rounding of each other, and nothing else changed.
    use_path(request, path)
    block_len = 8 if path in ("default", "per-block") else 0
    inputs = make_inputs(3, 24, 7, "holes", True, seed_of(path, "bias sum"), torch.float32, DEVICE)
    settings = (block_len, "forward", 5.0)
    got = {}
    for form in ("sum", "mv"):
        monkeypatch.setattr(configs, "BIAS_SUM", form)
        got[form] = run(masked_block_attn_triton, *inputs, *settings)
        check((form, path), got[form], reference64(*inputs, *settings))
        assert torch.equal(got[form][4], run(masked_block_attn_triton, *inputs, *settings)[4])
    assert all(torch.equal(a, b) for a, b in zip(got["mv"][:4], got["sum"][:4]))
    torch.testing.assert_close(got["mv"][4], got["sum"][4], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("path", ["default", "per-block", "rows", "fused", "trimmed"])
def test_n_equals_one(request, path):
    use_path(request, path)
    for direction in DIRECTIONS:
        compare(2, 1, 4, 0, direction, "none", True, 5.0, seed=1)


@pytest.mark.parametrize("path", ["default", "per-block", "fused", "trimmed"])
def test_wide_features_and_multiple_feature_tiles(request, path):
    use_path(request, path)
    # d = 70 > 64: two feature tiles; 3 sequences of 10 blocks of 4: several programs in each
    # (the per-block kernels take 8 blocks a program, the grid the feature tiles fastest).
    compare(3, 40, 70, 4, "diag", "holes", True, 5.0, seed=3)


def test_non_contiguous_inputs():
    gen = torch.Generator().manual_seed(5)
    big = torch.randn(2, 11, 2, 8, generator=gen).to(DEVICE)
    dep, head = big[:, :, 0], big[:, :, 1]  # strided views
    value = torch.randn(2, 8, 11, generator=gen).to(DEVICE).transpose(1, 2)
    bias = torch.randn(16, generator=gen).to(DEVICE)[::2]
    mask = (torch.rand(11, 2, generator=gen) > 0.2).to(DEVICE).t()
    grad = torch.randn(2, 11, 8, generator=gen).to(DEVICE)
    settings = (3, "forward", 5.0)
    got = run(masked_block_attn_triton, dep, head, value, bias, mask, grad, *settings)
    check("non-contiguous", got, reference64(dep, head, value, bias, mask, grad, *settings))


@pytest.mark.parametrize("path", ["default", "per-block", "rows", "fused", "trimmed"])
def test_queries_without_keys_get_exact_zeros_and_inf_lse(request, path):
    use_path(request, path)
    dep, head, value, bias, mask, grad = make_inputs(2, 12, 5, "holes", True, 7, torch.float32, DEVICE)
    mask[0] = False  # a whole sequence of padding
    mask[1, 4] = False  # a padded token
    out, lse = masked_block_attn_triton_fwd(dep, head, value, bias, mask, 4, "forward", 5.0)
    no_key = ~mask.clone()
    no_key[:, 0::4] = True  # first query of each block under "forward"
    assert torch.equal(out[no_key], torch.zeros_like(out[no_key]))
    assert torch.isinf(lse[no_key]).all() and (lse[no_key] > 0).all()
    assert torch.isfinite(out).all()
    got = run(masked_block_attn_triton, dep, head, value, bias, mask, grad, 4, "forward", 5.0)
    for g in got:
        assert torch.isfinite(g).all()
    d_dep, d_head, d_value = got[1:4]
    pad = ~mask
    assert (d_head[no_key] == 0).all() and (d_dep[pad] == 0).all() and (d_value[pad] == 0).all()


@pytest.mark.parametrize("fill", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("path, n, block_len, direction, mask_kind, scale", [
    ("default", 13, 3, "forward", "holes", 5.0),  # per-pair kernels
    ("default", 13, 0, "all", "empty_row", 5.0),  # per-block kernels, one block
    ("default", 13, 5, "diag", "right_pad", 50.0),  # per-pair kernels, running maximum
    ("per-block", 13, 5, "backward", "holes", 50.0),  # per-block kernels, running maximum
    ("rows", 36, 0, "backward", "holes", 5.0),  # row tiles, split backward
    ("fused", 36, 7, "forward", "right_pad", 50.0),  # row tiles, fused backward
    ("trimmed", 36, 20, "diag", "holes", 5.0),  # its trimmed key loop
])
def test_what_padding_holds_does_not_matter(request, fill, path, n, block_len, direction,
                                            mask_kind, scale):
    """Padded tokens are no keys and no queries: inf or NaN in dep, head and value there (padded
    batches hold garbage) gives bit for bit the outputs and gradients of finite padding, exactly 0
    at padding, in every tiling (as the CPU and CUDA kernels)."""
    use_path(request, path)
    seed = seed_of("padding holds", fill, path, block_len, direction, mask_kind)
    dep, head, value, bias, mask, grad = make_inputs(2, n, 5, mask_kind, True, seed, torch.float32,
                                                     DEVICE)
    settings = (block_len, direction, scale)

    def run_with(inputs):
        return run(masked_block_attn_triton, *inputs, mask, grad, *settings)

    dirty = assert_padding_ignored(run_with, [dep, head, value, bias], mask, fill)
    check((path, block_len, direction, mask_kind, fill), dirty,
          reference64(dep, head, value, bias, mask, grad, *settings), scale)
    assert_zero_at_padding(dirty, mask)


@pytest.mark.parametrize("path, n, block_len, direction", [
    ("default", 13, 3, "forward"),  # per-pair kernels
    ("default", 13, 0, "all"),  # per-block kernels
    ("rows", 36, 0, "backward"),  # split backward
    ("fused", 36, 7, "diag"),
    ("trimmed", 36, 20, "forward"),
])
def test_what_grad_out_holds_at_padding_does_not_matter(request, path, n, block_len, direction):
    """Padded queries pass no gradient: an upstream gradient of NaN or inf there (a later layer's
    0 / 0 at padding, say) gives bit for bit the gradients of a finite one."""
    use_path(request, path)
    seed = seed_of("grad_out at padding", path, block_len, direction)
    dep, head, value, bias, mask, grad = make_inputs(2, n, 5, "holes", True, seed, torch.float32,
                                                     DEVICE)
    settings = (block_len, direction, 5.0)
    assert_grad_out_padding_ignored(
        lambda g: run(masked_block_attn_triton, dep, head, value, bias, mask, g, *settings),
        grad, mask)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("block_len", [1, 4, 0])  # 4 leaves a short last block at n = 11
def test_per_block_backward_writes_every_gradient(monkeypatch, direction, block_len):
    # The per-block backward allocates its outputs with torch.empty_like and writes every row
    # itself (d_head's rows that can have no key too): NaN-filled allocations make a row it
    # leaves unwritten fail against the reference.
    empty_like = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: empty_like(t, **kw).fill_(float("nan")))
    seed = seed_of(direction, block_len, "nan-filled")
    inputs = make_inputs(2, 11, 5, "holes", True, seed, torch.float32, DEVICE)
    settings = (block_len, direction, 5.0)
    check(("nan-filled", direction, block_len), run(masked_block_attn_triton, *inputs, *settings),
          reference64(*inputs, *settings))


def test_all_padding_batch_gives_zero_everything():
    dep, head, value, bias, _, grad = make_inputs(2, 6, 3, "none", True, 8, torch.float32, DEVICE)
    mask = torch.zeros(2, 6, dtype=torch.bool, device=DEVICE)
    out, *grads = run(masked_block_attn_triton, dep, head, value, bias, mask, grad, 0, "all", 5.0)
    assert not out.any() and not any(g.any() for g in grads)


@pytest.mark.parametrize("shape", [(0, 5, 3), (2, 0, 3), (2, 5, 0)])
def test_empty_inputs(shape):
    dep = torch.randn(*shape, device=DEVICE, requires_grad=True)
    out = masked_block_attn_triton(dep, dep, dep, None, None, 2, "forward", 5.0)
    assert out.shape == shape
    out.sum().backward()
    assert dep.grad.shape == shape


def test_public_api_backend_triton():
    dep, head, value, bias, mask, grad = make_inputs(2, 10, 4, "right_pad", True, 9, torch.float32, DEVICE)
    out = blosa.masked_block_attn(dep, head, value, bias, mask, 4, "backward", 5.0, backend="triton")
    want = reference64(dep, head, value, bias, mask, grad, 4, "backward", 5.0)[0]
    torch.testing.assert_close(out.cpu().double(), want, atol=float32_atol(5.0), rtol=RTOL)


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(direction="sideways"), "direction"),
        (dict(scale=float("nan")), "scale"),
        (dict(mask=torch.ones(2, 5, dtype=torch.int64)), "mask"),
        (dict(bias=torch.ones(4)), "bias"),
        (dict(bias=torch.ones(3).to_sparse()), "bias must be a dense"),
        (dict(mask=torch.ones(2, 5, dtype=torch.bool).to_sparse()), "mask must be a dense"),
    ],
)
def test_bad_arguments_raise_before_work(kwargs, word):
    x = torch.randn(2, 5, 3, device=DEVICE)
    args = dict(bias=None, mask=None, block_len=2, direction="forward", scale=5.0)
    args.update({k: (v.to(DEVICE) if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()})
    with pytest.raises((ValueError, TypeError), match=word):
        masked_block_attn_triton(x, x, x, args["bias"], args["mask"], args["block_len"], args["direction"], args["scale"])


def test_float64_inputs_take_only_float32_scales():
    """The kernels compute float64 inputs in float32, c included: a scale whose 1/c float32
    cannot hold is refused although float64 could hold it (the CPU op takes it)."""
    x = torch.randn(2, 5, 3, dtype=torch.float64, device=DEVICE)
    with pytest.raises(ValueError, match="scale must lie in .* finite in torch.float32, got 1e-40"):
        masked_block_attn_triton(x, x, x, None, None, 2, "forward", 1e-40)


def test_ops_are_registered_under_their_own_names():
    fwd = str(torch.ops.blosa.masked_block_attn_triton_fwd.default._schema)
    bwd = str(torch.ops.blosa.masked_block_attn_triton_bwd.default._schema)
    assert fwd.startswith("blosa::masked_block_attn_triton_fwd(Tensor dep, Tensor head, Tensor value, Tensor? bias")
    assert fwd.endswith("-> (Tensor, Tensor)")
    assert bwd.startswith("blosa::masked_block_attn_triton_bwd(Tensor grad_out,")
    # The C++ ops keep their own names.
    assert torch.ops.blosa.masked_block_attn_fwd.default is not torch.ops.blosa.masked_block_attn_triton_fwd.default
