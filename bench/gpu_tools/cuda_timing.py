"""Timing of GPU work from Python, shared by the scripts of bench/gpu_tools/."""
from __future__ import annotations

import time

import torch


def time_ms(fn, budget_s: float = 0.25) -> float:
    """Mean time of fn in ms over back-to-back calls between two CUDA events: one warm-up call
    (compiles, autotunes), then enough repetitions (3 to 50) for about budget_s."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = time.perf_counter() - t0
    reps = max(3, min(50, int(budget_s / max(once, 1e-6))))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def kernel_times(fn, reps: int = 5) -> dict[str, float]:
    """Device time (ms) per call of fn of each kernel it launches, from CUPTI via torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    times = {}
    for evt in prof.key_averages():
        us = evt.self_device_time_total
        if us > 0:
            times[evt.key] = us / reps / 1e3
    return times
