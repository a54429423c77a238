"""torch.compile(fullgraph=True) of Bi-BloSAN and DiSAN on CPU matches eager (outputs and grads).

Compiling is slow on a small CPU, so each model is compiled once (module-scoped) and kept tiny.
"""
from __future__ import annotations

import random

import pytest
import torch

from blosa.nn import build_encoder
from nn_helpers import assert_close, fresh_seed, random_batch, weighted_loss

CASES = {"bibosan": {"block_len": 3}, "disan": {}}


@pytest.fixture(scope="module", params=sorted(CASES))
def eager_and_compiled(request):
    torch._dynamo.reset()
    name = request.param
    model = build_encoder(name, 5, 4, backend="cpu", **CASES[name]).double()
    return name, model, torch.compile(model, fullgraph=True)


def _run(model, x, mask, w_tok, w_sent):
    model.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    tokens, sentence = model(x, mask)
    weighted_loss(tokens, sentence, w_tok, w_sent).backward()
    return [tokens.detach(), sentence.detach(), x.grad] + [p.grad for p in model.parameters()]


def test_compiled_matches_eager(eager_and_compiled):
    name, model, compiled = eager_and_compiled
    seed = fresh_seed()
    B, n = 3, random.randint(7, 11)  # padding and several blocks, lengths 1 and 0 included
    x, mask = random_batch(B, n, 5, lengths=[n, 1, random.randint(0, n)])
    w_tok = torch.randn(B, n, model.token_dim, dtype=torch.float64)
    w_sent = torch.randn(B, model.sentence_dim, dtype=torch.float64)
    want = _run(model, x, mask, w_tok, w_sent)
    got = _run(compiled, x, mask, w_tok, w_sent)  # compiled shares the eager module's parameters
    labels = ["tokens", "sentence", "d embeddings"] + [f"d {p}" for p, _ in model.named_parameters()]
    for label, g, w in zip(labels, got, want):
        assert_close(g, w, f"{name} compiled vs eager: {label}", seed)
    assert torch.isfinite(got[1]).all()
