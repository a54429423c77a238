"""Baseline encoders (Bi-LSTM, Bi-GRU, Bi-SRU, Multi-CNN, Hrchy-CNN, Multi-head): forward and
backward on padded batches, and padding never changes a sentence's representation."""
from __future__ import annotations

import random

import pytest
import torch

from blosa.nn import BiSRU, build_encoder
from blosa.nn.baselines import SRULayer
from nn_helpers import assert_batch_independent, assert_close, fresh_seed, random_batch, right_padded_mask

BASELINES = ["bilstm", "bigru", "bisru", "multi_cnn", "hrchy_cnn", "multi_head"]


@pytest.mark.parametrize("name", BASELINES)
def test_forward_backward_on_padded_batch(name):
    seed = fresh_seed()
    B, n, d_in = 4, random.randint(2, 12), random.randint(3, 7)
    model = build_encoder(name, d_in, 6, dropout=0.2, dropout_at=("input", "dense", "output")).double()
    x, mask = random_batch(B, n, d_in)
    x.requires_grad_(True)
    tokens, sentence = model(x, mask)
    assert tokens.shape == (B, n, model.token_dim) and sentence.shape == (B, model.sentence_dim)
    (tokens.square().sum() + sentence.square().sum()).backward()
    assert torch.all(tokens[~mask] == 0), f"padding outputs are not 0 (seed={seed})"
    assert torch.all(x.grad[~mask] == 0), f"gradient reached padding (seed={seed})"
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads), f"seed={seed}"
    assert sum(g.abs().sum() for g in grads) > 0


@pytest.mark.parametrize("name", BASELINES)
def test_padding_cannot_change_a_sentence(name):
    seed = fresh_seed()
    L, d_in = random.randint(1, 8), random.randint(3, 6)
    model = build_encoder(name, d_in, 5).double().eval()
    assert_batch_independent(model, d_in, L, random.randint(1, 6), seed, name)


@pytest.mark.parametrize("name", ["bilstm", "bigru"])
def test_rnn_rejects_masks_with_holes(name):
    model = build_encoder(name, 3, 4)
    mask = right_padded_mask([3, 2], 4)
    mask[0, 1] = False
    with pytest.raises(ValueError, match="right-padded"):
        model(torch.randn(2, 4, 3), mask)


def test_sru_layer_matches_its_equations():
    seed = fresh_seed()
    layer = SRULayer(4, 4, reverse=False).double()
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    mask = torch.ones(2, 5, dtype=torch.bool)
    W, Wf, Wr = layer.proj.linear.weight.split(4, dim=0)
    with torch.no_grad():
        layer.bias.copy_(torch.randn(8))
        bf, br = layer.bias.split(4)
        c = torch.zeros(2, 4, dtype=torch.float64)
        hs = []
        for t in range(5):
            f = torch.sigmoid(x[:, t] @ Wf.T + bf)
            r = torch.sigmoid(x[:, t] @ Wr.T + br)
            c = f * c + (1 - f) * (x[:, t] @ W.T)
            hs.append(r * torch.tanh(c) + (1 - r) * x[:, t])
        assert_close(layer(x, mask), torch.stack(hs, dim=1), "SRU recurrence", seed)


def test_bisru_backward_direction_starts_at_the_last_real_token():
    seed = fresh_seed()
    model = BiSRU(3, 3).double().eval()
    x, mask = random_batch(1, 6, 3, lengths=[4])
    with torch.no_grad():
        full = model(x, mask)[0][0, :4]
        alone = model(x[:, :4], mask[:, :4])[0][0]
    assert_close(full, alone, "Bi-SRU with trailing padding", seed)


def test_multi_head_shape_is_8_heads_of_75_for_hidden_300():
    model = build_encoder("multi_head", 300, 300)
    assert (model.heads, model.head_dim, model.token_dim) == (8, 75, 600)
    assert build_encoder("multi_cnn", 300, 300).token_dim == 600
