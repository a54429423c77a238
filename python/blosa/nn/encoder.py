"""The one interface every encoder follows, so the trainer and benchmarks can swap them by name."""
from __future__ import annotations

from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from blosa.nn.dropout import Dropout
from blosa.nn.layers import check_width, checked_mask, dropout_places, zero_padding


class SentenceEncoder(nn.Module):
    """Base of every encoder: `forward(x, mask) -> (tokens, sentence)`.

    Shapes: x [B, n, d_in] embeddings; mask [B, n] bool, True for real tokens (None: all real) ->
    tokens [B, n, token_dim] (exactly 0 at padding), sentence [B, sentence_dim]
    (0 for a row with no real token). An empty batch (B = 0 or n = 0) is fine. Subclasses
    implement `encode` with the same signature and set `token_dim` and `sentence_dim`.

    d_in and hidden (the encoder's width, see registry.build_encoder) are checked here, before
    any layer is built.
    Dropout (probability `dropout`) goes to the places named in `dropout_at` (see
    blosa.nn.layers.DROPOUT_PLACES); subclasses pass `self.dense_dropout` to their layers.
    """

    token_dim: int
    sentence_dim: int

    def __init__(self, d_in: int, hidden: int, dropout: float = 0.0, dropout_at: str | Iterable[str] = ("dense",)):
        super().__init__()
        check_width("d_in", d_in)
        check_width("hidden", hidden)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_in = d_in
        places = dropout_places(dropout_at)
        self.dense_dropout = dropout if "dense" in places else 0.0
        self.in_drop = Dropout(dropout) if "input" in places and dropout > 0 else nn.Identity()
        self.out_drop = Dropout(dropout) if "output" in places and dropout > 0 else nn.Identity()

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        mask = checked_mask(x, mask, self.d_in, "embeddings")
        B, n = mask.shape
        if B == 0 or n == 0:
            # Packing, convolutions and SRU's loop take no empty batch: encode one padding token
            # per row in at least one row (x padded, so gradients still reach it) and cut back.
            grown = F.pad(x, (0, 0, 0, max(n, 1) - n, 0, max(B, 1) - B))
            tokens, sentence = self.forward(grown, mask.new_zeros(grown.shape[:2]))  # hooks ran once
            return tokens[:B, :n], sentence[:B]
        x = zero_padding(self.in_drop(x), mask)  # padding content can never matter
        tokens, sentence = self.encode(x, mask)
        return zero_padding(self.out_drop(tokens), mask), self.out_drop(sentence)
