"""The stacked, packed Bi-BloSAN (blosa.nn.mblosa, stacked, token_rows) against the plain one it
replaced (tests/nn_plain.py): outputs and every gradient, on rows packed or not; the former
checkpoints load; the stacked layers' initialization and dropout."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

import blosa.nn.token_rows as token_rows
from blosa.nn import BiBloSAN, MaskedBlockSelfAttention
from blosa.nn.checkpoint_compat import convert_dense, convert_mblosa
from blosa.nn.stacked import StackedDense
from nn_helpers import assert_same_results, fresh_seed, outputs_and_grads, random_batch
from nn_plain import PlainBiBloSAN, PlainMBloSA

ABLATIONS = [(True, True), (False, True), (True, False)]


@pytest.fixture(params=["packed", "padded"])
def packing(request, monkeypatch):
    """Rows packed whenever allowed (any padding) or never."""
    monkeypatch.setattr(token_rows, "PACK_FROM_PADDING", 0.0 if request.param == "packed" else 1.01)
    return request.param


def _to_new_names(sd: dict) -> dict:
    """The plain model's state_dict (or gradients) keyed as the stacked BiBloSAN's."""
    sd = dict(sd)
    convert_dense(sd, ["bi_blosa.fc_fw.", "bi_blosa.fc_bw."], "bi_blosa.fc.")
    convert_mblosa(sd, ["bi_blosa.fw.", "bi_blosa.bw."], "bi_blosa.mblosa.")
    return sd


@pytest.mark.parametrize("local, global_", ABLATIONS)
@pytest.mark.parametrize("case", range(4))
def test_stacked_biblosan_matches_the_plain_one(local, global_, case, packing):
    seed = fresh_seed()
    B, n = random.randint(1, 5), random.choice([1, 2, random.randint(3, 23)])
    d_in, hidden = random.randint(2, 6), random.randint(2, 5)
    r = random.choice([1, 2, n, n + 3, random.randint(1, n + 1)])  # n < r, r | n or not
    plain = PlainBiBloSAN(d_in, hidden, r, local, global_).double()
    model = BiBloSAN(d_in, hidden, block_len=r, backend="cpu", use_local=local, use_global=global_).double()
    model.load_state_dict(plain.state_dict())  # strict: the former keys, converted
    lengths = [random.randint(0, n) for _ in range(B)]  # rows of all padding among them
    lengths[random.randrange(B)] = n
    x, mask = random_batch(B, n, d_in, lengths=lengths)
    w_tok, w_sent = torch.randn(B, n, 2 * hidden, dtype=torch.float64), torch.randn(B, 2 * hidden, dtype=torch.float64)
    got = outputs_and_grads(model, x, mask, w_tok, w_sent)
    want = outputs_and_grads(plain, x, mask, w_tok, w_sent)
    params = _to_new_names({k[2:]: v for k, v in want.items() if k.startswith("d ") and k != "d x"})
    want = {k: v for k, v in want.items() if k in ("tokens", "sentence", "d x")} | {
        f"d {k}": v for k, v in params.items()}
    assert_same_results(got, want, f"{packing} local={local} global={global_} B={B} n={n} r={r} "
                        f"lengths={lengths}", seed)


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("local, global_", ABLATIONS)
def test_one_direction_mblosa_loads_and_matches_the_plain_one(direction, local, global_, packing):
    seed = fresh_seed()
    B, n, d = random.randint(1, 4), random.randint(1, 20), random.randint(2, 6)
    r = random.randint(1, n + 1)
    plain = PlainMBloSA(d, direction, r, local, global_).double()
    model = MaskedBlockSelfAttention(d, direction, block_len=r, backend="cpu", use_local=local,
                                     use_global=global_).double()
    model.load_state_dict(plain.state_dict())
    x, mask = random_batch(B, n, d)
    x = x.masked_fill(~mask[..., None], 0.0)  # as an encoder gives it
    got, want = model(x, mask), plain(x, mask)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10,
                               msg=lambda m: f"{direction} n={n} r={r} (seed={seed}): {m}")


def test_checkpoints_of_the_former_layout_load_and_give_their_outputs():
    """tests/data/biblosan_v1.pt: state_dicts and outputs saved by the code before stacking."""
    saved = torch.load(Path(__file__).parent / "data" / "biblosan_v1.pt")
    x, mask = saved["x"], saved["mask"]
    for name, kw in (("biblosan", {}), ("biblosan_no_local", {"use_local": False}),
                     ("biblosan_no_global", {"use_global": False})):
        model = BiBloSAN(5, 4, block_len=3, **kw).double().eval()
        model.load_state_dict(saved[name]["state_dict"])
        with torch.no_grad():
            tokens, sentence = model(x, mask)
        torch.testing.assert_close(tokens, saved[name]["tokens"], atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(sentence, saved[name]["sentence"], atol=1e-12, rtol=1e-10)
    one = MaskedBlockSelfAttention(5, "backward", block_len=3).double().eval()
    one.load_state_dict(saved["mblosa_backward"]["state_dict"])
    with torch.no_grad():
        torch.testing.assert_close(one(x, mask), saved["mblosa_backward"]["tokens"], atol=1e-12, rtol=1e-10)


def test_a_mismatched_checkpoint_still_fails_loudly():
    plain = PlainBiBloSAN(5, 4, 3, use_local=False)
    with pytest.raises(RuntimeError, match="size mismatch|Missing|Unexpected"):
        BiBloSAN(5, 4, block_len=3).load_state_dict(plain.state_dict())


def test_stacked_weights_are_glorot_per_original_matrix():
    fresh_seed()
    layer = StackedDense(2, 3, 40, 30, fan=(90, 30))
    bound = math.sqrt(6.0 / 120)
    for w in layer.weight.flatten(0, 1):
        assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound
    assert torch.all(layer.bias == 0)
    model = BiBloSAN(50, 40, block_len=4)
    assert model.bi_blosa.mblosa.gate.weight.abs().max() <= math.sqrt(6.0 / 80)  # W_o, W_v: [d, d] each
    assert model.bi_blosa.mblosa.fuse_blk.weight.abs().max() <= math.sqrt(6.0 / 160)  # slices of [3d, d]


@pytest.mark.parametrize("shared", [False, True])
def test_stacked_dropout_masks_are_independent_unless_shared(shared):
    fresh_seed()
    layer = StackedDense(2, 2, 64, 64, bias=False, dropout=0.5, shared_dropout=shared)
    with torch.no_grad():
        layer.weight.copy_(torch.eye(64).expand(2, 2, 64, 64))
    y = layer.train()(torch.ones(500, 64))  # one input for both slices: y = its dropped copy
    zeros = (y == 0).float()
    assert not torch.equal(y[0], y[1])  # slices: always independent masks
    assert torch.equal(y[0, 0], y[0, 1]) == shared
    assert 0.45 < zeros.mean() < 0.55


def test_former_layout_is_told_from_the_keys():
    from blosa.nn.checkpoint_compat import former_layout

    assert former_layout(PlainBiBloSAN(5, 4, 3).state_dict())
    assert not former_layout(BiBloSAN(5, 4, block_len=3).state_dict())
