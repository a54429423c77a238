"""The fused CPU op against the plain reference, gradients included."""
import itertools
import warnings

import pytest
import torch

from attn_cases import (DIRECTIONS, MASK_KINDS, assert_grad_out_padding_ignored,
                        assert_padding_ignored, assert_zero_at_padding, generator_for, grads,
                        make_inputs, make_mask)
from blosa import masked_block_attn, masked_block_attn_ref

TOL = {torch.float64: dict(atol=1e-12, rtol=1e-10), torch.float32: dict(atol=2e-5, rtol=1e-4)}
N = 11  # block lengths below: 1, 3, 5 (does not divide 11), 11 (= n), 16 (> n), 0 (one block)
BLOCK_LENS = (1, 3, 5, N, 16, 0)
SCALES = (0.5, 5.0, 17.0, 100.0)  # 100 > 40 takes the running-maximum path


def check_against_reference(dtype, direction, block_len, mask_kind, B=3, n=N, d=70, case=()):
    gen = generator_for(dtype, direction, block_len, mask_kind, n, d, *case)
    with_bias = bool(torch.randint(0, 2, (1,), generator=gen))
    scale = SCALES[int(torch.randint(0, len(SCALES), (1,), generator=gen))]
    inputs = make_inputs(B, n, d, dtype, gen, with_bias)
    mask = make_mask(mask_kind, B, n, gen)
    out = masked_block_attn(*inputs, mask, block_len, direction, scale, backend="cpu")
    ref = masked_block_attn_ref(*inputs, mask, block_len, direction, scale)
    grad_out = torch.randn(out.shape, generator=gen, dtype=dtype)
    torch.testing.assert_close(out, ref, **TOL[dtype])
    for got, want in zip(grads(out, inputs, grad_out), grads(ref, inputs, grad_out)):
        torch.testing.assert_close(got, want, **TOL[dtype])


@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("block_len", BLOCK_LENS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_matches_reference_float64(direction, block_len, mask_kind):
    check_against_reference(torch.float64, direction, block_len, mask_kind)


@pytest.mark.parametrize("block_len", (1, 5, 0))
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_matches_reference_float32(direction, block_len):
    check_against_reference(torch.float32, direction, block_len, "holes")


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_every_scale(direction, scale):
    gen = generator_for("scale", direction, scale)
    inputs = make_inputs(2, 9, 5, torch.float64, gen, spread=scale)  # reach tanh saturation
    out = masked_block_attn(*inputs, None, 4, direction, scale)
    ref = masked_block_attn_ref(*inputs, None, 4, direction, scale)
    torch.testing.assert_close(out, ref, **TOL[torch.float64])


@pytest.mark.parametrize("spread", (1e2, 1e3, 1e4))
@pytest.mark.parametrize("direction, block_len", [("all", 3), ("forward", 0)])
def test_running_maximum_backward_error_is_the_rounding_of_lse(direction, block_len, spread):
    """Above c = 40 lse = m + log Σp is one float32 a query and feature: rounded to within
    |lse|·2^-24, and backward's p = exp(s - lse) takes that on as a relative error (README,
    `scale`). With c = 1e6 the scores are about dep + head, of size `spread`: d_value's error
    stays within that term (plus twice the float32 reference's), and under 1e-4 at spread 1e2."""
    gen = generator_for("running-max-lse", direction, block_len, spread)
    dep, head, value, _ = make_inputs(2, 12, 9, torch.float32, gen, with_bias=False, spread=spread)
    value = (value / spread).detach().requires_grad_()  # values of size 1
    grad_out = torch.randn(dep.shape, generator=gen)
    settings = (None, None, block_len, direction, 1e6)
    out = masked_block_attn(dep, head, value, *settings, backend="cpu")
    lse = torch.ops.blosa.masked_block_attn_fwd(dep, head, value, *settings)[1]
    (got,) = torch.autograd.grad(out, value, grad_out)
    (low,) = torch.autograd.grad(masked_block_attn_ref(dep, head, value, *settings), value, grad_out)
    as64 = [t.detach().double().requires_grad_() for t in (dep, head, value)]
    ref64 = masked_block_attn_ref(*as64, *settings)
    (want,) = torch.autograd.grad(ref64, as64[2], grad_out.double(), retain_graph=True)
    # d_value_i = Σ_j p_ij g_j: each p off by at most lse_rounding relative, so d_value by at
    # most lse_rounding · Σ_j p_ij |g_j| (the same sum with |g|).
    (abs_sums,) = torch.autograd.grad(ref64, as64[2], grad_out.double().abs())
    lse_rounding = lse[torch.isfinite(lse)].abs().max().item() * 2.0 ** -24
    err = (got.double() - want).abs().max().item()
    bound = 2 * (low.double() - want).abs().max().item() + lse_rounding * abs_sums.max().item()
    assert err <= bound + 1e-6, f"d_value error {err:.3g} > {bound:.3g}"
    if spread <= 1e2:
        assert err <= 1e-4 * want.abs().max().item()


@pytest.mark.parametrize("backend", ("cpu", "reference"))
@pytest.mark.parametrize("fill", (float("nan"), float("inf"), -float("inf")))
@pytest.mark.parametrize("direction, block_len, mask_kind",
                         [("forward", 3, "holes"), ("all", 0, "empty_row"), ("diag", 5, "right_pad")])
def test_what_padding_holds_does_not_matter(backend, fill, direction, block_len, mask_kind):
    """Padded tokens are no keys and no queries: inf or NaN in dep, head and value there (padded
    batches hold garbage) gives bit for bit the outputs and gradients of finite padding, exactly 0
    at padding."""
    gen = generator_for("padding holds", backend, fill, direction, block_len)
    inputs = make_inputs(3, N, 6, torch.float64, gen)
    mask = make_mask(mask_kind, 3, N, gen)
    grad_out = torch.randn(3, N, 6, generator=gen, dtype=torch.float64)

    def run(inputs):
        out = masked_block_attn(*inputs, mask, block_len, direction, 5.0, backend=backend)
        return [out, *grads(out, inputs, grad_out)]

    assert_zero_at_padding(assert_padding_ignored(run, inputs, mask, fill), mask)


@pytest.mark.parametrize("backend", ("cpu", "reference"))
@pytest.mark.parametrize("direction, block_len", [("forward", 3), ("all", 0), ("diag", 5)])
def test_what_grad_out_holds_at_padding_does_not_matter(backend, direction, block_len):
    """Padded queries pass no gradient: NaN or inf in the upstream gradient there (a later
    layer's 0 / 0 at padding, say) gives bit for bit the gradients of a finite one."""
    gen = generator_for("grad_out at padding", backend, direction, block_len)
    inputs = make_inputs(3, N, 6, torch.float64, gen)
    mask = make_mask("holes", 3, N, gen)
    grad_out = torch.randn(3, N, 6, generator=gen, dtype=torch.float64)

    def run(grad_out):
        out = masked_block_attn(*inputs, mask, block_len, direction, 5.0, backend=backend)
        return grads(out, inputs, grad_out)

    assert_grad_out_padding_ignored(run, grad_out, mask)


@pytest.mark.parametrize("n, d", [(1, 1), (1, 7), (2, 3), (64, 1), (129, 3)])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_odd_sizes(direction, n, d):
    check_against_reference(torch.float64, direction, 3, "holes", B=2, n=n, d=d)


def test_non_contiguous_inputs():
    gen = generator_for("strides")
    big = [torch.randn(4, 20, 30, generator=gen, dtype=torch.float64) for _ in range(3)]
    dep, head = big[0][::2, :, 1::2], big[1].transpose(0, 1).contiguous().transpose(0, 1)[::2, :, :15]
    value = big[2][1::2, :, ::2]
    bias = torch.randn(30, generator=gen, dtype=torch.float64)[::2]
    mask = (torch.rand(20, 2, generator=gen) > 0.2).t()
    assert not dep.is_contiguous() and not value.is_contiguous() and not mask.is_contiguous()
    out = masked_block_attn(dep, head, value, bias, mask, 6, "backward")
    torch.testing.assert_close(out, masked_block_attn_ref(dep, head, value, bias, mask, 6, "backward"))


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_fully_masked_rows_are_exact_zeros(direction):
    gen = generator_for("empty", direction)
    inputs = make_inputs(3, 8, 6, torch.float32, gen, spread=50.0)
    mask = torch.ones(3, 8, dtype=torch.bool)
    mask[0] = False  # a whole sequence of padding
    mask[1, 5:] = False  # right padding
    mask[2, ::2] = False  # holes
    out = masked_block_attn(*inputs, mask, 3, direction)
    out.sum().backward()
    assert torch.isfinite(out).all()
    assert (out[~mask] == 0).all()
    for t in inputs:
        assert torch.isfinite(t.grad).all()
        if t is not inputs[3]:
            assert (t.grad[~mask] == 0).all(), "padding must get no gradient"


def test_queries_without_keys_get_zero_and_no_gradient():
    gen = generator_for("first-token")
    dep, head, value, _ = make_inputs(2, 6, 4, torch.float64, gen)
    out = masked_block_attn(dep, head, value, None, None, 3, "forward")
    assert (out[:, ::3] == 0).all()  # the first token of each block sees no key
    (g_head,) = torch.autograd.grad(out.sum(), head)
    assert (g_head[:, ::3] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_half_precision_is_computed_in_float32(direction, dtype):
    """The CPU kernels take float32/float64: blosa.masked_block_attn gives them float16/bfloat16
    inputs in float32 and returns the result (and every gradient) rounded to the inputs' dtype,
    bit for bit the float32 op on the same values."""
    gen = generator_for("half", direction, dtype)
    n = int(torch.randint(1, 2 * N, (1,), generator=gen))
    block_len = int(torch.randint(0, n + 2, (1,), generator=gen))
    half = make_inputs(3, n, 9, dtype, gen)
    single = [t.detach().float().requires_grad_() for t in half]
    mask = make_mask(MASK_KINDS[int(torch.randint(0, len(MASK_KINDS), (1,), generator=gen))], 3, n, gen)
    grad_out = torch.randn(3, n, 9, generator=gen, dtype=dtype)
    out = masked_block_attn(*half, mask, block_len, direction, backend="cpu")
    want = masked_block_attn(*single, mask, block_len, direction, backend="cpu")
    assert out.dtype == dtype and torch.equal(out, want.to(dtype))
    for got, w in zip(grads(out, half, grad_out), grads(want, single, grad_out.float())):
        assert got.dtype == dtype and torch.equal(got, w.to(dtype))


# The reference too: it is the oracle, and autograd must reach every input through it.
@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("block_len", [0, 2])
@pytest.mark.parametrize("shape", [(0, 5, 4), (2, 0, 4), (2, 5, 0)])
def test_empty_inputs(shape, block_len, backend):
    dep, head, value = (torch.randn(shape, requires_grad=True) for _ in range(3))
    bias = torch.randn(shape[2], requires_grad=True)
    out = masked_block_attn(dep, head, value, bias, None, block_len, backend=backend)
    assert out.shape == shape
    out.sum().backward()
    for name, t in (("dep", dep), ("head", head), ("value", value), ("bias", bias)):
        assert t.grad is not None and t.grad.shape == t.shape, name
    assert (bias.grad == 0).all()


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_a_second_derivative_raises_instead_of_leaving_terms_out(direction):
    # The backward op has no derivative: gradients taken with create_graph=True are the plain
    # ones, and differentiating them raises (torch's default would only warn and drop the
    # backward's terms from the second derivative). As on the Triton path.
    gen = generator_for("second derivative", direction)
    inputs = make_inputs(2, 7, 5, torch.float64, gen)
    mask = make_mask("holes", 2, 7, gen)
    out = masked_block_attn(*inputs, mask, 3, direction, 5.0, backend="cpu")
    loss = (out ** 2).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "autograd kernel was not registered" warning
        tied = torch.autograd.grad(loss, inputs, create_graph=True)
        plain = torch.autograd.grad(loss, inputs, retain_graph=True)
        assert all(torch.equal(t, p) for t, p in zip(tied, plain))
        with pytest.raises(RuntimeError, match="derivative for blosa::masked_block_attn_bwd is not implemented"):
            torch.autograd.grad(sum(t.sum() for t in tied), inputs)


def test_backward_is_deterministic():
    gen = generator_for("determinism")
    inputs = make_inputs(4, 40, 150, torch.float32, gen)
    out = masked_block_attn(*inputs, None, 0, "all")
    grad_out = torch.randn(out.shape, generator=gen)
    first = grads(out, inputs, grad_out)
    again = grads(masked_block_attn(*inputs, None, 0, "all"), inputs, grad_out)
    assert all(torch.equal(a, b) for a, b in zip(first, again))


@pytest.mark.parametrize("direction, block_len", list(itertools.product(DIRECTIONS, (0, 2))))
def test_gradcheck(direction, block_len):
    gen = generator_for("gradcheck", direction, block_len)
    inputs = make_inputs(2, 5, 3, torch.float64, gen, spread=1.0)
    mask = torch.tensor([[True, True, False, True, True], [True, True, True, False, False]])
    # check_batched_grad: the backward under vmap too (its rule, blosa/_functorch.py), as
    # PyTorch's own operator tests ask of theirs.
    assert torch.autograd.gradcheck(
        lambda *t: masked_block_attn(*t, mask, block_len, direction, 2.0), inputs,
        check_batched_grad=True,
    )


def test_direct_torch_ops_call_matches():
    gen = generator_for("torch.ops")
    inputs = make_inputs(2, 7, 5, torch.float64, gen)
    mask = make_mask("holes", 2, 7, gen)
    out = torch.ops.blosa.masked_block_attn(*inputs, mask, 3, "diag", 5.0)
    torch.testing.assert_close(out, masked_block_attn_ref(*inputs, mask, 3, "diag", 5.0))
