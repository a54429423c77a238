"""The paper's Figure 3 measured, with the training panels it lacks, and a long-sequence figure.

Run `make figures` (or `python bench/figures.py [--device cpu|cuda] [--quick] [--out DIR]`). It
writes, under DIR (docs/figures; build/figures-quick with --quick), for DEVICE:

- figure3-DEVICE.csv/.png: inference time and memory (the paper's Figure 3 a and b) and the
  training step's time and memory against the sequence length 16..384 (step 16), for the 8
  encoders of the paper at its sizes (300-d inputs, 600D baselines, 480D Bi-BloSAN): batch 64 on
  a GPU as the paper, a smaller batch on the CPU (in the title).
- long-DEVICE.csv/.png: Bi-BloSAN and DiSAN (fused op) against Multi-head and Bi-LSTM at lengths
  up to 16384, at a small batch, and Bi-BloSAN and DiSAN on the reference attention (n x n x d
  scores) until they run out of memory (marked). On the CPU a case whose step would take longer
  than --timeout is not run (marked too).

Memory is the step's peak above the process at rest before it, parameters and inputs included:
on the CPU the resident-set growth of a child process running just that case, under a cap
(--memory-limit-gib); on CUDA the allocator's peak. The CSV files get a row as each case ends
and a rerun with the same grid goes on where the last one stopped (--fresh: start over).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

import torch
from tqdm import tqdm

from blosa.bench import LABELS, PAPER_ENCODERS, EncoderCase, procmem
from blosa.bench.provenance import commit, machine, today
from blosa.bench.sweep import CsvLog, Point, run_sweep

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Grid:
    """Sizes of one figure: batch B, the lengths, d and hidden (None: the paper's), the warm steps
    timed after the first (0: the first step's time), and the time limit of one case (CPU)."""

    B: int
    lengths: tuple[int, ...]
    repeats: int
    d: int = 300
    hidden: int | None = None
    timeout_s: float | None = None


FIG3_LENGTHS = tuple(range(16, 385, 16))  # the paper's section 4.5
LONG_LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384)
# On the CPU (one thread) the sizes are chosen for `make figures` to end in about 20 minutes.
FIG3 = {"cpu": Grid(B=4, lengths=FIG3_LENGTHS, repeats=2),
        "cuda": Grid(B=64, lengths=FIG3_LENGTHS, repeats=10),
        "quick": Grid(B=2, lengths=(8, 16), repeats=1, d=16, hidden=8)}
LONG = {"cpu": Grid(B=1, lengths=LONG_LENGTHS, repeats=0, timeout_s=60.0),
        "cuda": Grid(B=8, lengths=LONG_LENGTHS, repeats=3),
        "quick": Grid(B=1, lengths=(16, 32), repeats=0, d=16, hidden=8, timeout_s=60.0)}
LONG_VARIANTS = (("biblosan", "auto"), ("disan", "auto"), ("multi_head", "auto"), ("bilstm", "auto"),
                 ("biblosan", "reference"), ("disan", "reference"))
MODE_TITLES = {"inference": "inference (no_grad forward)", "train": "training step (fwd + bwd + Adadelta)"}


def series_of(grid: Grid, variants, device: str) -> list[list[Point]]:
    """One series (growing n) per (encoder, backend, mode)."""
    def case(name: str, backend: str, n: int) -> EncoderCase:
        return EncoderCase(name, grid.B, n, d=grid.d, hidden=grid.hidden, backend=backend, device=device)

    return [[Point(case(name, backend, n), mode) for n in grid.lengths]
            for name, backend in variants for mode in ("inference", "train")]


def measure_figure(name: str, grid: Grid, variants, args, limit_bytes: int | None) -> list[list[Point]]:
    series = series_of(grid, variants, args.device)
    points = [p for s in series for p in s]
    log = CsvLog(os.path.join(args.out, f"{name}-{args.device}.csv"), points, fresh=args.fresh)
    with tqdm(total=len(points), desc=name, unit="case", file=sys.stdout) as bar:
        def progress(point: Point, done: bool) -> None:
            if done:
                bar.update(1)
            else:
                bar.set_postfix_str(f"{point.case.label} {point.mode}")

        cpu = args.device == "cpu"
        run_sweep(series, log, grid.repeats, limit_bytes, grid.timeout_s if cpu else None,
                  args.threads if cpu else None, progress)
    return series


def _label(case: EncoderCase) -> str:
    attention = case.name in ("biblosan", "disan")
    if case.backend == "reference":
        return LABELS[case.name] + " (reference)"
    return LABELS[case.name] + (" (fused)" if attention else "")


def plot(series: list[list[Point]], title: str, path: str, long: bool, limit_bytes: int | None,
         timeout_s: float | None, footer: str) -> None:
    """2 x 2 panels: rows inference, training step; columns time, peak memory; a line a series.
    Where a series stops: X at the memory cap (out of memory), a triangle at the time limit
    (not measured in time)."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9.5))
    labels = [_label(s[0].case) for s in series if s[0].mode == "inference"]
    colors = dict(zip(labels, plt.get_cmap("tab10").colors))
    notes = []
    for points in series:
        mode, label = points[0].mode, _label(points[0].case)
        style = dict(color=colors[label], linestyle="--" if points[0].case.backend == "reference" else "-",
                     marker="o", markersize=3 if not long else 5, linewidth=1.5)
        ok = [p for p in points if p.row and p.row["status"] == "ok"]
        n = [p.case.n for p in ok]
        ax_t, ax_m = axes[0 if mode == "inference" else 1]
        ax_t.plot(n, [float(p.row["seconds"]) * 1e3 for p in ok], label=label, **style)
        memory = [float(p.row["peak_mib"]) + float(p.row["static_mib"]) for p in ok]
        ax_m.plot(n, memory, label=label, **style)
        stopped = next((p for p in points if p.row and p.row["status"] != "ok"), None)
        if stopped is None:
            continue
        if timeout_s and stopped.row["status"] != "oom" and "memory" not in stopped.row["note"]:
            ax_t.plot([stopped.case.n], [timeout_s * 1e3], marker="^", markersize=10, color=colors[label],
                      linestyle="none")
        if stopped.row["status"] == "oom":
            ceiling = limit_bytes / procmem.MIB if limit_bytes else ax_m.get_ylim()[1]
            ax_m.plot([stopped.case.n], [ceiling], marker="X", markersize=12, color=colors[label],
                      linestyle="none")
            ax_m.annotate(f"{label}: out of memory\nat n={stopped.case.n}", (stopped.case.n, ceiling),
                          textcoords="offset points", xytext=(-10, -30), ha="right", fontsize=8,
                          color=colors[label])
            for ax in (ax_t, ax_m):
                ax.axvline(stopped.case.n, color=colors[label], linestyle=":", linewidth=1)
        notes.append(f"{label}, {mode}: from n={stopped.case.n} {stopped.row['status']}"
                     + (f" ({stopped.row['note']})" if stopped.row["status"] == "skipped" else ""))
    for (ax_t, ax_m), mode in zip(axes, ("inference", "train")):
        ax_t.set_title(f"{MODE_TITLES[mode]}: time", fontsize=10)
        ax_m.set_title(f"{MODE_TITLES[mode]}: peak memory", fontsize=10)
        ax_t.set_ylabel("time of a step (ms)")
        ax_m.set_ylabel("peak memory (MiB)")
        for ax in (ax_t, ax_m):
            ax.set_xlabel("sequence length n")
            # Time spans two orders of magnitude here, memory too on long sequences: log axes,
            # their ticks written as plain numbers.
            if ax is ax_t or long:
                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
                ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            else:
                ax.set_ylim(bottom=0)
            if long:
                ax.set_xscale("log", base=2)
                lengths = sorted({p.case.n for s in series for p in s})
                ax.set_xticks(lengths, [str(n) for n in lengths], rotation=45)
                ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.grid(True, which="both", alpha=0.3)
        if long and limit_bytes:
            ax_m.axhline(limit_bytes / procmem.MIB, color="gray", linestyle="--", linewidth=1)
            ax_m.text(ax_m.get_xlim()[0], limit_bytes / procmem.MIB, " memory cap of a case", va="bottom",
                      fontsize=8, color="gray")
        if long and timeout_s:
            ax_t.axhline(timeout_s * 1e3, color="gray", linestyle="--", linewidth=1)
            ax_t.text(ax_t.get_xlim()[0], timeout_s * 1e3, " time limit of a case", va="bottom", fontsize=8,
                      color="gray")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 5), bbox_to_anchor=(0.5, 0.955))
    fig.suptitle(title, y=0.995)
    fig.text(0.01, 0.005, "\n".join([footer, *notes]), fontsize=7.5, va="bottom", family="monospace")
    fig.subplots_adjust(left=0.07, right=0.98, top=0.85, bottom=0.09 + 0.014 * (len(notes) + 1),
                        hspace=0.42, wspace=0.2)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes, two lengths a figure: a test of the script")
    parser.add_argument("--out", help="output folder (docs/figures; build/figures-quick with --quick)")
    parser.add_argument("--memory-limit-gib", type=float, default=8.0,
                        help="CPU: cap on a case's memory (default 8, or half the available memory if less)")
    parser.add_argument("--fresh", action="store_true",
                        help="measure every case again, not only the missing ones")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU: threads a case (default 1: comparable between machines, a core left free)")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    if not args.memory_limit_gib > 0:
        parser.error(f"--memory-limit-gib must be > 0, got {args.memory_limit_gib}")
    args.out = args.out or os.path.join(REPO, "build/figures-quick" if args.quick else "docs/figures")
    os.makedirs(args.out, exist_ok=True)
    if args.device == "cpu":
        torch.set_num_threads(args.threads)  # as the children will: machine() names it
    sizes = "quick" if args.quick else args.device
    limit = None
    if args.device == "cpu":
        limit = min(int(args.memory_limit_gib * 2**30), procmem.default_limit_bytes())
    where = machine(args.device)
    command = f"python bench/figures.py --device {args.device}{' --quick' if args.quick else ''}"
    footer = f"{today()}, commit {commit()}, {where}; command: {command}"
    device = args.device.upper()

    grid = FIG3[sizes]
    series = measure_figure("figure3", grid, [(name, "auto") for name in PAPER_ENCODERS], args, limit)
    title = (f"The paper's Figure 3 (batch 64, GTX 1080Ti), measured on {device}: {_sizes(grid)}\n"
             f"{where}; time: median of {grid.repeats} steps; memory: peak of the first step")
    plot(series, title, os.path.join(args.out, f"figure3-{args.device}.png"), False, None, None, footer)

    grid = LONG[sizes]
    series = measure_figure("long", grid, LONG_VARIANTS, args, limit)
    timing = f"median of {grid.repeats} steps" if grid.repeats else "one step after a tiny warm-up"
    cap = f", memory cap {limit / 2**30:.3g} GiB a case" if limit else ""
    title = (f"Long sequences on {device}: {_sizes(grid)}; fused op (solid) and reference attention "
             f"(dashed)\n{where}; time: {timing}{cap}")
    timeout = grid.timeout_s if args.device == "cpu" else None
    plot(series, title, os.path.join(args.out, f"long-{args.device}.png"), True, limit, timeout, footer)

    with open(os.path.join(args.out, f"figures-{args.device}.json"), "w") as f:
        json.dump({"date": today(), "commit": commit(), "machine": where, "command": command,
                   "memory_cap_gib": limit and limit / 2**30, "figure3": vars(FIG3[sizes]),
                   "long": vars(grid)}, f, indent=1, default=list)
    print(f"wrote {args.out}/figure3-{args.device}.png/.csv and long-{args.device}.png/.csv")


def _sizes(grid: Grid) -> str:
    hidden = "paper hidden sizes" if grid.hidden is None else f"hidden {grid.hidden}"
    return f"batch {grid.B}, d={grid.d}, {hidden}"


if __name__ == "__main__":
    main()
