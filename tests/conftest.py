import os
import sys

import pytest

# tests/ helpers (attn_cases.py) importable from every test module.
sys.path.insert(0, os.path.dirname(__file__))

from shards import shard_bounds, stride_indices  # noqa: E402

# The Triton tests run in their own pytest process (see the Makefile): the interpreter must be
# switched on before triton is first imported, which this process may already have done.
collect_ignore = ["triton"]


def pytest_collection_modifyitems(config, items):
    # BLOSA_TEST_SHARD=i/k runs one slice of the collected tests, so that several pytest
    # processes share a suite (bench/gpu_tools/gpu_check.sh runs the Triton GPU tests so: they
    # spend their time compiling kernels, one CPU core a process). BLOSA_TEST_STRIDE=i/k runs
    # every k-th test instead (CI: half the Triton interpreter suite under each triton).
    shard, stride = os.environ.get("BLOSA_TEST_SHARD"), os.environ.get("BLOSA_TEST_STRIDE")
    if not shard and not stride:
        return
    try:
        if shard and stride:
            raise ValueError("set BLOSA_TEST_SHARD or BLOSA_TEST_STRIDE, not both")
        if shard:
            start, stop = shard_bounds(shard, len(items))
            keep = range(start, stop)
        else:
            keep = stride_indices(stride, len(items))
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None
    kept = set(keep)
    config.hook.pytest_deselected(items=[item for i, item in enumerate(items) if i not in kept])
    items[:] = [items[i] for i in keep]
