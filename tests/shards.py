"""Splitting a pytest run into shards (tests/conftest.py): BLOSA_TEST_SHARD=i/k, the i-th of k
contiguous slices of the collected tests, and BLOSA_TEST_STRIDE=i/k, every k-th test from the i-th
(a sample of every file)."""


def shard_bounds(spec: str, count: int) -> tuple[int, int]:
    """[start, stop) of the items shard `spec` ("i/k": the i-th of k contiguous slices, from 0)
    runs out of `count`. Contiguous, so a shard's neighbouring parametrizations share compiled
    kernels. Raises ValueError naming the bad spec."""
    i, k = _parse(spec, "BLOSA_TEST_SHARD")
    return count * i // k, count * (i + 1) // k


def stride_indices(spec: str, count: int) -> range:
    """The indices of the items stride `spec` ("i/k": every k-th from the i-th, from 0) runs out
    of `count`: the k strides run every test once, and each takes its share of every file's
    tests (CI runs the Triton interpreter suite so, half under each supported triton).
    Raises ValueError naming the bad spec."""
    i, k = _parse(spec, "BLOSA_TEST_STRIDE")
    return range(i, count, k)


def _parse(spec: str, name: str) -> tuple[int, int]:
    try:
        i, k = (int(part) for part in spec.split("/"))
    except ValueError:
        i, k = -1, 0
    if not 0 <= i < k:
        raise ValueError(f"{name} must be 'i/k' with 0 <= i < k, got {spec!r}")
    return i, k
