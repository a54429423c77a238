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


def allowed_pairs(
    mask: torch.Tensor | None, n: int, block_len: int, direction: str, batch: int,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Which (query j, key i) pairs may attend. Returns a bool tensor [B, n(j), n(i)].

    Query j may attend key i iff both lie in the same block of length `block_len` (the last
    block may be shorter), both are real tokens, and the direction rule holds:
    "forward" i < j, "backward" i > j, "diag" i != j, "all" always.
    """
    r = resolve_block_len(block_len, n)
    pos = torch.arange(n, device=device)
    j, i = pos[:, None], pos[None, :]
    same_block = (i // r) == (j // r)
    rule = {
        "forward": i < j,
        "backward": i > j,
        "diag": i != j,
        "all": torch.ones(n, n, dtype=torch.bool, device=device),
    }[direction]
    pairs = (same_block & rule).expand(batch, n, n)
    if mask is not None:
        pairs = pairs & mask[:, :, None] & mask[:, None, :]
    return pairs


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
        scale: c in c * tanh(z / c); finite and positive.

    Returns:
        out: [B, n, d], where out[b, j, k] = sum_i softmax_i(c tanh((dep[b,i,k] + head[b,j,k]
        + bias[k]) / c)) * value[b, i, k] over the allowed keys i; exactly 0 for a query with
        no allowed key.
    """
    check_attn_args(dep, head, value, bias, mask, block_len, direction, scale)
    B, n, d = dep.shape
    z = dep[:, None, :, :] + head[:, :, None, :]  # [B, n(j), n(i), d]
    if bias is not None:
        z = z + bias
    logits = scale * torch.tanh(z / scale)
    pairs = allowed_pairs(mask, n, block_len, direction, B, dep.device)[..., None]
    logits = logits.masked_fill(~pairs, float("-inf"))
    # A query with no key has an all -inf row; softmax would give NaN there, so give it a
    # harmless finite row and zero its output afterwards.
    has_key = pairs.any(dim=2, keepdim=True)
    probs = torch.softmax(logits.masked_fill(~has_key, 0.0), dim=2) * has_key
    return (probs * value[:, None, :, :]).sum(dim=2)
