"""A run's folder: config.json, vocab.txt, metrics.jsonl, log.txt, curves.png, last.pt, best.pt
and, once the run has ended, result.json."""
from __future__ import annotations

import json
import os
from pathlib import Path

from blosa.train.config import TrainConfig


class RunDirError(ValueError):
    """A run folder that cannot be used as asked (another run there, a config that differs)."""


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.config = self.path / "config.json"
        self.vocab = self.path / "vocab.txt"
        self.metrics = self.path / "metrics.jsonl"
        self.log_txt = self.path / "log.txt"
        self.curves = self.path / "curves.png"
        self.last = self.path / "last.pt"
        self.best = self.path / "best.pt"
        self.result = self.path / "result.json"

    def check(self, config: TrainConfig, resume: bool) -> bool:
        """Check the folder against the run about to start, before any work: without `resume` it
        must hold no run; with it, a run there must have the same settings. Returns whether a run
        is there to resume. Writes nothing (every process of a distributed run checks)."""
        if self.config.exists():
            saved = TrainConfig.load(self.config)
            if not resume:
                raise RunDirError(f"{self.path} holds another run ({saved.task}, {saved.encoder}); "
                                  f"pass --resume to continue it, or choose another --out")
            diff = saved.differences(config)
            if diff:
                lines = "; ".join(f"{k}: {a!r} there, {b!r} now" for k, a, b in
                                  ((k, *v) for k, v in sorted(diff.items())))
                raise RunDirError(f"--resume: the run in {self.path} has other settings ({lines})")
            return True
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"--out {self.path} is a file, not a folder")
        if self.path.is_dir() and any(self.path.iterdir()):
            raise RunDirError(f"--out {self.path} is not empty and holds no run; choose another")
        return False

    def create(self, config: TrainConfig) -> None:
        """The folder with the run's config.json (after check found no run there)."""
        self.path.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.config, config.to_json())

    def log(self, record: dict) -> None:
        """Append one evaluation's record to metrics.jsonl."""
        with open(self.metrics, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()

    def records(self) -> list[dict]:
        if not self.metrics.exists():
            return []
        return [json.loads(line) for line in self.metrics.read_text().splitlines() if line.strip()]

    def truncate_log(self, step: int) -> None:
        """Drop the records written after the checkpoint a resumed run continues from (step):
        the resumed run writes them again."""
        kept = [r for r in self.records() if r["step"] <= step]
        write_text_atomic(self.metrics, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
