"""blosa.tasks.metrics against independent numpy/scipy computations on random data."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats
import torch

from blosa.tasks.metrics import accuracy, mse, pearson, spearman

METRICS = {"accuracy": accuracy, "pearson": pearson, "spearman": spearman, "mse": mse}


def _random_scores(rng: np.random.Generator, n: int, ties: bool) -> np.ndarray:
    """n scores; with ties, drawn from few values so that ranks tie often."""
    if ties:
        return rng.integers(0, max(2, n // 3), size=n).astype(np.float64)
    return rng.normal(size=n)


@pytest.mark.parametrize("seed", range(6))
def test_accuracy_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    pred, target = rng.integers(0, 4, size=n), rng.integers(0, 4, size=n)
    expected = np.mean(pred == target)
    got = accuracy(torch.from_numpy(pred), torch.from_numpy(target))
    assert isinstance(got, float)
    assert got == pytest.approx(expected, abs=1e-15), seed
    assert accuracy(pred.tolist(), target.tolist()) == got  # lists too


@pytest.mark.parametrize("seed", range(6))
def test_pearson_matches_corrcoef(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 300))
    target = rng.normal(size=n)
    pred = target * rng.uniform(-1, 1) + rng.normal(size=n)
    got = pearson(torch.from_numpy(pred).float(), torch.from_numpy(target).float())
    assert isinstance(got, float)
    expected = np.corrcoef(pred.astype(np.float32), target.astype(np.float32))[0, 1]
    assert got == pytest.approx(expected, abs=1e-6), seed


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [False, True])
def test_spearman_is_pearson_of_ranks(seed, ties):
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(3, 300))
    pred, target = _random_scores(rng, n, ties), _random_scores(rng, n, ties)
    if ties:
        assert len(np.unique(pred)) < n  # the case really has ties
    expected = np.corrcoef(scipy.stats.rankdata(pred), scipy.stats.rankdata(target))[0, 1]
    got = spearman(pred, target)
    assert isinstance(got, float)
    assert got == pytest.approx(expected, abs=1e-12), seed


@pytest.mark.parametrize("seed", range(6))
def test_mse_matches_numpy(seed):
    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(1, 300))
    pred, target = rng.normal(size=n), rng.uniform(1, 5, size=n)
    got = mse(torch.from_numpy(pred), torch.from_numpy(target))
    assert isinstance(got, float)
    assert got == pytest.approx(np.mean((pred - target) ** 2), rel=1e-12), seed


def test_per_batch_tensors_are_concatenated():
    rng = np.random.default_rng(7)
    pred, target = rng.normal(size=50), rng.normal(size=50)
    parts = [torch.from_numpy(pred[:20]), torch.from_numpy(pred[20:])]
    tparts = [torch.from_numpy(target[:33]), torch.from_numpy(target[33:])]
    for name, fn in METRICS.items():
        assert fn(parts, tparts) == fn(pred, target), name


@pytest.mark.parametrize("name", sorted(METRICS))
def test_length_mismatch_raises(name):
    with pytest.raises(ValueError, match=f"{name}: pred has 3 values, target 2"):
        METRICS[name](torch.zeros(3), torch.zeros(2))


@pytest.mark.parametrize("name", sorted(METRICS))
def test_empty_input_raises(name):
    with pytest.raises(ValueError, match=f"{name}: empty input"):
        METRICS[name](torch.zeros(0), torch.zeros(0))
    with pytest.raises(ValueError, match=f"{name}: empty input"):
        METRICS[name]([], [])


@pytest.mark.parametrize("name", sorted(METRICS))
def test_non_1d_input_raises(name):
    with pytest.raises(ValueError, match=f"{name}: pred must be 1-D"):
        METRICS[name](torch.zeros(2, 3), torch.zeros(6))


@pytest.mark.parametrize("fn", [pearson, spearman])
def test_correlation_of_constant_input_is_nan_without_warning(fn):
    rng = np.random.default_rng(11)
    varying = rng.normal(size=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(fn(np.full(10, 3.0), varying))
        assert math.isnan(fn(varying, np.full(10, 3.0)))
        assert math.isnan(fn([1.5], [2.0]))  # a single pair: undefined too


def test_correlations_of_perfect_agreement():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert pearson(2 * x + 1, x) == pytest.approx(1.0)
    assert spearman(x ** 3, x) == pytest.approx(1.0)
    assert spearman(-x, x) == pytest.approx(-1.0)
    assert mse(x, x) == 0.0
    assert accuracy([0, 1, 2], [0, 1, 1]) == pytest.approx(2 / 3)
