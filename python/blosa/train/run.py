"""`blosa train`: one run, or k runs of cross-validation, from a config to result.json."""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from blosa.train import distributed
from blosa.tasks import build_task
from blosa.train.build import described, make_splits, num_folds, read_dataset
from blosa.train.config import TrainConfig, validate
from blosa.train.dataset_block_len import describe, resolve_dataset_block_len
from blosa.train.distributed import barrier
from blosa.train.loop import Trainer
from blosa.train.progress import Progress
from blosa.train.report import source_commit
from blosa.train.run_dir import RunDir, RunDirError, write_text_atomic


def train(config: TrainConfig, out: str | Path, resume: bool = False, quiet: bool = False,
          bars: bool | None = None) -> dict:
    """Train as `config` says into the folder `out`; returns the result (also result.json).

    Everything is checked before any work: the settings (validate), the folder (another run
    there without `resume`, or a run with other settings with it), the data files. Under
    torchrun each process calls this; they train one model data-parallel and only rank 0
    writes and prints. bars: tqdm bars (None: when stdout is a terminal and not quiet).
    """
    config = config.resolved()
    validate(config)
    run_dir = RunDir(out)
    resuming = run_dir.check(config, resume)
    world = distributed.init(config.device)
    progress = Progress(enabled=world.is_main, bars=False if quiet else bars)
    try:
        if resuming and run_dir.result.exists():
            result = json.loads(run_dir.result.read_text())
            progress.line(f"{out} has finished already")
            progress.line(result_line(result))
            return result
        dataset, bad = read_dataset(config)
        config, block_line = _from_data(config, dataset, run_dir, resuming)
        barrier(world)  # every process has checked the folder before rank 0 writes to it
        if world.is_main and not resuming:
            run_dir.create(config)
        progress.log_to(run_dir.log_txt)
        progress.line(f"blosa train: {described(config)} -> {out}")
        progress.line(f"data: {dataset!r}" + (f"; skipped {len(bad)} malformed lines "
                                                f"(--skip-bad-lines)" if len(bad) else ""))
        if block_line:
            progress.line(block_line)
        start = time.perf_counter()
        k = num_folds(config, dataset)
        if k:
            result = _cross_validate(config, dataset, k, run_dir, world, progress, resuming)
        else:
            result = _one_run(config, dataset, None, run_dir, world, progress, resuming)
        result = {"task": config.task, "encoder": config.encoder, **result,
                  "seconds": round(time.perf_counter() - start, 1), "commit": source_commit()}
        if world.is_main:
            write_text_atomic(run_dir.result, json.dumps(result, indent=2) + "\n")
        progress.line(result_line(result))
        return result
    finally:
        distributed.shutdown(world)


def _from_data(config: TrainConfig, dataset, run_dir: RunDir,
               resuming: bool) -> tuple[TrainConfig, str | None]:
    """(config with the settings the training data decides filled in, the line that logs them):
    --block-len dataset's r. A resumed run must get the r it began with: another means the data
    (or the formula) changed since."""
    if config.block_len != "dataset":
        return config, None
    config, stats = resolve_dataset_block_len(config, dataset)
    if resuming:
        began = TrainConfig.load(run_dir.config).block_len_dataset
        if began != config.block_len_dataset:
            raise RunDirError(f"--resume: the run in {run_dir.path} began with block length "
                              f"{began}, its training data gives {config.block_len_dataset} now "
                              "(--block-len dataset): the data files changed")
    return config, describe(config.block_len_dataset, stats, config.batch_size)


def _one_run(config, dataset, fold, run_dir, world, progress, resuming) -> dict:
    splits = make_splits(config, dataset, fold)
    trainer = Trainer(config, build_task(dataset.spec), splits, run_dir, world, progress)
    progress.line(f"{'fold ' + str(fold) + ': ' if fold is not None else ''}train "
                  f"{len(splits.train)}, dev {len(splits.dev)}, test "
                  f"{len(splits.test) if splits.test is not None else 0} examples; vocabulary "
                  f"{len(trainer.train_vocab)} words, {trainer.found} in the vectors"
                  f"{frozen_words(trainer.frozen_words)}; "
                  f"{sum(p.numel() for p in trainer.model.parameters())} parameters; "
                  f"{trainer.steps_per_epoch} steps per epoch")
    return trainer.run(resuming and run_dir.last.exists())


def frozen_words(count: int) -> str:
    return f" (+ {count} more from them, frozen: --vocab vectors)" if count else ""


def _cross_validate(config, dataset, k, run_dir, world, progress, resuming) -> dict:
    """k runs, fold i held out as test in run_dir/fold-i; their results and mean and std."""
    folds = []
    for fold in range(k):
        fold_dir = RunDir(run_dir.path / f"fold-{fold}")
        if fold_dir.result.exists():  # a fold a killed run had finished
            folds.append(json.loads(fold_dir.result.read_text()))
            continue
        fold_resuming = resuming and fold_dir.config.exists()
        if world.is_main and not fold_resuming:
            fold_dir.create(config)
        barrier(world)
        start = time.perf_counter()
        result = _one_run(config, dataset, fold, fold_dir, world, progress, fold_resuming)
        result = {"fold": fold, **result, "seconds": round(time.perf_counter() - start, 1)}
        if world.is_main:
            write_text_atomic(fold_dir.result, json.dumps(result, indent=2) + "\n")
        progress.line(f"fold {fold}: " + result_line(result))
        folds.append(result)
    summary = {"folds": folds}
    for split in ("dev", "test"):
        names = folds[0][split].keys()
        summary.setdefault("mean", {})[split] = {
            m: statistics.fmean(f[split][m] for f in folds) for m in names}
        summary.setdefault("std", {})[split] = {
            m: statistics.stdev(f[split][m] for f in folds) for m in names}
    return {"test": summary["mean"]["test"], "dev": summary["mean"]["dev"], **summary}


def result_line(result: dict) -> str:
    """The last line a run prints: its test result."""
    test = " ".join(f"{k} {v:.4f}" for k, v in result.get("test", {}).items())
    if "std" in result:
        std = " ".join(f"{k} {v:.4f}" for k, v in result["std"]["test"].items())
        return f"test (mean of {len(result['folds'])} folds): {test} (std {std})"
    where = f" at the best dev step {result['best_step']}" if "best_step" in result else ""
    return f"test: {test}{where}"
