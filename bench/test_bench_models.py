"""Every encoder of the paper: inference and training-step time, and peak memory, on CPU (and CUDA).

Run: `pytest bench/test_bench_models.py --benchmark-only` (`--paper-sizes`: batch 64, n 64;
`--tiny-sizes --benchmark-disable`: each case once, as tests/test_bench_smoke.py does).
A batch of B sentences of n tokens with d-dim random embeddings, right-padded to random lengths;
hidden sizes as in the paper's SNLI setup (600D baselines, 480D Bi-BloSAN). "inference": a
no_grad forward in eval mode; "train": forward, a linear head's cross-entropy, backward and an
Adadelta step. Each result's extra_info holds peak_mib, the step's peak memory above the
parameters and inputs (static_mib), measured on its first step: on CPU in a child process of its
own (blosa.bench.child), on CUDA from the allocator; on CPU also gflop, the step's matmul FLOPs
(blosa.bench.flops), sgemm_gflops, this run's float32 matmul rate, and x_bound, the median time
over the matmuls' time at that rate. Bi-BloSAN and DiSAN also run with
backend="reference" (the attention written plainly, materializing the n x n x d scores): its
extra_info and the summary at the end hold reference_over_fused, the whole model's time ratio.
"""
import functools

import pytest
import torch
import torch.nn.functional as F

from blosa.bench import MODES, PAPER_ENCODERS, EncoderCase, build_case, flops, measure
from blosa.bench.steps import make_step

VARIANTS = [(name, "auto") for name in PAPER_ENCODERS] + [("biblosan", "reference"), ("disan", "reference")]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@functools.cache
def _sgemm_gflops(threads: int) -> float:
    return flops.sgemm_gflops()


def _step_flops(built, mode: str) -> int:
    """Matmul FLOPs of the step make_step(built, mode) times (the optimizer's update: none)."""
    encoder, head = built.encoder, built.head
    if mode == "inference":
        return flops.inference_flops(encoder, (built.x, built.mask))
    count = flops.count_flops(lambda: F.cross_entropy(head(encoder(built.x, built.mask)[1]),
                                                      built.labels).backward())
    encoder.zero_grad(set_to_none=True)
    head.zero_grad(set_to_none=True)
    return count


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name, backend", VARIANTS, ids=[f"{n}-{b}" for n, b in VARIANTS])
def test_model(benchmark, model_sizes, model_records, name, backend, mode, device):
    B, n, d, hidden = model_sizes[device]
    case = EncoderCase(name, B, n, d=d, hidden=hidden, backend=backend, device=device)
    memory = measure(case, mode)  # its own first step: before this process ran any of the case
    built = build_case(case)
    step = make_step(built, mode)

    benchmark.group = f"{mode} {device} B={B} n={n} d={d}"
    benchmark.extra_info.update(
        encoder=name, backend=backend, hidden=case.hidden_size, peak_mib=round(memory.peak_mib, 2),
        static_mib=round(memory.static_mib, 2), threads=torch.get_num_threads(),
        parameters=sum(p.numel() for p in built.encoder.parameters()))
    benchmark.pedantic(step, rounds=5, warmup_rounds=1, iterations=1)

    stats = getattr(benchmark, "stats", None)  # None under --benchmark-disable
    if device == "cpu":
        work, rate = _step_flops(built, mode), _sgemm_gflops(torch.get_num_threads())
        benchmark.extra_info.update(gflop=round(work / 1e9, 4), sgemm_gflops=round(rate, 1))
        if stats and work:
            benchmark.extra_info["x_bound"] = round(stats.stats.median / (work / rate / 1e9), 3)
    record = dict(label=case.label, encoder=name, backend=backend, mode=mode, device=device, B=B, n=n,
                  d=d, peak_mib=memory.peak_mib, static_mib=memory.static_mib,
                  seconds=stats.stats.median if stats else None)
    fused = next((r for r in model_records if (r["encoder"], r["backend"], r["mode"], r["device"])
                  == (name, "auto", mode, device)), None)
    if backend == "reference" and fused and fused["seconds"] and record["seconds"]:
        record["reference_over_fused"] = record["seconds"] / fused["seconds"]
        benchmark.extra_info["reference_over_fused"] = round(record["reference_over_fused"], 3)
        benchmark.extra_info["reference_over_fused_memory"] = round(memory.peak_mib / fused["peak_mib"], 3)
    model_records.append(record)
