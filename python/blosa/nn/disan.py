"""DiSAN (Shen et al. 2017) as the Bi-BloSAN paper uses it: forward and backward DiSA, source2token."""
from __future__ import annotations

import torch

from blosa.nn.encoder import SentenceEncoder
from blosa.nn.masked_self_attention import MaskedSelfAttention
from blosa.nn.source2token import Source2Token


class DiSAN(SentenceEncoder):
    """[DiSA_fw(x); DiSA_bw(x)] (untied) -> u [B, n, 2*hidden]; source2token(u) -> s [B, 2*hidden].

    The paper's "600D DiSAN" is hidden=300. Its memory is O(n^2 d): no blocks.
    Shapes: x [B, n, d_in], mask [B, n] bool -> tokens [B, n, 2*hidden], sentence [B, 2*hidden].
    """

    def __init__(self, d_in: int, hidden: int = 300, activation="relu", dropout: float = 0.0,
                 dropout_at=("dense",), scale: float = 5.0, backend: str = "auto"):
        super().__init__(d_in, hidden, dropout, dropout_at)
        p = self.dense_dropout
        self.fw = MaskedSelfAttention(d_in, hidden, "forward", activation, p, scale, backend)
        self.bw = MaskedSelfAttention(d_in, hidden, "backward", activation, p, scale, backend)
        self.s2t = Source2Token(2 * hidden, activation=activation, dropout=p)
        self.token_dim = self.sentence_dim = 2 * hidden

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = torch.cat([self.fw(x, mask), self.bw(x, mask)], dim=-1)
        return u, self.s2t(u, mask)
