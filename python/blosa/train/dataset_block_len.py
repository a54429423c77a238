"""`--block-len dataset`: one block length r for the whole run, fixed from the lengths of the
training sentences as the authors' code fixes it (their exp_*/..._main.py, MODEL_NOTES.md):

    n_est = mean + std * sqrt(2 ln B),   r = ceil(cbrt(2 n_est)) + 1

with B the training batch size, mean and std (population, numpy's np.std) over the token counts
of the training file's sentences. n_est is the paper's Appendix A bound on a batch's expected
longest sentence and cbrt(2 n) its memory-optimal r; the + 1 is their code's. (Their
math.ceil(math.pow(2 n, 1/3)) rounds an exact cube up, 27 -> 4; the ceiling here is exact. Real
statistics hardly ever give an exact cube.) The same r then serves training, dev, test,
`blosa eval` and `blosa encode`: it is stored in the run's config.json
(TrainConfig.block_len_dataset), never measured again on other text.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from blosa.data.datasets import Dataset
from blosa.nn.block_len import block_len_for_dataset
from blosa.train.build import token_lists
from blosa.train.config import TrainConfig


@dataclass(frozen=True)
class LengthStats:
    """Token counts of the training sentences: how many, their mean and population std."""
    count: int
    mean: float
    std: float


def training_lengths(dataset: Dataset) -> list[int]:
    """The token count of every sequence the encoder reads in the dataset's training file: each
    sentence, both sentences of a pair, a passage's question and each of its sentences. SST: the
    whole sentences of the training trees, not their phrases (SST-2: the non-neutral ones), as
    the authors' code measures them. The whole training file, before a dev split is carved or
    folds are cut, as theirs (so every fold of a cross-validation gets the same r)."""
    examples = (dataset.train_sentences if dataset.train_sentences is not None
                else dataset.splits["train"])
    return [len(tokens) for example in examples for tokens in token_lists(example)]


def length_stats(lengths: Sequence[int]) -> LengthStats:
    """LengthStats of `lengths` (at least one)."""
    if len(lengths) == 0:
        raise ValueError("no lengths to measure")
    array = np.asarray(lengths, dtype=np.float64)
    return LengthStats(len(array), float(array.mean()), float(array.std()))


def block_len_as_coded(stats: LengthStats, batch_size: int) -> int:
    """r = ceil(cbrt(2 (mean + std sqrt(2 ln batch_size)))) + 1."""
    if stats.mean <= 0:
        raise ValueError("--block-len dataset: the training sentences hold no tokens")
    return block_len_for_dataset(stats.mean, stats.std, batch_size) + 1


def resolve_dataset_block_len(config: TrainConfig,
                              dataset: Dataset) -> tuple[TrainConfig, LengthStats]:
    """(config with block_len_dataset set, the statistics it came from), for a resolved config
    with block_len "dataset"."""
    if config.block_len != "dataset":
        raise ValueError(f"block_len is {config.block_len!r}, not 'dataset'")
    stats = length_stats(training_lengths(dataset))
    r = block_len_as_coded(stats, config.batch_size)
    return dataclasses.replace(config, block_len_dataset=r), stats


def describe(r: int, stats: LengthStats, batch_size: int) -> str:
    """The log line that says which r a run uses and where it came from."""
    return (f"block length r = {r} for every batch (--block-len dataset: {stats.count} training "
            f"sentences of {stats.mean:.2f} ± {stats.std:.2f} tokens, batch {batch_size})")
