"""The paper's Table 2 (SNLI: time per training epoch, training memory, inference time) measured.

Run `python -m blosa.bench.table2 --device cpu|cuda [--steps N] [--inference-batches M]`. For
every encoder of the table, the paper's NLI model (blosa.bench.snli.NLIModel: 300-d embeddings,
600D baselines, 480D Bi-BloSAN) trains N steps of batch 64 on SNLI-shaped random pairs with
Adadelta; an epoch's time is the mean step (the first step, which allocates the gradients and
the optimizer's state, left out) times the 8,584 steps of SNLI's 549,367 training pairs. The
memory is the peak over those steps, parameters and batches included (CPU: the resident set of a
child process running just that encoder; CUDA: the allocator's peak). Inference: M batches of 100
pairs, extrapolated to the 99 batches of SNLI's 9,824 test pairs (the paper's caption says its
9,842 dev pairs: 99 batches too). It prints a markdown table with the paper's numbers
(GTX 1080Ti, TensorFlow 1.3) beside these, each also relative to Bi-BloSAN's. DiSAN and Bi-BloSAN
also run on the reference attention (--no-reference: not), which materializes the n x n x d
scores as the paper's TensorFlow code did, where blosa's fused op does not.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from blosa.bench import flops, procmem
from blosa.bench.cases import LABELS, paper_hidden
from blosa.bench.provenance import commit, machine, today
from blosa.bench.snli import TEST_PAIRS, TRAIN_PAIRS, VOCAB, NLIModel, pair_batch
from blosa.bench.steps import make_optimizer, synchronize

# The paper's Table 2: Time(s)/epoch, Memory(MB), Inference Time(s), on a GTX 1080Ti.
PAPER_TABLE2 = {
    "bilstm": (2080, 1245, 9.2), "bigru": (1728, 1259, 9.3), "bisru": (1630, 731, 8.2),
    "multi_cnn": (284, 529, 2.4), "hrchy_cnn": (343, 2341, 2.9), "multi_head": (345, 1245, 3.0),
    "disan": (587, 2267, 7.0), "biblosan": (508, 1243, 3.4),
}
TRAIN_BATCH, TEST_BATCH = 64, 100
WEIGHT_DECAY = 5e-5  # the paper's L2 factor
DEFAULTS = {"cpu": (20, 10), "cuda": (200, math.ceil(TEST_PAIRS / TEST_BATCH))}  # (steps, inference batches)


def _to(batch, device):
    return tuple(t.to(device) for t in batch)


def _train_step(model, optimizer, batch) -> None:
    *inputs, labels = batch
    optimizer.zero_grad(set_to_none=True)
    F.cross_entropy(model(*inputs), labels).backward()
    optimizer.step()


def measure_encoder(name: str, device: str, steps: int, inference_batches: int, vocab: int = VOCAB,
                    seed: int = 0, limit_bytes: int | None = None, backend: str = "auto") -> dict:
    """Train `steps` steps and run `inference_batches` test batches of encoder `name`'s NLI
    model (its attention on `backend`), here. Returns step_seconds (mean over the steps after the
    first), peak_mib (training), static_mib (parameters and batches), infer_seconds (mean a test
    batch) and the mean padded lengths. limit_bytes (CPU): cap this process's growth once warmed
    up (for child processes).
    """
    if steps < 2:
        raise ValueError(f"steps must be >= 2 (the first is not timed), got {steps}")
    if inference_batches < 1:
        raise ValueError(f"inference_batches must be >= 1, got {inference_batches}")
    dev = torch.device(device)
    generator = torch.Generator().manual_seed(seed)
    # A tiny model of the same encoder first: code, thread pools and first-call buffers load
    # there, not in the measured peak (its gradients and optimizer state are its own).
    tiny = NLIModel(name, hidden=12, vocab=50, d=8, backend=backend).to(dev)
    _train_step(tiny, make_optimizer(tiny.parameters()), _to(pair_batch(2, 50, generator), dev))
    del tiny

    torch.manual_seed(seed)
    model = NLIModel(name, paper_hidden(name), vocab, backend=backend).to(dev)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=0.5, weight_decay=WEIGHT_DECAY)
    train = [_to(pair_batch(TRAIN_BATCH, vocab, generator), dev) for _ in range(steps)]
    test = [_to(pair_batch(TEST_BATCH, vocab, generator)[:4], dev) for _ in range(inference_batches)]
    tensors = [*model.parameters(), *(t for b in train + test for t in b)]
    static = sum(t.numel() * t.element_size() for t in tensors)

    model.train()
    rate = flops.sgemm_gflops() if dev.type == "cpu" else None  # this run's, on its threads
    synchronize(dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
    else:
        if limit_bytes is not None:
            procmem.cap_growth(limit_bytes)
        before = procmem.reset_peak()
    times = []
    try:
        for batch in train:
            start = time.perf_counter()
            _train_step(model, optimizer, batch)
            synchronize(dev)
            times.append(time.perf_counter() - start)
        peak = (torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else procmem.peak_bytes()) - before
        model.eval()
        infer = []
        with torch.no_grad():
            for batch in test:
                start = time.perf_counter()
                model(*batch)
                synchronize(dev)
                infer.append(time.perf_counter() - start)
    except Exception as error:
        if procmem.is_oom(error):
            raise procmem.OutOfMemory(f"{name}: out of memory ({str(error)[:200]})") from None
        raise
    if rate is not None:  # the better of before and after: a shared machine's stalls only slow it
        rate = max(rate, flops.sgemm_gflops())
    # Matmul FLOPs of the very batches timed, counted after the timing (the counter's overhead).
    model.train()
    train_flops = statistics.fmean(flops.train_flops(model, b[:4], b[4]) for b in train[1:])
    model.eval()
    infer_flops = statistics.fmean(flops.inference_flops(model, b) for b in test)
    return dict(step_seconds=statistics.fmean(times[1:]), peak_mib=peak / procmem.MIB,
                train_gflop=train_flops / 1e9, infer_gflop=infer_flops / 1e9, sgemm_gflops=rate,
                static_mib=static / procmem.MIB, infer_seconds=statistics.fmean(infer), steps=steps,
                inference_batches=inference_batches, threads=torch.get_num_threads(),
                premise_len=statistics.fmean(b[0].shape[1] for b in train),
                hypothesis_len=statistics.fmean(b[2].shape[1] for b in train))


def variant(row: str) -> tuple[str, str]:
    """A row's (encoder, backend): "disan" -> ("disan", "auto"); "disan[reference]" -> ("disan",
    "reference"), DiSAN with its attention written plainly, materializing the scores as the
    paper's TensorFlow code did."""
    name, _, backend = row.partition("[")
    return name, backend.rstrip("]") or "auto"


def measure_all(rows, device: str, steps: int, inference_batches: int, threads: int | None = None,
                progress=lambda row: None) -> dict:
    """{row: measure_encoder's dict, or {"error": why}} for rows named as `variant` reads them;
    on the CPU each in a child process of its own, on `threads` threads."""
    results = {}
    for row in rows:
        progress(row)
        name, backend = variant(row)
        try:
            if device == "cpu":
                from blosa.bench.child import run_in_child

                limit = procmem.default_limit_bytes()
                args = (name, device, steps, inference_batches, VOCAB, 0, limit, backend)
                results[row] = run_in_child(measure_encoder, args, f"table2 {row}", threads=threads)
            else:
                results[row] = measure_encoder(name, device, steps, inference_batches, backend=backend)
        except (procmem.OutOfMemory, RuntimeError) as error:
            results[row] = {"error": str(error).splitlines()[0][:200]}
    return results


def _cell(value: float, reference: float | None, digits: int) -> str:
    ratio = f" ({value / reference:.2f})" if reference else ""
    return f"{value:,.{digits}f}{ratio}"


def bound_multiple(result: dict, seconds: str, gflop: str) -> float | None:
    """A measured time over its matmul bound (its matmul FLOPs at this run's sgemm rate), or None
    without a rate (CUDA) or without matmuls."""
    rate, work = result.get("sgemm_gflops"), result.get(gflop)
    if not rate or not work:
        return None
    return result[seconds] / (work / rate)


def _bound_cell(result: dict, seconds: str, gflop: str) -> str:
    multiple = bound_multiple(result, seconds, gflop)
    if multiple is None:
        return "-"
    return f"{multiple:.2f} ({result[gflop]:.2f} GFLOP at {result['sgemm_gflops']:.0f} GFLOP/s)"


def markdown(results: dict, device: str, header: list[str]) -> str:
    """The table: paper and ours a column each, every number also as a ratio to Bi-BloSAN's."""
    epoch_steps = math.ceil(TRAIN_PAIRS / TRAIN_BATCH)
    test_batches = math.ceil(TEST_PAIRS / TEST_BATCH)
    ours = {name: (r["step_seconds"] * epoch_steps, r["peak_mib"] + r["static_mib"],
                   r["infer_seconds"] * test_batches)
            for name, r in results.items() if "error" not in r}
    ref_paper, ref_ours = PAPER_TABLE2["biblosan"], ours.get("biblosan")
    lines = [*header, "",
             "| Model | Time(s)/epoch, paper | Time(s)/epoch, ours | Memory(MB), paper | Memory(MB), ours "
             "| Inference Time(s), paper | Inference Time(s), ours | Training step, x bound | Inference, x bound |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in results:
        base, backend = variant(name)
        paper = PAPER_TABLE2[base]
        label = ("480D " if base == "biblosan" else "") + LABELS[base]
        label += " (reference attention)" if backend == "reference" else ""
        if name not in ours:
            error = results[name]["error"]
            lines.append(f"| {label} | {paper[0]} | {error} | {paper[1]} | - | {paper[2]} | - | - | - |")
            continue
        cells = []
        for i, digits in enumerate((0, 0, 1)):
            cells += [_cell(paper[i], ref_paper[i], digits),
                      _cell(ours[name][i], ref_ours and ref_ours[i], digits)]
        cells += [_bound_cell(results[name], "step_seconds", "train_gflop"),
                  _bound_cell(results[name], "infer_seconds", "infer_gflop")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    first = next((r for r in results.values() if "error" not in r), None)
    if first:
        lines += ["", _notes(first, device, epoch_steps, test_batches)]
    return "\n".join(lines)


def _notes(first: dict, device: str, epoch_steps: int, test_batches: int) -> str:
    """How our numbers were made, under the table."""
    reduced = " (a reduced number, on the CPU)" if device == "cpu" else ""
    memory = ("the resident-set growth of a child process running that encoder alone (the paper's is a "
              "GPU's)" if device == "cpu" else "torch's CUDA allocator peak")
    return (f"In parentheses: relative to Bi-BloSAN's. Ours: {device.upper()}, {first['threads']} "
            f"thread(s). An epoch is {epoch_steps:,} steps of batch {TRAIN_BATCH} ({TRAIN_PAIRS:,} pairs), "
            f"extrapolated from the mean of {first['steps'] - 1} steps{reduced} after a first, untimed "
            f"one; inference is {test_batches} batches of {TEST_BATCH} (the {TEST_PAIRS:,} test pairs), "
            f"extrapolated from {first['inference_batches']}. Memory: the training steps' peak, "
            f"parameters and batches included, in MiB: {memory}. Padded lengths averaged "
            f"{first['premise_len']:.1f} (premises) and {first['hypothesis_len']:.1f} (hypotheses) "
            "tokens. The paper's numbers: GTX 1080Ti, TensorFlow 1.3." + _bound_note(first))


def _bound_note(first: dict) -> str:
    """What the "x bound" columns mean, with this run's matmul rate (CPU runs only)."""
    if not first.get("sgemm_gflops"):
        return ""
    return (f" x bound: a training step's (a test batch's) time over the time its matmul FLOPs (counted "
            f"on the model by torch.utils.flop_counter, the mean of the batches timed; in parentheses) "
            f"take at this machine's float32 matmul rate on {first['threads']} thread(s) (the best "
            "1024 x 1024 matmul, timed before and after each encoder's steps: after the FLOPs in "
            "parentheses; a machine shared with other jobs gives each encoder's run its own). "
            "Elementwise work, the masked_block_attn op and an LSTM's gate nonlinearities count 0.")


def emit(table: str, out: str | None) -> None:
    """Print a markdown table, and write it to the file `out` too where one is named."""
    print(table)
    if out:
        with open(out, "w") as f:
            f.write(table + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m blosa.bench.table2", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--steps", type=int, help="training steps measured (default "
                        f"{DEFAULTS['cpu'][0]} on the CPU, {DEFAULTS['cuda'][0]} on CUDA)")
    parser.add_argument("--inference-batches", type=int, help="test batches measured (default "
                        f"{DEFAULTS['cpu'][1]} on the CPU, all {DEFAULTS['cuda'][1]} on CUDA)")
    parser.add_argument("--encoders", nargs="+", choices=sorted(PAPER_TABLE2), default=list(PAPER_TABLE2))
    parser.add_argument("--reference", action=argparse.BooleanOptionalAction, default=True,
                        help="also DiSAN and Bi-BloSAN on the reference attention (default: yes)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    parser.add_argument("--out", help="also write the markdown to this file")
    args = parser.parse_args(argv)
    steps, batches = DEFAULTS[args.device]
    args.steps = steps if args.steps is None else args.steps
    args.inference_batches = batches if args.inference_batches is None else args.inference_batches
    if args.steps < 2:
        parser.error(f"--steps must be >= 2 (the first step is not timed), got {args.steps}")
    if args.inference_batches < 1:
        parser.error(f"--inference-batches must be >= 1, got {args.inference_batches}")
    if args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    if args.device == "cpu":
        torch.set_num_threads(args.threads)  # as the children will: machine() names it
    command = "python -m blosa.bench.table2 " + " ".join(sys.argv[1:] if argv is None else argv)
    header = ["# The paper's Table 2, measured", "",
              f"{today()}, {machine(args.device)}, commit {commit()}: `{command.strip()}`"]
    rows = list(args.encoders)
    if args.reference:
        rows += [f"{name}[reference]" for name in ("disan", "biblosan") if name in args.encoders]
    results = measure_all(rows, args.device, args.steps, args.inference_batches, args.threads,
                          lambda row: print(f"measuring {row}...", file=sys.stderr, flush=True))
    emit(markdown(results, args.device, header), args.out)


if __name__ == "__main__":
    main()
