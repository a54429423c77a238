import os
import sys

import pytest

# tests/ helpers (attn_cases.py) importable from every test module.
sys.path.insert(0, os.path.dirname(__file__))

from shards import shard_bounds  # noqa: E402

# The Triton tests run in their own pytest process (see the Makefile): the interpreter must be
# switched on before triton is first imported, which this process may already have done.
collect_ignore = ["triton"]


def pytest_collection_modifyitems(config, items):
    # BLOSA_TEST_SHARD=i/k runs one slice of the collected tests, so that several pytest
    # processes share a suite (bench/gpu_check.sh runs the Triton GPU tests so: they spend their
    # time compiling kernels, one CPU core a process).
    spec = os.environ.get("BLOSA_TEST_SHARD")
    if not spec:
        return
    try:
        start, stop = shard_bounds(spec, len(items))
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None
    config.hook.pytest_deselected(items=items[:start] + items[stop:])
    items[:] = items[start:stop]
