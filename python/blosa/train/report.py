"""`blosa report RUN_DIR...`: a markdown table of finished runs, from their result.json and
config.json: a row per setup (the seeds of one setup averaged), the paper's number beside ours,
wall time, seeds, commit and the command that reruns it."""
from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
from pathlib import Path

from blosa.train.config import FROM_DATA, TrainConfig
from blosa.train.paper import paper_result


def source_commit() -> str | None:
    """The short git commit of the blosa source tree, or None outside a git checkout."""
    root = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def command_of(config: TrainConfig, base: dict | None = None) -> str:
    """The `blosa train` command line that gives `config`: its preset, then the flags whose
    values differ from the task's defaults under that preset, written as given. base: settings
    that replace those defaults first (what a command of an older release left out, say)."""
    # The defaults of the run's own encoder (Bi-BloSAN's block length is not DiSAN's).
    default = TrainConfig(task=config.task, preset=config.preset, encoder=config.encoder,
                          **(base or {})).resolved()
    flags = {"train_file": "--train", "test_file": "--test"}
    words = ["blosa", "train", "--task", config.task]
    if config.preset:
        words += ["--preset", config.preset]
    if config.encoder != TrainConfig(task=config.task).encoder:
        words += ["--encoder", config.encoder]
    for field in dataclasses.fields(config):
        name, value = field.name, getattr(config, field.name)
        if name in ("task", "encoder", "extra", "data_dir", "preset", *FROM_DATA) \
                or value == getattr(default, name):
            continue
        flag = flags.get(name, "--" + name.replace("_", "-"))
        if name == "fine_tune":
            words.append("--fine-tune-vectors" if value else "--freeze-vectors")
        elif isinstance(value, bool):
            words.append(flag)
        else:
            words += [flag, str(value)]
    return " ".join(words)


def _number(metric: str, value: float) -> str:
    """Accuracy in percent with one decimal, as the paper prints it; other metrics 4 decimals."""
    return f"{100 * value:.1f}" if metric == "accuracy" else f"{value:.4f}"


def _cell(runs: list[dict], metric: str, split: str = "test") -> str:
    """The metric on `split` over a setup's runs: mean ± std over seeds, or over a lone run's
    folds."""
    values = [r[split][metric] for r in runs]
    if len(runs) > 1:
        mean, std = statistics.fmean(values), statistics.stdev(values)
    elif split in runs[0].get("std", {}):
        mean, std = values[0], runs[0]["std"][split][metric]
    else:
        return _number(metric, values[0])
    return f"{_number(metric, mean)} ± {_number(metric, std)}"


def _spread(runs: list[dict]) -> str:
    folds = f"{len(runs[0]['folds'])} folds" if "folds" in runs[0] else ""
    if len(runs) == 1:
        return f" ({folds})" if folds else ""
    return f" ({len(runs)} seeds" + (f" of {folds} each)" if folds else ")")


def _load(run_dir: str | Path) -> tuple[dict, TrainConfig]:
    path = Path(run_dir)
    if not (path / "result.json").exists():
        raise ValueError(f"{path} holds no finished run (no result.json)")
    return json.loads((path / "result.json").read_text()), TrainConfig.load(path / "config.json")


def report(run_dirs: list[str | Path], paper: bool = False, dev: bool = False) -> str:
    """The markdown table of finished runs, a row per setup in the order first seen: runs whose
    settings differ only in the seed (and the data folder) share a row, their test metrics as mean
    ± std over the seeds (a lone cross-validated run's std is over its folds), the mean wall time
    per run and the command that reruns it (with --seed S for each seed listed). paper: a column
    with the paper's number for the task and encoder (blosa.train.paper), for runs on the
    paper's data. dev: a column with the dev metrics at the selected checkpoints (what setups are
    chosen on), beside test's."""
    groups: dict[str, list[tuple[dict, TrainConfig]]] = {}
    for run_dir in run_dirs:
        result, config = _load(run_dir)
        key = json.dumps(dataclasses.asdict(dataclasses.replace(config, seed=0, data_dir=None)),
                         sort_keys=True)
        groups.setdefault(key, []).append((result, config))
    header = ["task", "encoder", *(["dev"] if dev else []), "test", *(["paper"] if paper else []),
              "seeds", "seconds per run", "commit", "command"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for members in groups.values():
        runs = [result for result, _ in members]
        config = members[0][1]
        if len(members) > 1:
            config = dataclasses.replace(config, seed=0)
        metrics = ", ".join(f"{name} {_cell(runs, name)}" for name in runs[0]["test"])
        on_dev = ", ".join(f"{name} {_cell(runs, name, 'dev')}" for name in runs[0]["dev"])
        theirs = ", ".join(f"{name} {value}" for name, value in
                           paper_result(config.task, config.encoder).items()) or "-"
        seeds = ", ".join(str(c.seed) for _, c in members)
        commits = ", ".join(dict.fromkeys(r.get("commit") or "-" for r in runs))
        seconds = statistics.fmean(r["seconds"] for r in runs)
        cells = [config.task, config.encoder, *([on_dev] if dev else []), metrics + _spread(runs),
                 *([theirs] if paper else []), seeds, f"{seconds:.0f}", commits,
                 f"`{command_of(config)}`"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _factor(config: TrainConfig, base: dict | None = None) -> str:
    """What a run changes over its preset (and base): the flags of its command after the
    preset's, less the task, encoder and seed ("control" for none)."""
    words = command_of(dataclasses.replace(config, seed=0), base).split()
    if "--encoder" in words:
        at = words.index("--encoder")
        del words[at:at + 2]
    start = words.index("--preset") + 2 if "--preset" in words else 4
    return " ".join(words[start:]) or "control"


def ablation(run_dirs: list[str | Path], base: dict | None = None) -> str:
    """A markdown table of one factor at a time: for each task and encoder, the control (the
    preset alone, with `base`'s settings over it: the defaults the runs were made under, where
    a default changed since) and each setup that adds flags to it, their main metric on dev and
    test as the mean over seeds, and each setup's change from the control on the seeds both ran
    (paired, so that a seed's luck cancels). The main metric: accuracy, else the first one."""
    cells: dict[tuple[str, str], dict[str, dict[int, dict]]] = {}
    for run_dir in run_dirs:
        result, config = _load(run_dir)
        key = (config.task, config.encoder)
        cells.setdefault(key, {}).setdefault(_factor(config, base), {})[config.seed] = result
    header = ["task", "encoder", "setup", "seeds", "dev", "Δ dev", "test", "Δ test"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (task, encoder), setups in cells.items():
        control = setups.get("control", {})
        for name in ["control", *sorted(set(setups) - {"control"})]:
            if name not in setups:
                continue
            runs = setups[name]
            metric = "accuracy" if "accuracy" in next(iter(runs.values()))["test"] else \
                next(iter(next(iter(runs.values()))["test"]))
            row = [task, encoder, f"`{name}`" if name != "control" else "control",
                   ", ".join(map(str, sorted(runs)))]
            for split in ("dev", "test"):
                row.append(_number(metric, statistics.fmean(r[split][metric]
                                                            for r in runs.values())))
                shared = sorted(set(runs) & set(control))
                if name == "control" or not shared:
                    row.append("-")
                    continue
                change = statistics.fmean(runs[s][split][metric] - control[s][split][metric]
                                          for s in shared)
                sign = "+" if change >= 0 else "−"
                row.append(f"{sign}{_number(metric, abs(change))}"
                           + (f" ({len(shared)} seed{'s' * (len(shared) > 1)})"
                              if len(shared) < len(runs) else ""))
            rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows)
