"""One measurable encoder case: which encoder, at what sizes, on what backend and device.

A case is plain data (picklable), so that a child process can build it again: the memory of a
CPU case is measured in a process of its own (blosa.bench.child).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import nn

from blosa.nn import ATTENTION_ENCODERS, ENCODERS, build_encoder
from blosa.nn.layers import check_width
from blosa.ops import BACKENDS

# The encoders of the paper's Table 2 and Figure 3, in its order.
PAPER_ENCODERS = ("bilstm", "bigru", "bisru", "multi_cnn", "hrchy_cnn", "multi_head", "disan", "biblosan")
LABELS = {"bilstm": "Bi-LSTM", "bigru": "Bi-GRU", "bisru": "Bi-SRU", "multi_cnn": "Multi-CNN",
          "hrchy_cnn": "Hrchy-CNN", "multi_head": "Multi-head", "disan": "DiSAN", "biblosan": "Bi-BloSAN"}
# Hidden units of the paper's SNLI models (section 4.1): 600D baselines (300 a direction), and the
# 480D Bi-BloSAN (240 a direction) that it sized to the baselines' parameter counts.
PAPER_HIDDEN = {"biblosan": 240}
DEFAULT_HIDDEN = 300
MODES = ("inference", "train")
NUM_CLASSES = 3  # the training step's linear head: SNLI's three classes


def paper_hidden(name: str) -> int:
    """The paper's hidden size for encoder `name` (240 for Bi-BloSAN, 300 for the others)."""
    return PAPER_HIDDEN.get(name, DEFAULT_HIDDEN)


@dataclass(frozen=True)
class EncoderCase:
    """An encoder on a random batch: x [B, n, d] ~ N(0, 1), right-padded to random lengths in
    [1, n] with the longest exactly n (so the padded length is n), mask [B, n] bool.

    hidden None: the paper's (paper_hidden). backend: the masked_block_attn backend of the
    attention encoders ("auto" for the fused op; "reference" materializes the n x n x d scores);
    the other encoders take "auto" only. dropout: of the encoder's dense layers, in training only.
    """

    name: str
    B: int
    n: int
    d: int = 300
    hidden: int | None = None
    backend: str = "auto"
    device: str = "cpu"
    seed: int = 0
    dropout: float = 0.0

    def __post_init__(self):
        if self.name not in ENCODERS:
            raise ValueError(f"name must be an encoder of blosa.nn.ENCODERS {sorted(ENCODERS)}, "
                             f"got {self.name!r}")
        for field in ("B", "n", "d"):
            check_width(field, getattr(self, field))
        if self.hidden is not None:
            check_width("hidden", self.hidden)
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.backend != "auto" and self.name not in ATTENTION_ENCODERS:
            raise ValueError(f"backend={self.backend!r} needs an attention encoder {ATTENTION_ENCODERS}; "
                             f"{self.name!r} has no masked_block_attn")
        if not isinstance(self.device, str) or self.device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {self.device!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    @property
    def hidden_size(self) -> int:
        return paper_hidden(self.name) if self.hidden is None else self.hidden

    @property
    def label(self) -> str:
        """A short name for tables and errors, e.g. 'disan[reference] B=8 n=64'."""
        backend = "" if self.backend == "auto" else f"[{self.backend}]"
        return f"{self.name}{backend} B={self.B} n={self.n}"

    def replace(self, **changes) -> EncoderCase:
        return dataclasses.replace(self, **changes)


@dataclass
class BuiltCase:
    """A case's tensors and modules, on its device. x: [B, n, d]; mask: [B, n] bool; labels: [B]."""

    case: EncoderCase
    encoder: nn.Module
    head: nn.Linear
    x: torch.Tensor
    mask: torch.Tensor
    labels: torch.Tensor

    def static_bytes(self) -> int:
        """Bytes the case holds before any step: parameters and inputs."""
        tensors = [*self.encoder.parameters(), *self.head.parameters(), self.x, self.mask, self.labels]
        return sum(t.numel() * t.element_size() for t in tensors)


def random_lengths(B: int, n: int, generator: torch.Generator) -> torch.Tensor:
    """Lengths [B] (int64) uniform in [1, n], one of them (at a random place) exactly n."""
    lengths = torch.randint(1, n + 1, (B,), generator=generator)
    lengths[torch.randint(0, B, (1,), generator=generator)] = n
    return lengths


def build_case(case: EncoderCase) -> BuiltCase:
    """The encoder (Glorot init from case.seed), a linear head to NUM_CLASSES, and the batch."""
    generator = torch.Generator().manual_seed(case.seed)
    torch.manual_seed(case.seed)  # the encoder's and head's initialization
    encoder = build_encoder(case.name, d_in=case.d, hidden=case.hidden_size, dropout=case.dropout,
                            **({"backend": case.backend} if case.name in ATTENTION_ENCODERS else {}))
    head = nn.Linear(encoder.sentence_dim, NUM_CLASSES)
    lengths = random_lengths(case.B, case.n, generator)
    x = torch.randn(case.B, case.n, case.d, generator=generator)
    mask = torch.arange(case.n)[None, :] < lengths[:, None]
    labels = torch.randint(0, NUM_CLASSES, (case.B,), generator=generator)
    device = torch.device(case.device)
    return BuiltCase(case, encoder.to(device), head.to(device), x.to(device), mask.to(device),
                     labels.to(device))
