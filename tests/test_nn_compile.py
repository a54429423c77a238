"""torch.compile(fullgraph=True) of Bi-BloSAN and DiSAN on CPU matches eager (outputs and grads).

Compiling is slow on a small CPU, so each model is compiled once (module-scoped) and kept tiny.
"""
from __future__ import annotations

import random

import pytest
import torch

from blosa.nn import build_encoder
from blosa.nn.registry import ENCODERS
from nn_helpers import assert_compiled_matches_eager, fresh_seed, random_batch

CASES = {"biblosan": {"block_len": 3}, "disan": {}}


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
    got = assert_compiled_matches_eager(model, compiled, x, mask, f"{name} compiled vs eager", seed)
    assert torch.isfinite(got["sentence"]).all()


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_graph_for_every_length(name):
    """torch.compile(dynamic=True) compiles once for batches of different sizes and lengths (NLP
    batches vary in both), matching eager at each: for Bi-BloSAN (r = 3) lengths under r, equal
    to it and that it divides, too. (With the "auto" block length it compiles again wherever
    ceil(cbrt(2n)) changes.)"""
    torch._dynamo.reset()
    seed = fresh_seed()
    model = build_encoder(name, 5, 4, backend="cpu", **CASES[name]).double()
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend="aot_eager")
    with torch._dynamo.config.patch(error_on_recompile=True):
        lengths = (7, 11, 2, 3, random.choice([6, 9, 12, 15]), random.choice([13, 14, 16, 17]))
        for B, n in zip((3, 2, 4, 2, 3, 4), lengths):
            x, mask = random_batch(B, n, 5)
            assert_compiled_matches_eager(model, compiled, x, mask,
                                          f"{name} compiled (dynamic) vs eager, B={B} n={n}", seed)


@pytest.mark.parametrize("strict", [False, True])
def test_export_auto_block_len(strict):
    """block_len="auto" derives r from the length: exporting with a symbolic length is refused by
    name (not as "block_len must be an int, got SymInt"), strict too, where dynamo shows the
    length as an int (before, strict export took r from the example's length under a guard that
    torch.onnx, which tries strict export, turns into a runtime check its graph then drops:
    a silently wrong model); a symbolic batch size exports and runs."""
    model = build_encoder("biblosan", 5, 4, backend="cpu").double().eval()
    x, mask = random_batch(2, 9, 5, lengths=[9, 4])
    batch = {0: torch.export.Dim("B", min=2, max=64)}
    length = {**batch, 1: torch.export.Dim("n", min=2, max=512)}
    # strict: dynamo's Unsupported, saying the ValueError
    refusal = ValueError if not strict else torch._dynamo.exc.Unsupported
    with pytest.raises(refusal, match='block_len="auto" takes r from the padded length.*int block_len'):
        torch.export.export(model, (x, mask), dynamic_shapes=(length, length), strict=strict)
    if not strict and torch.__version__ < "2.14":
        # Since the layers were stacked (blosa.nn.stacked), torch 2.11's non-strict export cannot
        # prove a guard its contiguity check adds on a symbolic batch size with a fixed length
        # (Min(36 B, 72 B) == 36 B), with any block length; strict export, or a symbolic length
        # too, exports (README).
        with pytest.raises((torch._dynamo.exc.UserError, torch._dynamo.exc.Unsupported),
                           match="Constraints violated"):
            torch.export.export(model, (x, mask), dynamic_shapes=(batch, batch), strict=strict)
        return
    exported = torch.export.export(model, (x, mask), dynamic_shapes=(batch, batch), strict=strict).module()
    x, mask = random_batch(5, 9, 5)
    for got, want in zip(exported(x, mask), model(x, mask)):
        torch.testing.assert_close(got, want)


# How the other encoders compile (README): one graph for every batch size and length, but for
# the recurrent baselines. Bi-LSTM and Bi-GRU pack each batch by its lengths (data-dependent:
# graph breaks, so not fullgraph), Bi-SRU loops over the tokens (a graph per length).
PACKED, PER_LENGTH = ("bilstm", "bigru"), ("bisru",)


@pytest.mark.parametrize("name", sorted(set(ENCODERS) - set(CASES)))
def test_every_encoder_compiles(name):
    """torch.compile(dynamic=True) of each remaining encoder matches eager (outputs and grads)
    at three batch sizes and lengths, in one graph where the README says so."""
    torch._dynamo.reset()
    seed = fresh_seed()
    model = build_encoder(name, 5, 4, **({"block_len": 3} if name.startswith("biblosan") else {})).double()
    compiled = torch.compile(model, fullgraph=name not in PACKED, dynamic=True, backend="aot_eager")
    with torch._dynamo.config.patch(error_on_recompile=name not in PACKED + PER_LENGTH):
        for B, n in ((3, 7), (2, 11), (4, 6)):
            x, mask = random_batch(B, n, 5)
            assert_compiled_matches_eager(model, compiled, x, mask,
                                          f"{name} compiled (dynamic) vs eager, B={B} n={n}", seed)


@pytest.mark.parametrize("name", sorted(set(ENCODERS) - set(PACKED)))
def test_export_with_a_dynamic_batch_and_length(name):
    """torch.export with a symbolic batch size and length (Bi-SRU: batch size only), exported at a
    length Bi-BloSAN's r = 3 divides and run against eager at lengths under r, equal to it, that
    it divides and that it does not."""
    seed = fresh_seed()
    model = build_encoder(name, 5, 4, **({"block_len": 3} if name.startswith("biblosan") else {}))
    model = model.double().eval()
    x, mask = random_batch(2, 9, 5, lengths=[9, 4])
    dims = {0: torch.export.Dim("B", min=2, max=64)}
    if name not in PER_LENGTH:
        dims[1] = torch.export.Dim("n", min=2, max=512)
    exported = torch.export.export(model, (x, mask), dynamic_shapes=(dims, dims)).module()
    lengths = (9,) if name in PER_LENGTH else (17, 4, 2, 3, random.choice([6, 12, 15]))
    for B, n in zip((5, 3, 2, 4, 3), lengths):
        x, mask = random_batch(B, n, 5)
        for got, want, what in zip(exported(x, mask), model(x, mask), ("tokens", "sentence")):
            torch.testing.assert_close(got, want, msg=lambda m: f"{name} {what} B={B} n={n} (seed={seed}): {m}")
