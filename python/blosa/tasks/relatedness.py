"""Semantic relatedness (paper section 4.3 and Appendix C: SICK), after Tai et al. (2015).

s1, s2 from ONE shared encoder; features [s1 * s2; |s1 - s2|] -> Dense(hidden, activation) ->
Dense(K) -> log-softmax, log p_hat [B, K]. The gold score y in [1, K] becomes the distribution
p of target_distribution (beta^T p = y, beta = [1..K]); the loss is KL(p || p_hat) averaged over
the batch; the prediction is y_hat = beta^T p_hat. Metrics: Pearson (main), Spearman, MSE.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from blosa.data.examples import Pair
from blosa.tasks.base import (MakeEncoder, PairModel, Task, built_encoder, check_examples,
                              check_model_args, check_num_classes, collate_pair_ids,
                              is_finite_number)
from blosa.tasks.classification import ClassifierHead
from blosa.tasks.metrics import mse, pearson, spearman


def check_scores(scores: torch.Tensor, K: int, what: str = "scores") -> None:
    """Raise ValueError unless scores is a 1-D floating tensor of finite values in [1, K]."""
    if not isinstance(scores, torch.Tensor) or scores.dim() != 1 or not scores.is_floating_point():
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"{what} must be a 1-D floating tensor [B], got {shape}")
    bad = ~(torch.isfinite(scores) & (scores >= 1) & (scores <= K))
    if bad.any():
        i = int(bad.nonzero()[0, 0])
        raise ValueError(f"{what}[{i}] = {scores[i].item()} is outside [1, {K}]")


def target_distribution(scores: torch.Tensor, K: int) -> torch.Tensor:
    """Appendix C's target p [B, K] for gold scores y [B] in [1, K] (column k-1 is class k):
    p_floor(y) = floor(y) - y + 1, p_(floor(y)+1) = y - floor(y), 0 elsewhere; so sum(p) = 1 and
    sum_k k p_k = y. y = K gives p_K = 1 (the formula's p_(K+1) would be 0 anyway)."""
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"target_distribution: K must be an int >= 1, got {K!r}")
    check_scores(scores, K)
    low = scores.floor()
    frac = scores - low  # 0 for y = K: the upper column then gets nothing
    col = low.long() - 1  # floor(y) as a 0-based column
    p = scores.new_zeros(scores.shape[0], K)
    p.scatter_(1, col[:, None], (1 - frac)[:, None])
    p.scatter_add_(1, (col + 1).clamp(max=K - 1)[:, None], frac[:, None])
    return p


def relatedness_features(s1: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
    """[s1 * s2; |s1 - s2|]: s1, s2 [B, D] -> [B, 2D]."""
    return torch.cat([s1 * s2, (s1 - s2).abs()], dim=-1)


class RelatednessModel(PairModel):
    """PairModel with features [s1 * s2; |s1 - s2|] [B, 2D] -> log p_hat [B, K]."""

    combine = staticmethod(relatedness_features)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.log_softmax(super().forward(batch), dim=-1)


class RelatednessTask(Task):
    """A sentence pair -> a similarity score in [1, K] (K = num_classes, 5 for SICK)."""

    family = "relatedness"
    metric_names = ("pearson", "spearman", "mse")
    main_metric = "pearson"
    higher_is_better = True

    def __init__(self, num_classes: int = 5):
        super().__init__(check_num_classes(num_classes, self.family))

    @property
    def K(self) -> int:
        return self.num_classes

    def length(self, example: Pair) -> int:
        return max(1, len(example.first), len(example.second))

    def collate(self, examples: Sequence[Pair], vocab) -> dict[str, torch.Tensor]:
        """{"ids1", "mask1" [B, n1], "ids2", "mask2" [B, n2], "label" [B] float32 gold scores}."""
        check_examples(examples, Pair, self.family)
        for i, ex in enumerate(examples):
            if not (is_finite_number(ex.label) and 1 <= ex.label <= self.K):
                raise ValueError(f"{self.family}: example {i} has score {ex.label!r}, "
                                 f"not a number in [1, {self.K}]")
        labels = torch.tensor([float(ex.label) for ex in examples], dtype=torch.float32)
        return {**collate_pair_ids(examples, vocab), "label": labels}

    def build_model(self, embedding: nn.Embedding, make_encoder: MakeEncoder, hidden: int = 300,
                    dropout: float = 0.0, activation="relu") -> RelatednessModel:
        check_model_args(embedding, make_encoder, hidden, dropout)
        encoder = built_encoder(make_encoder, embedding.embedding_dim)
        head = ClassifierHead(2 * encoder.sentence_dim, hidden, self.K, activation, dropout)
        return RelatednessModel(embedding, encoder, head)

    def loss(self, output: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """KL(p || p_hat) averaged over the batch; output is log p_hat [B, K].
        Terms with p_k = 0 contribute 0 (kl_div uses p log p = 0 there)."""
        p = target_distribution(batch["label"].to(output.dtype), self.K)
        return F.kl_div(output, p, reduction="batchmean", log_target=False)

    def predict(self, output: torch.Tensor) -> torch.Tensor:
        """y_hat = beta^T p_hat [B], beta = [1, ..., K]."""
        beta = torch.arange(1, self.K + 1, dtype=output.dtype, device=output.device)
        return output.exp() @ beta

    def compute_metrics(self, predictions, targets) -> dict[str, float]:
        return {"pearson": pearson(predictions, targets),
                "spearman": spearman(predictions, targets),
                "mse": mse(predictions, targets)}
