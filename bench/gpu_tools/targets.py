"""Where the GPU backends stand against the targets of issues 4 and 5, from gpu_rates.py's JSON.

    python bench/gpu_tools/targets.py rates.json                        # markdown table
    python bench/gpu_tools/targets.py rates.json --plot targets.png     # and a chart of the same figures
    python bench/gpu_tools/targets.py a.json b.json --take "cuda rcp-fma"

Targets, at B=64, n=384, d=300 in blocks of r=8 and in one block: forward >= 1.3e12 score
elements/s and forward+backward >= 0.5e12 (kernel time); full DiSA (one block) at B=8, n=8192,
d=300 forward+backward in memory O(B·n·d). Each cell is a backend's default in one dtype; a
variant that has since become the default stands in for it with --take "BACKEND VARIANT" (its
label in the JSON). Later files override earlier ones. Needs no GPU; the plot needs matplotlib.
"""
from __future__ import annotations

import argparse
import json
import sys

# (config, mode) -> elements/s, as gpu_rates.py names its configs and modes.
RATE_TARGETS = {
    ("r=8", "fwd"): 1.3e12,
    ("r=8", "fwd+bwd"): 0.5e12,
    ("one block", "fwd"): 1.3e12,
    ("one block", "fwd+bwd"): 0.5e12,
}
MEMORY_TARGET = ("DiSA n=8192", "fwd+bwd")
# Linear memory, judged: at most this many B·n·d tensors of peak extra memory. The n×n×d scores
# of one block would be n = 8192 of them; the op's saved out and lse, its gradients and the
# backward's scratch are a handful.
MAX_TENSORS = 16
BACKENDS = ("cuda", "triton")
NAMES = {"cuda": "CUDA C++", "triton": "Triton"}
DTYPES = ("float32", "bfloat16")


def load(paths: list[str], take: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """(records, run) from gpu_rates.py JSON files: records maps (backend, dtype, config, mode)
    to the record of the backend's default, or of the variant labelled in `take` ("cuda
    rcp-fma": the variant's record in place of its backend's), a later file's over an earlier
    one's; run holds the first file's device and bound. ValueError names a label of `take`
    that no file holds."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    labels = {r["backend"] for run in runs for r in run["records"]}
    missing = [label for label in take if label not in labels]
    if missing:
        raise ValueError(f"no records of {', '.join(map(repr, missing))} in {', '.join(paths)} "
                         f"(labels there: {', '.join(sorted(labels))})")
    records = {}
    # The defaults (labelled by their backend alone), then the variants taken, each in file
    # order: a taken variant stands in for its default whichever file holds which.
    for wanted in [label for label in labels if " " not in label], take:
        for run in runs:
            for r in run["records"]:
                if r["backend"] in wanted:
                    records[r["backend"].split(" ")[0], r["dtype"], r["config"], r["mode"]] = r
    return records, {"device": runs[0]["device"], "bound": runs[0]["bound"]}


def rate_cell(record: dict | None, target: float) -> str:
    """A rate in elements/s: bold where it meets `target`, else with its fraction of it."""
    if record is None:
        return "-"
    rate = record["rate"]
    text = f"{rate / 1e12:.3g}e12"
    return f"**{text}**" if rate >= target else f"{text} ({rate / target:.0%})"


def memory_cell(record: dict | None) -> str:
    """Kernel time and peak extra memory in B·n·d tensors: bold where linear (MAX_TENSORS)."""
    if record is None:
        return "-"
    tensors = record["peak_mib"] / record["bnd_mib"]
    text = f"{record['kernel_ms']:.1f} ms, {tensors:.1f} B·n·d"
    return f"**{text}**" if tensors <= MAX_TENSORS else text


def table(records: dict) -> list[str]:
    """Markdown rows: one per target, one column per backend and dtype; a met target in bold,
    a rate short of it with its fraction of the target."""
    columns = [(b, t) for b in BACKENDS for t in DTYPES]
    rows = ["| config | mode | " + " | ".join(f"{b} {t}" for b, t in columns) + " | target |",
            "|---|---|" + "---|" * len(columns) + "---|"]
    for (config, mode), target in RATE_TARGETS.items():
        cells = [rate_cell(records.get((b, t, config, mode)), target) for b, t in columns]
        rows.append(f"| {config} | {mode} | " + " | ".join(cells)
                    + f" | {target / 1e12:.2g}e12/s |")
    config, mode = MEMORY_TARGET
    cells = [memory_cell(records.get((b, t, config, mode))) for b, t in columns]
    rows.append(f"| {config} | {mode} | " + " | ".join(cells)
                + f" | peak memory <= {MAX_TENSORS} B·n·d |")
    return rows


def plot(records: dict, run: dict, path: str, title: str = "") -> None:
    """One panel per rate target: a bar per backend and dtype (elements/s of kernel time), the
    target as a dashed line, each bar's memory bound as a tick over it where it is within twice
    the larger of the target and the bar (the r = 8 calls), and in the forward
    panels the card's special-function bound (one tanh and one exp an element)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(1, len(RATE_TARGETS), figsize=(3.2 * len(RATE_TARGETS), 3.6))
    colors = {"float32": "#4c72b0", "bfloat16": "#dd8452"}
    lines = {"target": dict(color="crimson", ls="--", lw=1),
             "tanh+exp bound": dict(color="grey", ls=":", lw=1),
             "memory bound": dict(color="black", lw=1.5)}
    for ax, ((config, mode), target) in zip(axes, RATE_TARGETS.items()):
        top = target
        for i, backend in enumerate(BACKENDS):
            for j, dtype in enumerate(DTYPES):
                r = records.get((backend, dtype, config, mode))
                if r is None:
                    continue
                x, rate = i + (j - 0.5) * 0.38, r["rate"] / 1e12
                ax.bar(x, rate, 0.36, color=colors[dtype],
                       edgecolor="black" if r["rate"] >= target else None)
                ax.text(x, rate, f"{rate:.2f}", ha="center", va="bottom", fontsize=7)
                top = max(top, r["rate"])
                if r["memory_bound"] > 2 * max(target, r["rate"]):
                    continue  # far from binding (one block): off the chart
                memory = r["memory_bound"] / 1e12
                ax.plot([x - 0.18, x + 0.18], [memory, memory], **lines["memory bound"])
                top = max(top, r["memory_bound"])
        ax.axhline(target / 1e12, **lines["target"])
        if mode == "fwd":
            ax.axhline(run["bound"] / 1e12, **lines["tanh+exp bound"])
            top = max(top, run["bound"])
        ax.set_ylim(0, top / 1e12 * 1.12)
        ax.set_xticks(range(len(BACKENDS)), [NAMES[b] for b in BACKENDS])
        ax.set_title(f"{config}, {mode}", fontsize=9)
    axes[0].set_ylabel("score elements/s (1e12)")
    legend = [Patch(color=c, label=t) for t, c in colors.items()]
    legend += [Line2D([], [], label=name, **style) for name, style in lines.items()]
    fig.legend(handles=legend, loc="lower center", ncol=len(legend), fontsize=8, frameon=False)
    fig.suptitle(title or f"{run['device']}, B=64, n=384, d=300 (bars outlined: target met)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rates", nargs="+", help="gpu_rates.py JSON files (later ones override)")
    ap.add_argument("--take", action="append", default=[], metavar="'BACKEND VARIANT'",
                    help="a measured variant that is now its backend's default (repeatable)")
    ap.add_argument("--plot", metavar="PNG", help="also draw the figures to this file")
    ap.add_argument("--title", default="", help="the plot's title")
    args = ap.parse_args(argv)
    try:
        records, run = load(args.rates, tuple(args.take))
    except ValueError as e:
        ap.error(f"--take: {e}")
    print("\n".join(table(records)))
    if args.plot:
        plot(records, run, args.plot, args.title)
        print(f"\nwrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
