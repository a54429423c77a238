"""BLOSA_TEST_SHARD=i/k and BLOSA_TEST_STRIDE=i/k (tests/shards.py, tests/conftest.py): k shards,
or k strides, run every test once."""
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from shards import shard_bounds, stride_indices

TESTS = Path(__file__).resolve().parent


def test_shards_partition_the_items_in_order():
    rng = random.Random()
    for count in [0, 1, 2, 7, rng.randrange(3, 500)]:
        for k in range(1, 9):
            bounds = [shard_bounds(f"{i}/{k}", count) for i in range(k)]
            assert bounds[0][0] == 0 and bounds[-1][1] == count, (count, k, bounds)
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:])), (count, k, bounds)
            sizes = [stop - start for start, stop in bounds]
            assert max(sizes) - min(sizes) <= 1, (count, k, sizes)


@pytest.mark.parametrize("spec", ["3/3", "-1/2", "1/0", "a/b", "1", "1/2/3", ""])
def test_bad_specs_are_refused_by_name(spec):
    with pytest.raises(ValueError, match="BLOSA_TEST_SHARD must be 'i/k'"):
        shard_bounds(spec, 10)


def test_strides_partition_the_items():
    rng = random.Random()
    for count in [0, 1, 2, 7, rng.randrange(3, 500)]:
        for k in range(1, 9):
            strides = [list(stride_indices(f"{i}/{k}", count)) for i in range(k)]
            assert sorted(i for s in strides for i in s) == list(range(count)), (count, k)
            assert all(s == sorted(s) and all(b - a == k for a, b in zip(s, s[1:]))
                       for s in strides), (count, k, strides)


@pytest.mark.parametrize("spec", ["2/2", "-1/2", "x", ""])
def test_bad_strides_are_refused_by_name(spec):
    with pytest.raises(ValueError, match="BLOSA_TEST_STRIDE must be 'i/k'"):
        stride_indices(spec, 10)


def collected(shard=None, variable="BLOSA_TEST_SHARD", **more):
    env = {k: v for k, v in os.environ.items()
           if k not in ("BLOSA_TEST_SHARD", "BLOSA_TEST_STRIDE")}
    env.update(more)
    if shard is not None:
        env[variable] = shard
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                          "no:cacheprovider", str(TESTS / "test_op_errors.py")],
                         capture_output=True, text=True, env=env, cwd=TESTS.parent, timeout=300)
    return run, [line for line in run.stdout.splitlines() if "::" in line]


@pytest.fixture(scope="module")
def whole():
    """The test ids of a whole run (each collection is a pytest process: seconds)."""
    names = collected()[1]
    assert len(names) > 10
    return names


def test_a_run_in_shards_collects_each_test_once(whole):
    k = random.randrange(2, 4)
    parts = [collected(f"{i}/{k}")[1] for i in range(k)]
    assert all(parts), [len(p) for p in parts]
    assert [name for part in parts for name in part] == whole


def test_a_run_in_strides_collects_each_test_once(whole):
    k = random.randrange(2, 4)
    parts = [collected(f"{i}/{k}", "BLOSA_TEST_STRIDE")[1] for i in range(k)]
    assert parts == [whole[i::k] for i in range(k)]


def test_shard_and_stride_together_are_a_usage_error():
    run, _ = collected("0/2", BLOSA_TEST_STRIDE="1/2")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "not both" in run.stdout + run.stderr


def test_a_bad_shard_is_a_usage_error():
    run, _ = collected("2/2")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "BLOSA_TEST_SHARD must be 'i/k'" in run.stdout + run.stderr
