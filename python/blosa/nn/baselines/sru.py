"""Bi-SRU baseline: a plain PyTorch SRU (Lei et al. 2017), source2token on top.

Plain PyTorch rather than the `sru` package: sru 2.6.0 tries to JIT-compile its CUDA kernels
when imported (about 55 s on this machine, failing without a CUDA runtime), uses the
deprecated torch.jit.script, and adds peephole weights (weight_c) absent from the paper's SRU.
The paper also ran SRU "with sped-up recurrence but no CUDA level optimization", which is what
this is: every matrix product is batched over time; only the elementwise recurrence loops.
"""
from __future__ import annotations

import torch
from torch import nn

from blosa.nn.encoder import SentenceEncoder
from blosa.nn.layers import Dense
from blosa.nn.source2token import Source2Token


class SRULayer(nn.Module):
    """One direction of SRU:

        x~_t = W x_t,  f_t = sigmoid(W_f x_t + b_f),  r_t = sigmoid(W_r x_t + b_r)
        c_t  = f_t * c_{t-1} + (1 - f_t) * x~_t
        h_t  = r_t * tanh(c_t) + (1 - r_t) * x'_t

    x'_t = x_t when d_in == hidden, else a projection W_h x_t (as in the `sru` package).
    At padding c is carried unchanged, so padding never reaches a real token in either direction.
    Shapes: x [B, n, d_in], mask [B, n] bool -> h [B, n, hidden].
    """

    def __init__(self, d_in: int, hidden: int, reverse: bool = False, dropout: float = 0.0):
        super().__init__()
        self.hidden, self.reverse = hidden, reverse
        self.project_skip = d_in != hidden
        self.proj = Dense(d_in, (4 if self.project_skip else 3) * hidden, bias=False, dropout=dropout)
        self.bias = nn.Parameter(torch.zeros(2 * hidden))  # b_f, b_r

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        parts = self.proj(x).split(self.hidden, dim=-1)
        x_tilde = parts[0]
        b_f, b_r = self.bias.split(self.hidden)
        f = torch.sigmoid(parts[1] + b_f)
        r = torch.sigmoid(parts[2] + b_r)
        skip = parts[3] if self.project_skip else x
        n = x.shape[1]
        c = x.new_zeros(x.shape[0], self.hidden)
        cs = []  # appended, not assigned by index: torch 2.11's dynamo cannot trace list stores
        for t in (range(n - 1, -1, -1) if self.reverse else range(n)):
            c = torch.where(mask[:, t, None], f[:, t] * c + (1 - f[:, t]) * x_tilde[:, t], c)
            cs.append(c)
        c_all = torch.stack(cs[::-1] if self.reverse else cs, dim=1)
        return r * torch.tanh(c_all) + (1 - r) * skip


class BiSRU(SentenceEncoder):
    """[SRU_fw(x); SRU_bw(x)] -> tokens [B, n, 2*hidden]; source2token -> sentence [B, 2*hidden].

    The paper's "600D Bi-SRU" is hidden=300. Shapes: x [B, n, d_in], mask [B, n] bool.
    """

    def __init__(self, d_in: int, hidden: int = 300, activation="relu", dropout: float = 0.0,
                 dropout_at=("dense",)):
        super().__init__(d_in, hidden, dropout, dropout_at)
        self.fw = SRULayer(d_in, hidden, reverse=False, dropout=self.dense_dropout)
        self.bw = SRULayer(d_in, hidden, reverse=True, dropout=self.dense_dropout)
        self.s2t = Source2Token(2 * hidden, activation=activation, dropout=self.dense_dropout)
        self.token_dim = self.sentence_dim = 2 * hidden

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = torch.cat([self.fw(x, mask), self.bw(x, mask)], dim=-1)
        return u, self.s2t(u, mask)
