"""`blosa report RUN_DIR...`: a markdown table of finished runs, from their result.json and
config.json: task, encoder, the test metrics (mean ± std over folds), wall time, seed, commit and
the command that reruns it."""
from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

from blosa.train.config import TrainConfig


def source_commit() -> str | None:
    """The short git commit of the blosa source tree, or None outside a git checkout."""
    root = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def command_of(config: TrainConfig) -> str:
    """The `blosa train` command line that gives `config`: the flags whose values differ from
    the defaults of the task, written as given."""
    default = TrainConfig(task=config.task).resolved()
    flags = {"train_file": "--train", "test_file": "--test", "fine_tune": "--freeze-vectors"}
    words = ["blosa", "train", "--task", config.task]
    for field in dataclasses.fields(config):
        name, value = field.name, getattr(config, field.name)
        if name in ("task", "extra", "data_dir") or value == getattr(default, name):
            continue
        flag = flags.get(name, "--" + name.replace("_", "-"))
        if isinstance(value, bool):
            words.append(flag)
        else:
            words += [flag, str(value)]
    return " ".join(words)


def _metric(result: dict, name: str) -> str:
    value = result["test"][name]
    if "std" in result:
        return f"{value:.4f} ± {result['std']['test'][name]:.4f}"
    return f"{value:.4f}"


def report(run_dirs: list[str | Path]) -> str:
    """The markdown table of the runs, one row each, in the order given."""
    rows = ["| task | encoder | test | seconds | seed | commit | command |",
            "|---|---|---|---|---|---|---|"]
    for run_dir in run_dirs:
        path = Path(run_dir)
        if not (path / "result.json").exists():
            raise ValueError(f"{path} holds no finished run (no result.json)")
        result = json.loads((path / "result.json").read_text())
        config = TrainConfig.load(path / "config.json")
        metrics = ", ".join(f"{name} {_metric(result, name)}" for name in result["test"])
        folds = f" ({len(result['folds'])} folds)" if "folds" in result else ""
        rows.append(f"| {result['task']} | {result['encoder']} | {metrics}{folds} | "
                    f"{result['seconds']:.0f} | {config.seed} | {result.get('commit') or '-'} | "
                    f"`{command_of(config)}` |")
    return "\n".join(rows)
