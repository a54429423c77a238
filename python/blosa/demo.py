"""A short demo of the fused op's speed and memory against the plain PyTorch reference.

Run `python -m blosa.demo` (or `make demo`). It prints forward+backward time and peak memory at
the paper's sizes (d = 300; block length 8 as in Bi-BloSAN, one block as in DiSAN), then sweeps
the sequence length of one block (DiSA) and plots time and memory against it, like the paper's
section 4.5, to `--plot` (default demo.png).
"""
from __future__ import annotations

import argparse
import os
import time

import torch
from tqdm import tqdm

from blosa import masked_block_attn, masked_block_attn_ref
from blosa.memprobe import peak_memory_mib

IMPLS = {"fused": masked_block_attn, "reference": masked_block_attn_ref}
CONFIGS = [  # (label, B, n, d, block_len)
    ("Bi-BloSA block, r=8", 32, 64, 300, 8),
    ("DiSA, one block", 8, 128, 300, 0),
]
SWEEP_B, SWEEP_D, SWEEP_LENGTHS = 4, 300, (16, 32, 64, 128, 256)


def seconds_per_call(fn, repeats: int = 3) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def measure(impl: str, B: int, n: int, d: int, block_len: int) -> tuple[float, float]:
    """(seconds, peak MiB) of one forward+backward of `impl` on random float32 inputs."""
    inputs = [torch.randn(B, n, d, requires_grad=True) for _ in range(3)]

    def run():
        out = IMPLS[impl](*inputs, None, None, block_len)
        out.backward(torch.ones_like(out))

    return seconds_per_call(run), peak_memory_mib(impl, B, n, d, block_len)


def print_table() -> None:
    rows = []
    for label, B, n, d, r in tqdm(CONFIGS, desc="paper sizes"):
        rows.append((f"{label} (B={B}, n={n}, d={d})", {impl: measure(impl, B, n, d, r) for impl in IMPLS}))
    print(f"\nmasked_block_attn forward+backward on {torch.get_num_threads()} CPU threads, float32\n")
    print(f"{'config':42} {'fused ms':>9} {'ref ms':>9} {'speed-up':>9} {'fused MiB':>10} {'ref MiB':>9}")
    for label, m in rows:
        (t_f, mem_f), (t_r, mem_r) = m["fused"], m["reference"]
        print(f"{label:42} {t_f * 1e3:9.1f} {t_r * 1e3:9.1f} {t_r / t_f:8.1f}x {mem_f:10.1f} {mem_r:9.1f}")


def plot_sweep(path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [(impl, n) for n in SWEEP_LENGTHS for impl in IMPLS]
    results = {impl: [] for impl in IMPLS}
    for impl, n in tqdm(steps, desc="sequence-length sweep"):
        results[impl].append(measure(impl, SWEEP_B, n, SWEEP_D, 0))
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4))
    for impl, values in results.items():
        ax_t.plot(SWEEP_LENGTHS, [s * 1e3 for s, _ in values], "o-", label=impl)
        ax_m.plot(SWEEP_LENGTHS, [mib for _, mib in values], "o-", label=impl)
    for ax, ylabel in ((ax_t, "forward+backward time (ms)"), (ax_m, "peak extra memory (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n (one block)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"masked_block_attn on CPU, B={SWEEP_B}, d={SWEEP_D}, float32, direction 'forward'")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")


def plot_path_problem(path: str) -> str | None:
    """Why the plot could not be written to `path` (checked before minutes of timing), or None."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return "the plot needs matplotlib (pip install matplotlib); or pass --no-plot"

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"{path} is a folder; name a file in it"
    if not os.path.isdir(folder):
        return f"folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"folder {folder} is not writable"
    suffix = os.path.splitext(path)[1][1:].lower()
    formats = FigureCanvasAgg(Figure()).get_supported_filetypes()
    if suffix and suffix not in formats:
        return f"matplotlib cannot write .{suffix} files; use one of {', '.join(sorted(formats))}"
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", default="demo.png", help="where to write the sweep's plot")
    parser.add_argument("--no-plot", action="store_true", help="skip the sequence-length sweep")
    args = parser.parse_args(argv)
    problem = None if args.no_plot else plot_path_problem(args.plot)
    if problem:
        parser.error(f"--plot: {problem}")
    print_table()
    if not args.no_plot:
        plot_sweep(args.plot)


if __name__ == "__main__":
    main()
