"""g^m(x, M): the paper's masked self-attention (section 2.4), optionally inside blocks."""
from __future__ import annotations

import torch
from torch import nn

from blosa.nn.dropout import Dropout
from blosa._validate import check_direction, check_scale
from blosa.nn.layers import Dense, check_width, checked_mask
from blosa.ops import BACKENDS, masked_block_attn


class BackendChoice:
    """A `backend` attribute checked against blosa.ops.BACKENDS when set (the attention modules'
    kernel choice; blosa.nn.set_backend sets it across a model)."""

    @property
    def backend(self) -> str:
        return self._backend

    @backend.setter
    def backend(self, value: str) -> None:
        if value not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {value!r}")
        self._backend = value


class MaskedAttention(BackendChoice, nn.Module):
    """s_j = sum_i P^j_i * x_i, P^j = softmax_i(c tanh((W1 x_i + W2 x_j + b1) / c) + M_ij).

    W1, W2 [d, d] without bias (b1 [d], zero-initialized, plays the bias); the values are the
    input x itself. M is the `direction` mask restricted to blocks of `block_len` tokens
    (0 = one block, the whole sequence) and to real tokens. A query with no allowed key gets 0.
    `backend` picks the kernel of blosa.masked_block_attn; "reference" runs the plain PyTorch
    oracle with the same parameters.

    Shapes: x [B, n, d], mask [B, n] bool (None: every token real) -> s [B, n, d].
    """

    def __init__(self, d: int, direction: str, scale: float = 5.0, dropout: float = 0.0,
                 backend: str = "auto"):
        super().__init__()
        check_width("d", d)
        check_direction(direction)
        check_scale(scale)
        self.d = d
        self.direction = direction
        self.scale = scale
        self.backend = backend
        self.dropout = Dropout(dropout) if dropout > 0 else nn.Identity()
        self.w1 = Dense(d, d, bias=False)  # key side ("dependent")
        self.w2 = Dense(d, d, bias=False)  # query side ("head")
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, block_len: int = 0) -> torch.Tensor:
        mask = checked_mask(x, mask, self.d)
        xd = self.dropout(x)  # one dropout mask shared by both projections, as in the authors' code
        return masked_block_attn(self.w1(xd), self.w2(xd), x, self.bias, mask, block_len,
                                 self.direction, self.scale, self.backend)

    def extra_repr(self) -> str:
        return f"direction={self.direction!r}, scale={self.scale}, backend={self.backend!r}"
