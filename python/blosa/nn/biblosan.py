"""Bi-BloSA and Bi-BloSAN (paper section 3.2)."""
from __future__ import annotations

import torch
from torch import nn

from blosa.nn.encoder import SentenceEncoder
from blosa.nn.checkpoint_compat import register_bi_blosa_compat
from blosa.nn.layers import check_width, checked_mask
from blosa.nn.mblosa import MaskedBlockSelfAttention
from blosa.nn.source2token import Source2Token
from blosa.nn.stacked import StackedDense
from blosa.nn.token_rows import TokenRows


class BiBloSA(nn.Module):
    """Two untied dense layers on the embeddings, a forward and a backward mBloSA, concatenated.

    Both directions run as one (blosa.nn.mblosa, a direction tuple): fc.weight [2, 1, d_in, d]
    holds the two dense layers, mblosa the two mBloSAs. Former checkpoints (fc_fw, fc_bw, fw, bw)
    load, converted (blosa.nn.checkpoint_compat).

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
        self.fc = StackedDense(2, 1, d_in, d, activation=activation, dropout=dropout)
        self.mblosa = MaskedBlockSelfAttention(d, ("forward", "backward"), **kw)
        register_bi_blosa_compat(self)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = checked_mask(x, mask, self.d_in)
        rows = TokenRows(mask)
        return rows.padded(self.forward_rows(rows.rows(x), rows))

    def forward_rows(self, x: torch.Tensor, rows: TokenRows) -> torch.Tensor:
        """forward on rows (blosa.nn.token_rows): x [N, d_in] -> u_bi [N, 2d]."""
        u = self.mblosa.forward_rows(self.fc(x).squeeze(1), rows)  # [2, N, d]
        return torch.cat(u.unbind(0), dim=-1)


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
        rows = TokenRows(mask)
        x_rows = rows.rows(x)
        u_rows = x_rows if self.bi_blosa is None else self.bi_blosa.forward_rows(x_rows, rows)
        u = x if self.bi_blosa is None else rows.padded(u_rows)
        return u, self.s2t.forward_rows(u_rows, u, rows)
