"""Runs over several epochs: each epoch draws its own batch order, and a run resumed from any
checkpoint (at an epoch's end, mid-epoch, after early stopping) ends bit for bit where the
uninterrupted run ends: parameters, optimizer, metrics.jsonl, result.json.

The resumes here start from copies of the run folder taken the moment each last.pt was written
(what a kill right after that checkpoint leaves on disk), so every kind of checkpoint is hit
exactly; tests/test_train_resume.py kills a real process at a moment it does not choose."""
import json
import random
import shutil

import numpy as np
import pytest
import torch

from blosa.data import BucketBatchSampler
from blosa.train import loop
from blosa.train.config import TrainConfig
from blosa.train.run import train
from test_train_run import WORDS, write_generic
from test_train_vocab import write_glove

# Dropout, word dropout and a cosine schedule: the random generators' and the schedule's state
# matter. 300 lines: 270 train (the generic task carves a stratified tenth as dev), 9 batches an
# epoch of 30.
TINY = dict(task="generic", vectors="none", hidden=5, head_hidden=5, optimizer="adam", lr=3e-3,
            batch_size=30, dropout=0.3, word_dropout=0.2, lr_schedule="cosine")
STEPS_PER_EPOCH = 9


@pytest.fixture
def data(tmp_path):
    rng = random.Random(random.randrange(2**32))
    return dict(train_file=str(write_generic(tmp_path / "train.txt", rng, 300)),
                test_file=str(write_generic(tmp_path / "test.txt", rng, 60)))


def record_batches(monkeypatch) -> tuple[list[list[int]], list]:
    """(the example indices of every training step in order, [the trainer])."""
    seen, trainers = [], []
    step = loop.Trainer._train_step

    def recording(self, indices):
        seen.append(list(indices))
        trainers[:] = [self]
        return step(self, indices)

    monkeypatch.setattr(loop.Trainer, "_train_step", recording)
    return seen, trainers


def snapshot_checkpoints(monkeypatch, into) -> None:
    """Copy the run folder to into/step-S the moment each last.pt (of step S) is written."""
    save = loop.checkpoint.save_atomic

    def saving(state, path):
        save(state, path)
        if path.name == "last.pt":
            shutil.copytree(path.parent, into / f"step-{state['step']}")

    monkeypatch.setattr(loop.checkpoint, "save_atomic", saving)


def test_each_epoch_draws_its_own_order(tmp_path, data, monkeypatch):
    seed = random.randrange(1000)
    seen, trainers = record_batches(monkeypatch)
    config = TrainConfig(**TINY, **data, epochs=3, seed=seed)
    train(config, tmp_path / "run", quiet=True)
    assert len(seen) == 3 * STEPS_PER_EPOCH
    epochs = [seen[e * STEPS_PER_EPOCH:(e + 1) * STEPS_PER_EPOCH] for e in range(3)]
    for epoch in epochs:  # every training example once an epoch
        assert sorted(i for batch in epoch for i in batch) == list(range(270))
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2]
    # ... and the order is the sampler's for (seed, epoch), which a resumed run draws too.
    sampler = trainers[0].sampler
    assert isinstance(sampler, BucketBatchSampler) and sampler.seed == seed
    for e, epoch in enumerate(epochs):
        sampler.set_epoch(e)
        assert epoch == list(sampler)


def load_run(path):
    last = torch.load(path / "last.pt", weights_only=True)
    result = json.loads((path / "result.json").read_text())
    result.pop("seconds")
    return last, (path / "metrics.jsonl").read_text(), result


def assert_same_end(a, b):
    (last_a, metrics_a, result_a), (last_b, metrics_b, result_b) = load_run(a), load_run(b)
    for key, value in last_a["model"].items():
        assert torch.equal(value, last_b["model"][key]), key
    for sa, sb in zip(last_a["optimizer"]["state"].values(),
                      last_b["optimizer"]["state"].values()):
        for name in sa:
            assert torch.equal(torch.as_tensor(sa[name]), torch.as_tensor(sb[name])), name
    for key in ("scheduler", "step", "epoch", "position", "best"):
        assert last_a[key] == last_b[key], key
    assert metrics_a == metrics_b
    assert result_a == result_b


@pytest.mark.parametrize("patience, vocab", [(0, "train"), (3, "train"), (0, "vectors")])
def test_resume_at_an_epochs_end_or_mid_epoch_ends_where_the_whole_run_ends(
        tmp_path, data, monkeypatch, patience, vocab):
    """A checkpoint every 3 steps: at an epoch's end (step 9, 18) and mid-epoch (12, 15) alike.
    With patience, the run may stop early; a resume from any checkpoint stops where it did.
    With --vocab vectors, the frozen rows are rebuilt from the vectors file."""
    snapshots = tmp_path / "snapshots"
    options = dict(TINY, patience=patience, vocab=vocab)
    if vocab == "vectors":
        numbers = np.random.default_rng(random.randrange(2**32))
        options["vectors"] = str(write_glove(tmp_path / "vectors.txt", WORDS[::2] + ["more"],
                                             numbers, dim=5))
    config = TrainConfig(**options, **data, epochs=3, eval_every=3,
                         seed=random.randrange(1000))
    whole = tmp_path / "whole"
    with monkeypatch.context() as patch:
        snapshot_checkpoints(patch, snapshots)
        train(config, whole, quiet=True)
    taken = {int(p.name.split("-")[1]): p for p in snapshots.iterdir()}
    last_step = max(taken)
    assert last_step == 27 or patience  # only early stopping ends a run before its last step
    epoch_end = [s for s in taken if s % STEPS_PER_EPOCH == 0 and s < last_step]
    mid_epoch = [s for s in taken if s % STEPS_PER_EPOCH and s > STEPS_PER_EPOCH]
    assert epoch_end and (mid_epoch or last_step <= 12), sorted(taken)
    for step in epoch_end[-1:] + mid_epoch[:1]:
        resumed = tmp_path / f"resumed-{step}"
        shutil.copytree(taken[step], resumed)
        train(config, resumed, resume=True, quiet=True)
        assert_same_end(whole, resumed)


def test_patience_stops_after_that_many_evaluations_without_a_better_dev(tmp_path, data):
    # lr 0: dev never changes, so no evaluation after the first improves on it.
    config = TrainConfig(**dict(TINY, lr=1e-12), **data, epochs=3, eval_every=3, patience=2,
                         seed=random.randrange(1000))
    result = train(config, tmp_path / "run", quiet=True)
    steps = [json.loads(line)["step"] for line in
             (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
             if '"dev"' in line]
    assert steps == [3, 6, 9]  # the best at 3, then 2 evaluations without a better one
    assert result["best_step"] == 3 and result["stopped_early_at_step"] == 9
