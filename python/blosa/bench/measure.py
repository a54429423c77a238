"""Measure one case where it stands: its peak memory on the first step, then its time.

`measure` is what callers use: a CPU case runs in a child process of its own (blosa.bench.child),
so that its resident-set growth is its alone and a case too big for the machine fails there under
a memory cap; a CUDA case runs in this process, the allocator's statistics being its own.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from blosa.bench import procmem
from blosa.bench.cases import MODES, EncoderCase, build_case
from blosa.bench.steps import make_step, median_seconds, synchronize


@dataclass
class Measurement:
    """peak_mib: memory the step needs above what the case holds before it (parameters and
    inputs: static_mib): activations, and for training gradients and Adadelta's state; on CPU
    the resident-set growth, on CUDA the allocator's peak. first_seconds: the time of that first
    step (after a tiny warm-up: close to a warm step's for steps of seconds, when every big
    buffer is allocated afresh anyway). seconds: the median step time over `repeats` warm steps
    after it (None when repeats = 0)."""

    peak_mib: float
    static_mib: float
    first_seconds: float
    seconds: float | None
    repeats: int
    threads: int

    def as_dict(self) -> dict:
        return asdict(self)


def _warm_up(case: EncoderCase, mode: str) -> None:
    """Run a tiny case of the same encoder, backend and mode, so that code loading, thread pools
    and first-call buffers are not counted in the real case's memory (a tiny model, not the real
    one: a warm-up step on it would allocate its gradients and optimizer state early)."""
    tiny = case.replace(B=1, n=min(case.n, 8), d=8, hidden=12)
    make_step(build_case(tiny), mode)()


def measure_here(case: EncoderCase, mode: str, repeats: int = 0,
                 limit_bytes: int | None = None) -> Measurement:
    """Peak memory of the case's first `mode` step, then the median time of `repeats` more, in
    this process. limit_bytes (CPU only): cap this process's growth from here on (procmem.cap_growth,
    which cannot be undone: for child processes). Raises procmem.OutOfMemory when a step does not fit.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 0:
        raise ValueError(f"repeats must be an int >= 0, got {repeats!r}")
    device = torch.device(case.device)
    if limit_bytes is not None and device.type != "cpu":
        raise ValueError("limit_bytes caps CPU memory; a CUDA case is bounded by its GPU")
    built = step = oom = None
    try:
        _warm_up(case, mode)
        built = build_case(case)
        step = make_step(built, mode)
        if device.type == "cuda":
            synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
            start = time.perf_counter()
            step()
            first = time.perf_counter() - start
            peak = torch.cuda.max_memory_allocated(device) - before
        else:
            if limit_bytes is not None:
                procmem.cap_growth(limit_bytes)
            before = procmem.reset_peak()
            start = time.perf_counter()
            step()
            first = time.perf_counter() - start
            peak = procmem.peak_bytes() - before
        seconds = median_seconds(step, repeats) if repeats else None
    except Exception as error:
        if not procmem.is_oom(error):
            raise
        cap = f", capped at {limit_bytes / 2**30:.3g} GiB" if limit_bytes is not None else ""
        oom = f"{case.label} {mode}: out of memory{cap} ({str(error).strip()[:300]})"
    if oom is not None:
        # Raised here, after the except clause has dropped the traceback whose frames hold the
        # case's tensors, so that a caller going on to the next case gets their memory back.
        built = step = None
        if device.type == "cuda":
            torch.cuda.empty_cache()
        raise procmem.OutOfMemory(oom)
    return Measurement(peak / procmem.MIB, built.static_bytes() / procmem.MIB, first, seconds, repeats,
                       torch.get_num_threads())


def _measure_as_dict(case: EncoderCase, mode: str, repeats: int, limit_bytes: int) -> dict:
    return measure_here(case, mode, repeats, limit_bytes).as_dict()


def measure(case: EncoderCase, mode: str, repeats: int = 0, limit_bytes: int | None = None,
            timeout_s: float | None = None, threads: int | None = None) -> Measurement:
    """Measure a case: CPU cases in a child process on `threads` threads (None: torch's default)
    under a memory cap (limit_bytes, default half of the memory available now) and a time limit
    (timeout_s, None: none); CUDA cases here, with none of these (the GPU's memory is the cap).
    Raises procmem.OutOfMemory when the case does not fit, child.CaseFailed when it fails
    otherwise (child.CaseTimeout past timeout_s)."""
    if torch.device(case.device).type == "cuda":
        return measure_here(case, mode, repeats)
    from blosa.bench.child import run_in_child  # not needed, so not imported, on CUDA

    limit = procmem.default_limit_bytes() if limit_bytes is None else limit_bytes
    result = run_in_child(_measure_as_dict, (case, mode, repeats, limit), f"{case.label} {mode}", timeout_s,
                          threads)
    return Measurement(**result)
