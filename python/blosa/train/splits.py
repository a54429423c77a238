"""Seeded splits of a training set: a dev split carved from it, and stratified k folds."""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np


def _label_of(example):
    """The stratum of an example: its class label, or None where labels are scores."""
    label = getattr(example, "label", None)
    return label if isinstance(label, int) else None


def carve_dev(examples: Sequence, fraction: float, seed: int) -> tuple[list, list]:
    """(train, dev): a seeded `fraction` of each class of `examples` held out as dev (of all of
    them where labels are scores), both in the examples' order."""
    rng = np.random.default_rng(seed)
    dev: set[int] = set()
    for _, members in sorted(_strata(examples).items(), key=lambda kv: (kv[0] is None, kv[0])):
        take = round(fraction * len(members))
        dev.update(int(i) for i in np.asarray(members)[rng.permutation(len(members))[:take]])
    return ([e for i, e in enumerate(examples) if i not in dev],
            [examples[i] for i in sorted(dev)])


def _strata(examples: Sequence) -> dict:
    strata = defaultdict(list)
    for i, example in enumerate(examples):
        strata[_label_of(example)].append(i)
    return strata


def stratified_folds(examples: Sequence, k: int, seed: int) -> list[list[int]]:
    """k disjoint lists of indices covering `examples`, each class spread evenly over them
    (sizes differ by at most one per class), shuffled by `seed`."""
    if k < 2:
        raise ValueError(f"k must be >= 2, got {k}")
    if len(examples) < k:
        raise ValueError(f"{len(examples)} examples cannot make {k} folds")
    rng = np.random.default_rng(seed)
    strata = _strata(examples)
    folds: list[list[int]] = [[] for _ in range(k)]
    offset = 0  # where the next class starts dealing, so that small classes do not all go to fold 0
    for key in sorted(strata, key=lambda s: (s is None, s)):
        members = np.asarray(strata[key])[rng.permutation(len(strata[key]))]
        for j, index in enumerate(members):
            folds[(offset + j) % k].append(int(index))
        offset += len(members)
    return [sorted(f) for f in folds]
