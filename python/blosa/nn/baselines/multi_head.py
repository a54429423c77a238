"""Multi-head attention baseline (Vaswani et al. 2017) with sinusoidal positions, source2token on top."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from blosa.nn.encoder import SentenceEncoder
from blosa.nn.layers import Dense, check_width
from blosa.nn.source2token import Source2Token


def sinusoidal_positions(n: int, d: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[n, d]: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same)."""
    pos = torch.arange(n, dtype=torch.float64, device=device)[:, None]
    inv = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float64, device=device) / d)
    pe = torch.zeros(n, d, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(pos * inv)
    pe[:, 1::2] = torch.cos(pos * inv)[:, : d // 2]
    return pe.to(dtype)


class MultiHead(SentenceEncoder):
    """x + PE -> Q, K, V projections (heads x head_dim) -> scaled dot-product attention over
    real keys (torch's scaled_dot_product_attention) -> heads concatenated -> source2token.

    heads=8 and head_dim = 2*hidden // heads (hidden=300 -> 8 x 75 = 600D, the paper's setting).
    No output projection, residual or feed-forward layer: the paper's 2.0m |theta| has none.
    Shapes: x [B, n, d_in], mask [B, n] bool -> tokens [B, n, heads*head_dim], sentence [B, same].
    """

    def __init__(self, d_in: int, hidden: int = 300, heads: int = 8, head_dim: int | None = None,
                 activation="relu", dropout: float = 0.0, dropout_at=("dense",)):
        super().__init__(d_in, hidden, dropout, dropout_at)
        check_width("heads", heads)
        if head_dim is None:
            head_dim = 2 * hidden // heads
            check_width("head_dim", head_dim, f"2*hidden // heads, hidden={hidden}, heads={heads}")
        else:
            check_width("head_dim", head_dim)
        self.heads, self.head_dim = heads, head_dim
        d = heads * head_dim
        p = self.dense_dropout
        self.q = Dense(d_in, d, dropout=p)
        self.k = Dense(d_in, d, dropout=p)
        self.v = Dense(d_in, d, dropout=p)
        self.s2t = Source2Token(d, activation=activation, dropout=p)
        self.token_dim = self.sentence_dim = d

    def extra_repr(self) -> str:
        return f"heads={self.heads}, head_dim={self.head_dim}"

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, n, _ = x.shape
        x = x + sinusoidal_positions(n, x.shape[-1], x.dtype, x.device)

        def split(t: torch.Tensor) -> torch.Tensor:  # [B, n, h*dh] -> [B, h, n, dh]
            return t.reshape(B, n, self.heads, self.head_dim).transpose(1, 2)

        # A row with no real key would give NaN; let it attend everything (its output is zeroed).
        keys = mask | ~mask.any(dim=1, keepdim=True)
        out = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)),
                                             attn_mask=keys[:, None, None, :])
        u = out.transpose(1, 2).reshape(B, n, self.heads * self.head_dim)
        u = u.masked_fill(~mask[..., None], 0.0)
        return u, self.s2t(u, mask)
