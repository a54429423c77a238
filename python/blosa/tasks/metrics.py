"""Evaluation metrics over a whole split: accuracy, Pearson's r, Spearman's rho, mean squared error.

Each takes (pred, target): 1-D tensors, numpy arrays or sequences of numbers of one length (a
list of per-batch tensors/arrays is concatenated), and returns a Python float. Mismatched
lengths, empty input and inputs that are not 1-D raise ValueError naming the function.

Correlations are undefined where either side is constant or there is a single pair: they are
then nan (as scipy.stats gives for constant input; scipy's ConstantInputWarning is silenced),
and model selection on them must treat nan as worst.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.stats
import torch


def _as_array(name: str, what: str, x) -> np.ndarray:
    """x as a 1-D float64 numpy array (torch tensors detached and moved to the CPU)."""
    if isinstance(x, (list, tuple)) and x and all(isinstance(v, (torch.Tensor, np.ndarray))
                                                  for v in x):
        x = np.concatenate([_as_array(name, what, v).reshape(-1) for v in x])
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        x = x.double() if x.is_floating_point() or x.dtype == torch.bool else x.long()
        x = x.numpy()
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: {what} must be numbers, got {type(x).__name__}: {err}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name}: {what} must be 1-D, got shape {arr.shape}")
    return arr


def _pair(name: str, pred, target) -> tuple[np.ndarray, np.ndarray]:
    p, t = _as_array(name, "pred", pred), _as_array(name, "target", target)
    if len(p) != len(t):
        raise ValueError(f"{name}: pred has {len(p)} values, target {len(t)}; they must match")
    if len(p) == 0:
        raise ValueError(f"{name}: empty input (no predictions)")
    return p, t


def accuracy(pred, target) -> float:
    """Fraction of positions where pred == target (class ids)."""
    p, t = _pair("accuracy", pred, target)
    return float(np.mean(p == t))


def mse(pred, target) -> float:
    """Mean of (pred - target)^2."""
    p, t = _pair("mse", pred, target)
    return float(np.mean((p - t) ** 2))


def _correlation(name: str, fn, pred, target) -> float:
    p, t = _pair(name, pred, target)
    if len(p) < 2 or np.all(p == p[0]) or np.all(t == t[0]):
        return float("nan")  # undefined; scipy would warn (constant) or raise (one pair)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.stats.ConstantInputWarning)
        return float(fn(p, t)[0])


def pearson(pred, target) -> float:
    """Pearson's r (scipy.stats.pearsonr); nan for constant input or a single pair."""
    return _correlation("pearson", scipy.stats.pearsonr, pred, target)


def spearman(pred, target) -> float:
    """Spearman's rho, Pearson's r of the ranks with ties averaged (scipy.stats.spearmanr);
    nan for constant input or a single pair."""
    return _correlation("spearman", scipy.stats.spearmanr, pred, target)
