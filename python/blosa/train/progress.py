"""What a run prints: a tqdm bar with the running loss, accuracy and examples/s on a terminal, and
one line per evaluation (the only output under --quiet or when stdout is not a terminal). The
lines go to the run folder's log.txt too, so a run in the background keeps its log."""
from __future__ import annotations

import sys

from tqdm import tqdm


def _fmt(metrics: dict[str, float]) -> str:
    return " ".join(f"{k} {v:.4f}" for k, v in metrics.items())


class Progress:
    """bars: draw tqdm bars (a terminal, not --quiet). enabled: print at all (the main process)."""

    def __init__(self, enabled: bool = True, bars: bool | None = None, stream=None):
        self.stream = sys.stdout if stream is None else stream
        self.enabled = enabled
        self.bars = enabled and (self.stream.isatty() if bars is None else bars)
        self._bar = None
        self.log = None

    def log_to(self, path) -> None:
        """Append every line from now on to the file `path` too."""
        self.log = path

    def line(self, text: str) -> None:
        if not self.enabled:
            return
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(text + "\n")
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def bar(self, total: int, done: int) -> "_Bar":
        return _Bar(self, total, done)

    def evaluation(self, step, epoch, epochs, train, dev, main, best, rate) -> None:
        self.line(f"step {step} (epoch {epoch:.2f}/{epochs}) | train {_fmt(train)} | dev "
                  f"{_fmt(dev)} | best dev {main} {best['value']:.4f} at step {best['step']} | "
                  f"{rate:.0f} examples/s")


class _Bar:
    """The training bar, or nothing where bars are off."""

    def __init__(self, progress: Progress, total: int, done: int):
        self.progress = progress
        self.tqdm = None
        if progress.bars:
            self.tqdm = tqdm(total=total, initial=done, unit="step", file=progress.stream,
                             dynamic_ncols=True, leave=False)
            progress._bar = self.tqdm

    def update(self, loss: float, accuracy: float | None, rate: float) -> None:
        if self.tqdm is None:
            return
        post = {"loss": f"{loss:.3f}"}
        if accuracy is not None:
            post["acc"] = f"{accuracy:.3f}"
        post["ex/s"] = f"{rate:.0f}"
        self.tqdm.set_postfix(post, refresh=False)
        self.tqdm.update(1)

    def pause(self) -> None:
        """Evaluation is under way: say so on the bar."""
        if self.tqdm is not None:
            self.tqdm.set_description("evaluating")

    def resume(self) -> None:
        if self.tqdm is not None:
            self.tqdm.set_description("")

    def close(self) -> None:
        if self.tqdm is not None:
            self.tqdm.close()
            self.progress._bar = None
