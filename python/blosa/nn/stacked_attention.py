"""g^m(x, M) for several directions at once: stacked weights, one matmul for all their W1|W2."""
from __future__ import annotations

import torch
from torch import nn

from blosa._validate import check_direction, check_scale
from blosa.nn.layers import check_width
from blosa.nn.stacked import StackedDense
from blosa.nn.token_rows import TokenRows
from blosa.nn.masked_attention import BackendChoice
from blosa.ops import masked_block_attn


class StackedMaskedAttention(BackendChoice, nn.Module):
    """MaskedAttention (the same math) for k directions with their own parameters: direction i's
    s_j = sum_i P^j_i * x_i, P^j = softmax_i(c tanh((W1 x_i + W2 x_j + b1) / c) + M_ij).

    The k directions' W1 and W2 are one batched matmul (one dropout mask for W1 and W2 of a
    direction, as MaskedAttention); masked_block_attn then runs once per direction (its direction
    is a scalar argument).

    Parameters: proj.weight [k, 2, d, d] (W1 then W2, as x @ W), bias [k, d] (b1, zeros).
    Shapes: x [k, N, d] (the rows of `rows`) -> s [k, N, d].
    """

    def __init__(self, d: int, directions: tuple[str, ...], scale: float = 5.0, dropout: float = 0.0,
                 backend: str = "auto"):
        super().__init__()
        check_width("d", d)
        for direction in directions:
            check_direction(direction)
        check_scale(scale)
        self.d, self.directions, self.scale, self.backend = d, tuple(directions), scale, backend
        self.proj = StackedDense(len(directions), 2, d, d, bias=False, dropout=dropout, shared_dropout=True)
        self.bias = nn.Parameter(torch.zeros(len(directions), d))

    def extra_repr(self) -> str:
        return f"directions={self.directions!r}, scale={self.scale}, backend={self.backend!r}"

    def forward(self, x: torch.Tensor, rows: TokenRows, block_len: int = 0) -> torch.Tensor:
        dep_head = rows.padded(self.proj(x))  # [k, 2, B, n, d]
        value = rows.padded(x)  # [k, B, n, d]
        # unbind, not indexing: one backward op, not a zeroed copy a slice
        out = [masked_block_attn(*dh.unbind(0), v, b, rows.mask, block_len, direction, self.scale, self.backend)
               for dh, v, b, direction in zip(dep_head.unbind(0), value.unbind(0), self.bias.unbind(0),
                                              self.directions)]
        return rows.rows(torch.stack(out))
