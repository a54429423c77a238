"""Block length r of mBloSA (paper Appendix A).

For a fixed length n the memory r^2 (n/r) + (n/r)^2 is least at r = cbrt(2n). For lengths
distributed N(mu, sigma^2) and batches of B sentences, the expected longest sentence of a batch
is at most sigma sqrt(2 ln B) + mu, so r = cbrt(2 (sigma sqrt(2 ln B) + mu)). Both are rounded up.
(The authors' code adds 1 more: ceil(cbrt(2 n_est)) + 1.)
"""
from __future__ import annotations

import math
import numbers


def _ceil_cbrt(x: float) -> int:
    """ceil(cbrt(x)) for x > 0, exact when x is a perfect cube (27 -> 3, not 4)."""
    r = max(1, math.ceil(x ** (1.0 / 3.0)))
    while r > 1 and (r - 1) ** 3 >= x:  # float cbrt may land a hair above an integer
        r -= 1
    while r ** 3 < x:
        r += 1
    return r


def block_len_for_length(n: int) -> int:
    """r = ceil(cbrt(2n)) for a padded length n >= 1 (what block_len="auto" uses)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return _ceil_cbrt(2 * n)


def block_len_for_dataset(mean: float, std: float, batch_size: int) -> int:
    """Appendix A: r = ceil(cbrt(2 (std * sqrt(2 ln batch_size) + mean))).

    Args:
        mean, std: mean and standard deviation of the training sentence lengths.
        batch_size: B, the training batch size (>= 1; B = 1 gives cbrt(2 mean)).
    """
    if not (math.isfinite(mean) and mean > 0):
        raise ValueError(f"mean must be a positive finite number, got {mean}")
    if not (math.isfinite(std) and std >= 0):
        raise ValueError(f"std must be a finite number >= 0, got {std}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    n_est = std * math.sqrt(2.0 * math.log(int(batch_size))) + mean  # numpy's ints too
    return _ceil_cbrt(2.0 * n_est)


def resolve_block_len(block_len: int | str, n: int) -> int:
    """The r used for a batch of padded length n: "auto" -> ceil(cbrt(2n)); an int >= 1 as is."""
    if block_len == "auto":
        return block_len_for_length(n)
    if isinstance(block_len, bool) or not isinstance(block_len, numbers.Integral) or block_len < 1:
        raise ValueError(f'block_len must be "auto" or an int >= 1, got {block_len!r}')
    return int(block_len)  # numpy's ints too
