"""Bi-BloSA and Bi-BloSAN (paper section 3.2)."""
from __future__ import annotations

import torch
from torch import nn

from blosa.nn.encoder import SentenceEncoder
from blosa.nn.layers import Dense, check_width, checked_mask
from blosa.nn.mblosa import MaskedBlockSelfAttention
from blosa.nn.source2token import Source2Token


class BiBloSA(nn.Module):
    """Two untied dense layers on the embeddings, a forward and a backward mBloSA, concatenated.

    Shapes: x [B, n, d_in], mask [B, n] bool (None: every token real) -> u_bi [B, n, 2d]
    ([u_fw; u_bw], 0 at padding).
    """

    def __init__(self, d_in: int, d: int, block_len: int | str = "auto", activation="relu",
                 dropout: float = 0.0, scale: float = 5.0, backend: str = "auto",
                 use_local: bool = True, use_global: bool = True):
        super().__init__()
        check_width("d_in", d_in)
        check_width("d", d)
        self.d_in = d_in
        kw = dict(block_len=block_len, activation=activation, dropout=dropout, scale=scale,
                  backend=backend, use_local=use_local, use_global=use_global)
        self.fc_fw = Dense(d_in, d, activation=activation, dropout=dropout)
        self.fc_bw = Dense(d_in, d, activation=activation, dropout=dropout)
        self.fw = MaskedBlockSelfAttention(d, "forward", **kw)
        self.bw = MaskedBlockSelfAttention(d, "backward", **kw)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = checked_mask(x, mask, self.d_in)
        return torch.cat([self.fw(self.fc_fw(x), mask), self.bw(self.fc_bw(x), mask)], dim=-1)


class BiBloSAN(SentenceEncoder):
    """Bi-BloSAN: Bi-BloSA, then source2token -> sentence vector.

    `hidden` is d, the size of each direction: the paper's "480D Bi-BloSAN" is hidden=240.
    block_len: "auto" (ceil(cbrt(2n)) of the batch's padded length) or a fixed int r; see
    blosa.nn.block_len.block_len_for_dataset for Appendix A's dataset-level choice.
    Ablations (Table 3): use_local, use_global (see MaskedBlockSelfAttention); use_mblosa=False
    is "w/o mBloSA" (tokens = embeddings, source2token on them); with multi_dim_s2t=False too it
    is "w/o mBloSA & source2token" (a vanilla, one-score-per-token attention).
    backend: the masked_block_attn backend of every attention in the model (set_backend changes it).

    Shapes: x [B, n, d_in], mask [B, n] bool -> tokens [B, n, 2*hidden] (d_in without mBloSA),
    sentence [B, 2*hidden] (d_in without mBloSA).
    """

    def __init__(self, d_in: int, hidden: int = 300, block_len: int | str = "auto", activation="relu",
                 dropout: float = 0.0, dropout_at=("dense",), scale: float = 5.0, backend: str = "auto",
                 use_local: bool = True, use_global: bool = True, use_mblosa: bool = True,
                 multi_dim_s2t: bool = True):
        super().__init__(d_in, hidden, dropout, dropout_at)
        p = self.dense_dropout
        self.bi_blosa = None
        d_out = d_in
        if use_mblosa:
            self.bi_blosa = BiBloSA(d_in, hidden, block_len, activation, p, scale, backend,
                                    use_local, use_global)
            d_out = 2 * hidden
        self.s2t = Source2Token(d_out, activation=activation, dropout=p, multi_dim=multi_dim_s2t)
        self.token_dim = self.sentence_dim = d_out

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = x if self.bi_blosa is None else self.bi_blosa(x, mask)
        return u, self.s2t(u, mask)
