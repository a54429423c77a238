"""curves.png: the training loss and the dev metrics against the step, from metrics.jsonl."""
from __future__ import annotations

from pathlib import Path


def plot_curves(records: list[dict], metric: str, path: str | Path, title: str = "") -> None:
    """Two panels: train loss, dev `metric` (its best point marked). `records` as in
    metrics.jsonl: {"step", "split", <metric>: value, ...}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if r["split"] == "train"]
    dev = [r for r in records if r["split"] == "dev" and metric in r]
    fig, (ax_loss, ax_dev) = plt.subplots(1, 2, figsize=(10, 3.6))
    ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], marker=".", color="C0")
    ax_loss.set(xlabel="step", ylabel="training loss", title="loss")
    ax_dev.plot([r["step"] for r in dev], [r[metric] for r in dev], marker=".", color="C1")
    best = [r for r in records if r["split"] == "test"]  # written at the best dev step
    if best:
        ax_dev.axvline(best[-1]["step"], color="0.6", ls="--", lw=1, label="best dev")
        ax_dev.legend(loc="lower right")
    ax_dev.set(xlabel="step", ylabel=f"dev {metric}", title=f"dev {metric}")
    for ax in (ax_loss, ax_dev):
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    tmp = Path(path).with_name(f".{Path(path).name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
