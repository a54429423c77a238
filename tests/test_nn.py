"""The Bi-BloSAN model family (blosa.nn): fused vs reference, padding, block length, counts."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from blosa.nn import (ATTENTION_ENCODERS, ENCODERS, BiBloSA, BiBloSAN, DiSAN, MaskedAttention,
                      MaskedBlockSelfAttention, MaskedSelfAttention, Source2Token, block_len_for_dataset,
                      block_len_for_length, build_encoder, resolve_block_len, set_backend)
from blosa.nn.layers import Dense
from nn_helpers import (assert_batch_independent, assert_close, assert_same_results, fresh_seed, outputs_and_grads,
                        random_batch)

ATTENTION_MODELS = ["biblosan", "biblosan_no_local", "biblosan_no_global", "disan"]


def _attn_kw(name: str, block_len) -> dict:
    return {"block_len": block_len} if name.startswith("biblosan") else {}


def _fused_and_reference(name, d_in, hidden, **kw):
    """A fused ("cpu") model and a "reference" model loaded from its state_dict, float64."""
    fused = build_encoder(name, d_in, hidden, backend="cpu", **kw).double()
    ref = build_encoder(name, d_in, hidden, backend="reference", **kw).double()
    ref.load_state_dict(fused.state_dict())  # strict: same parameters and names
    return fused, ref


# ---------------------------------------------------------------- fused vs reference

@pytest.mark.parametrize("name", ATTENTION_MODELS)
@pytest.mark.parametrize("case", range(3))
def test_fused_matches_reference_outputs_and_every_gradient(name, case):
    seed = fresh_seed()
    B, n = random.randint(1, 4), random.randint(1, 24)
    d_in, hidden = random.randint(2, 7), random.randint(2, 6)
    block_len = random.choice(["auto", random.randint(1, n + 2)])
    fused, ref = _fused_and_reference(name, d_in, hidden, **_attn_kw(name, block_len))
    x, mask = random_batch(B, n, d_in)
    w_tok = torch.randn(B, n, fused.token_dim, dtype=torch.float64)
    w_sent = torch.randn(B, fused.sentence_dim, dtype=torch.float64)
    got = outputs_and_grads(fused, x, mask, w_tok, w_sent)
    want = outputs_and_grads(ref, x, mask, w_tok, w_sent)
    assert_same_results(got, want, f"{name} B={B} n={n} r={block_len} mask={mask.sum(1).tolist()}", seed)


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("local, global_", [(True, True), (False, True), (True, False)])
def test_mblosa_fused_matches_reference(direction, local, global_):
    seed = fresh_seed()
    B, n, d = random.randint(1, 4), random.randint(1, 30), random.randint(2, 8)
    r = random.randint(1, n + 1)
    mods = [MaskedBlockSelfAttention(d, direction, block_len=r, backend=b, use_local=local,
                                     use_global=global_).double() for b in ("cpu", "reference")]
    mods[1].load_state_dict(mods[0].state_dict())
    x, mask = random_batch(B, n, d)
    w = torch.randn(B, n, d, dtype=torch.float64)
    outs = []
    for m in mods:
        xx = x.clone().requires_grad_(True)
        u = m(xx, mask)
        (u * w).sum().backward()
        outs.append((u.detach(), xx.grad, [p.grad for p in m.parameters()]))
    where = f"{direction} local={local} global={global_} n={n} r={r}"
    assert_close(outs[0][0], outs[1][0], f"u, {where}", seed)
    assert_close(outs[0][1], outs[1][1], f"d x, {where}", seed)
    for g, h in zip(outs[0][2], outs[1][2]):
        assert_close(g, h, f"d param, {where}", seed)


def test_set_backend_switches_every_attention_and_keeps_state_dict():
    model = build_encoder("biblosan", 5, 4, backend="cpu")
    keys = list(model.state_dict())
    set_backend(model, "reference")
    attns = [m for m in model.modules() if hasattr(m, "backend")]
    assert len(attns) == 2 and all(m.backend == "reference" for m in attns)  # intra, inter (both directions each)
    assert list(model.state_dict()) == keys
    with pytest.raises(ValueError, match="backend"):
        set_backend(model, "tpu")


# ---------------------------------------------------------------- padding

@pytest.mark.parametrize("name", ATTENTION_MODELS)
@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_same_sentence_same_vector_whatever_the_padding(name, backend):
    seed = fresh_seed()
    L, r = random.randint(1, 12), random.randint(1, 5)
    d_in = random.randint(2, 6)
    model = build_encoder(name, d_in, 4, backend=backend, **_attn_kw(name, r)).double().eval()
    # 2r extra positions: the padded batch has blocks that are entirely padding
    assert_batch_independent(model, d_in, L, 2 * r + random.randint(0, 5), seed)


class _UnmaskedBlocks(MaskedBlockSelfAttention):
    """The authors' bug: blocks that are entirely padding take part in the inter-block attention."""

    @staticmethod
    def block_mask(mask_blocks):
        return torch.ones_like(mask_blocks[:, 0])


def test_batch_independence_check_catches_unmasked_padding_blocks():
    seed = fresh_seed()
    # hidden 8, not 3: with 3 units the backward direction's input (a ReLU dense layer) is 0 at
    # most tokens for ~2% of inits, the real blocks after the first then have v = 0, and adding
    # v = 0 padding blocks changes nothing (18 of seeds 0-999 hid the bug; none with 8).
    model = BiBloSAN(4, 8, block_len=2, backend="cpu").double().eval()
    # backward direction: a block sees the blocks after it, the last 3 being padding here.
    # (L=6 fills 3 whole blocks: with a padded last block h there would be 0 and so would v.)
    model.bi_blosa.mblosa.__class__ = _UnmaskedBlocks  # both directions (one stacked module)
    try:
        assert_batch_independent(model, 4, L=6, extra_len=6, seed=seed)
    except AssertionError as caught:
        assert "length 6" in str(caught), caught
    else:
        pytest.fail(f"the check missed padding blocks taking part in the attention (seed={seed})")


@pytest.mark.parametrize("name, backend", [(name, "auto") for name in sorted(ENCODERS)]
                         + [(name, "reference") for name in ATTENTION_ENCODERS])
def test_no_nan_with_length_one_and_all_padding_rows(name, backend):
    seed = fresh_seed()
    kw = {"backend": backend} if name in ATTENTION_ENCODERS else {}
    n, d_in = random.randint(2, 9), 5
    model = build_encoder(name, d_in, 4, **kw).double()
    x, mask = random_batch(3, n, d_in, lengths=[1, 0, n])
    x.requires_grad_(True)
    tokens, sentence = model(x, mask)
    (tokens.sum() + sentence.sum()).backward()
    assert torch.isfinite(tokens).all() and torch.isfinite(sentence).all(), f"seed={seed}"
    assert torch.isfinite(x.grad).all(), f"seed={seed}"
    for pname, p in model.named_parameters():
        assert p.grad is None or torch.isfinite(p.grad).all(), f"{pname} (seed={seed})"
    assert torch.all(tokens[1] == 0) and torch.all(sentence[1] == 0), f"all-padding row (seed={seed})"
    assert torch.all(tokens[0, 1:] == 0), f"padding after a length-1 row (seed={seed})"
    assert torch.all(x.grad[~mask] == 0), f"gradient reached padding (seed={seed})"


def test_source2token_gives_padding_no_weight():
    seed = fresh_seed()
    s2t = Source2Token(6).double()
    x, mask = random_batch(2, 7, 6, lengths=[4, 0])
    s = s2t(x, mask)
    assert_close(s[0], s2t(x[:1, :4], mask[:1, :4])[0], "source2token ignores padding", seed)
    assert torch.all(s[1] == 0)


# ---------------------------------------------------------------- block length

def test_auto_block_len_is_ceil_cbrt_2n():
    # hand-computed: 2n = 2 -> 1.26 -> 2; 8 -> 2 exactly; 64 -> 4 exactly; 66 -> 4.04 -> 5;
    # 1000 -> 10 exactly; 2*60 = 120 -> 4.93 -> 5
    for n, r in [(1, 2), (4, 2), (32, 4), (33, 5), (500, 10), (60, 5)]:
        assert block_len_for_length(n) == r == resolve_block_len("auto", n), n
    assert resolve_block_len(7, 100) == 7
    for bad in (0, -1, 2.0, True, "big"):
        with pytest.raises(ValueError):
            resolve_block_len(bad, 10)


def test_block_len_for_dataset_appendix_a():
    # r = ceil(cbrt(2 (sigma sqrt(2 ln B) + mu))), by hand:
    # mu=20, sigma=5, B=64: sqrt(2 ln 64) = 2.884053 -> 2 (14.420 + 20) = 68.84 -> 4.099 -> 5
    assert block_len_for_dataset(20, 5, 64) == 5
    # mu=14, sigma=6, B=64: 2 (17.304 + 14) = 62.61 -> 3.971 -> 4
    assert block_len_for_dataset(14, 6, 64) == 4
    # mu=10, sigma=3, B=32: sqrt(2 ln 32) = 2.632769 -> 2 (7.898 + 10) = 35.80 -> 3.296 -> 4
    assert block_len_for_dataset(10, 3, 32) == 4
    # B=1: ln 1 = 0 -> cbrt(2 mu); 2 * 13.5 = 27 is a perfect cube -> exactly 3, not 4
    assert block_len_for_dataset(13.5, 7.0, 1) == 3
    # sigma=0: 2 * 32 = 64 -> 4
    assert block_len_for_dataset(32, 0, 128) == 4
    # Statistics as numpy computes them (numpy floats, a numpy int batch size): the same r.
    lengths = np.array([12, 25, 20, 23])  # mean 20, std sqrt(23.5)
    assert block_len_for_dataset(lengths.mean(), lengths.std(), np.int64(64)) == block_len_for_dataset(20, 23.5 ** 0.5, 64) == 5
    got = block_len_for_dataset(20, 5, 64)
    assert got == math.ceil((2 * (5 * math.sqrt(2 * math.log(64)) + 20)) ** (1 / 3))
    for args in [(0, 1, 64), (10, -1, 64), (10, 1, 0), (10, 1, 2.5), (float("nan"), 1, 4)]:
        with pytest.raises(ValueError):
            block_len_for_dataset(*args)


def test_block_len_changes_the_blocks():
    seed = fresh_seed()
    model = BiBloSAN(4, 3, block_len=2, backend="cpu").double().eval()
    x, mask = random_batch(2, 9, 4, lengths=[9, 6])
    a = model(x, mask)[1]
    model.bi_blosa.mblosa.block_len = 3
    b = model(x, mask)[1]
    assert not torch.allclose(a, b), f"block_len had no effect (seed={seed})"


@pytest.mark.parametrize("name, shown", [
    ("biblosan", "d=6, direction=('forward', 'backward'), block_len=4"),
    ("biblosan_no_local", "d=6, direction=('forward', 'backward'), block_len=4, use_local=False"),
    ("biblosan_no_global", "d=6, direction=('forward', 'backward'), block_len=4, use_global=False")])
def test_printed_model_shows_the_block_length(name, shown):
    """print(model) shows the mBloSAs' width, directions, block length and ablations, as it shows
    each attention's directions, scale and backend."""
    printed = repr(build_encoder(name, 5, 6, block_len=4))
    assert printed.count(f"MaskedBlockSelfAttention(\n      {shown}\n") == 1, printed


def test_printed_layers_show_their_activation_and_heads():
    printed = repr(build_encoder("multi_head", 5, 8, heads=2, activation="elu"))
    assert "MultiHead(\n  heads=2, head_dim=8\n" in printed and "activation='elu'" in printed, printed
    assert "activation='tanh'" in repr(Dense(3, 4, activation=torch.tanh))
    assert "activation" not in repr(Dense(3, 4))


# ---------------------------------------------------------------- configuration

def test_activation_and_dropout_placement_are_configurable():
    seed = fresh_seed()
    x, mask = random_batch(2, 6, 4, lengths=[6, 3])
    relu = BiBloSAN(4, 3, block_len=2).double().eval()
    elu = BiBloSAN(4, 3, block_len=2, activation="elu").double().eval()
    elu.load_state_dict(relu.state_dict())
    assert not torch.allclose(relu(x, mask)[1], elu(x, mask)[1]), f"seed={seed}"
    drop = BiBloSAN(4, 3, block_len=2, dropout=0.5, dropout_at=("input", "dense", "output")).double()
    drop.load_state_dict(relu.state_dict())
    tokens, _ = drop.train()(x, mask)
    assert torch.all(tokens[~mask] == 0)
    assert_close(drop.eval()(x, mask)[1], relu(x, mask)[1], "dropout is off in eval", seed)
    with pytest.raises(ValueError, match="dropout_at"):
        BiBloSAN(4, 3, dropout_at=("everywhere",))
    with pytest.raises(ValueError, match="activation"):
        BiBloSAN(4, 3, activation="swishy")


def test_glorot_weights_zero_biases():
    fresh_seed()
    model = DiSAN(50, 40)
    # The stacked weights [direction, layer, in, out]: each slice Glorot as the matrix it was
    # (the fusion's [W_f1; W_f2] two 40 x 40 ones).
    fans = {"disa.dense_map.weight": (50, 40), "disa.attn.proj.weight": (40, 40),
            "disa.fuse.weight": (40, 40)}
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            assert torch.all(p == 0), name  # biases and f_bias start at 0
            continue
        fan_in, fan_out = fans.get(name, p.shape[-2:])
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        for part in p.reshape(-1, fan_in, fan_out):
            assert part.abs().max() <= bound and part.abs().max() > 0.8 * bound, name


def test_build_encoder_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown encoder"):
        build_encoder("bert", 4, 4)


@pytest.mark.parametrize("old", ["bibosan", "bibosan_no_local", "bibosan_no_mblosa_no_s2t"])
def test_old_bibosan_names_warn_and_build_biblosan(old):
    new = old.replace("bibosan", "biblosan")
    assert old not in ENCODERS and new in ENCODERS
    torch.manual_seed(0)
    with pytest.warns(FutureWarning, match=f"use '{new}'"):
        model = build_encoder(old, 6, 4)
    torch.manual_seed(0)
    expected = build_encoder(new, 6, 4)
    assert type(model) is type(expected)
    for (name, p), (_, q) in zip(model.named_parameters(), expected.named_parameters(), strict=True):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_no_mask_means_every_token_is_real(name):
    seed = fresh_seed()
    B, n, d_in = random.randint(1, 3), random.randint(1, 9), 5
    model = build_encoder(name, d_in, 4).double()
    x, mask = random_batch(B, n, d_in, lengths=[n] * B)
    with_mask, without = model(x, mask), model(x)
    for what, got, want in zip(("tokens", "sentence"), without, with_mask):
        assert torch.equal(got, want), f"{name} {what}: mask=None differs from an all-True mask (seed={seed})"


@pytest.mark.parametrize("shape", [(0, 6), (3, 0), (0, 0)])
@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_empty_batches(name, shape):
    """B = 0 or n = 0: outputs of the right shapes (a sentence with no token is 0, as for an
    all-padding row), and backward reaches the embeddings and every parameter the model uses."""
    B, n = shape
    model = build_encoder(name, 5, 4).double()
    x = torch.randn(B, n, 5, dtype=torch.float64, requires_grad=True)
    for mask in (torch.zeros(B, n, dtype=torch.bool), None):
        model.zero_grad(set_to_none=True)
        tokens, sentence = model(x, mask)
        assert tokens.shape == (B, n, model.token_dim) and sentence.shape == (B, model.sentence_dim)
        assert torch.all(sentence == 0)
        (tokens.sum() + sentence.sum()).backward()
        assert x.grad is not None and x.grad.shape == x.shape
        assert any(p.grad is not None for p in model.parameters()), f"{name}: no parameter in the graph"


ENCODER_BAD_INPUTS = [
    ("embeddings type", lambda x, mask: (x.tolist(), mask), TypeError, "embeddings must be a torch.Tensor, got list"),
    ("embeddings width", lambda x, mask: (x[..., :-1], mask), ValueError, r"embeddings must be \[B, n, 5\]"),
    ("embeddings 2-D", lambda x, mask: (x[0], mask[0]), ValueError, r"embeddings must be \[B, n, 5\]"),
    ("mask type", lambda x, mask: (x, mask.tolist()), TypeError, "mask must be a torch.Tensor or None, got list"),
    ("mask dtype", lambda x, mask: (x, mask.long()), TypeError, "mask must be a bool tensor"),
    ("mask shape", lambda x, mask: (x, mask[:, 1:]), ValueError, r"mask must be \[B, n\] = \[2, 6\]"),
    ("embeddings nested", lambda x, mask: (torch.nested.nested_tensor([x[0], x[1, :3]], layout=torch.jagged), None),
     TypeError, r"embeddings is a nested tensor; blosa takes padded tensors and a \[B, n\] mask: pass embeddings.to_padded_tensor"),
    ("embeddings sparse", lambda x, mask: (x.to_sparse(), mask), TypeError, r"embeddings must be a dense \(strided\) tensor, got layout torch.sparse_coo"),
    ("mask sparse", lambda x, mask: (x, mask.to_sparse()), TypeError, r"mask must be a dense \(strided\) tensor, got layout torch.sparse_coo"),
    # "meta" is a second device that every machine has.
    ("mask device", lambda x, mask: (x, mask.to("meta")), ValueError, "mask is on meta, embeddings on cpu; use one device"),
]


@pytest.mark.parametrize("name", sorted(ENCODERS))
@pytest.mark.parametrize("what, spoil, error, message", ENCODER_BAD_INPUTS, ids=[b[0] for b in ENCODER_BAD_INPUTS])
def test_encoders_name_the_bad_input(name, what, spoil, error, message):
    model = build_encoder(name, 5, 4).double()
    x, mask = random_batch(2, 6, 5)
    with pytest.raises(error, match=message):
        model(*spoil(x, mask))


ENCODER_BAD_SIZES = [
    ("hidden zero", dict(hidden=0), "hidden must be an int >= 1, got 0"),
    ("hidden negative", dict(hidden=-3), "hidden must be an int >= 1, got -3"),
    ("hidden float", dict(hidden=4.0), "hidden must be an int >= 1, got 4.0"),
    ("d_in zero", dict(d_in=0), "d_in must be an int >= 1, got 0"),
]


@pytest.mark.parametrize("name", sorted(ENCODERS))
@pytest.mark.parametrize("what, change, message", ENCODER_BAD_SIZES, ids=[b[0] for b in ENCODER_BAD_SIZES])
def test_encoders_name_a_bad_size_before_building(name, what, change, message):
    args = dict(d_in=5, hidden=4)
    args.update(change)
    with pytest.raises(ValueError, match=message):
        build_encoder(name, **args)


@pytest.mark.parametrize("name, width", [("multi_cnn", "filters"), ("multi_head", "head_dim")])
def test_a_width_derived_from_hidden_names_hidden(name, width):
    with pytest.raises(ValueError, match=rf"{width} must be an int >= 1 \(2\*hidden // .*hidden=1.*got 0"):
        build_encoder(name, 5, hidden=1)


LAYER_BAD_ARGS = [
    ("attention direction", lambda: MaskedAttention(6, "sideways"), "direction must be one of 'forward'"),
    ("attention width", lambda: MaskedAttention(0, "forward"), "d must be an int >= 1, got 0"),
    ("attention scale", lambda: MaskedAttention(6, "forward", scale=-2.0), "scale must be a finite positive"),
    ("mblosa direction", lambda: MaskedBlockSelfAttention(6, "up"), "direction must be one of 'forward'"),
    ("mblosa width", lambda: MaskedBlockSelfAttention(0, "forward"), "d must be an int >= 1, got 0"),
    ("s2t width", lambda: Source2Token(0), "d must be an int >= 1, got 0"),
    ("s2t hidden", lambda: Source2Token(4, hidden=0), "hidden must be an int >= 1, got 0"),
    ("disa input width", lambda: MaskedSelfAttention(0, 4, "forward"), "d_in must be an int >= 1, got 0"),
    ("disa width", lambda: MaskedSelfAttention(4, 0, "forward"), "d must be an int >= 1, got 0"),
    ("bi-blosa input width", lambda: BiBloSA(0, 4), "d_in must be an int >= 1, got 0"),
    ("bi-blosa width", lambda: BiBloSA(4, 0), "d must be an int >= 1, got 0"),
    ("bi-blosa scale", lambda: BiBloSA(4, 4, scale=math.inf), "scale must be a finite positive"),
]


@pytest.mark.parametrize("what, build, message", LAYER_BAD_ARGS, ids=[b[0] for b in LAYER_BAD_ARGS])
def test_layers_name_a_bad_argument_when_built(what, build, message):
    with pytest.raises(ValueError, match=message):
        build()


# The layers of blosa.nn, called directly: (name, build(d_in)).
LAYERS = [
    ("attention", lambda d: MaskedAttention(d, "forward")),
    ("disa", lambda d: MaskedSelfAttention(d, 4, "backward")),
    ("mblosa", lambda d: MaskedBlockSelfAttention(d, "forward", block_len=2)),
    ("source2token", lambda d: Source2Token(d)),
    ("bi-blosa", lambda d: BiBloSA(d, 4, block_len=3)),
]

LAYER_BAD_INPUTS = [
    ("x width", lambda x, mask: (x[..., :-1], mask), ValueError, r"x must be \[B, n, 5\], got \(2, 6, 4\)"),
    ("x 2-D", lambda x, mask: (x[0], mask[0]), ValueError, r"x must be \[B, n, 5\], got \(6, 5\)"),
    # A [B, 1] mask broadcast over every token in source2token, silently.
    ("mask [B, 1]", lambda x, mask: (x, mask[:, :1]), ValueError, r"mask must be \[B, n\] = \[2, 6\], got \(2, 1\)"),
    ("mask dtype", lambda x, mask: (x, mask.double()), TypeError, "mask must be a bool tensor"),
    ("mask device", lambda x, mask: (x, mask.to("meta")), ValueError, "mask is on meta, x on cpu; use one device"),
    ("x sparse", lambda x, mask: (x.to_sparse(), mask), TypeError, r"x must be a dense \(strided\) tensor"),
]


@pytest.mark.parametrize("layer, build", LAYERS, ids=[layer[0] for layer in LAYERS])
@pytest.mark.parametrize("what, spoil, error, message", LAYER_BAD_INPUTS, ids=[b[0] for b in LAYER_BAD_INPUTS])
def test_layers_name_a_bad_input(layer, build, what, spoil, error, message):
    model = build(5).double()
    x, mask = random_batch(2, 6, 5)
    with pytest.raises(error, match=message):
        model(*spoil(x, mask))


@pytest.mark.parametrize("layer, build", LAYERS, ids=[layer[0] for layer in LAYERS])
def test_layers_without_a_mask_take_every_token_as_real(layer, build):
    """mask=None as in the encoders and the op: the same output as an all-True mask."""
    seed = fresh_seed()
    model = build(5).double()
    x = torch.randn(3, 7, 5, dtype=torch.float64)
    assert_close(model(x), model(x, torch.ones(3, 7, dtype=torch.bool)), f"{layer}, no mask", seed)


def test_snli_parameter_counts():
    from blosa.nn.param_count import nli_head, snli_counts

    rows = {r["name"]: r for r in snli_counts()}
    d, e = 240, 300  # Bi-BloSAN 480D: per direction, by hand
    per_dir = (e * d + d) + (2 * d * d + d) + 2 * (d * d + d) + (2 * d * d + d) + (2 * d * d + d) + 2 * (3 * d * d + d)
    assert rows["biblosan"]["encoder"] == 2 * per_dir + 2 * (480 * 480 + 480) == 2_222_400
    assert rows["disan"]["encoder"] == 2 * (90_300 + 180_300 + 180_300) + 2 * (600 * 600 + 600)
    assert sum(p.numel() for p in nli_head(480).parameters()) == 1920 * 300 + 300 + 903
    for r in rows.values():  # |theta| rounds to the paper's value, except "w/o Local" (see docs/MODELS.md)
        if r["name"] != "biblosan_no_local":
            assert abs(r["total"] / 1e6 - r["paper_m"]) < 0.1, r


def test_numpy_block_len_and_scale_give_the_python_values_model():
    """A block length and scale from numpy (a config computed with it) build the same model."""
    seed = fresh_seed()
    x, mask = random_batch(3, 10, 5)
    models = [build_encoder("biblosan", 5, 4, block_len=r, scale=c).double()
              for r, c in ((3, 5.5), (np.int64(3), np.float32(5.5)))]
    models[1].load_state_dict(models[0].state_dict())
    for got, want in zip(models[1](x, mask), models[0](x, mask)):
        assert torch.equal(got, want), f"seed={seed}"
