"""Batches of examples of similar length (little padding), or random ones, in an order that is a
pure function of (seed, epoch), optionally split over DDP ranks; and the padding of id
sequences."""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch


class BucketBatchSampler:
    """Yields lists of example indices (a torch DataLoader batch_sampler).

    shuffle=True (training): the epoch's order is a permutation drawn from
    np.random.default_rng((seed, epoch)); it is cut into chunks of batch_size * bucket_batches
    examples, each chunk is sorted by length (stable) and cut into batches of batch_size, and
    the batches of all chunks are shuffled by the same generator. So a batch holds examples of
    similar length while the batch order stays random; only the last batch of the epoch may be
    smaller. shuffle=False (evaluation): all examples sorted by length (stable), cut into batches
    in that order.

    DDP (world_size > 1): batch_size is the GLOBAL batch, the examples of one optimizer step over
    all ranks. Every rank computes the same global batches, and rank r takes examples
    [r::world_size] of each (the global batch is sorted by length, so the ranks' shares have
    similar lengths). batch_size must be at least world_size.
      Training: every rank gets the same number of batches (one per global batch) and none is
      empty: where the last global batch has fewer than world_size examples, it is filled up to
      world_size with the first examples of the epoch's order (at most world_size - 1 examples
      are then seen twice in the epoch). Nothing is dropped.
      Evaluation: nothing is dropped and nothing repeated, so metrics gathered over the ranks
      count each example once; where the last global batch has fewer than world_size examples,
      ranks r >= its size get no share of it, and len() is one less on those ranks (evaluation
      must not run a collective per batch).

    Call set_epoch(epoch) before each epoch (as with DistributedSampler); the batches depend
    only on (lengths, batch_size, shuffle, seed, epoch, rank, world_size, bucket_batches), so a
    run resumed at an epoch sees the same batches."""

    def __init__(self, lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int = 0,
                 rank: int = 0, world_size: int = 1, bucket_batches: int = 50):
        lengths = np.asarray(lengths)
        if lengths.ndim != 1 or (lengths.size and (lengths.dtype.kind not in "iu"
                                                   or lengths.min() < 0)):
            raise ValueError("lengths must be a sequence of ints >= 0")
        for name, value, low in (("batch_size", batch_size, 1), ("world_size", world_size, 1),
                                 ("bucket_batches", bucket_batches, 1), ("seed", seed, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or \
                not 0 <= rank < world_size:
            raise ValueError(f"rank must be an int in [0, world_size={world_size}), got {rank!r}")
        if batch_size < world_size:
            raise ValueError(f"batch_size (the global batch, {batch_size}) must be at least "
                             f"world_size ({world_size}): every rank needs an example")
        self.lengths = lengths.astype(np.int64)
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.bucket_batches = int(bucket_batches)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ValueError(f"epoch must be an int >= 0, got {epoch!r}")
        self.epoch = int(epoch)

    def global_batches(self) -> list[np.ndarray]:
        """This epoch's global batches (before the split over ranks)."""
        n, size = len(self.lengths), self.batch_size
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable")
            return [order[i:i + size] for i in range(0, n, size)]
        rng = np.random.default_rng((self.seed, self.epoch))
        order = rng.permutation(n)
        chunk = size * self.bucket_batches
        batches = []
        for start in range(0, n, chunk):
            part = order[start:start + chunk]
            part = part[np.argsort(self.lengths[part], kind="stable")]
            batches.extend(part[i:i + size] for i in range(0, len(part), size))
        if self.world_size > 1 and batches and len(batches[-1]) < self.world_size:
            # Only the last chunk's last batch can be short: fill it so that every rank gets
            # an example.
            batches[-1] = self._fill(batches[-1], order)
        return [batches[i] for i in rng.permutation(len(batches))]

    def _fill(self, batch: np.ndarray, order: np.ndarray) -> np.ndarray:
        need = self.world_size - len(batch)
        extra = np.resize(order, need)  # repeats `order` cyclically when it is shorter
        filled = np.concatenate([batch, extra])
        return filled[np.argsort(self.lengths[filled], kind="stable")]

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.global_batches():
            share = batch[self.rank::self.world_size]
            if len(share):  # empty only in evaluation, for a last batch shorter than world_size
                yield share.tolist()

    def __len__(self) -> int:
        n, size = len(self.lengths), self.batch_size
        full, last = divmod(n, size)
        if last == 0 or self.shuffle or self.world_size == 1:
            return full + (last > 0)
        return full + (last > self.rank)


class RandomBatchSampler(BucketBatchSampler):
    """Training batches drawn without regard to length, as the authors' code draws them: each
    epoch a permutation of the examples from np.random.default_rng((seed, epoch)), cut into
    batches of batch_size in its order; only the last batch of the epoch may be smaller. (Their
    code carries the last batch over into the next epoch's permutation; here each epoch stands
    alone, so that it is a function of (seed, epoch) and a resumed run sees the same batches.)

    Everything else is BucketBatchSampler's in training (shuffle=True): each batch is sorted by
    length (stable), so that under DDP rank r's share [r::world_size] of a global batch holds
    lengths like the other ranks' (with one process the order within a batch changes nothing);
    a last global batch shorter than world_size is filled up with the first examples of the
    epoch's order; call set_epoch(epoch) before each epoch."""

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0, rank: int = 0,
                 world_size: int = 1):
        super().__init__(lengths, batch_size, shuffle=True, seed=seed, rank=rank,
                         world_size=world_size)

    def global_batches(self) -> list[np.ndarray]:
        """This epoch's global batches (before the split over ranks)."""
        order = np.random.default_rng((self.seed, self.epoch)).permutation(len(self.lengths))
        size = self.batch_size
        batches = [order[i:i + size] for i in range(0, len(order), size)]
        if self.world_size > 1 and batches and len(batches[-1]) < self.world_size:
            batches[-1] = self._fill(batches[-1], order)  # _fill sorts it by length too
        return [b[np.argsort(self.lengths[b], kind="stable")] for b in batches]


def training_sampler(batching: str, lengths: Sequence[int], batch_size: int, seed: int = 0,
                     rank: int = 0, world_size: int = 1) -> BucketBatchSampler:
    """The training batches of one process: batching "bucket" (BucketBatchSampler, shuffle=True)
    or "random" (RandomBatchSampler); either is a function of (seed, epoch)."""
    if batching == "random":
        return RandomBatchSampler(lengths, batch_size, seed=seed, rank=rank,
                                  world_size=world_size)
    if batching == "bucket":
        return BucketBatchSampler(lengths, batch_size, shuffle=True, seed=seed, rank=rank,
                                  world_size=world_size)
    raise ValueError(f'batching must be "bucket" or "random", got {batching!r}')


def pad_ids(seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad id sequences to the longest: ids [B, n] long with 0 (Vocab.PAD) at padding, and mask
    [B, n] bool, True at real tokens. No sequences give [0, 0] tensors; an empty sequence gives
    an all-False row."""
    lengths = [len(seq) for seq in seqs]
    n = max(lengths, default=0)
    ids = np.zeros((len(lengths), n), dtype=np.int64)
    for row, seq in enumerate(seqs):
        ids[row, :lengths[row]] = seq
    mask = np.arange(n)[None, :] < np.asarray(lengths, dtype=np.int64).reshape(-1, 1)
    return torch.from_numpy(ids), torch.from_numpy(mask)


__all__ = ["BucketBatchSampler", "RandomBatchSampler", "pad_ids", "training_sampler"]
