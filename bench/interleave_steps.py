"""Encoder steps of blosa.bench's cases, interleaved in one process: ratios a shared machine's
changing load cannot skew (the first encoder is every ratio's reference).

    python bench/interleave_steps.py --threads 1 --B 32 --n 14 --d 50 --mode train --reps 12 \\
        --dropout 0.4 [--full] [--compile] disan:150 biblosan:150 bilstm:150

An encoder is NAME[:HIDDEN] (no hidden: the paper's). Each case is blosa.bench.cases.EncoderCase
(random lengths in [1, n], the longest n; --full: every token real, as the trainer's length
buckets nearly give); --compile adds each encoder compiled as the trainer's --compile does
(module.compile(dynamic=True)). Prints each step's median over the rounds, and its ratio.
"""
import argparse
import statistics
import sys
import time

import torch

from blosa.bench.cases import EncoderCase, build_case
from blosa.bench.steps import make_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("encoders", nargs="+")
    for name, default in (("threads", 1), ("B", 32), ("n", 14), ("d", 50), ("reps", 12)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--mode", choices=("train", "inference"), default="train")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--full", action="store_true", help="no padding")
    parser.add_argument("--compile", action="store_true", help="also each encoder compiled")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps = {}
    for spec in args.encoders:
        name, _, hidden = spec.partition(":")
        for compiled in (False, True) if args.compile else (False,):
            built = build_case(EncoderCase(name, args.B, args.n, d=args.d, hidden=int(hidden) if hidden else None,
                                           dropout=args.dropout if args.mode == "train" else 0.0))
            if args.full:
                built.mask = torch.ones_like(built.mask)
            if compiled:
                built.encoder.compile(dynamic=True)
            label = spec + ("+compile" if compiled else "")
            steps[label] = make_step(built, args.mode)
            start = time.perf_counter()
            for _ in range(3):
                steps[label]()
            print(f"{label}: first 3 steps {time.perf_counter() - start:.1f} s", file=sys.stderr)
    times = {label: [] for label in steps}
    for _ in range(args.reps):
        for label, step in steps.items():
            start = time.perf_counter()
            step()
            times[label].append(time.perf_counter() - start)
    base = statistics.median(next(iter(times.values())))
    print(" ".join(f"{label}={statistics.median(t) * 1e3:.1f}ms({statistics.median(t) / base:.2f})"
                   for label, t in times.items()))


if __name__ == "__main__":
    main()
