"""Bi-BloSAN written plainly, as blosa.nn had it before its layers were stacked (one module a
direction and a layer, E at every token, every position computed): the oracle of the stacked,
packed model (tests/test_nn_stacked.py). Its state_dict has the former layout."""
from __future__ import annotations

import torch
from torch import nn

from blosa.nn.block_len import resolve_block_len
from blosa.nn.layers import Dense, zero_padding
from blosa.nn.masked_attention import MaskedAttention
from blosa.nn.source2token import Source2Token


class PlainMBloSA(nn.Module):
    """One direction's mBloSA; x [B, n, d], mask [B, n] -> u [B, n, d]."""

    def __init__(self, d, direction, block_len, use_local=True, use_global=True, backend="cpu"):
        super().__init__()
        self.block_len, self.use_local, self.use_global = block_len, use_local, use_global
        if use_local:
            self.intra = MaskedAttention(d, direction, backend=backend)
        if use_global:
            self.block_s2t = Source2Token(d)
            self.inter = MaskedAttention(d, direction, backend=backend)
            self.gate_o = Dense(d, d, bias=False)
            self.gate_v = Dense(d, d)
        d_fuse = d * (1 + use_local + use_global)
        self.fuse_f = Dense(d_fuse, d, activation="relu")
        self.fuse_g = Dense(d_fuse, d)

    def forward(self, x, mask):
        B, n, d = x.shape
        r = resolve_block_len(self.block_len, n)
        parts, h = [x], x
        if self.use_local:
            h = self.intra(x, mask, block_len=r)
            parts.append(h)
        if self.use_global:
            m = -(-n // r)
            pos = torch.arange(m)[:, None] * r + torch.arange(r)  # [m, r]
            past_end, index = pos >= n, pos.clamp(max=n - 1)
            h_blocks = h[:, index].masked_fill(past_end[:, :, None], 0.0).flatten(0, 1)
            mask_blocks = (mask[:, index] & ~past_end).flatten(0, 1)
            v = self.block_s2t(h_blocks, mask_blocks).unflatten(0, (B, m))
            o = self.inter(v, mask_blocks.any(dim=1).unflatten(0, (B, m)), block_len=0)
            gate = torch.sigmoid(self.gate_o(o) + self.gate_v(v))
            e = gate * o + (1 - gate) * v
            parts.append(e[:, torch.arange(n) // r])
        fused = torch.cat(parts, dim=-1)
        gate = torch.sigmoid(self.fuse_g(fused))
        return zero_padding(gate * self.fuse_f(fused) + (1 - gate) * x, mask)


class PlainBiBloSAN(nn.Module):
    """x [B, n, d_in], mask -> (tokens [B, n, 2 hidden], sentence [B, 2 hidden]), ReLU, no dropout."""

    def __init__(self, d_in, hidden, block_len, use_local=True, use_global=True, backend="cpu"):
        super().__init__()
        self.bi_blosa = nn.Module()
        self.bi_blosa.fc_fw = Dense(d_in, hidden, activation="relu")
        self.bi_blosa.fc_bw = Dense(d_in, hidden, activation="relu")
        self.bi_blosa.fw = PlainMBloSA(hidden, "forward", block_len, use_local, use_global, backend)
        self.bi_blosa.bw = PlainMBloSA(hidden, "backward", block_len, use_local, use_global, backend)
        self.s2t = Source2Token(2 * hidden)
        self.token_dim = self.sentence_dim = 2 * hidden

    def forward(self, x, mask):
        x = zero_padding(x, mask)
        bb = self.bi_blosa
        u = torch.cat([bb.fw(bb.fc_fw(x), mask), bb.bw(bb.fc_bw(x), mask)], dim=-1)
        return u, self.s2t(u, mask)
