"""A finished run's model put to use: `blosa eval` and `blosa encode`."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from blosa.data import Vocab, pad_ids
from blosa.data.tokenize import tokenize
from blosa.train import checkpoint
from blosa.tasks import build_task
from blosa.train.build import (build_model, extend_vocab, make_splits, num_folds, read_dataset,
                               run_vectors)
from blosa.train.config import TrainConfig
from blosa.train.distributed import World
from blosa.train.loop import evaluate, predict
from blosa.train.run_dir import RunDir


def load_run(run_dir: str | Path, data_dir: str | None = None):
    """(config, run folder, vocabulary, task, dataset, model at its best dev checkpoint, eval mode).
    The model is built as the run built it, with random vectors in place of the word vectors:
    the checkpoint holds the trained embedding. A --vocab vectors run reads its frozen rows from
    its named vectors again (the checkpoint checks their digest); the vocabulary returned is the
    one it encodes text with."""
    rd = RunDir(run_dir)
    if not rd.best.exists() and (rd.path / "fold-0").is_dir():
        raise ValueError(f"{run_dir} is a cross-validation run: name one of its folds "
                         f"({rd.path / 'fold-0'}, ...)")
    for path in (rd.config, rd.vocab, rd.best):
        if not path.exists():
            raise ValueError(f"{run_dir} is not a finished run folder: {path.name} is missing")
    config = TrainConfig.load(rd.config)
    if data_dir is not None:
        config = dataclasses.replace(config, data_dir=data_dir)
    train_vocab = Vocab.load(rd.vocab)
    state = checkpoint.load(rd.best, config.device)["model"]
    dim = state[next(k for k in state if k.endswith("embedding.weight"))].shape[1]
    dataset, _ = read_dataset(config)
    task = build_task(dataset.spec)
    vocab, frozen = extend_vocab(config, train_vocab,
                                 run_vectors(config) if config.vocab == "vectors" else None)
    model, _ = build_model(dataclasses.replace(config, vectors="none"), task, train_vocab, dim,
                           frozen=frozen)
    model.load_state_dict(state)
    return config, rd, vocab, task, dataset, model.to(config.device).eval()


# Default bins of evaluate_run(by_length=...): where the SST-2 analysis of docs/RESULTS.md
# ("Where the attention encoders lose") cut sentence lengths.
LENGTH_EDGES = (4, 8, 16, 26)


def _split_examples(run_dir, split, data_dir):
    config, rd, vocab, task, dataset, model = load_run(run_dir, data_dir)
    fold = None
    if rd.path.name.startswith("fold-") and num_folds(config, dataset):
        fold = int(rd.path.name.removeprefix("fold-"))
    splits = make_splits(config, dataset, fold)
    examples = {"train": splits.train, "dev": splits.dev, "test": splits.test}[split]
    if examples is None:
        raise ValueError(f"the {config.task} run has no {split} split")
    return config, vocab, task, model, examples


def length_bins(edges: tuple[int, ...]) -> list[tuple[int, int | None]]:
    """[(1, e0 - 1), (e0, e1 - 1), ..., (e_last, None)]: token counts lo..hi (None: no end).
    ValueError unless edges are increasing ints >= 2."""
    if (not edges or any(isinstance(e, bool) or not isinstance(e, int) for e in edges)
            or edges[0] < 2 or any(b <= a for a, b in zip(edges, edges[1:]))):
        raise ValueError(f"length edges must be increasing ints >= 2, got {edges!r}")
    starts = (1, *edges)
    return [(lo, hi - 1) for lo, hi in zip(starts, edges)] + [(edges[-1], None)]


def evaluate_run(run_dir: str | Path, split: str = "test", data_dir: str | None = None,
                 by_length: tuple[int, ...] | None = None) -> dict:
    """The task's metrics of the run's best checkpoint on `split` (its own dev and test splits,
    carved as the run carved them; a cross-validation run's folds are folders of their own).

    by_length: also the metrics per bin of example length (the task's: an NLI pair's longer
    sentence), bins cut at these edges (see length_bins; LENGTH_EDGES for the usual ones), under
    "by_length": a list of {"lengths": "LO-HI" or "LO+", "examples": N, metric: value}; a bin
    without examples is left out, and a metric that needs more examples than a bin has (Pearson
    of one pair) is NaN there.
    """
    bins = None if by_length is None else length_bins(tuple(by_length))
    config, vocab, task, model, examples = _split_examples(run_dir, split, data_dir)
    if bins is None:
        return {"split": split, **evaluate(model, task, examples, vocab, config, World())}
    # One pass over the split: each bin's predictions, and the split's metrics from all of them
    # (the bins partition it).
    lengths = [task.length(e) for e in examples]
    rows, preds, targets = [], [], []
    for lo, hi in bins:
        chosen = [e for e, n in zip(examples, lengths) if n >= lo and (hi is None or n <= hi)]
        if chosen:
            p, t = predict(model, task, chosen, vocab, config, World())
            preds.append(p)
            targets.append(t)
            rows.append({"lengths": f"{lo}+" if hi is None else f"{lo}-{hi}",
                         "examples": len(chosen), **task.metrics(p, t)})
    return {"split": split, **task.metrics(torch.cat(preds), torch.cat(targets)), "by_length": rows}


@torch.no_grad()
def encode_lines(run_dir: str | Path, lines: list[str], batch_size: int = 128) -> np.ndarray:
    """Sentence vectors [len(lines), sentence_dim] float32 of raw sentences (tokenized as the
    readers tokenize raw text) from the run's encoder."""
    config, _, vocab, _, _, model = load_run(run_dir)
    out = []
    for start in range(0, len(lines), batch_size):
        chunk = lines[start:start + batch_size]
        ids, mask = pad_ids([vocab.encode(tokenize(line)) for line in chunk])
        ids, mask = ids.to(config.device), mask.to(config.device)
        _, sentence = model.encoder(model.embedding(ids), mask)
        out.append(sentence.float().cpu().numpy())
    if not out:
        return np.zeros((0, model.encoder.sentence_dim), dtype=np.float32)
    return np.concatenate(out)
