"""Natural language inference (paper section 4.1: SNLI; also SICK-E).

premise and hypothesis -> ONE shared encoder -> s1, s2; features [s1; s2; s1 - s2; s1 * s2] ->
Dense(hidden, activation) -> Dense(num_classes) logits; cross-entropy; accuracy.
The authors' SNLI head used elu and a highway layer before the output (MODEL_NOTES.md): the
activation is an option of build_model (default relu); there is no highway layer here.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from blosa.data.examples import Pair
from blosa.tasks.base import (MakeEncoder, Task, built_encoder, check_class_labels, check_examples,
                              check_model_args, check_num_classes, collate_pair_ids, encode_pair)
from blosa.tasks.classification import ClassifierHead
from blosa.tasks.metrics import accuracy


def nli_features(s1: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
    """[s1; s2; s1 - s2; s1 * s2]: s1, s2 [B, D] -> [B, 4D]."""
    return torch.cat([s1, s2, s1 - s2, s1 * s2], dim=-1)


class NLIModel(nn.Module):
    """forward(batch) with "ids1", "mask1" [B, n1] and "ids2", "mask2" [B, n2] -> logits [B, C].

    features(batch) -> [B, 4D] is the head's input.
    """

    def __init__(self, embedding: nn.Embedding, encoder: nn.Module, head: ClassifierHead):
        super().__init__()
        self.embedding = embedding
        self.encoder = encoder
        self.head = head

    def features(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return nli_features(*encode_pair(self.embedding, self.encoder, batch))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.features(batch))


class NLITask(Task):
    """A (premise, hypothesis) pair -> entailment / neutral / contradiction (0 / 1 / 2)."""

    family = "nli"
    metric_names = ("accuracy",)
    main_metric = "accuracy"
    higher_is_better = True

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

    def loss(self, output: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(output, batch["label"])

    def predict(self, output: torch.Tensor) -> torch.Tensor:
        return output.argmax(dim=-1)

    def compute_metrics(self, predictions, targets) -> dict[str, float]:
        return {"accuracy": accuracy(predictions, targets)}
