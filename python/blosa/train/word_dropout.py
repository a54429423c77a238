"""Word dropout: in training, a word of the input reads as <unk> with a fixed probability, so that
the model cannot lean on any single word (Iyyer et al., 2015, drop words; here they become <unk>
rather than vanishing, so that sequence lengths and masks stay as they are)."""
from __future__ import annotations

import torch
from torch import nn

from blosa.data import Vocab


class WordDropoutEmbedding(nn.Embedding):
    """An nn.Embedding (the same parameters and state_dict) whose forward, in training mode,
    first replaces each non-padding id with Vocab.UNK with probability `word_dropout`.

    ids [*] (int64) -> vectors [*, embedding_dim]. In eval mode, or with word_dropout 0, it is
    exactly nn.Embedding. The draw uses torch's global generator, so a seeded run repeats it and a
    checkpoint's saved generator state resumes it."""

    word_dropout: float = 0.0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.training and self.word_dropout > 0:
            dropped = torch.rand(ids.shape, device=ids.device) < self.word_dropout
            ids = ids.masked_fill(dropped & (ids != Vocab.PAD), Vocab.UNK)
        return super().forward(ids)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, word_dropout={self.word_dropout}"
