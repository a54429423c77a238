"""Natural language inference (paper section 4.1: SNLI; also SICK-E).

premise and hypothesis -> ONE shared encoder -> s1, s2; features [s1; s2; s1 - s2; s1 * s2] ->
Dense(hidden, activation) -> Dense(num_classes) logits; cross-entropy; accuracy.
The authors' SNLI head used elu and a highway layer before the output (MODEL_NOTES.md): the
activation is an option of build_model (default relu); there is no highway layer here.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from blosa.data.examples import Pair
from blosa.tasks.base import (ClassIdTask, MakeEncoder, PairModel, built_encoder,
                              check_class_labels, check_examples, check_model_args,
                              check_num_classes, collate_pair_ids)
from blosa.tasks.classification import ClassifierHead


def nli_features(s1: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
    """[s1; s2; s1 - s2; s1 * s2]: s1, s2 [B, D] -> [B, 4D]."""
    return torch.cat([s1, s2, s1 - s2, s1 * s2], dim=-1)


class NLIModel(PairModel):
    """PairModel with features [s1; s2; s1 - s2; s1 * s2] [B, 4D] -> logits [B, C]."""

    combine = staticmethod(nli_features)


class NLITask(ClassIdTask):
    """A (premise, hypothesis) pair -> entailment / neutral / contradiction (0 / 1 / 2)."""

    family = "nli"

    def __init__(self, num_classes: int = 3):
        super().__init__(check_num_classes(num_classes, self.family))

    def length(self, example: Pair) -> int:
        return max(1, len(example.first), len(example.second))

    def collate(self, examples: Sequence[Pair], vocab) -> dict[str, torch.Tensor]:
        """{"ids1", "mask1" [B, n1], "ids2", "mask2" [B, n2], "label" [B] long}."""
        check_examples(examples, Pair, self.family)
        labels = check_class_labels([ex.label for ex in examples], self.num_classes, self.family)
        return {**collate_pair_ids(examples, vocab), "label": labels}

    def build_model(self, embedding: nn.Embedding, make_encoder: MakeEncoder, hidden: int = 300,
                    dropout: float = 0.0, activation="relu") -> NLIModel:
        """activation: of the hidden layer; "elu" as in the authors' SNLI code."""
        check_model_args(embedding, make_encoder, hidden, dropout)
        encoder = built_encoder(make_encoder, embedding.embedding_dim)
        head = ClassifierHead(4 * encoder.sentence_dim, hidden, self.num_classes, activation,
                              dropout)
        return NLIModel(embedding, encoder, head)
