"""torch.jit.trace of every encoder, saved and loaded back (TorchScript deployment), matches eager
(outputs and every gradient) at batch sizes and lengths other than the traced ones.

Tracing records the ops one call ran, with sizes taken from the inputs, so one trace serves every
batch size and length but for Bi-SRU, whose loop over the tokens is unrolled at the traced length,
and Bi-BloSAN with block_len="auto", whose r the trace fixes at the traced length's (it warns).
Python branches are frozen at trace time too: a trace made on a non-empty batch takes no empty one.
"""
from __future__ import annotations

import io
import random

import pytest
import torch

from blosa.nn import build_encoder
from blosa.nn.registry import ENCODERS
from nn_helpers import assert_compiled_matches_eager, fresh_seed, random_batch

PER_LENGTH = ("bisru",)
pytestmark = [
    pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),  # the sizes it warns of are checked
    # Deprecated (torch 2.14: FutureWarning; 2.11: DeprecationWarning), still used.
    pytest.mark.filterwarnings("ignore:`torch.jit"),
]


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_trace_saved_and_loaded_matches_eager(name):
    seed = fresh_seed()
    model = build_encoder(name, 5, 4, **({"block_len": 3} if name.startswith("biblosan") else {})).double()
    traced = torch.jit.trace(model, random_batch(2, 9, 5, lengths=[9, 4]), check_trace=False)
    buffer = io.BytesIO()
    torch.jit.save(traced, buffer)
    buffer.seek(0)
    loaded = torch.jit.load(buffer)
    # Bi-BloSAN's r = 3: lengths under it, equal to it, that it divides and that it does not.
    lengths = (9,) if name in PER_LENGTH else (9, 1, 2, 3, random.choice([6, 12]), random.choice([13, 17]))
    for B, n in zip((3, 1, 4, 2, 3, 2), lengths):
        x, mask = random_batch(B, n, 5)
        assert_compiled_matches_eager(model, loaded, x, mask, f"{name} traced vs eager, B={B} n={n}", seed)


def test_trace_with_auto_block_len_warns():
    """block_len="auto" takes r from the length (ceil(cbrt(2n)): 3 at n = 9, 6 at n = 100), which
    a trace fixes: tracing says so, and at another length the trace does depart from eager."""
    fresh_seed()
    model = build_encoder("biblosan", 5, 4).double()
    with pytest.warns(UserWarning, match=r'block_len="auto".*this trace uses r = 3 \(that of length 9\)'):
        traced = torch.jit.trace(model, random_batch(2, 9, 5), check_trace=False)
    x, mask = random_batch(2, 100, 5)
    assert not torch.allclose(traced(x, mask)[1], model(x, mask)[1])
