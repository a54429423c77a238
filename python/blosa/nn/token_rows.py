"""Which rows a model computes its per-token layers on: every position of the padded batch, or
only the real tokens ("packed"), which skips the matmuls of padding."""
from __future__ import annotations

import torch

from blosa._functorch import transform_active

# Pack when at least this fraction of the positions is padding: below, the gathers and scatters
# cost more than the padding's matmuls save.
PACK_FROM_PADDING = 0.125


def packing_allowed(x: torch.Tensor) -> bool:
    """Whether this call may pack its tokens: eager, on the CPU. nonzero's data-dependent shape
    has no place in a compiled, exported, traced or functorch-transformed graph, and on CUDA it
    syncs with the host (not measured yet: CUDA keeps the padded rows)."""
    return (x.device.type == "cpu" and not torch.jit.is_tracing() and not torch.compiler.is_compiling()
            and not transform_active())


class TokenRows:
    """The rows [..., N, f] of a batch's tokens: all B*n positions (packed=False) or the real ones.

    mask [B, n] bool. rows(t [..., B, n, f]) -> [..., N, f]; padded(t [..., N, f]) -> [..., B, n, f]
    (packed: 0 at padding; not packed: a view, padding rows as computed). Per-token layers run on
    rows; attention over positions runs on padded tensors.
    """

    def __init__(self, mask: torch.Tensor, packed: bool | None = None):
        self.mask = mask
        self.B, self.n = mask.shape
        if packed is None:
            packed = packing_allowed(mask) and mask.numel() > 0 and \
                int(mask.sum()) <= (1 - PACK_FROM_PADDING) * mask.numel()
        self.packed = packed
        self.index = mask.flatten().nonzero().squeeze(1) if packed else None  # [N] flat positions

    def rows(self, t: torch.Tensor) -> torch.Tensor:
        t = t.flatten(-3, -2)
        return t.index_select(-2, self.index) if self.packed else t

    def padded(self, t: torch.Tensor) -> torch.Tensor:
        if self.packed:
            t = t.new_zeros(*t.shape[:-2], self.B * self.n, t.shape[-1]).index_copy(-2, self.index, t)
        return t.unflatten(-2, (self.B, self.n))

    def zero_padding(self, t: torch.Tensor) -> torch.Tensor:
        """t [..., N, f] with the padding rows (none when packed) exactly 0."""
        return t if self.packed else t.masked_fill(~self.mask.flatten()[:, None], 0.0)

    def add_blocks(self, t: torch.Tensor, blocks: torch.Tensor, r: int, m: int) -> torch.Tensor:
        """t [..., N, f] + blocks [..., B*m, f] at each row's block (tokens l*r .. l*r + r - 1 of a
        sentence are its block l): a broadcast over the block's r rows where they are contiguous,
        else a gather."""
        B, n = self.B, self.n
        if not self.packed and isinstance(n, int) and n == m * r:  # not a traced or symbolic n
            return (t.unflatten(-2, (B * m, r)) + blocks.unsqueeze(-2)).flatten(-3, -2)
        device = t.device
        block = (torch.arange(B, device=device)[:, None] * m
                 + torch.div(torch.arange(n, device=device), r, rounding_mode="floor")).flatten()  # [B*n]
        if self.packed:
            block = block.index_select(0, self.index)
        return t + blocks.index_select(-2, block)
