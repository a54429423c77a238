"""blosa.data.batching: length-bucketed batches (each example once, little padding, order a
function of (seed, epoch)), random batches (the same rules, no regard to length), the split over
DDP ranks, and pad_ids."""
from collections import Counter

import numpy as np
import pytest
import torch

from blosa.data.batching import (BucketBatchSampler, RandomBatchSampler, pad_ids,
                                 training_sampler)


def random_lengths(seed, n=None):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000)) if n is None else n
    return rng.integers(0, 120, n).tolist()


def padding(lengths, batches):
    """Padded positions: sum over batches of (longest * size - total)."""
    lengths = np.asarray(lengths)
    return sum(int(lengths[b].max() * len(b) - lengths[b].sum()) for b in batches if len(b))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("shuffle", [True, False])
def test_every_example_once_per_epoch(seed, shuffle):
    lengths = random_lengths(seed)
    rng = np.random.default_rng(seed + 50)
    batch_size, bucket_batches = int(rng.integers(1, 70)), int(rng.integers(1, 60))
    sampler = BucketBatchSampler(lengths, batch_size, shuffle, seed=seed,
                                 bucket_batches=bucket_batches)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler) == -(-len(lengths) // batch_size)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(lengths)))  # no loss, no repeat
        sizes = [len(b) for b in batches]
        assert all(0 < s <= batch_size for s in sizes)
        assert sum(s != batch_size for s in sizes) <= 1  # only one batch may be smaller
        assert all(isinstance(i, int) for i in flat)


@pytest.mark.parametrize("seed", range(3))
def test_batches_hold_similar_lengths(seed):
    lengths = random_lengths(seed, n=2000)
    sampler = BucketBatchSampler(lengths, 32, shuffle=True, seed=seed)
    bucketed = padding(lengths, list(sampler))
    perm = np.random.default_rng(seed).permutation(len(lengths))
    random_batches = [perm[i:i + 32] for i in range(0, len(perm), 32)]
    assert bucketed < 0.1 * padding(lengths, random_batches)
    # evaluation order: sorted by length, so the least padding of all
    eval_batches = list(BucketBatchSampler(lengths, 32, shuffle=False))
    ordered = [lengths[i] for b in eval_batches for i in b]
    assert ordered == sorted(lengths)
    assert padding(lengths, eval_batches) <= bucketed


def test_order_is_a_function_of_seed_and_epoch():
    lengths = random_lengths(3, n=1000)
    a = BucketBatchSampler(lengths, 16, True, seed=7)
    b = BucketBatchSampler(lengths, 16, True, seed=7)
    a.set_epoch(4)
    b.set_epoch(4)
    assert list(a) == list(b) == list(a)  # iterating twice gives the same epoch
    a.set_epoch(5)
    epoch5 = list(a)
    assert epoch5 != list(b)
    # a fresh sampler (a resumed run) jumping straight to epoch 5 sees the same batches
    c = BucketBatchSampler(lengths, 16, True, seed=7)
    c.set_epoch(5)
    assert list(c) == epoch5
    d = BucketBatchSampler(lengths, 16, True, seed=8)
    d.set_epoch(5)
    assert list(d) != epoch5
    # the batch order is random: not sorted by length
    firsts = [lengths[batch[0]] for batch in epoch5]
    assert firsts != sorted(firsts)


def test_evaluation_order_ignores_seed_and_epoch():
    lengths = random_lengths(4, n=300)
    a = BucketBatchSampler(lengths, 10, False, seed=1)
    b = BucketBatchSampler(lengths, 10, False, seed=2)
    b.set_epoch(3)
    assert list(a) == list(b)


def make_sampler(kind, lengths, batch_size, shuffle, **kw):
    """A BucketBatchSampler, or a RandomBatchSampler (training only: shuffle must be True)."""
    if kind == "random":
        assert shuffle
        return RandomBatchSampler(lengths, batch_size, **kw)
    return BucketBatchSampler(lengths, batch_size, shuffle, **kw)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind, shuffle", [("bucket", True), ("bucket", False),
                                           ("random", True)])
def test_ddp_ranks_partition_each_global_batch(seed, kind, shuffle):
    rng = np.random.default_rng(seed)
    world = int(rng.integers(2, 6))
    n = int(rng.integers(1, 400))
    batch_size = int(rng.integers(world, 40))
    if seed == 0:  # a last global batch shorter than world_size
        n, batch_size = 3 * batch_size + world - 1, batch_size
    if seed == 1:  # fewer examples than ranks
        n = world - 1
    lengths = random_lengths(seed, n=n)
    single = make_sampler(kind, lengths, batch_size, shuffle, seed=seed)
    single.set_epoch(2)
    global_batches = list(single)
    ranks = []
    for rank in range(world):
        sampler = make_sampler(kind, lengths, batch_size, shuffle, seed=seed, rank=rank,
                               world_size=world)
        sampler.set_epoch(2)
        ranks.append(list(sampler))
        assert len(ranks[-1]) == len(sampler)
        assert all(len(b) > 0 for b in ranks[-1])
    counts = [len(r) for r in ranks]
    if shuffle:
        # training: the same number of steps everywhere, each step a split of a global batch
        assert len(set(counts)) == 1 and counts[0] == len(global_batches)
        seen = Counter()
        for step in range(counts[0]):
            shares = [r[step] for r in ranks]
            union = set().union(*shares)
            big = global_batches[step]
            assert set(big) <= union  # the global batch, plus fill-ups if it was short
            if len(big) >= world:
                assert union == set(big)
                assert sum(len(s) for s in shares) == len(big)  # disjoint
                sizes = [len(s) for s in shares]
                assert max(sizes) - min(sizes) <= 1
            else:  # filled up: one example a rank, distinct where there are enough examples
                assert [len(s) for s in shares] == [1] * world
                assert len(union) == min(world, n)
            seen.update(i for s in shares for i in s)
        assert set(seen) == set(range(n))
        assert sum(seen.values()) - n <= world - 1  # repeats only to fill a short batch
    else:
        # evaluation: every example exactly once over the ranks, none repeated
        flat = [i for r in ranks for b in r for i in b]
        assert sorted(flat) == list(range(n))
        assert max(counts) - min(counts) <= 1
        for step, big in enumerate(global_batches):
            shares = [r[step] for r in ranks if step < len(r)]
            assert sorted(i for s in shares for i in s) == sorted(big)


def test_ddp_training_fill_is_the_last_short_batch_only():
    # 10 examples, global batch 4, 4 ranks: batches of 4, 4, 2 -> the 2 are filled up to 4.
    lengths = list(range(10))
    steps = []
    for rank in range(4):
        sampler = BucketBatchSampler(lengths, 4, True, seed=0, rank=rank, world_size=4,
                                     bucket_batches=1)
        steps.append(list(sampler))
    assert [len(s) for s in steps] == [3, 3, 3, 3]
    per_step = [sorted(i for rank in steps for i in rank[step]) for step in range(3)]
    assert sorted(len(set(s)) for s in per_step) == [4, 4, 4]
    assert Counter(i for s in per_step for i in s).total() == 12


# ---------------------------------------------------------------- random batches


@pytest.mark.parametrize("seed", range(5))
def test_random_batches_cut_a_permutation(seed):
    lengths = random_lengths(seed)
    batch_size = int(np.random.default_rng(seed + 60).integers(1, 70))
    sampler = RandomBatchSampler(lengths, batch_size, seed=seed)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler) == -(-len(lengths) // batch_size)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(lengths)))  # no loss, no repeat
        assert all(isinstance(i, int) for i in flat)
        assert [len(b) for b in batches[:-1]] == [batch_size] * (len(batches) - 1)
        # the epoch's permutation cut in its order (each batch sorted by length within)
        perm = np.random.default_rng((seed, epoch)).permutation(len(lengths))
        for k, batch in enumerate(batches):
            assert set(batch) == set(perm[k * batch_size:(k + 1) * batch_size].tolist())
            assert [lengths[i] for i in batch] == sorted(lengths[i] for i in batch)


@pytest.mark.parametrize("seed", range(3))
def test_random_batches_ignore_length(seed):
    lengths = random_lengths(seed, n=2000)
    random_batches = list(RandomBatchSampler(lengths, 32, seed=seed))
    bucketed = list(BucketBatchSampler(lengths, 32, True, seed=seed))
    assert padding(lengths, random_batches) > 5 * padding(lengths, bucketed)
    spreads = [max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in random_batches]
    assert np.median(spreads) > 60  # lengths 0-119: a random batch spans most of the range


def test_random_order_is_a_function_of_seed_and_epoch():
    lengths = random_lengths(5, n=1000)
    a, b = RandomBatchSampler(lengths, 16, seed=7), RandomBatchSampler(lengths, 16, seed=7)
    a.set_epoch(4)
    b.set_epoch(4)
    assert list(a) == list(b) == list(a)  # iterating twice gives the same epoch
    a.set_epoch(5)
    epoch5 = list(a)
    assert epoch5 != list(b)
    c = RandomBatchSampler(lengths, 16, seed=7)  # a resumed run jumping to epoch 5
    c.set_epoch(5)
    assert list(c) == epoch5
    d = RandomBatchSampler(lengths, 16, seed=8)
    d.set_epoch(5)
    assert list(d) != epoch5


def test_training_sampler_by_name():
    lengths = random_lengths(6, n=100)
    assert type(training_sampler("bucket", lengths, 8, seed=2)) is BucketBatchSampler
    sampler = training_sampler("random", lengths, 8, seed=2, rank=1, world_size=2)
    assert type(sampler) is RandomBatchSampler and (sampler.rank, sampler.world_size) == (1, 2)
    assert list(training_sampler("bucket", lengths, 8, 2)) == list(
        BucketBatchSampler(lengths, 8, True, seed=2))
    with pytest.raises(ValueError, match='batching must be "bucket" or "random"'):
        training_sampler("sorted", lengths, 8)


def test_random_bad_arguments():
    with pytest.raises(ValueError, match="lengths"):
        RandomBatchSampler([1, -1], 2)
    with pytest.raises(ValueError, match="batch_size"):
        RandomBatchSampler([1, 2], 0)
    with pytest.raises(ValueError, match="rank"):
        RandomBatchSampler([1, 2], 4, rank=2, world_size=2)
    with pytest.raises(ValueError, match="at least world_size"):
        RandomBatchSampler([1, 2], 2, world_size=3)
    assert list(RandomBatchSampler([], 4)) == [] and len(RandomBatchSampler([], 4)) == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="lengths"):
        BucketBatchSampler([1, -1], 2, True)
    with pytest.raises(ValueError, match="lengths"):
        BucketBatchSampler([1.5, 2], 2, True)
    with pytest.raises(ValueError, match="batch_size"):
        BucketBatchSampler([1, 2], 0, True)
    with pytest.raises(ValueError, match="rank"):
        BucketBatchSampler([1, 2], 4, True, rank=2, world_size=2)
    with pytest.raises(ValueError, match="at least world_size"):
        BucketBatchSampler([1, 2], 2, True, rank=0, world_size=3)
    with pytest.raises(ValueError, match="epoch"):
        BucketBatchSampler([1, 2], 2, True).set_epoch(-1)
    assert list(BucketBatchSampler([], 4, True)) == []
    assert len(BucketBatchSampler([], 4, False)) == 0


def test_works_as_a_dataloader_batch_sampler():
    lengths = random_lengths(9, n=50)
    data = [list(range(1, n + 1)) for n in lengths]
    sampler = BucketBatchSampler(lengths, 8, True, seed=3)
    loader = torch.utils.data.DataLoader(data, batch_sampler=sampler, collate_fn=pad_ids)
    total = 0
    for ids, mask in loader:
        assert ids.shape == mask.shape
        total += int(mask.sum())
    assert total == sum(lengths)


@pytest.mark.parametrize("seed", range(4))
def test_pad_ids(seed):
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(1, 1000, int(rng.integers(0, 15))).tolist()
            for _ in range(int(rng.integers(1, 12)))]
    ids, mask = pad_ids(seqs)
    n = max(len(s) for s in seqs)
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    assert ids.shape == mask.shape == (len(seqs), n)
    for row, seq in enumerate(seqs):
        assert ids[row, :len(seq)].tolist() == seq
        assert not ids[row, len(seq):].any()
        assert mask[row].tolist() == [True] * len(seq) + [False] * (n - len(seq))


def test_pad_ids_edge_cases():
    ids, mask = pad_ids([])
    assert ids.shape == mask.shape == (0, 0)
    ids, mask = pad_ids([[], [5, 6]])
    assert ids.tolist() == [[0, 0], [5, 6]]
    assert mask.tolist() == [[False, False], [True, True]]
    ids, mask = pad_ids([[], []])
    assert ids.shape == (2, 0) and mask.shape == (2, 0)
    ids, mask = pad_ids([torch.tensor([3, 4, 5])])
    assert ids.tolist() == [[3, 4, 5]] and mask.all()
