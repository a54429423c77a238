"""DiSA for several directions at once (DiSAN's two): every layer one batched matmul."""
from __future__ import annotations

import torch
from torch import nn

from blosa.nn.layers import check_width
from blosa.nn.stacked import StackedDense
from blosa.nn.stacked_attention import StackedMaskedAttention
from blosa.nn.token_rows import TokenRows


class StackedMaskedSelfAttention(nn.Module):
    """MaskedSelfAttention (the same math) for k directions with their own parameters:

        rep = act(W_m x + b_m)                         the directions' dense maps: one matmul
        a   = g^m(rep, M)                              W1|W2 of every direction: one matmul
        F   = sigmoid([W_f1; W_f2] [rep; a] + b_f)     W_f1 rep + W_f2 a as one matmul
        out = F * rep + (1 - F) * a

    Each slice's weights are Glorot as its former matrix; dropout draws a mask per layer input
    as the separate layers did (per direction; one for W1|W2, as the authors' code).

    Parameters: dense_map.weight [k, 1, d_in, d] (+ bias), attn.proj.weight [k, 2, d, d] and
    attn.bias [k, d], fuse.weight [k, 1, 2d, d] ([W_f1; W_f2]) and fuse.bias [k, 1, d].
    Shapes: forward_rows(x [N, d_in] (the rows of `rows`), rows) -> out [k, N, d], 0 at padding
    rows.
    """

    def __init__(self, d_in: int, d: int, directions: tuple[str, ...], activation="relu",
                 dropout: float = 0.0, scale: float = 5.0, backend: str = "auto"):
        super().__init__()
        check_width("d_in", d_in)
        check_width("d", d)
        k = len(directions)
        self.d_in, self.d = d_in, d
        self.dense_map = StackedDense(k, 1, d_in, d, activation=activation, dropout=dropout)
        self.attn = StackedMaskedAttention(d, tuple(directions), scale=scale, dropout=dropout,
                                           backend=backend)
        self.fuse = StackedDense(k, 1, 2 * d, d, dropout=dropout, fan=(d, d))

    def forward_rows(self, x: torch.Tensor, rows: TokenRows) -> torch.Tensor:
        rep = self.dense_map(x).squeeze(1)  # [k, N, d]
        a = self.attn(rep, rows, block_len=0)
        gate = torch.sigmoid(self.fuse(torch.cat([rep, a], dim=-1)).squeeze(1))
        return rows.zero_padding(gate * rep + (1 - gate) * a)
