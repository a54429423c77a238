"""Source2token self-attention (paper section 2.3): compress a sequence into one vector."""
from __future__ import annotations

import torch
from torch import nn

from blosa.nn.layers import Dense, check_width, checked_mask


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
        logits = self.score_layer(self.hidden_layer(x))  # [B, n, d] or [B, n, 1]
        keep = mask[..., None]
        # A row with no real token would softmax over only -inf (NaN); give it zeros, then
        # multiply its probabilities by 0.
        has_token = mask.any(dim=1)[:, None, None]
        logits = logits.masked_fill(~keep, float("-inf")).masked_fill(~has_token, 0.0)
        probs = torch.softmax(logits, dim=1) * keep
        return (probs * x).sum(dim=1)
