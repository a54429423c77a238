"""Sentence classification (paper section 4.4: CR, MPQA, SUBJ, TREC, SST-1, SST-2).

sentence vector -> Dense(hidden, activation) -> Dense(num_classes) logits; cross-entropy;
accuracy. Dropout is on the input of both dense layers, where the authors' code puts it.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from blosa.data.examples import Sentence
from blosa.nn.layers import Dense
from blosa.tasks.base import (ClassIdTask, MakeEncoder, built_encoder, check_class_labels,
                              check_examples, check_model_args, check_num_classes,
                              embed_and_encode, encode_ids)


class ClassifierHead(nn.Module):
    """[B, d] features -> Dense(d, hidden, activation) -> Dense(hidden, num_classes) -> [B, C]."""

    def __init__(self, d: int, hidden: int, num_classes: int, activation="relu",
                 dropout: float = 0.0):
        super().__init__()
        self.hidden = Dense(d, hidden, activation=activation, dropout=dropout)
        self.out = Dense(hidden, num_classes, dropout=dropout)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.out(self.hidden(features))


class SentenceClassifier(nn.Module):
    """embedding -> encoder -> sentence vector -> ClassifierHead.

    forward(batch) with batch["ids"] [B, n] long, batch["mask"] [B, n] bool -> logits [B, C].
    """

    def __init__(self, embedding: nn.Embedding, encoder: nn.Module, head: ClassifierHead):
        super().__init__()
        self.embedding = embedding
        self.encoder = encoder
        self.head = head

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        _, sentence = embed_and_encode(self.embedding, self.encoder, batch["ids"], batch["mask"])
        return self.head(sentence)


class ClassificationTask(ClassIdTask):
    """One sentence -> one of num_classes labels."""

    family = "classification"

    def __init__(self, num_classes: int):
        super().__init__(check_num_classes(num_classes, self.family))

    def length(self, example: Sentence) -> int:
        return max(1, len(example.tokens))

    def collate(self, examples: Sequence[Sentence], vocab) -> dict[str, torch.Tensor]:
        """{"ids" [B, n] long, "mask" [B, n] bool, "label" [B] long}."""
        check_examples(examples, Sentence, self.family)
        labels = check_class_labels([ex.label for ex in examples], self.num_classes, self.family)
        ids, mask = encode_ids(vocab, [ex.tokens for ex in examples])
        return {"ids": ids, "mask": mask, "label": labels}

    def build_model(self, embedding: nn.Embedding, make_encoder: MakeEncoder, hidden: int = 300,
                    dropout: float = 0.0, activation="relu") -> SentenceClassifier:
        check_model_args(embedding, make_encoder, hidden, dropout)
        encoder = built_encoder(make_encoder, embedding.embedding_dim)
        head = ClassifierHead(encoder.sentence_dim, hidden, self.num_classes, activation, dropout)
        return SentenceClassifier(embedding, encoder, head)
