"""torch.func checks of masked_block_attn, shared by the C++ and Triton backends' tests.

Each check runs a transform over the fused op and compares it with the same transform over the
float64 reference, slice by slice or through plain autograd, on random inputs drawn per case.
torch's vmap fallback (one call per slice) is switched off, so a missing vmap rule fails.
"""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.func import grad, jacrev, vjp, vmap

from attn_cases import generator_for, make_mask
from blosa import masked_block_attn, masked_block_attn_ref

V = 3  # slices mapped over


@contextlib.contextmanager
def no_vmap_fallback():
    """vmap raises where an op has no batching rule, instead of looping over the slices."""
    torch._C._functorch._set_vmap_fallback_enabled(False)
    try:
        yield
    finally:
        torch._C._functorch._set_vmap_fallback_enabled(True)


def draw(gen, *shape, device="cpu", dtype=torch.float32):
    return torch.randn(*shape, generator=gen, dtype=torch.float64).mul(2).to(device, dtype)


def assert_close(got, want, tol):
    """got (any dtype) against the float64 `want`: within tol of want's largest magnitude."""
    want = want.double()
    bound = tol * max(1.0, want.abs().max().item() if want.numel() else 0.0)
    err = (got.double().cpu() - want.cpu()).abs().max().item() if want.numel() else 0.0
    assert got.shape == want.shape and err <= bound, (tuple(got.shape), tuple(want.shape), err, bound)


def reference_f64(dep, head, value, bias, mask, block_len, direction):
    """The reference's output at scale 5, computed in float64."""
    cast = [None if t is None else (t.double() if t.is_floating_point() else t)
            for t in (dep, head, value, bias)]
    return masked_block_attn_ref(*cast, mask, block_len, direction, 5.0)


def check_vmap(backend, device, dtype, tol, case):
    """vmap with dep mapped along dim 1, head unmapped, value along dim 0, and the bias and the
    mask (kind) mapped or shared, against the reference slice by slice."""
    B, n, d, block_len, direction, mask_kind, bias_kind = case
    gen = generator_for("vmap", backend, str(dtype), *case)
    deps, head, values = draw(gen, B, V, n, d), draw(gen, B, n, d), draw(gen, V, B, n, d)
    bias = {"none": None, "shared": draw(gen, d), "mapped": draw(gen, V, d)}[bias_kind]
    masks = torch.stack([make_mask(mask_kind, B, n, gen) for _ in range(V)]) if mask_kind != "none" else None
    args = [None if t is None else t.to(device, dtype if t.is_floating_point() else t.dtype)
            for t in (deps, head, values, bias, masks)]
    in_dims = (1, None, 0, 0 if bias_kind == "mapped" else None, None if masks is None else 0)
    with no_vmap_fallback():
        got = vmap(lambda x, h, v, b, m: masked_block_attn(x, h, v, b, m, block_len, direction, 5.0, backend),
                   in_dims=in_dims)(*args)
    for i in range(V):
        want = reference_f64(deps[:, i], head, values[i], bias[i] if bias_kind == "mapped" else bias,
                             None if masks is None else masks[i], block_len, direction)
        assert_close(got[i], want, tol)
    assert got.device.type == torch.device(device).type and got.dtype == dtype


def check_per_sample_grads(backend, device, dtype, tol, case):
    """vmap(grad): each sequence's gradients of its own loss (the bias shared), against plain
    autograd on the reference, one sequence at a time."""
    B, n, d, block_len, direction, mask_kind = case
    gen = generator_for("per-sample", backend, str(dtype), *case)
    dep, head, value = (draw(gen, B, n, d) for _ in range(3))
    bias, weights = draw(gen, d), draw(gen, B, n, d)
    mask = make_mask(mask_kind, B, n, gen)

    def loss(x, h, v, b, m, w):
        return (masked_block_attn(x[None], h[None], v[None], b, None if m is None else m[None],
                                  block_len, direction, 5.0, backend) * w).sum()

    args = [t.to(device, dtype) for t in (dep, head, value, bias)]
    with no_vmap_fallback():
        got = vmap(grad(loss, argnums=(0, 1, 2, 3)), in_dims=(0, 0, 0, None, None if mask is None else 0, 0))(
            *args, None if mask is None else mask.to(device), weights.to(device, dtype))
    for i in range(B):
        inputs = [t.double().requires_grad_() for t in (dep[i:i + 1], head[i:i + 1], value[i:i + 1], bias)]
        out = reference_f64(*inputs, None if mask is None else mask[i:i + 1], block_len, direction)
        want = torch.autograd.grad(out, inputs, weights[i:i + 1].double())
        for g, w in zip(got, want):
            assert_close(g[i], w.squeeze(0) if w.dim() == 3 else w, tol)


def check_grad_of_vmap(backend, device, dtype, tol, case):
    """grad of a loss over a vmapped call with a mapped bias ([V, d]: the backward's rule adds
    it to head and returns each slice's d_bias), against plain autograd on the reference."""
    B, n, d, block_len, direction, mask_kind = case
    gen = generator_for("grad-vmap", backend, str(dtype), *case)
    deps, head, value = draw(gen, V, B, n, d), draw(gen, B, n, d), draw(gen, B, n, d)
    biases, weights = draw(gen, V, d), draw(gen, V, B, n, d)
    mask = make_mask(mask_kind, B, n, gen)
    dev_mask = None if mask is None else mask.to(device)

    def loss(xs, h, v, bs):
        def attend(x, b):
            return masked_block_attn(x, h, v, b, dev_mask, block_len, direction, 5.0, backend)
        return (vmap(attend)(xs, bs) * weights.to(device, dtype)).sum()

    with no_vmap_fallback():
        got = grad(loss, argnums=(0, 1, 2, 3))(*(t.to(device, dtype) for t in (deps, head, value, biases)))
    inputs = [t.double().requires_grad_() for t in (deps, head, value, biases)]
    outs = torch.stack([reference_f64(inputs[0][i], *inputs[1:3], inputs[3][i], mask, block_len, direction)
                        for i in range(V)])
    want = torch.autograd.grad(outs, inputs, weights.double())
    for g, w in zip(got, want):
        assert_close(g, w, tol)


def check_vjp_and_jacrev(backend, device, dtype, tol, case):
    """torch.func.vjp (all four inputs) and jacrev (of dep) against the reference's."""
    B, n, d, block_len, direction, mask_kind = case
    gen = generator_for("vjp", backend, str(dtype), *case)
    inputs = [draw(gen, B, n, d) for _ in range(3)] + [draw(gen, d)]
    cotangent, mask = draw(gen, B, n, d), make_mask(mask_kind, B, n, gen)
    dev_mask = None if mask is None else mask.to(device)

    def fused(x, h, v, b):
        return masked_block_attn(x, h, v, b, dev_mask, block_len, direction, 5.0, backend)

    def ref(x, h, v, b):
        return masked_block_attn_ref(x, h, v, b, mask, block_len, direction, 5.0)

    out, pullback = vjp(fused, *(t.to(device, dtype) for t in inputs))
    want_out, want_pullback = vjp(ref, *(t.double() for t in inputs))
    assert_close(out, want_out, tol)
    for g, w in zip(pullback(cotangent.to(device, dtype)), want_pullback(cotangent.double())):
        assert_close(g, w, tol)
    rest = [t.to(device, dtype) for t in inputs[1:]]
    with no_vmap_fallback():  # jacrev is vmap over vjp
        jac = jacrev(lambda x: fused(x, *rest))(inputs[0].to(device, dtype))
    assert_close(jac, jacrev(lambda x: ref(x, *(t.double() for t in inputs[1:])))(inputs[0].double()), tol)


def check_no_higher_derivatives(backend, device, dtype):
    """Forward mode and second derivatives are refused by name, not computed wrong."""
    gen = generator_for("higher", backend, str(dtype))
    dep, head, value = (draw(gen, 2, 5, 3, device=device, dtype=dtype) for _ in range(3))

    def f(x):
        return masked_block_attn(x, head, value, None, None, 2, "all", 5.0, backend)

    with pytest.raises(NotImplementedError, match="no forward-mode derivative.*backend='reference'"):
        torch.func.jvp(f, (dep,), (torch.ones_like(dep),))
    with pytest.raises(NotImplementedError, match="no forward-mode derivative"):
        torch.func.jacfwd(f)(dep)
    with pytest.raises(RuntimeError, match="no second derivative"):
        grad(lambda x: grad(lambda y: f(y).pow(2).sum())(x).sum())(dep)
    # Forward mode through other inputs, none reaching the op, wants no derivative of it. (Not
    # bit for bit: these calls compute lse, which on a GPU may select another kernel.)
    plain = f(dep)
    weight = torch.tensor(2.0, device=device, dtype=dtype)
    _, tangent = torch.func.jvp(lambda w: f(dep) * w, (weight,), (torch.ones_like(weight),))
    torch.testing.assert_close(tangent, plain)
    with fwAD.dual_level():
        with pytest.raises(NotImplementedError, match="no forward-mode derivative"):
            f(fwAD.make_dual(dep, torch.ones_like(dep)))
        torch.testing.assert_close(f(dep), plain)


def check_empty(backend, device, dtype):
    """vmap over no slices, or slices of no sequence, token or feature: outputs and per-slice
    gradients of the right (empty) shapes, and an empty batch's gradient reaching its input."""
    def attend(x):
        return masked_block_attn(x, x, x, None, None, 2, "all", 5.0, backend)

    for shape in ((0, 2, 5, 3), (3, 0, 5, 3), (2, 2, 0, 3), (2, 2, 5, 0)):
        x = torch.randn(*shape, device=device, dtype=dtype)
        with no_vmap_fallback():
            assert vmap(attend)(x).shape == shape
            assert vmap(grad(lambda x1: attend(x1).sum()))(x).shape == shape
            assert vmap(attend, in_dims=1)(x.transpose(0, 1)).shape == shape
            leaf = x.clone().requires_grad_()
            vmap(attend)(leaf).sum().backward()
        assert leaf.grad.shape == shape
