"""Answer-sentence selection on SQuAD (paper section 4.2 and Appendix B).

Each of a passage's m sentences -> the shared encoder -> its sentence vector u_k; the question
-> the same encoder -> q; c_k = [u_k; q; u_k - q; u_k * q]; the sequence c_1..c_m -> a second
encoder (make_encoder(4D)) over the passage's sentences -> its token outputs -> Dense to one
score per sentence -> softmax over the passage's sentences (padding sentences get -inf, so
probability exactly 0); cross-entropy against the sentence holding the answer; accuracy.

Where this departs from Appendix B:
- The paper compresses the question with a source2token alone; here the question goes through
  the whole shared encoder (its context fusion and its source2token), like the sentences.
- The second "context fusion layer" is a whole blosa.nn encoder of which only the token outputs
  are used: its sentence-level layers (source2token) get no gradient, so the task sets
  unused_parameters = True (DistributedDataParallel needs find_unused_parameters=True).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from blosa.data.examples import Passage
from blosa.data.batching import pad_ids
from blosa.nn.layers import Dense
from blosa.tasks.base import (ClassIdTask, MakeEncoder, built_encoder, check_examples,
                              check_model_args, embed_and_encode, encode_ids)


def selection_features(u: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """c_k = [u_k; q; u_k - q; u_k * q]: u [B, m, D], q [B, D] -> [B, m, 4D]."""
    q = q[:, None, :].expand_as(u)
    return torch.cat([u, q, u - q, u * q], dim=-1)


class SentenceSelector(nn.Module):
    """forward(batch) -> scores [B, m], -inf at padding sentences (softmax gives p_hat).

    batch: "q_ids", "q_mask" [B, lq]; "s_ids", "s_mask" [B, m, ls]; "passage_mask" [B, m] bool.
    """

    def __init__(self, embedding: nn.Embedding, encoder: nn.Module, passage_encoder: nn.Module,
                 score: Dense):
        super().__init__()
        self.embedding = embedding
        self.encoder = encoder
        self.passage_encoder = passage_encoder
        self.score = score

    def sentence_vectors(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """u [B, m, D]: the shared encoder's sentence vector of each real sentence, 0 at padding.
        Only the real sentences are encoded (padding sentences would be wasted work)."""
        keep = batch["passage_mask"]
        s_ids, s_mask = batch["s_ids"], batch["s_mask"]
        if s_ids.dim() != 3 or s_mask.shape != s_ids.shape or keep.shape != s_ids.shape[:2]:
            raise ValueError(f"s_ids, s_mask must be [B, m, ls] and passage_mask [B, m], got "
                             f"{tuple(s_ids.shape)}, {tuple(s_mask.shape)}, {tuple(keep.shape)}")
        _, real = embed_and_encode(self.embedding, self.encoder, s_ids[keep], s_mask[keep])
        u = real.new_zeros(*keep.shape, real.shape[-1])
        u[keep] = real
        return u

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        keep = batch["passage_mask"]
        u = self.sentence_vectors(batch)
        _, q = embed_and_encode(self.embedding, self.encoder, batch["q_ids"], batch["q_mask"])
        tokens, _ = self.passage_encoder(selection_features(u, q), keep)
        scores = self.score(tokens).squeeze(-1)  # [B, m]
        return scores.masked_fill(~keep, float("-inf"))


class SelectionTask(ClassIdTask):
    """(question, passage sentences) -> the index of the sentence holding the answer."""

    family = "selection"
    unused_parameters = True  # the passage encoder's sentence-level layers (see module doc)

    def __init__(self, num_classes: int | None = None):
        # The number of candidates varies by passage: num_classes is kept but not used.
        super().__init__(num_classes)

    def length(self, example: Passage) -> int:
        return max(1, len(example.question), *(len(s) for s in example.sentences))

    def collate(self, examples: Sequence[Passage], vocab) -> dict[str, torch.Tensor]:
        """{"q_ids", "q_mask" [B, lq]; "s_ids", "s_mask" [B, m, ls] (m: the most sentences of a
        passage, ls: the longest sentence); "passage_mask" [B, m] bool; "s_count" [B] long;
        "label" [B] long, the answer sentence's index}."""
        check_examples(examples, Passage, self.family)
        for i, ex in enumerate(examples):
            n = len(ex.sentences)
            if n == 0:
                raise ValueError(f"{self.family}: example {i} has a passage with no sentence")
            a = ex.answer
            if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < n:
                raise ValueError(f"{self.family}: example {i} has answer {a!r}, not a sentence "
                                 f"index in [0, {n})")
        q_ids, q_mask = encode_ids(vocab, [ex.question for ex in examples])
        counts = torch.tensor([len(ex.sentences) for ex in examples], dtype=torch.long)
        keep = torch.arange(int(counts.max()))[None, :] < counts[:, None]  # [B, m]
        flat_ids, flat_mask = pad_ids([vocab.encode(s) for ex in examples for s in ex.sentences])
        s_ids = flat_ids.new_zeros(*keep.shape, flat_ids.shape[1])
        s_mask = flat_mask.new_zeros(*keep.shape, flat_mask.shape[1])
        s_ids[keep] = flat_ids  # keep's row-major order is the order the sentences were listed
        s_mask[keep] = flat_mask
        labels = torch.tensor([ex.answer for ex in examples], dtype=torch.long)
        return {"q_ids": q_ids, "q_mask": q_mask, "s_ids": s_ids, "s_mask": s_mask,
                "passage_mask": keep, "s_count": counts, "label": labels}

    def build_model(self, embedding: nn.Embedding, make_encoder: MakeEncoder, hidden: int = 300,
                    dropout: float = 0.0, activation="relu") -> SentenceSelector:
        """hidden and activation are unused (the head is one linear Dense to a score; the
        encoders' widths and activations come from make_encoder); they are accepted so that
        every task builds the same way."""
        check_model_args(embedding, make_encoder, hidden, dropout)
        encoder = built_encoder(make_encoder, embedding.embedding_dim)
        passage_encoder = built_encoder(make_encoder, 4 * encoder.sentence_dim)
        score = Dense(passage_encoder.token_dim, 1, dropout=dropout)
        return SentenceSelector(embedding, encoder, passage_encoder, score)
