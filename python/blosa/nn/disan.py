"""DiSAN (Shen et al. 2017) as the Bi-BloSAN paper uses it: forward and backward DiSA, source2token."""
from __future__ import annotations

import torch

from blosa.nn.checkpoint_compat import register_disan_compat
from blosa.nn.encoder import SentenceEncoder
from blosa.nn.source2token import Source2Token
from blosa.nn.stacked_self_attention import StackedMaskedSelfAttention
from blosa.nn.token_rows import TokenRows


class DiSAN(SentenceEncoder):
    """[DiSA_fw(x); DiSA_bw(x)] (untied) -> u [B, n, 2*hidden]; source2token(u) -> s [B, 2*hidden].

    The paper's "600D DiSAN" is hidden=300. Its memory is O(n^2 d): no blocks. Both directions
    run as one (disa: blosa.nn.stacked_self_attention, each layer a batched matmul over them),
    per-token layers on the real tokens only where the batch is padded enough
    (blosa.nn.token_rows). Checkpoints of the former layout (fw.*, bw.*: a MaskedSelfAttention
    a direction) load, converted (blosa.nn.checkpoint_compat).
    Shapes: x [B, n, d_in], mask [B, n] bool -> tokens [B, n, 2*hidden], sentence [B, 2*hidden].
    """

    def __init__(self, d_in: int, hidden: int = 300, activation="relu", dropout: float = 0.0,
                 dropout_at=("dense",), scale: float = 5.0, backend: str = "auto"):
        super().__init__(d_in, hidden, dropout, dropout_at)
        p = self.dense_dropout
        self.disa = StackedMaskedSelfAttention(d_in, hidden, ("forward", "backward"), activation,
                                               p, scale, backend)
        self.s2t = Source2Token(2 * hidden, activation=activation, dropout=p)
        self.token_dim = self.sentence_dim = 2 * hidden
        register_disan_compat(self)

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = TokenRows(mask)
        u_rows = torch.cat(self.disa.forward_rows(rows.rows(x), rows).unbind(0), dim=-1)
        u = rows.padded(u_rows)
        return u, self.s2t.forward_rows(u_rows, u, rows)
