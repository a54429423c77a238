"""The stacked, packed Bi-BloSAN (blosa.nn.mblosa, stacked, token_rows) against the plain one it
replaced (tests/nn_plain.py), and the stacked DiSAN against two one-direction DiSA layers:
outputs and every gradient, on rows packed or not; the former checkpoints load; the stacked
layers' initialization and dropout."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

import blosa.nn.token_rows as token_rows
from blosa.nn import BiBloSAN, DiSAN, MaskedBlockSelfAttention, MaskedSelfAttention
from blosa.nn.checkpoint_compat import convert_dense, convert_mblosa, former_layout
from blosa.nn.stacked import StackedDense
from blosa.nn.token_rows import TokenRows
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


def test_disan_checkpoints_of_the_former_layout_load_and_give_their_outputs():
    """tests/data/disan_v1.pt: a DiSAN (a MaskedSelfAttention a direction, every bias non-zero)
    saved by the code before stacking (commit 8af38b9), with its outputs."""
    saved = torch.load(Path(__file__).parent / "data" / "disan_v1.pt")
    model = DiSAN(5, 4).double().eval()
    model.load_state_dict(saved["disan"]["state_dict"])
    assert former_layout(saved["disan"]["state_dict"])
    assert not former_layout(model.state_dict())
    with torch.no_grad():
        tokens, sentence = model(saved["x"], saved["mask"])
    torch.testing.assert_close(tokens, saved["disan"]["tokens"], atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(sentence, saved["disan"]["sentence"], atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("packed", [False, True])
def test_disan_stacked_is_two_directions_of_disa(packed):
    """DiSAN's stacked directions against two MaskedSelfAttention (the one-direction layer)
    holding the same weights, values and gradients, on padded batches (packed rows or not)."""
    seed = fresh_seed()
    B, n = random.randint(1, 6), random.randint(1, 12)
    lengths = [random.randint(1, n) for _ in range(B)]
    x = torch.randn(B, n, 5, dtype=torch.float64, requires_grad=True)
    mask = torch.arange(n)[None] < torch.tensor(lengths)[:, None]
    model = DiSAN(5, 4).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    plain = [MaskedSelfAttention(5, 4, d).double() for d in ("forward", "backward")]
    for i, layer in enumerate(plain):
        disa = model.disa
        with torch.no_grad():
            layer.dense_map.linear.weight.copy_(disa.dense_map.weight[i, 0].T)
            layer.dense_map.linear.bias.copy_(disa.dense_map.bias[i, 0])
            layer.attn.w1.linear.weight.copy_(disa.attn.proj.weight[i, 0].T)
            layer.attn.w2.linear.weight.copy_(disa.attn.proj.weight[i, 1].T)
            layer.attn.bias.copy_(disa.attn.bias[i])
            layer.fuse_rep.linear.weight.copy_(disa.fuse.weight[i, 0, :4].T)
            layer.fuse_attn.linear.weight.copy_(disa.fuse.weight[i, 0, 4:].T)
            layer.fuse_attn.linear.bias.copy_(disa.fuse.bias[i, 0])
    rows = TokenRows(mask, packed=packed)
    got = rows.padded(model.disa.forward_rows(rows.rows(x), rows))
    want = torch.stack([layer(x, mask) for layer in plain])
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10, msg=lambda m: f"seed={seed}: {m}")
    weights = torch.randn_like(want)
    grad_got = torch.autograd.grad((got * weights).sum(), x)[0]
    grad_want = torch.autograd.grad((want * weights).sum(), x)[0]
    torch.testing.assert_close(grad_got, grad_want, atol=1e-12, rtol=1e-10,
                               msg=lambda m: f"seed={seed}: {m}")


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
