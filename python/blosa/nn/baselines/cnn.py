"""CNN baselines: Multi-CNN (Kim 2014) and Hrchy-CNN (ConvS2S-style encoder, Gehring et al. 2017)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from blosa.nn.dropout import Dropout
from blosa.nn.encoder import SentenceEncoder
from blosa.nn.layers import Dense, check_width, get_activation, glorot_, zero_padding
from blosa.nn.source2token import Source2Token


def same_conv(conv: nn.Conv1d, x: torch.Tensor, mask: torch.Tensor, dropout: nn.Module) -> torch.Tensor:
    """Conv1d over time keeping length n: padding zeroed first, zeros beyond both ends.

    Width k covers tokens j - (k-1)//2 ... j + k//2. Shapes: x [B, n, d_in] -> [B, n, d_out].
    """
    k = conv.kernel_size[0]
    xt = dropout(zero_padding(x, mask)).transpose(1, 2)
    return conv(F.pad(xt, ((k - 1) // 2, k // 2))).transpose(1, 2)


class MultiCNN(SentenceEncoder):
    """Kim (2014): convolutions of widths 3, 4, 5 with `filters` each, act, max over time.

    filters defaults to 2*hidden // len(widths) (hidden=300 -> 200 each, the paper's 600D).
    The convolutions are padded to keep n outputs (the token representations, as the paper's
    Appendix B does); the max-pool takes real positions only. No source2token (the paper's
    1.4m |theta| has none).
    Shapes: x [B, n, d_in], mask [B, n] bool -> tokens [B, n, F*len(widths)], sentence [B, same].
    """

    def __init__(self, d_in: int, hidden: int = 300, widths=(3, 4, 5), filters: int | None = None,
                 activation="relu", dropout: float = 0.0, dropout_at=("dense",)):
        super().__init__(d_in, hidden, dropout, dropout_at)
        if filters is None:
            filters = 2 * hidden // len(widths)
            check_width("filters", filters, f"2*hidden // {len(widths)} widths, hidden={hidden}")
        else:
            check_width("filters", filters)
        self.convs = nn.ModuleList(glorot_(nn.Conv1d(d_in, filters, k)) for k in widths)
        self.act = get_activation(activation)
        self.conv_dropout = Dropout(self.dense_dropout) if self.dense_dropout > 0 else nn.Identity()
        self.token_dim = self.sentence_dim = filters * len(widths)

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = torch.cat([self.act(same_conv(c, x, mask, self.conv_dropout)) for c in self.convs], dim=-1)
        pooled = u.masked_fill(~mask[..., None], float("-inf")).amax(dim=1)
        return u, pooled.masked_fill(~mask.any(dim=1)[:, None], 0.0)


class HrchyCNN(SentenceEncoder):
    """Hierarchical CNN, ConvS2S encoder style: in-projection, `layers` x [conv width `kernel`
    to 2*hidden -> GLU -> residual, scaled by sqrt(1/2)], out-projection, source2token.

    The paper's "3-layer 300D CNN with kernel length 5" is hidden=300 (|theta| 3.4m matches the
    two projections and the source2token). Padding is zeroed before every convolution.
    Shapes: x [B, n, d_in], mask [B, n] bool -> tokens [B, n, hidden], sentence [B, hidden].
    """

    def __init__(self, d_in: int, hidden: int = 300, layers: int = 3, kernel: int = 5,
                 activation="relu", dropout: float = 0.0, dropout_at=("dense",)):
        super().__init__(d_in, hidden, dropout, dropout_at)
        p = self.dense_dropout
        self.in_proj = Dense(d_in, hidden, dropout=p)
        self.convs = nn.ModuleList(glorot_(nn.Conv1d(hidden, 2 * hidden, kernel)) for _ in range(layers))
        self.conv_dropout = Dropout(p) if p > 0 else nn.Identity()
        self.out_proj = Dense(hidden, hidden, dropout=p)
        self.s2t = Source2Token(hidden, activation=activation, dropout=p)
        self.token_dim = self.sentence_dim = hidden

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.in_proj(x)
        for conv in self.convs:
            h = (F.glu(same_conv(conv, h, mask, self.conv_dropout), dim=-1) + h) * math.sqrt(0.5)
        u = zero_padding(self.out_proj(h), mask)
        return u, self.s2t(u, mask)
