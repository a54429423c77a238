"""blosa.bench.flops: matmul FLOPs counted on real modules, and the sgemm rate."""
from __future__ import annotations

import random

import torch
from torch import nn

from blosa.bench.flops import count_flops, inference_flops, sgemm_gflops, train_flops
from blosa.nn import build_encoder


def test_a_linear_layer_is_2_b_n_din_dout():
    B, n, d_in, d_out = (random.randint(1, 9) for _ in range(4))
    layer = nn.Linear(d_in, d_out)
    x = torch.randn(B, n, d_in)
    assert inference_flops(layer, (x,)) == 2 * B * n * d_in * d_out
    # training: forward, and the input's and the weight's gradients, a matmul each
    x.requires_grad_(True)
    assert count_flops(lambda: layer(x).sum().backward()) == 3 * 2 * B * n * d_in * d_out


def test_train_step_is_three_forwards_of_matmuls_and_leaves_no_gradient():
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    x, labels = torch.randn(4, 6), torch.randint(0, 3, (4,))
    forward = inference_flops(model, (x,))
    assert forward == 2 * 4 * (6 * 5 + 5 * 3)
    # the first layer's input needs no gradient: 3 forwards less that one matmul
    assert train_flops(model, (x,), labels) == 3 * forward - 2 * 4 * 6 * 5
    assert all(p.grad is None for p in model.parameters())


def test_multi_head_counts_its_attention_and_bibosan_its_stacked_matmuls():
    x, mask = torch.randn(2, 7, 8), torch.ones(2, 7, dtype=torch.bool)
    mask[1, 4:] = False
    heads = build_encoder("multi_head", 8, 8, heads=2)
    projections = 3 * 2 * 2 * 7 * 8 * 16 + 2 * 2 * 2 * 7 * 16 * 16  # q, k, v; source2token
    attention = 2 * 2 * 2 * (7 * 7 * 8) * 2  # QK^T and PV, 2 heads of 8
    assert inference_flops(heads, (x, mask)) == projections + attention
    assert inference_flops(build_encoder("biblosan", 8, 4, block_len=3), (x, mask)) > 0


def test_sgemm_rate_is_positive_and_finite():
    rate = sgemm_gflops(size=64, seconds=0.01)
    assert 0 < rate < float("inf")
