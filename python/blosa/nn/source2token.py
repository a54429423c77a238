"""Source2token self-attention (paper section 2.3): compress a sequence into one vector."""
from __future__ import annotations

import torch
from torch import nn

from blosa.nn.layers import Dense, check_width, checked_mask


def masked_pool(logits: torch.Tensor, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sum_i softmax_i(logits)_i * x_i over the real tokens i of each sequence; 0 for a sequence
    with no real token (its logits would softmax over only -inf: NaN).

    Shapes: logits [..., M, r, d] or [..., M, r, 1], x [..., M, r, d], mask [M, r] bool -> [..., M, d].
    """
    # Padding gets -inf added, except in a sequence with no real token: 0 there, then its
    # probabilities times 0. Additions and products of float masks [M, r, 1], built small:
    # a bool-conditioned where or masked_fill over [..., M, r, d] costs ~20x an addition on the CPU.
    keep = mask.to(logits.dtype)
    skip = torch.zeros_like(keep).masked_fill(~mask & mask.any(dim=-1, keepdim=True), float("-inf"))
    probs = torch.softmax(logits + skip[..., None], dim=-2) * keep[..., None]
    return (probs * x).sum(dim=-2)


class Source2Token(nn.Module):
    """f(x_i) = W^T act(W1 x_i + b1) + b; P = masked softmax over tokens i; s = sum_i P_i * x_i.

    multi_dim=True (the paper's source2token) gives one score per feature, W [d, d_h];
    multi_dim=False gives one scalar score per token, w [d_h] (the vanilla attention "without q"
    of the Table 3 ablation). Padding never gets weight; a row with no real token gives s = 0.

    Shapes: x [B, n, d], mask [B, n] bool (None: every token real) -> s [B, d].
    """

    def __init__(self, d: int, hidden: int | None = None, activation="relu", dropout: float = 0.0,
                 multi_dim: bool = True):
        super().__init__()
        hidden = d if hidden is None else hidden
        check_width("d", d)
        check_width("hidden", hidden)
        self.d = d
        self.hidden_layer = Dense(d, hidden, activation=activation, dropout=dropout)
        self.score_layer = Dense(hidden, d if multi_dim else 1, dropout=dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = checked_mask(x, mask, self.d)
        return masked_pool(self.score_layer(self.hidden_layer(x)), x, mask)

    def forward_rows(self, x_rows: torch.Tensor, x: torch.Tensor, rows) -> torch.Tensor:
        """forward(x, rows.mask), its scores computed on the rows only (blosa.nn.token_rows):
        x_rows [N, d] = rows.rows(x), x [B, n, d] -> s [B, d]."""
        return masked_pool(rows.padded(self.score_layer(self.hidden_layer(x_rows))), x, rows.mask)
