"""Plain PyTorch reference of masked block self-attention: the oracle for every backend.

It materializes the [B, n, n, d] score tensor, so it is only for checking numerics and for
small inputs. The fused backends compute exactly this without that tensor.
"""
from __future__ import annotations

import torch

from blosa._validate import check_attn_args


def resolve_block_len(block_len: int, n: int) -> int:
    """Block length actually used: `block_len <= 0` or `>= n` means one block of length n."""
    return n if block_len <= 0 or block_len >= n else block_len


def allowed_pairs(mask: torch.Tensor, r: int, direction: str) -> torch.Tensor:
    """Which (query j, key i) pairs of each block may attend.

    Args:
        mask: [B, m, r] bool, True for real tokens (block-padding positions are False).
        r: block length.
        direction: "forward" i < j, "backward" i > j, "diag" i != j, "all" always.

    Returns:
        [B, m, r(j), r(i)] bool.
    """
    pos = torch.arange(r, device=mask.device)
    j, i = pos[:, None], pos[None, :]
    rule = {"forward": i < j, "backward": i > j, "diag": i != j, "all": (i >= 0) & (j >= 0)}[direction]
    return rule & mask[..., :, None] & mask[..., None, :]


def masked_block_attn_ref(
    dep: torch.Tensor,
    head: torch.Tensor,
    value: torch.Tensor,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    block_len: int = 0,
    direction: str = "forward",
    scale: float = 5.0,
) -> torch.Tensor:
    """Feature-level masked additive self-attention inside blocks, written plainly.

    Args:
        dep: [B, n, d] key-side term W1 x_i.
        head: [B, n, d] query-side term W2 x_j.
        value: [B, n, d] values x_i.
        bias: [d] b1, or None for zeros.
        mask: [B, n] bool, True for real tokens; None means all real.
        block_len: r; `<= 0` or `>= n` means one block over the whole sequence.
        direction: "forward", "backward", "diag" or "all".
        scale: c in c * tanh(z / c); positive, within _validate.SCALE_RANGE as for the op.

    Returns:
        out: [B, n, d], where out[b, j, k] = sum_i softmax_i(c tanh((dep[b,i,k] + head[b,j,k]
        + bias[k]) / c)) * value[b, i, k] over the allowed keys i of j's block; exactly 0 for a
        query with no allowed key.
    """
    check_attn_args(dep, head, value, bias, mask, block_len, direction, scale)
    B, n, d = dep.shape
    r = max(resolve_block_len(block_len, n), 1)  # n = 0: no block, but no division by 0 either
    m = -(-n // r)
    if mask is None:
        mask = torch.ones(B, n, dtype=torch.bool, device=dep.device)
    else:
        # Padding is no key and no query, so what it holds (padded batches hold garbage, inf or
        # NaN among it) must not reach the result, as in the CPU and CUDA kernels, which never
        # use it: a probability of 0 times an inf would still be NaN. Zeroed here, padding also
        # gets exactly 0 gradient (masked_fill's).
        pad = ~mask[..., None]
        dep, head, value = (t.masked_fill(pad, 0.0) for t in (dep, head, value))

    def blocks(t: torch.Tensor) -> torch.Tensor:  # [B, n, ...] -> [B, m, r, ...], zero-padded
        pad = [0, 0] * (t.dim() - 2) + [0, m * r - n]
        return torch.nn.functional.pad(t, pad).reshape(B, m, r, *t.shape[2:])

    z = blocks(dep)[:, :, None, :, :] + blocks(head)[:, :, :, None, :]  # [B, m, r(j), r(i), d]
    if bias is not None:
        z = z + bias
    logits = scale * torch.tanh(z / scale)
    pairs = allowed_pairs(blocks(mask), r, direction)[..., None]
    # A query with no key has an all -inf row; softmax would give NaN there, so give it a
    # harmless finite row and zero its output afterwards.
    has_key = pairs.any(dim=3, keepdim=True)
    logits = logits.masked_fill(~pairs, float("-inf")).masked_fill(~has_key, 0.0)
    probs = torch.softmax(logits, dim=3)
    out = (probs * blocks(value)[:, :, None, :, :]).sum(dim=3)  # [B, m, r, d]
    # masked_fill, not a product with has_key: it also stops the upstream gradient there (a
    # later layer may leave inf or NaN at padding), which 0 · g would let through.
    out = out.masked_fill(~has_key[:, :, :, 0], 0.0)
    return out.reshape(B, m * r, d)[:, :n]
