"""DiSA: directional self-attention as the DiSAN authors coded it (MODEL_NOTES, DiSAN 1-4)."""
from __future__ import annotations

import torch
from torch import nn

from blosa.nn.layers import Dense, check_width, checked_mask, zero_padding
from blosa.nn.masked_attention import MaskedAttention


class MaskedSelfAttention(nn.Module):
    """Dense map, masked attention over the whole sequence (one block), fusion gate.

        rep = act(W_m x + b_m)
        a   = g^m(rep, M)            (W1, W2 without bias, f_bias [d] = 0 at init, values rep)
        F   = sigmoid(W_f1 rep + W_f2 a + b_f)
        out = F * rep + (1 - F) * a, 0 at padding

    Shapes: x [B, n, d_in], mask [B, n] bool (None: every token real) -> out [B, n, d].
    """

    def __init__(self, d_in: int, d: int, direction: str, activation="relu", dropout: float = 0.0,
                 scale: float = 5.0, backend: str = "auto"):
        super().__init__()
        check_width("d_in", d_in)
        check_width("d", d)
        self.d_in = d_in
        self.dense_map = Dense(d_in, d, activation=activation, dropout=dropout)
        self.attn = MaskedAttention(d, direction, scale=scale, dropout=dropout, backend=backend)
        self.fuse_rep = Dense(d, d, bias=False, dropout=dropout)
        self.fuse_attn = Dense(d, d, bias=True, dropout=dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = checked_mask(x, mask, self.d_in)
        rep = self.dense_map(x)
        a = self.attn(rep, mask, block_len=0)
        gate = torch.sigmoid(self.fuse_rep(rep) + self.fuse_attn(a))
        return zero_padding(gate * rep + (1 - gate) * a, mask)
