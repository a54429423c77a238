"""torch.compile(fullgraph=True) of Bi-BloSAN and DiSAN on CPU matches eager (outputs and grads).

Compiling is slow on a small CPU, so each model is compiled once (module-scoped) and kept tiny.
"""
from __future__ import annotations

import random

import pytest
import torch

from blosa.nn import build_encoder
from nn_helpers import assert_same_results, fresh_seed, outputs_and_grads, random_batch

CASES = {"bibosan": {"block_len": 3}, "disan": {}}


@pytest.fixture(scope="module", params=sorted(CASES))
def eager_and_compiled(request):
    torch._dynamo.reset()
    name = request.param
    model = build_encoder(name, 5, 4, backend="cpu", **CASES[name]).double()
    return name, model, torch.compile(model, fullgraph=True)


def test_compiled_matches_eager(eager_and_compiled):
    name, model, compiled = eager_and_compiled
    seed = fresh_seed()
    B, n = 3, random.randint(7, 11)  # padding and several blocks, lengths 1 and 0 included
    x, mask = random_batch(B, n, 5, lengths=[n, 1, random.randint(0, n)])
    w_tok = torch.randn(B, n, model.token_dim, dtype=torch.float64)
    w_sent = torch.randn(B, model.sentence_dim, dtype=torch.float64)
    want = outputs_and_grads(model, x, mask, w_tok, w_sent)
    got = outputs_and_grads(compiled, x, mask, w_tok, w_sent)  # compiled shares the eager module's parameters
    assert_same_results(got, want, f"{name} compiled vs eager", seed)
    assert torch.isfinite(got["sentence"]).all()


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_graph_for_every_length(name):
    """torch.compile(dynamic=True) compiles once for batches of different sizes and lengths (NLP
    batches vary in both), matching eager at each. Bi-BloSAN compiles a second graph for lengths
    that its block length divides (no padding block), and with the "auto" block length one
    more wherever ceil(cbrt(2n)) changes: the lengths here avoid both."""
    torch._dynamo.reset()
    seed = fresh_seed()
    model = build_encoder(name, 5, 4, backend="cpu", **CASES[name]).double()
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend="aot_eager")
    with torch._dynamo.config.patch(error_on_recompile=True):
        for B, n in ((3, 7), (2, 11), (4, random.choice([13, 14, 16, 17, 19, 20]))):
            x, mask = random_batch(B, n, 5)
            w_tok = torch.randn(B, n, model.token_dim, dtype=torch.float64)
            w_sent = torch.randn(B, model.sentence_dim, dtype=torch.float64)
            want = outputs_and_grads(model, x, mask, w_tok, w_sent)
            got = outputs_and_grads(compiled, x, mask, w_tok, w_sent)
            assert_same_results(got, want, f"{name} compiled (dynamic) vs eager, B={B} n={n}", seed)


@pytest.mark.parametrize("name, dynamic_length", [("disan", True), ("bibosan", False)])
def test_export_with_a_dynamic_batch(name, dynamic_length):
    """torch.export with a symbolic batch size (DiSAN: and length), run at other sizes against
    eager. Bi-BloSAN's length stays fixed: repeating each block's context over its r tokens
    and cutting at n (mblosa.py) makes export ask whether r divides n."""
    seed = fresh_seed()
    model = build_encoder(name, 5, 4, backend="cpu", **CASES[name]).double().eval()
    x, mask = random_batch(2, 9, 5, lengths=[9, 4])
    dims = {0: torch.export.Dim("B", min=2, max=64)}
    if dynamic_length:
        dims[1] = torch.export.Dim("n", min=2, max=512)
    exported = torch.export.export(model, (x, mask), dynamic_shapes=(dims, dims)).module()
    for B, n in ((5, 17 if dynamic_length else 9), (3, 4 if dynamic_length else 9)):
        x, mask = random_batch(B, n, 5)
        for got, want, what in zip(exported(x, mask), model(x, mask), ("tokens", "sentence")):
            torch.testing.assert_close(got, want, msg=lambda m: f"{name} {what} B={B} n={n} (seed={seed}): {m}")
