"""What every task family shares: the Task interface and the embed -> encode step of its models.

A Task knows one family of datasets (classification, nli, relatedness, selection): how to turn a
list of examples into a batch of tensors, which model to build around a blosa.nn encoder, its
loss, its predictions and its metrics. It holds no parameters; build_model does.
"""
from __future__ import annotations

import math
import numbers
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from blosa.data.batching import pad_ids
from blosa.nn.encoder import SentenceEncoder
from blosa.tasks.metrics import accuracy

MakeEncoder = Callable[[int], SentenceEncoder]


class Task:
    """The interface of a task family: what the trainer (blosa.train) calls.

    Class attributes: family (its name in TASK_FAMILIES), metric_names, main_metric (the one model
    selection uses), higher_is_better (for main_metric), unused_parameters (True where the model
    has parameters that get no gradient: DistributedDataParallel then needs
    find_unused_parameters=True).
    `task.metrics(predictions, targets)` computes {name: float} over a whole split, in
    metric_names order (subclasses implement compute_metrics).
    """

    family: str = ""
    metric_names: tuple[str, ...] = ()
    main_metric: str = ""
    higher_is_better: bool = True
    unused_parameters: bool = False

    def __init__(self, num_classes: int | None = None):
        self.num_classes = num_classes

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_classes={self.num_classes})"

    def metrics(self, predictions, targets) -> dict[str, float]:
        out = self.compute_metrics(predictions, targets)
        if tuple(out) != self.metric_names:  # a subclass's slip, caught before it is logged
            raise RuntimeError(f"{type(self).__name__} computed {tuple(out)}, "
                               f"declared {self.metric_names}")
        return out

    def length(self, example) -> int:
        """Token count of the example's longest sentence, at least 1 (for length bucketing)."""
        raise NotImplementedError

    def collate(self, examples: Sequence, vocab) -> dict[str, torch.Tensor]:
        """A batch of tensors from a list of examples; ids through vocab.encode."""
        raise NotImplementedError

    def build_model(self, embedding: nn.Embedding, make_encoder: MakeEncoder, hidden: int = 300,
                    dropout: float = 0.0, **kw) -> nn.Module:
        """The model: embedding -> make_encoder(d) encoder(s) -> the family's head.
        model(batch) -> output (see the family's loss/predict)."""
        raise NotImplementedError

    def loss(self, output: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Scalar loss, the mean over the batch."""
        raise NotImplementedError

    def predict(self, output: torch.Tensor) -> torch.Tensor:
        """[B] predictions (class ids or scores) from the model's output."""
        raise NotImplementedError

    def target(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """[B] gold values (class ids or scores), comparable with predict()."""
        return batch["label"]

    def compute_metrics(self, predictions, targets) -> dict[str, float]:
        """{name: value} over a whole split, in metric_names order."""
        raise NotImplementedError


class ClassIdTask(Task):
    """A task whose model scores classes (or candidates): cross-entropy, argmax, accuracy."""

    metric_names = ("accuracy",)
    main_metric = "accuracy"
    higher_is_better = True

    def loss(self, output: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Cross-entropy of output [B, C] (-inf where a candidate does not exist) and "label"."""
        return F.cross_entropy(output, batch["label"])

    def predict(self, output: torch.Tensor) -> torch.Tensor:
        return output.argmax(dim=-1)

    def compute_metrics(self, predictions, targets) -> dict[str, float]:
        return {"accuracy": accuracy(predictions, targets)}


class PairModel(nn.Module):
    """A sentence pair through ONE encoder, the two sentence vectors combined, then a head.

    forward(batch) with "ids1", "mask1" [B, n1] and "ids2", "mask2" [B, n2] -> head output;
    features(batch) -> combine(s1, s2), the head's input. Subclasses set combine.
    """

    combine: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

    def __init__(self, embedding: nn.Embedding, encoder: nn.Module, head: nn.Module):
        super().__init__()
        self.embedding = embedding
        self.encoder = encoder
        self.head = head

    def features(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return type(self).combine(*encode_pair(self.embedding, self.encoder, batch))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.features(batch))


# ----------------------------------------------------------------------------- shared helpers


def check_model_args(embedding, make_encoder, hidden: int, dropout: float) -> None:
    """Raise TypeError/ValueError naming the bad build_model argument, before any layer is built."""
    if not isinstance(embedding, nn.Embedding):
        raise TypeError(f"embedding must be a torch.nn.Embedding, got {type(embedding).__name__}")
    if not callable(make_encoder):
        raise TypeError(f"make_encoder must be callable (d_in -> encoder), got {make_encoder!r}")
    if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
        raise ValueError(f"hidden must be an int >= 1, got {hidden!r}")
    if not (isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0):
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")


def built_encoder(make_encoder: MakeEncoder, d_in: int) -> SentenceEncoder:
    """make_encoder(d_in), checked to be a module with token_dim and sentence_dim."""
    encoder = make_encoder(d_in)
    if not isinstance(encoder, nn.Module):
        raise TypeError(f"make_encoder({d_in}) must return a torch.nn.Module, "
                        f"got {type(encoder).__name__}")
    for attr in ("token_dim", "sentence_dim"):
        if not isinstance(getattr(encoder, attr, None), int):
            raise TypeError(f"make_encoder({d_in}) returned {type(encoder).__name__} without an "
                            f"int {attr}; build it with blosa.nn.build_encoder")
    return encoder


def embed_and_encode(embedding: nn.Embedding, encoder: nn.Module, ids: torch.Tensor,
                     mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode a padded batch of token ids.

    Shapes: ids [B, n] long (0 = padding), mask [B, n] bool (True = real token) ->
    tokens [B, n, token_dim] (0 at padding), sentence [B, sentence_dim].
    """
    if ids.dim() != 2 or mask.shape != ids.shape:
        raise ValueError(f"ids and mask must both be [B, n], got ids {tuple(ids.shape)}, "
                         f"mask {tuple(mask.shape)}")
    return encoder(embedding(ids), mask)


def encode_ids(vocab, tokens_list: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """ids [B, n] long, mask [B, n] bool for B token sequences (vocab.encode, then pad_ids)."""
    return pad_ids([vocab.encode(tokens) for tokens in tokens_list])


def check_examples(examples: Sequence, cls: type, family: str) -> None:
    """Raise TypeError/ValueError unless examples is a non-empty sequence of cls."""
    if len(examples) == 0:
        raise ValueError(f"{family}: collate needs at least one example, got none")
    for i, ex in enumerate(examples):
        if not isinstance(ex, cls):
            raise TypeError(f"{family}: example {i} must be a {cls.__name__}, "
                            f"got {type(ex).__name__}")


def check_class_labels(labels: Sequence, num_classes: int | None, family: str) -> torch.Tensor:
    """[B] long class ids, each an int in [0, num_classes) (any int >= 0 for num_classes None)."""
    for i, y in enumerate(labels):
        if isinstance(y, bool) or not isinstance(y, numbers.Integral):
            raise ValueError(f"{family}: example {i} has label {y!r}, not a class index (int)")
        if y < 0 or (num_classes is not None and y >= num_classes):
            bound = f"[0, {num_classes})" if num_classes is not None else ">= 0"
            raise ValueError(f"{family}: example {i} has label {y!r}, outside {bound}")
    return torch.tensor([int(y) for y in labels], dtype=torch.long)


def check_num_classes(num_classes, family: str, minimum: int = 2) -> int:
    """num_classes as an int >= minimum, or ValueError naming it."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < minimum:
        raise ValueError(f"{family}: num_classes must be an int >= {minimum}, got {num_classes!r}")
    return num_classes


def is_finite_number(x) -> bool:
    """True for a real number (not bool) that is finite."""
    return not isinstance(x, bool) and isinstance(x, numbers.Real) and math.isfinite(x)


def collate_pair_ids(examples: Sequence, vocab) -> dict[str, torch.Tensor]:
    """{"ids1", "mask1"} of the examples' first sentences, {"ids2", "mask2"} of their second,
    each [B, n_i] (every side padded to its own longest sentence)."""
    ids1, mask1 = encode_ids(vocab, [ex.first for ex in examples])
    ids2, mask2 = encode_ids(vocab, [ex.second for ex in examples])
    return {"ids1": ids1, "mask1": mask1, "ids2": ids2, "mask2": mask2}


def encode_pair(embedding: nn.Embedding, encoder: nn.Module,
                batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Sentence vectors s1, s2 [B, sentence_dim] of a pair batch through ONE encoder.

    Two encoder calls rather than one on the stacked sides: each side keeps its own padded
    length (no extra padding, and block_len="auto" sees the same n as for that side alone).
    """
    _, s1 = embed_and_encode(embedding, encoder, batch["ids1"], batch["mask1"])
    _, s2 = embed_and_encode(embedding, encoder, batch["ids2"], batch["mask2"])
    return s1, s2
