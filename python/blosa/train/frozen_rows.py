"""An embedding whose table goes on past the trained rows with frozen pretrained rows: the words
of the word vectors that the training data never shows (the authors' vocabulary, MODEL_NOTES.md
"SST as coded": every GloVe word is in it, those outside training keep their vectors).

The frozen rows are a buffer that is not saved: a checkpoint holds only the trained rows and a
SHA-256 digest of the frozen ones, so it does not grow by the vector table, and a run rebuilt on
other vectors fails to load instead of reading wrong rows (blosa eval and encode rebuild the rows
from the run's named vectors)."""
from __future__ import annotations

import hashlib

import numpy as np
import torch
import torch.nn.functional as F

from blosa.data import Vocab
from blosa.train.word_dropout import WordDropoutEmbedding


def digest(rows: np.ndarray) -> torch.Tensor:
    """SHA-256 of a float32 table and its shape, as 32 uint8."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    h = hashlib.sha256(repr(rows.shape).encode())
    h.update(rows.tobytes())
    return torch.frombuffer(bytearray(h.digest()), dtype=torch.uint8)


class FrozenRowsEmbedding(WordDropoutEmbedding):
    """ids < num_embeddings read the (trained) weight, as in nn.Embedding; ids
    num_embeddings + k read row k of `frozen`, which no gradient reaches.

    ids [*] int64 -> vectors [*, embedding_dim]. Word dropout applies to the trained ids only
    (training text holds no other). Build it with with_frozen_rows()."""

    frozen: torch.Tensor  # [V_frozen, embedding_dim], not in the state_dict
    frozen_digest: torch.Tensor  # [32] uint8, in the state_dict

    @classmethod
    def with_frozen_rows(cls, weight: torch.Tensor, frozen: np.ndarray, freeze: bool,
                         padding_idx: int) -> "FrozenRowsEmbedding":
        """weight [V, d]: the trained rows' start; frozen [V_frozen, d] float32."""
        if frozen.ndim != 2 or frozen.shape[1] != weight.shape[1]:
            raise ValueError(f"frozen rows must be [V, {weight.shape[1]}], got {frozen.shape}")
        embedding = cls.from_pretrained(weight, freeze=freeze, padding_idx=padding_idx)
        embedding.register_buffer("frozen", torch.from_numpy(np.array(frozen, np.float32)),
                                  persistent=False)
        embedding.register_buffer("frozen_digest", digest(frozen))
        return embedding

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        beyond = ids >= self.num_embeddings
        trained = super().forward(ids.masked_fill(beyond, Vocab.UNK))
        frozen = F.embedding((ids - self.num_embeddings).clamp_min(0), self.frozen)
        return torch.where(beyond[..., None], frozen, trained)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        saved = state_dict.get(prefix + "frozen_digest")
        if saved is not None and not torch.equal(saved.cpu(), self.frozen_digest.cpu()):
            raise ValueError("this checkpoint was trained with other frozen word vectors than "
                             "the ones loaded now (their SHA-256 differs): the run's --vectors "
                             "source changed since it was trained")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, frozen_rows={self.frozen.shape[0]}"
