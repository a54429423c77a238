"""torch.func transforms (vmap, grad, vjp, jacrev) over the C++ op, on CPU and, where there is
one, a GPU; and over the encoders built on it. The checks are in functorch_cases.py."""
from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, grad, vmap

import functorch_cases as fc
from attn_cases import RESULTS, RecordLseRequests, generator_for
from blosa import masked_block_attn
from blosa.nn.registry import build_encoder, set_backend
from blosa.ops import cuda_kernels_built

# (backend, device, dtype, tolerance against the float64 reference)
TARGETS = [("cpu", "cpu", torch.float64, 1e-10), ("cpu", "cpu", torch.float32, 1e-4)]
if torch.cuda.is_available() and cuda_kernels_built():
    # float32 runs tanh.approx / ex2.approx (tests/test_cuda.py): a looser bound.
    TARGETS += [("cuda", "cuda", torch.float64, 1e-10), ("cuda", "cuda", torch.float32, 1e-2)]
TARGET_IDS = [f"{b}-{str(t).split('.')[1]}" for b, _, t, _ in TARGETS]

# (B, n, d, block_len, direction, mask kind, bias kind): block lengths that do not divide n,
# one block (0, and longer than n), length 1, fully masked rows.
VMAP_CASES = [
    (2, 7, 5, 3, "forward", "holes", "mapped"),
    (2, 7, 5, 0, "all", "empty_row", "shared"),
    (1, 1, 4, 1, "backward", "none", "none"),
    (3, 9, 2, 4, "diag", "right_pad", "mapped"),
    (2, 6, 3, 8, "forward", "none", "shared"),
]
GRAD_CASES = [
    (2, 7, 5, 3, "forward", "holes"),
    (3, 9, 4, 0, "all", "right_pad"),
    (2, 5, 3, 2, "diag", "empty_row"),
    (1, 1, 3, 1, "backward", "none"),
]
SMALL_CASES = [(2, 5, 3, 2, "forward", "holes"), (1, 6, 2, 0, "backward", "empty_row")]


# Each check of functorch_cases.py with the cases it takes.
CHECKS = ([(fc.check_vmap, case) for case in VMAP_CASES]
          + [(check, case) for check in (fc.check_per_sample_grads, fc.check_grad_of_vmap) for case in GRAD_CASES]
          + [(fc.check_vjp_and_jacrev, case) for case in SMALL_CASES])


@pytest.mark.parametrize("backend,device,dtype,tol", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("check,case", CHECKS, ids=[f"{c.__name__[6:]}-{i}" for i, (c, _) in enumerate(CHECKS)])
def test_transform_matches_reference(check, case, backend, device, dtype, tol):
    check(backend, device, dtype, tol, case)


@pytest.mark.parametrize("backend,device,dtype,tol", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("check", [fc.check_no_higher_derivatives, fc.check_empty])
def test_refusals_and_empty_shapes(check, backend, device, dtype, tol):
    check(backend, device, dtype)


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if any(t[0] == "cuda" for t in TARGETS) else []))
@pytest.mark.parametrize("compute_lse", [True, False])
def test_torch_ops_under_vmap(device, compute_lse):
    """torch.ops.blosa.* themselves have vmap rules: _fwd (out, and lse where asked for), _bwd
    (with the saved lse or recomputing it; d_bias per slice) and the composite op equal calls
    slice by slice, and regular autograd outside vmap reaches the inputs through the composite."""
    gen = generator_for("ops-vmap", device, compute_lse)
    dep, head, value = (fc.draw(gen, fc.V, 2, 6, 3, device=device, dtype=torch.float64) for _ in range(3))
    bias = fc.draw(gen, 3, device=device, dtype=torch.float64)
    mask = (torch.rand(fc.V, 2, 6, generator=gen) > 0.3).to(device)
    args = (4, "forward", 5.0)
    with fc.no_vmap_fallback():
        out, lse = vmap(lambda *t: torch.ops.blosa.masked_block_attn_fwd(*t, *args, compute_lse),
                        in_dims=(0, 0, 0, None, 0))(dep, head, value, bias, mask)
    for i in range(fc.V):
        want_out, want_lse = torch.ops.blosa.masked_block_attn_fwd(dep[i], head[i], value[i], bias, mask[i],
                                                                     *args, compute_lse)
        torch.testing.assert_close(out[i], want_out, rtol=0, atol=1e-12)
        torch.testing.assert_close(lse[i], want_lse, rtol=0, atol=1e-12)  # [0] when not asked for
    # _bwd from the saved lse, or recomputing it (lse empty; out then empty too, and unmapped).
    grad_out = fc.draw(gen, fc.V, 2, 6, 3, device=device, dtype=torch.float64)
    saved = (out, lse) if compute_lse else (dep.new_empty(0), lse[0])

    def bwd(g, x, h, v, m, o, s):
        return torch.ops.blosa.masked_block_attn_bwd(g, x, h, v, bias, m, o, s, *args)

    with fc.no_vmap_fallback():
        got = vmap(bwd, in_dims=(0, 0, 0, 0, 0) + ((0, 0) if compute_lse else (None, None)))(
            grad_out, dep, head, value, mask, *saved)
    for i in range(fc.V):
        o, s = (out[i], lse[i]) if compute_lse else saved
        want = bwd(grad_out[i], dep[i], head[i], value[i], mask[i], o, s)
        for name, g, w in zip(RESULTS[1:], got, want):
            torch.testing.assert_close(g[i], w, rtol=0, atol=1e-12, msg=name)
    x = dep.clone().requires_grad_(compute_lse)
    with fc.no_vmap_fallback():
        got = vmap(lambda t, m: torch.ops.blosa.masked_block_attn(t, head[0], value[0], bias, m, *args))(
            x, mask)
    want = torch.stack([fc.reference_f64(x[i], head[0], value[0], bias, mask[i], 4, "forward")
                        for i in range(fc.V)])
    torch.testing.assert_close(got, want)
    if compute_lse:
        g, = torch.autograd.grad(got.pow(2).sum(), x)
        w, = torch.autograd.grad(want.pow(2).sum(), x)
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("name", ["biblosan", "disan"])
def test_encoder_per_sample_grads(name):
    """An encoder's per-sequence parameter gradients (vmap(grad) over functional_call, as in
    differential privacy or influence functions) with the fused op equal the reference's."""
    gen = generator_for("encoder-per-sample", name)
    torch.manual_seed(int(torch.randint(1 << 30, (1,), generator=gen)))
    model = build_encoder(name, 6, hidden=8, **({"block_len": 3} if name == "biblosan" else {}))
    model = model.double().eval()
    x = fc.draw(gen, 4, 7, 6, dtype=torch.float64)
    mask = torch.rand(4, 7, generator=gen) > 0.3
    mask[:, 0] = True
    params = {k: v.detach() for k, v in model.named_parameters()}

    def per_sample(backend):
        set_backend(model, backend)

        def loss(p, xi, mi):
            return functional_call(model, p, (xi[None], mi[None]))[1].pow(2).sum()

        with fc.no_vmap_fallback():
            return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, mask)

    got, want = per_sample("auto"), per_sample("reference")
    assert set(got) == set(params)
    for key in params:
        torch.testing.assert_close(got[key], want[key], msg=key)


@pytest.mark.parametrize("wants_grad", [False, True])
def test_vmap_saves_lse_only_for_a_gradient(wants_grad):
    """Under vmap alone nothing is differentiated, and the forward is asked for no lse (a third
    of its memory traffic); under vmap(grad) it is, for the backward."""
    gen = generator_for("vmap-lse", wants_grad)
    dep, head, value = (fc.draw(gen, fc.V, 2, 6, 3, dtype=torch.float64) for _ in range(3))

    def attend(x):
        return masked_block_attn(x[None], head[0, :1], value[0, :1], None, None, 4, "all", 5.0, "cpu").sum()

    with fc.no_vmap_fallback(), RecordLseRequests(torch.ops.blosa.masked_block_attn_fwd.default) as record:
        got = vmap(grad(attend) if wants_grad else attend)(dep[:, 0])
    assert record.asked == [wants_grad]
    assert got.shape == ((fc.V, 6, 3) if wants_grad else (fc.V,))


def test_encoder_ensemble():
    """An ensemble of encoders run as one model (torch.func.stack_module_state, vmap over the
    stacked parameters: each attention bias mapped) and its gradients equal each model's own,
    with random (nonzero) attention biases."""
    gen = generator_for("ensemble")
    torch.manual_seed(int(torch.randint(1 << 30, (1,), generator=gen)))
    models = [build_encoder("biblosan", 6, hidden=8, block_len=3).double() for _ in range(3)]
    with torch.no_grad():
        for model in models:
            for p in model.parameters():
                p.normal_(0, 0.5)
    params, buffers = torch.func.stack_module_state(models)
    skeleton = build_encoder("biblosan", 6, hidden=8, block_len=3).double().to("meta")
    x = fc.draw(gen, 4, 7, 6, dtype=torch.float64)
    mask = torch.rand(4, 7, generator=gen) > 0.3

    def sentences(p, b):
        return vmap(lambda p1, b1: functional_call(skeleton, (p1, b1), (x, mask))[1])(p, b)

    with fc.no_vmap_fallback():
        got = sentences(params, buffers)
        got_grads = grad(lambda p: sentences(p, buffers).pow(2).sum())(params)
    for i, model in enumerate(models):
        want = model(x, mask)[1]
        torch.testing.assert_close(got[i], want)
        want.pow(2).sum().backward()
        for name, p in model.named_parameters():
            torch.testing.assert_close(got_grads[name][i], p.grad, msg=name)
