"""Splitting a pytest run into shards: BLOSA_TEST_SHARD=i/k (tests/conftest.py)."""


def shard_bounds(spec: str, count: int) -> tuple[int, int]:
    """[start, stop) of the items shard `spec` ("i/k": the i-th of k contiguous slices, from 0)
    runs out of `count`. Contiguous, so a shard's neighbouring parametrizations share compiled
    kernels. Raises ValueError naming the bad spec."""
    try:
        i, k = (int(part) for part in spec.split("/"))
    except ValueError:
        i, k = -1, 0
    if not 0 <= i < k:
        raise ValueError(f"BLOSA_TEST_SHARD must be 'i/k' with 0 <= i < k, got {spec!r}")
    return count * i // k, count * (i + 1) // k
