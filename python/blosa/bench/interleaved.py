"""Table 2's encoders timed in one process, their steps interleaved: ratios a shared machine
cannot skew.

Run `python -m blosa.bench.interleaved [--encoders ...] [--threads N] [--steps S]
[--inference-batches M]`. blosa.bench.table2 measures one encoder after another, each in a child
process of its own (for its memory): on a machine that other jobs share, the load changes between
encoders, and with it their ratios. Here every encoder's NLI model (blosa.bench.snli, the same
batches) takes its training step in turn, round after round, then its inference batch likewise;
each time is the median over the rounds (the first round left out), each ratio against the first
encoder's, and each time a multiple of its matmul bound (blosa.bench.flops; the matmul rate
timed before and after, the better kept). No memory: the encoders share the process.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from blosa.bench import flops
from blosa.bench.cases import LABELS, paper_hidden
from blosa.bench.provenance import commit, machine, today
from blosa.bench.snli import VOCAB, NLIModel, pair_batch
from blosa.bench.table2 import (PAPER_TABLE2, TEST_BATCH, TRAIN_BATCH, WEIGHT_DECAY, _train_step,
                                 bound_multiple, emit)


def measure_interleaved(names: list[str], steps: int, inference_batches: int, vocab: int = VOCAB,
                        seed: int = 0) -> dict:
    """{name: step_seconds, infer_seconds (medians over the rounds after the first), train_gflop,
    infer_gflop (means over the batches), sgemm_gflops}, every encoder on the same batches."""
    if steps < 2 or inference_batches < 2:
        raise ValueError(f"steps and inference_batches must be >= 2, got {steps}, {inference_batches}")
    generator = torch.Generator().manual_seed(seed)
    train = [pair_batch(TRAIN_BATCH, vocab, generator) for _ in range(steps)]
    test = [pair_batch(TEST_BATCH, vocab, generator)[:4] for _ in range(inference_batches)]
    models, optimizers = {}, {}
    for name in names:
        torch.manual_seed(seed)
        models[name] = NLIModel(name, paper_hidden(name), vocab)
        optimizers[name] = torch.optim.Adadelta(models[name].parameters(), lr=0.5, weight_decay=WEIGHT_DECAY)
    rate = flops.sgemm_gflops()
    times = {name: ([], []) for name in names}
    for batch in train:
        for name in names:
            models[name].train()
            start = time.perf_counter()
            _train_step(models[name], optimizers[name], batch)
            times[name][0].append(time.perf_counter() - start)
    with torch.no_grad():
        for batch in test:
            for name in names:
                models[name].eval()
                start = time.perf_counter()
                models[name](*batch)
                times[name][1].append(time.perf_counter() - start)
    rate = max(rate, flops.sgemm_gflops())
    results = {}
    for name in names:
        model = models[name].train()
        train_flops = statistics.fmean(flops.train_flops(model, b[:4], b[4]) for b in train[1:])
        model.eval()
        infer_flops = statistics.fmean(flops.inference_flops(model, b) for b in test[1:])
        results[name] = dict(step_seconds=statistics.median(times[name][0][1:]),
                             infer_seconds=statistics.median(times[name][1][1:]),
                             train_gflop=train_flops / 1e9, infer_gflop=infer_flops / 1e9, sgemm_gflops=rate)
    return results


def markdown(results: dict, header: list[str]) -> str:
    """A row an encoder: its median training step and test batch, each against the first
    encoder's and as a multiple of its matmul bound."""
    first = next(iter(results.values()))
    base = LABELS[next(iter(results))]
    lines = [*header, "",
             f"| Model | Training step (s) | vs {base} | x bound | Test batch (s) | vs {base} | x bound |",
             "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        label = ("480D " if name == "biblosan" else "") + LABELS[name]
        train_x = bound_multiple(r, "step_seconds", "train_gflop")
        infer_x = bound_multiple(r, "infer_seconds", "infer_gflop")
        lines.append(f"| {label} | {r['step_seconds']:.3f} | {r['step_seconds'] / first['step_seconds']:.2f} "
                     f"| {train_x:.2f} ({r['train_gflop']:.1f} GFLOP) | {r['infer_seconds']:.3f} "
                     f"| {r['infer_seconds'] / first['infer_seconds']:.2f} | {infer_x:.2f} ({r['infer_gflop']:.1f} GFLOP) |")
    lines += ["", f"Medians over the rounds after the first, batches of {TRAIN_BATCH} (training, Adadelta) "
              f"and {TEST_BATCH} (test) SNLI-shaped pairs, the same for every encoder; {first['sgemm_gflops']:.0f} "
              "GFLOP/s the float32 matmul rate of x bound (a 1024 x 1024 matmul, the better of before and after)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m blosa.bench.interleaved", description=__doc__.splitlines()[0])
    parser.add_argument("--encoders", nargs="+", choices=sorted(PAPER_TABLE2),
                        default=["bilstm", "bigru", "multi_head", "disan", "biblosan"],
                        help="the first is every ratio's reference (default: Bi-LSTM)")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--inference-batches", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="also write the markdown to this file")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    command = "python -m blosa.bench.interleaved " + " ".join(sys.argv[1:] if argv is None else argv)
    header = ["# Table 2's encoders, interleaved", "",
              f"{today()}, {machine('cpu')}, commit {commit()}: `{command.strip()}`"]
    emit(markdown(measure_interleaved(args.encoders, args.steps, args.inference_batches), header),
         args.out)


if __name__ == "__main__":
    main()
