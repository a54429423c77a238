"""The trainer's seeded splits: a dev split carved from train, and stratified k folds."""
import random
from collections import Counter

import pytest

from blosa.data.examples import Pair, Sentence
from blosa.train.splits import carve_dev, stratified_folds


def random_examples(rng, n, classes):
    return [Sentence((f"w{i}",), rng.randrange(classes)) for i in range(n)]


@pytest.mark.parametrize("case", range(6))
def test_folds_partition_and_stratify(case):
    rng = random.Random(1000 + case)
    n, classes, k = rng.randint(30, 300), rng.randint(2, 6), rng.choice([2, 3, 5, 10])
    examples = random_examples(rng, n, classes)
    folds = stratified_folds(examples, k, seed=case)
    assert len(folds) == k
    flat = [i for f in folds for i in f]
    assert sorted(flat) == list(range(n))  # every example in exactly one fold
    total = Counter(e.label for e in examples)
    for fold in folds:
        counts = Counter(examples[i].label for i in fold)
        for label, count in total.items():  # each class spread evenly: within one of its share
            assert abs(counts[label] - count / k) <= 1, (label, counts[label], count, k)
    assert max(map(len, folds)) - min(map(len, folds)) <= 1


def test_folds_depend_on_the_seed_only():
    rng = random.Random(7)
    examples = random_examples(rng, 100, 3)
    assert stratified_folds(examples, 5, 3) == stratified_folds(examples, 5, 3)
    assert stratified_folds(examples, 5, 3) != stratified_folds(examples, 5, 4)


def test_folds_of_scores_are_plain_shuffled_folds():
    examples = [Pair(("a",), ("b",), 1.0 + i / 50) for i in range(50)]
    folds = stratified_folds(examples, 5, 0)
    assert sorted(i for f in folds for i in f) == list(range(50))
    assert all(len(f) == 10 for f in folds)


def test_too_few_examples_for_the_folds():
    with pytest.raises(ValueError, match="3 examples cannot make 5 folds"):
        stratified_folds(random_examples(random.Random(0), 3, 2), 5, 0)
    with pytest.raises(ValueError, match="k must be >= 2"):
        stratified_folds(random_examples(random.Random(0), 3, 2), 1, 0)


@pytest.mark.parametrize("fraction", [0.1, 0.15, 0.3, 0.5])
def test_carve_dev(fraction):
    rng = random.Random(int(fraction * 100))
    examples = random_examples(rng, 500, 4)
    train, dev = carve_dev(examples, fraction, seed=1)
    assert sorted(train + dev, key=lambda e: e.tokens) == sorted(examples, key=lambda e: e.tokens)
    assert abs(len(dev) - fraction * 500) <= 2  # rounded per class
    dev_counts, all_counts = Counter(e.label for e in dev), Counter(e.label for e in examples)
    assert all(abs(dev_counts[c] - fraction * all_counts[c]) <= 0.5 for c in all_counts)
    assert carve_dev(examples, fraction, seed=1) == (train, dev)
