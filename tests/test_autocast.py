"""masked_block_attn and the models under torch.autocast on CPU (blosa/_autocast.py), and models
converted to bfloat16 on CPU.

Inside autocast the op casts its inputs to float32 on CPU and computes with autocast off, so its
result must equal, bit for bit, the op run outside autocast on the inputs cast to float32, and
each input's gradient that result's gradient in the input's own dtype (attn_cases.check_autocast;
on CUDA: tests/test_nn_cuda.py and tests/triton/test_triton_autocast.py).
"""
from __future__ import annotations

import random

import pytest
import torch

from attn_cases import (DIRECTIONS, MASK_KINDS, check_autocast, generator_for, make_inputs,
                        make_mask)
from blosa import masked_block_attn
from blosa.nn import ATTENTION_ENCODERS, build_encoder
from nn_helpers import assert_near, fresh_seed, outputs_and_grads, random_batch

LOW = (torch.bfloat16, torch.float16)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("low", LOW)
def test_op_under_autocast_computes_in_float32(backend, direction, mask_kind, low):
    check_autocast(backend, "cpu", low, direction, mask_kind,
                   generator_for("autocast", backend, direction, mask_kind, low))


def test_float64_stays_float64_under_autocast():
    gen = generator_for("autocast float64")
    dep, head, value, bias = make_inputs(2, 7, 4, torch.float64, gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = masked_block_attn(dep, head, value, bias, None, 3, "diag")
    assert out.dtype == torch.float64
    assert torch.equal(out, masked_block_attn(dep, head, value, bias, None, 3, "diag"))


def test_bad_argument_still_named_under_autocast():
    dep = torch.randn(2, 5, 4, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(TypeError, match="bias must be a torch.Tensor or None, got list"):
            masked_block_attn(dep, dep, dep, [0.0] * 4)
        with pytest.raises(TypeError, match="head has dtype torch.float64 but dep has torch.float32"):
            masked_block_attn(dep, dep.double(), dep)  # float64 is not autocast's to change


@pytest.mark.parametrize("name", ATTENTION_ENCODERS)
def test_models_under_autocast_match_the_reference_model(name):
    """Under autocast, a model on the fused op and the same model on the reference see the same
    bfloat16 projections and compute the attention in float32: they agree up to bfloat16
    rounding downstream, outputs and every gradient; and both stay near the model run without
    autocast (outputs). (An indexing or masking error is of the order of the values themselves.)"""
    seed = fresh_seed()
    B, n, d_in, hidden = 3, random.randint(5, 14), 12, 8
    kw = {"block_len": random.randint(1, n)} if name.startswith("biblosan") else {}
    model = build_encoder(name, d_in, hidden, backend="cpu", **kw)
    ref = build_encoder(name, d_in, hidden, backend="reference", **kw)
    ref.load_state_dict(model.state_dict())
    x, mask = random_batch(B, n, d_in)
    x = x.float()
    w_tok, w_sent = torch.randn(B, n, model.token_dim), torch.randn(B, model.sentence_dim)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = outputs_and_grads(model, x, mask, w_tok, w_sent)
        want = outputs_and_grads(ref, x, mask, w_tok, w_sent)
    # A source2token score layer's bias gets 0 by structure (its softmax over tokens does not
    # move when every score shifts alike): in bfloat16 both sides hold only rounding there.
    for label in [label for label in want if label.endswith("score_layer.linear.bias")]:
        del got[label], want[label]
    assert_near(got, want, 2e-2, f"{name} under autocast, fused vs reference", seed)
    # Outputs only: bfloat16 moves gradients that are 0 by structure (the score layers' biases,
    # under softmax's shift invariance) and a few others by more than 5% of their largest.
    plain = outputs_and_grads(model, x, mask, w_tok, w_sent)
    outputs = ("tokens", "sentence")
    assert_near({k: got[k] for k in outputs}, {k: plain[k].to(got[k].dtype) for k in outputs},
                5e-2, f"{name}, autocast vs float32", seed)


def test_compiled_op_under_autocast_matches_eager():
    """torch.compile(fullgraph=True) traces the cast and the autocast-off region: same result,
    same gradients, bit for bit (the casts are exact, the kernel the same)."""
    torch._dynamo.reset()
    gen = generator_for("autocast compiled")
    B, n, d = 2, 9, 6
    inputs = make_inputs(B, n, d, torch.float32, gen)
    mask = make_mask("holes", B, n, gen)
    g = torch.randn(B, n, d, generator=gen)
    dtypes = [torch.bfloat16, torch.bfloat16, torch.float32, torch.float32]

    def attend(dep, head, value, bias):
        return masked_block_attn(dep, head, value, bias, mask, 4, "backward")

    results = []
    for fn in (attend, torch.compile(attend, fullgraph=True)):
        mixed = [t.detach().to(dt).requires_grad_() for t, dt in zip(inputs, dtypes)]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = fn(*mixed)
        results.append((out, torch.autograd.grad(out, mixed, g)))
    (out, grads), (want, want_grads) = results[1], results[0]
    assert out.dtype == torch.float32 and torch.equal(out, want)
    for grad, w, dtype in zip(grads, want_grads, dtypes):
        assert grad.dtype == dtype and torch.equal(grad, w)


@pytest.mark.parametrize("name", ATTENTION_ENCODERS)
def test_bfloat16_models_run_on_cpu(name):
    """Not autocast but its neighbour: a model converted to bfloat16 on CPU, whose attention the
    CPU op computes in float32 (test_op_cpu.py), stays near the float32 model, and every
    parameter gets a finite bfloat16 gradient."""
    seed = fresh_seed()
    B, n, d_in, hidden = 3, random.randint(5, 14), 12, 8
    kw = {"block_len": random.randint(1, n)} if name.startswith("biblosan") else {}
    model = build_encoder(name, d_in, hidden, backend="cpu", **kw)
    x, mask = random_batch(B, n, d_in)
    w_tok, w_sent = torch.randn(B, n, model.token_dim), torch.randn(B, model.sentence_dim)
    single = outputs_and_grads(model.float(), x.float(), mask, w_tok, w_sent)
    half = outputs_and_grads(model.bfloat16(), x.bfloat16(), mask, w_tok.bfloat16(), w_sent.bfloat16())
    outputs = ("tokens", "sentence")
    assert_near({k: half[k] for k in outputs}, {k: single[k].bfloat16() for k in outputs},
                5e-2, f"{name}, bfloat16 vs float32", seed)
    for label, grad in half.items():
        if label.startswith("d "):
            assert grad.dtype == torch.bfloat16 and torch.isfinite(grad).all(), (label, seed)
