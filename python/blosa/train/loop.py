"""The training loop of one run (or one fold): train, evaluate on dev, checkpoint, and at the end
test the best dev checkpoint.

A run can be killed at any moment and resumed: the data order is a function of (seed, epoch),
the checkpoint holds the model, the optimizer and its learning-rate schedule, the random
generators and the position in the epoch, so a resumed run ends bit for bit where an
uninterrupted one would.
"""
from __future__ import annotations

import contextlib
import time
from typing import Sequence

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from blosa.data import BucketBatchSampler, Vocab
from blosa.data.batching import training_sampler
from blosa.nn import SentenceEncoder
from blosa.nn.checkpoint_compat import former_layout
from blosa.tasks import Task
from blosa.train import checkpoint
from blosa.train.build import (Splits, build_model, build_optimizer, build_scheduler,
                               build_vocab, extend_vocab, run_vectors)
from blosa.train.config import TrainConfig
from blosa.train.curves import plot_curves
from blosa.train.distributed import World, all_sum, barrier, gather
from blosa.train.progress import Progress
from blosa.train.run_dir import RunDir


def to_device(batch: dict[str, torch.Tensor], device: str) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def autocast(config: TrainConfig):
    """bfloat16 autocast under --amp bf16 (CPU too), else nothing."""
    if config.amp == "bf16":
        return torch.autocast(config.device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def counts_accuracy(task: Task) -> bool:
    return "accuracy" in task.metric_names


@torch.no_grad()
def predict(model: nn.Module, task: Task, examples: Sequence, vocab: Vocab, config: TrainConfig,
            world: World) -> tuple[torch.Tensor, torch.Tensor]:
    """(predictions, targets) over `examples`, each process taking every world.size-th example
    and the results gathered on all of them."""
    mine = list(examples[world.rank::world.size])
    sampler = BucketBatchSampler([task.length(e) for e in mine], config.eval_batch_size,
                                 shuffle=False)
    was_training = model.training
    model.eval()
    preds, targets = [], []
    for indices in sampler:
        batch = to_device(task.collate([mine[i] for i in indices], vocab), config.device)
        with autocast(config):
            output = model(batch)
        preds.extend(task.predict(output).float().cpu().tolist())
        targets.extend(task.target(batch).float().cpu().tolist())
    model.train(was_training)
    return torch.tensor(gather(world, preds)), torch.tensor(gather(world, targets))


def evaluate(model, task, examples, vocab, config, world) -> dict[str, float]:
    """The task's metrics over `examples`."""
    return task.metrics(*predict(model, task, examples, vocab, config, world))


class Trainer:
    """Trains config's model on `splits` in `run_dir`; run() returns {"dev": ..., "test": ...}.

    Only the main process (world.is_main) writes files and prints.
    """

    def __init__(self, config: TrainConfig, task: Task, splits: Splits, run_dir: RunDir,
                 world: World, progress: Progress):
        self.config, self.task, self.splits, self.dir = config, task, splits, run_dir
        self.world, self.progress = world, progress
        # train_vocab (vocab.txt) holds the training words, which the embedding trains; vocab
        # encodes text, and with --vocab vectors goes on with the vectors' other words.
        self.train_vocab = build_vocab(splits.train)
        vectors = run_vectors(config)
        self.vocab, frozen = extend_vocab(config, self.train_vocab, vectors)
        self.frozen_words = 0 if frozen is None else len(frozen)
        self.model, self.found = build_model(config, task, self.train_vocab, vectors=vectors,
                                             frozen=frozen)
        del vectors
        self.model.to(config.device)
        if config.compile:
            # In place, so the state_dict keys stay those of the plain model (checkpoints load
            # either way); dynamic: one graph for every batch size and length.
            for module in self.model.modules():
                if isinstance(module, SentenceEncoder):
                    module.compile(dynamic=True)
        self.optimizer = build_optimizer(config, self.model)
        self.ddp = (DistributedDataParallel(self.model,
                                            find_unused_parameters=task.unused_parameters)
                    if world.size > 1 else self.model)
        self.sampler = training_sampler(config.batching, [task.length(e) for e in splits.train],
                                        config.batch_size, config.seed, world.rank, world.size)
        self.steps_per_epoch = len(self.sampler)
        if self.steps_per_epoch == 0:
            raise ValueError(f"the training split has {len(splits.train)} examples: too few "
                             f"for one batch on each of {world.size} processes")
        self.total_steps = self.config.epochs * self.steps_per_epoch
        if config.max_steps is not None:
            self.total_steps = min(self.total_steps, config.max_steps)
        self.scheduler = build_scheduler(config, self.optimizer, self.total_steps)
        # Where training stands; a checkpoint holds exactly this. stale: evaluations since the
        # best dev (early stopping, config.patience).
        self.step, self.epoch, self.position = 0, 0, 0
        self.best = {"value": None, "step": 0, "epoch": 0}
        self.stale = 0
        self._reset_window()

    # ------------------------------------------------------------------ state and checkpoints

    def _reset_window(self):
        # Training loss and accuracy since the last evaluation, summed over examples.
        self.window = {"loss": 0.0, "correct": 0.0, "count": 0.0, "seconds": 0.0}

    def _state(self, rng_by_rank: list[dict]) -> dict:
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "scheduler": self.scheduler.state_dict(), "step": self.step, "epoch": self.epoch,
                 "position": self.position, "best": dict(self.best), "stale": self.stale,
                 "rng": rng_by_rank[0]}
        if self.world.size > 1:
            # Each process's dropout draws differ (their batches differ in shape), so each
            # resumes from its own generators' state.
            state["rng_by_rank"] = rng_by_rank
        return state

    def resume(self) -> bool:
        """Continue from run_dir's last.pt, if there is one. Returns whether it was."""
        if not self.dir.last.exists():
            return False
        saved = Vocab.load(self.dir.vocab)
        if saved.words != self.train_vocab.words:
            raise ValueError(f"{self.dir.vocab} is not the vocabulary of this run's training data: "
                             "the data files changed since the run began")
        state = checkpoint.load(self.dir.last, self.config.device)
        self.model.load_state_dict(state["model"])
        try:
            self.optimizer.load_state_dict(state["optimizer"])
        except ValueError as error:
            if not former_layout(state["model"]):
                raise
            raise ValueError(
                f"{self.dir.last} was saved before Bi-BloSA's (or DiSAN's) layers were stacked "
                "(blosa.nn.stacked): its weights load, converted, but its optimizer's state is "
                "per former parameter and does not fit. Finish this run with the blosa it began "
                "with, or start a new run (its best.pt's weights load into a new model with "
                "load_state_dict)") from error
        if "scheduler" in state:  # checkpoints before --lr-schedule ran at a constant rate
            self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.epoch, self.position = state["step"], state["epoch"], state["position"]
        self.best = dict(state["best"])
        self.stale = state.get("stale", 0)  # checkpoints before --patience
        by_rank = state.get("rng_by_rank")
        if by_rank is not None and len(by_rank) != self.world.size:
            raise ValueError(f"{self.dir.last} was written by {len(by_rank)} processes; resume it "
                             f"with as many (now {self.world.size}), or its dropout draws differ")
        checkpoint.set_rng_state(state["rng"] if by_rank is None else by_rank[self.world.rank])
        if self.world.is_main:
            self.dir.truncate_log(self.step)
        return True

    def _checkpoint(self, dev: dict[str, float]) -> bool:
        """Log the window's training figures and dev's, save best.pt when dev improved, then
        last.pt. Returns whether dev improved. Called by every process (the metrics are
        gathered); only the main one writes."""
        loss, correct, count = all_sum(self.world, [self.window["loss"], self.window["correct"],
                                                    self.window["count"]])
        train = {"loss": loss / max(count, 1)}
        if counts_accuracy(self.task):
            train["accuracy"] = correct / max(count, 1)
        value = dev[self.task.main_metric]
        best = self.best["value"]
        improved = best is None or (value > best if self.task.higher_is_better else value < best)
        if improved:
            self.best = {"value": value, "step": self.step, "epoch": self.epoch_float()}
        self.stale = 0 if improved else self.stale + 1
        rng_by_rank = gather(self.world, [checkpoint.rng_state()])
        if self.world.is_main:
            where = {"step": self.step, "epoch": round(self.epoch_float(), 4)}
            self.dir.log({**where, "split": "train", **train})
            self.dir.log({**where, "split": "dev", **dev})
            if improved:
                checkpoint.save_atomic({"model": self.model.state_dict(), **where, "dev": dev},
                                       self.dir.best)
            checkpoint.save_atomic(self._state(rng_by_rank), self.dir.last)
            plot_curves(self.dir.records(), self.task.main_metric, self.dir.curves,
                        f"{self.config.task} / {self.config.encoder}")
            rate = count / self.window["seconds"] if self.window["seconds"] else 0.0
            self.progress.evaluation(self.step, self.epoch_float(), self.config.epochs, train,
                                     dev, self.task.main_metric, self.best, rate)
        barrier(self.world)
        self._reset_window()
        return improved

    def epoch_float(self) -> float:
        return self.epoch + self.position / self.steps_per_epoch

    # ------------------------------------------------------------------ training

    def _train_step(self, indices: list[int]) -> None:
        config, task = self.config, self.task
        start = time.perf_counter()
        batch = to_device(task.collate([self.splits.train[i] for i in indices], self.vocab),
                          config.device)
        with autocast(config):
            output = self.ddp(batch)
            loss = task.loss(output, batch)
        size = float(len(indices))
        # DDP averages gradients over processes; weighting each process's batch mean by its share
        # of the global batch makes that average the gradient of the global batch's mean.
        total = all_sum(self.world, [size])[0] if self.world.size > 1 else size
        self.optimizer.zero_grad(set_to_none=True)
        (loss * (size * self.world.size / total)).backward()
        self.optimizer.step()
        self.scheduler.step()
        self.window["loss"] += loss.item() * size
        self.window["count"] += size
        if counts_accuracy(task):
            hits = task.predict(output.detach()) == task.target(batch)
            self.window["correct"] += hits.sum().item()
        self.window["seconds"] += time.perf_counter() - start
        self.step += 1

    def _due(self, end_of_epoch: bool) -> bool:
        """Evaluate (and checkpoint) now? Every eval_every steps, else at each epoch's end; and
        always at the last step."""
        every = self.config.eval_every
        return ((every and self.step % every == 0) or (not every and end_of_epoch)
                or self.step >= self.total_steps)

    def stopped_early(self) -> bool:
        """Whether early stopping ended training: config.patience evaluations in a row without a
        better dev score."""
        return 0 < self.config.patience <= self.stale

    def train(self) -> None:
        self.model.train()
        bar = self.progress.bar(self.total_steps, self.step)
        while self.step < self.total_steps and not self.stopped_early():
            # Each epoch draws its own order, a function of (seed, epoch): an uninterrupted run
            # and one resumed at any checkpoint walk the same batches.
            self.sampler.set_epoch(self.epoch)
            batches = list(self.sampler)
            for indices in batches[self.position:]:
                if self.step >= self.total_steps:
                    break
                self._train_step(indices)
                self.position += 1
                end_of_epoch = self.position == len(batches)
                if end_of_epoch:
                    self.epoch, self.position = self.epoch + 1, 0
                w, count = self.window, max(self.window["count"], 1)
                bar.update(w["loss"] / count,
                           w["correct"] / count if counts_accuracy(self.task) else None,
                           w["count"] * self.world.size / max(w["seconds"], 1e-9))
                if self._due(end_of_epoch):
                    bar.pause()
                    self._checkpoint(evaluate(self.model, self.task, self.splits.dev, self.vocab,
                                              self.config, self.world))
                    bar.resume()
                    if self.stopped_early():
                        break
        bar.close()
        if self.stopped_early():
            self.progress.line(f"early stop at step {self.step}: no better dev "
                               f"{self.task.main_metric} in {self.stale} evaluations (--patience)")

    def finish(self) -> dict:
        """Evaluate the best dev checkpoint on dev and test; log them and return
        {"best_step", "best_epoch", "dev", "test"}, and "stopped_early_at_step" where --patience
        ended training."""
        best = checkpoint.load(self.dir.best, self.config.device)
        self.model.load_state_dict(best["model"])
        result = {"best_step": best["step"], "best_epoch": best["epoch"]}
        if self.stopped_early():
            result["stopped_early_at_step"] = self.step
        result["dev"] = evaluate(self.model, self.task, self.splits.dev, self.vocab, self.config,
                                 self.world)
        if self.splits.test is not None:
            result["test"] = evaluate(self.model, self.task, self.splits.test, self.vocab,
                                      self.config, self.world)
        if self.world.is_main:
            where = {"step": best["step"], "epoch": best["epoch"]}
            if "test" in result:
                self.dir.log({**where, "split": "test", **result["test"]})
            plot_curves(self.dir.records(), self.task.main_metric, self.dir.curves,
                        f"{self.config.task} / {self.config.encoder}")
        return result

    def run(self, resume: bool) -> dict:
        if self.world.is_main:
            if not (resume and self.dir.vocab.exists()):
                self.train_vocab.save(self.dir.vocab)
        barrier(self.world)
        if resume:
            self.resume()
        self.train()
        return self.finish()

