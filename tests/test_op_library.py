"""torch.library integration: opcheck, fake kernels, torch.compile and torch.func."""
import pytest
import torch

from attn_cases import RecordOps, generator_for, grads, make_inputs, make_mask, zero_fills
from blosa import masked_block_attn


def sample_args(dtype=torch.float64, with_bias=True, mask_kind="holes", case=()):
    gen = generator_for("opcheck", dtype, with_bias, mask_kind, *case)
    dep, head, value, bias = make_inputs(2, 7, 5, dtype, gen, with_bias)
    return dep, head, value, bias, make_mask(mask_kind, 2, 7, gen)


@pytest.mark.parametrize("with_bias, mask_kind", [(True, "holes"), (False, "none"), (True, "empty_row")])
@pytest.mark.parametrize("direction, block_len", [("forward", 3), ("backward", 0), ("diag", 2)])
def test_opcheck_fwd(direction, block_len, with_bias, mask_kind):
    args = sample_args(with_bias=with_bias, mask_kind=mask_kind, case=(direction, block_len))
    torch.library.opcheck(torch.ops.blosa.masked_block_attn_fwd, (*args, block_len, direction, 5.0))


def test_opcheck_public_and_bwd():
    dep, head, value, bias, mask = sample_args(torch.float32)
    torch.library.opcheck(torch.ops.blosa.masked_block_attn, (dep, head, value, bias, mask, 3, "forward", 5.0))
    out, lse = torch.ops.blosa.masked_block_attn_fwd(dep, head, value, bias, mask, 3, "forward", 5.0)
    grad_out = torch.randn_like(out)
    bwd_args = (grad_out, dep.detach(), head.detach(), value.detach(), bias.detach(), mask,
                out.detach(), lse, 3, "forward", 5.0)
    torch.library.opcheck(torch.ops.blosa.masked_block_attn_bwd, bwd_args)


@pytest.mark.parametrize("with_bias", [True, False])
def test_bwd_returns_d_bias_the_sum_of_d_head(with_bias):
    # z = dep_i + head_j + bias: d_bias is d_head summed over batch and queries; [0] without a bias.
    dep, head, value, bias, mask = sample_args(with_bias=with_bias, case=("d_bias",))
    out, lse = torch.ops.blosa.masked_block_attn_fwd(dep, head, value, bias, mask, 3, "all", 5.0)
    grad_out = torch.randn(out.shape, dtype=out.dtype, generator=generator_for("d_bias", with_bias))
    _, d_head, _, d_bias = torch.ops.blosa.masked_block_attn_bwd(grad_out, dep, head, value, bias, mask,
                                                                 out, lse, 3, "all", 5.0)
    if with_bias:
        torch.testing.assert_close(d_bias, d_head.sum(dim=(0, 1)), rtol=1e-12, atol=1e-12)
    else:
        assert d_bias.shape == (0,)


def test_backward_fills_no_zero_gradient_for_lse():
    # lse is not differentiable; autograd must not fill a zero [B, n, d] gradient for it before
    # each backward (set_materialize_grads(false) in csrc/autograd.cpp).
    dep, head, value, bias, mask = sample_args(case=("no-zero-fill",))
    leaves = [t.requires_grad_() for t in (dep, head, value, bias)]
    out, lse = torch.ops.blosa.masked_block_attn_fwd(*leaves, mask, 0, "all", 5.0)
    assert lse.shape == out.shape  # saved, as on the CPU for every block length
    with RecordOps() as mode:
        out.backward(torch.ones_like(out))
    assert "blosa.masked_block_attn_bwd.default" in mode.names
    assert not zero_fills(mode.names), zero_fills(mode.names)


def test_lse_is_inf_exactly_where_a_query_has_no_key():
    dep, head, value, bias, mask = sample_args()
    _, lse = torch.ops.blosa.masked_block_attn_fwd(dep, head, value, bias, mask, 3, "forward", 5.0)
    has_key = torch.zeros_like(mask)
    for j in range(7):
        start = j // 3 * 3
        has_key[:, j] = mask[:, j] & mask[:, start:j].any(dim=1)
    assert torch.isinf(lse[~has_key]).all() and torch.isfinite(lse[has_key]).all()


def test_torch_compile_fullgraph_matches_eager():
    torch._dynamo.reset()
    lin = torch.nn.Linear(6, 12, dtype=torch.float64)

    def layer(x, mask):
        dep, head = lin(x).chunk(2, dim=-1)
        return masked_block_attn(dep, head, x, None, mask, 4, "forward").relu().sum(dim=1)

    gen = generator_for("compile")
    x = torch.randn(3, 10, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    mask = make_mask("right_pad", 3, 10, gen)
    compiled = torch.compile(layer, fullgraph=True)
    got, want = compiled(x, mask), layer(x, mask)
    torch.testing.assert_close(got, want)
    g_got = torch.autograd.grad(got.sum(), [x, lin.weight])
    g_want = torch.autograd.grad(want.sum(), [x, lin.weight])
    for a, b in zip(g_got, g_want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("direction, block_len", [("forward", 4), ("all", 0)])
def test_torch_compile_dynamic_shapes_compile_once(direction, block_len):
    """dynamic=True: one graph serves every batch size and length (the C++ op's checks read
    SymInts, and scale may be a SymFloat), with eager's results and gradients at each."""
    torch._dynamo.reset()

    def layer(dep, head, value, bias, mask, scale):
        return masked_block_attn(dep, head, value, bias, mask, block_len, direction, scale)

    compiled = torch.compile(layer, fullgraph=True, dynamic=True, backend="aot_eager")
    with torch._dynamo.config.patch(error_on_recompile=True):
        for B, n in ((3, 10), (2, 17), (5, 13)):
            gen = generator_for("dynamic", direction, block_len, B, n)
            inputs = make_inputs(B, n, 4, torch.float64, gen)
            mask = make_mask("right_pad", B, n, gen)
            got, want = compiled(*inputs, mask, 3.0), layer(*inputs, mask, 3.0)
            torch.testing.assert_close(got, want)
            g = torch.randn(B, n, 4, generator=gen, dtype=torch.float64)
            for a, b in zip(grads(got, inputs, g), grads(want, inputs, g)):
                torch.testing.assert_close(a, b)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_vmap_matches_a_loop(backend):
    """torch.func.vmap over a batch of calls: the C++ op's rule folds the mapped dimension into
    the batch, bitwise the calls one by one (tests/test_functorch.py has the other transforms)."""
    gen = generator_for("vmap", backend)
    dep, head, value, bias = make_inputs(4 * 2, 6, 3, torch.float64, gen)
    dep, head, value = (t.detach().reshape(4, 2, 6, 3) for t in (dep, head, value))
    mask = make_mask("holes", 4 * 2, 6, gen).reshape(4, 2, 6)

    def attend(d, h, v, m):
        return masked_block_attn(d, h, v, bias.detach(), m, 4, "diag", 5.0, backend)

    want = torch.stack([attend(*args) for args in zip(dep, head, value, mask)])
    torch.testing.assert_close(torch.func.vmap(attend)(dep, head, value, mask), want, rtol=0, atol=0)
