"""Score-element rates of the GPU backends of masked_block_attn (CUDA C++ and Triton).

    python bench/gpu_tools/gpu_rates.py --out rates.json
    python bench/gpu_tools/gpu_rates.py --memory-bounds 4.8e12

Measures forward and forward+backward of every available GPU backend at B=64, d=300, n=384
with blocks of r=8 and with one block, and full DiSA (one block) at B=8, n=8192, d=300
(forward+backward and its peak memory), in float32 and bfloat16, direction "forward".
Modes: "fwd", a forward no gradient will reach (no lse written); "fwd+bwd", forward and
backward of a training step through the public op (at r = 8 neither backend saves lse: their
small-block backwards recompute it); and at r = 8, where lse is a third of the bfloat16 forward
traffic, the same two with lse written and read, as every training step ran before the
recomputing backwards: "fwd+lse" and "fwd+bwd+lse" (the backend's forward op called with
compute_lse=True).
Two times per case: "call" (CUDA events around back-to-back calls from Python: what a user
sees, host overhead included when the host is the slower side) and "kernels" (the summed device
time of the kernels one call launches, from torch.profiler: the GPU's own work, which the rates
use). "Elements" are the allowed (query, key, feature) triples, B·(n/r)·r(r−1)/2·d for
r-blocks; the rate is set beside the nominal SFU bound of the card (one tanh and one exp per
element forward: SMs × 16 MUFU/clock × 1.98 GHz / 2 ≈ 2.1e12/s on an H100 SXM; bench/gpu_tools/sfu_peak.py
measures what the card really gives) and beside its memory bound (min_bytes at the nominal
DRAM bandwidth: the binding one at r = 8). Writes a JSON list of records and prints a markdown
table. About a minute.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import blosa  # noqa: E402
from cuda_timing import kernel_times, time_ms  # noqa: E402  (the script's own folder, bench/gpu_tools/)

BACKENDS = ("cuda", "triton")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# (name, B, n, d, block_len, modes)
CONFIGS = (
    ("r=8", 64, 384, 300, 8, ("fwd", "fwd+lse", "fwd+bwd", "fwd+bwd+lse")),
    ("one block", 64, 384, 300, 0, ("fwd", "fwd+bwd")),
    ("DiSA n=8192", 8, 8192, 300, 0, ("fwd+bwd",)),
)
CLOCK_HZ = 1.98e9  # H100/H200 SXM boost clock


def elements(B: int, n: int, d: int, block_len: int, direction: str = "forward") -> int:
    """Allowed (query, key, feature) triples without a mask."""
    r = n if block_len <= 0 or block_len >= n else block_len
    def pairs(m: int) -> int:
        return {"forward": m * (m - 1) // 2, "backward": m * (m - 1) // 2,
                "diag": m * (m - 1), "all": m * m}[direction]
    full, last = divmod(n, r)
    return B * d * (full * pairs(r) + pairs(last))


def sfu_bound() -> float:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return sms * 16 * CLOCK_HZ / 2


def min_bytes(B: int, n: int, d: int, itemsize: int, mode: str) -> int:
    """Bytes a call of `mode` moves at the least, without a mask: each tensor its ops read,
    read once, and each one they write, written once. Forward: dep, head, value and bias in,
    out (and lse, float32 but for float64 inputs, in the "+lse" modes) out. Backward:
    grad_out, dep, head, value and bias in (the recomputing backward, no lse saved, recomputes
    out), and with lse the saved out and lse too; d_dep, d_head, d_value and d_bias out."""
    x = B * n * d * itemsize
    lse = B * n * d * max(itemsize, 4)  # the accumulation dtype: float32, float64 for float64
    bias = d * itemsize
    fwd = 3 * x + bias + x
    bwd = 4 * x + bias + 3 * x + bias
    return {"fwd": fwd, "fwd+lse": fwd + lse, "fwd+bwd": fwd + bwd,
            "fwd+bwd+lse": fwd + lse + bwd + x + lse}[mode]


def dram_bandwidth() -> float:
    """Nominal DRAM bandwidth of device 0 in bytes/s: two transfers a memory clock over the
    whole bus (H100 SXM: 2 × 2.62 GHz × 5120 bits / 8 ≈ 3.35e12; H200: 2 × 3.2 GHz × 6144 / 8 ≈
    4.9e12)."""
    props = torch.cuda.get_device_properties(0)
    return 2 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8


def memory_bound(elements_: int, bytes_: int, bandwidth: float) -> float:
    """Elements/s a call could reach if moving its bytes at the full bandwidth were all it
    cost: at r = 8 the bytes take as long as the tanh and exp (bfloat16) or longer (float32)."""
    return elements_ / (bytes_ / bandwidth)


def memory_bound_table(bandwidth: float) -> list[str]:
    """Markdown rows of every config, dtype and mode: its least bytes (min_bytes) and the rate
    they allow at `bandwidth` B/s (memory_bound). Needs no GPU: `--memory-bounds`."""
    rows = ["| config | dtype | mode | least MB | memory bound (elements/s) |",
            "|---|---|---|---|---|"]
    for cname, B, n, d, r, modes in CONFIGS:
        for dname, dtype in DTYPES.items():
            for mode in modes:
                moved = min_bytes(B, n, d, dtype.itemsize, mode)
                rows.append(f"| {cname} | {dname} | {mode} | {moved / 1e6:.1f} | "
                            f"{memory_bound(elements(B, n, d, r), moved, bandwidth):.3g} |")
    return rows


@contextlib.contextmanager
def wall_time_of(owner, name: str, totals: list):
    """While active, every call of owner.name adds its wall time (s) to totals[0] and 1 to
    totals[1]."""
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[0] += time.perf_counter() - start
            totals[1] += 1

    setattr(owner, name, timed)
    try:
        yield
    finally:
        setattr(owner, name, original)


def host_profile(fn, calls: int = 50, top: int = 12, timed=None) -> str:
    """Host time of fn per call (no synchronization: what the CPU spends launching) and the
    functions taking it from cProfile over `calls` calls: the `top` by cumulative time, then by
    their own time. timed: (owner, attribute name) of a function whose share of that time is
    measured apart, with a plain clock. (On the H200 on 2026-11-27 cProfile put 1 ms of Triton's
    1.5 ms a call in the own time of torch.library's backend_impl, about the cumulative time of
    the backend_fn that runs inside it: its accounting under torch.library does not add up, so
    the Triton launches, `blosa_kernels.op._launch`, are timed directly.)"""
    totals = [0.0, 0]  # the timed function's seconds and calls
    torch.cuda.synchronize()
    with wall_time_of(*timed, totals) if timed is not None else contextlib.nullcontext():
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        host_us = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    share = "" if timed is None else (f"; {timed[1]}: {totals[0] / calls * 1e6:.0f} us per call "
                                      f"({totals[1] / calls:g} calls of it per call)")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    torch.cuda.synchronize()
    parts = [f"host {host_us:.0f} us per call{share}; cProfile, {calls} calls"]
    for order in ("cumulative", "tottime"):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(top)
        parts.append(f"by {order}:\n    ncalls" + text.getvalue().split("ncalls", 1)[-1].rstrip())
    return "\n  ".join(parts)


def measure(backend, dtype, B, n, d, block_len, mode, profile_host=False):
    """Call ms (CUDA events), peak extra bytes and kernel ms per call of one job; with
    profile_host, also prints where the host time of a call goes (host_profile)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    dep, head, value = (torch.randn(B, n, d, device="cuda", dtype=dtype, generator=gen) for _ in range(3))
    bias = torch.randn(d, device="cuda", dtype=dtype, generator=gen)
    leaves = [t.requires_grad_(mode != "fwd") for t in (dep, head, value, bias)]
    grad_out = torch.randn(B, n, d, device="cuda", dtype=dtype, generator=gen)

    args = (*leaves, None, block_len, "forward", 5.0)
    if mode.endswith("+lse"):  # the backend's forward op, told to write lse
        if backend == "cuda":
            def call():
                return torch.ops.blosa.masked_block_attn_fwd(*args, compute_lse=True)[0]
        else:
            from blosa_kernels import masked_block_attn_triton_fwd

            def call():
                return masked_block_attn_triton_fwd(*args, True)[0]
    else:
        def call():
            return blosa.masked_block_attn(*args, backend=backend)

    if mode == "fwd":
        def fn():
            with torch.no_grad():
                call()
    elif mode == "fwd+lse":
        fn = call
    else:
        def fn():
            torch.autograd.grad(call(), leaves, grad_out)

    fn()  # compile / autotune outside the timing; raises if the backend is unavailable
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    ms = time_ms(fn)
    peak = torch.cuda.max_memory_allocated() - base
    try:
        kernels = kernel_times(fn)
    except Exception as e:  # noqa: BLE001  the call time still stands without the profiler
        print(f"  (no kernel times: {type(e).__name__}: {e})")
        kernels = {}
    if profile_host:
        timed = None
        if backend == "triton":
            import blosa_kernels.op

            timed = (blosa_kernels.op, "_launch")
        print(f"  {backend} {dtype} r={block_len} {mode}: {host_profile(fn, timed=timed)}")
    return ms, peak, kernels


# Read by the CUDA launcher at every call (csrc/cuda/masked_block_attn_cuda.cu).
TUNING_VARIABLES = ("BLOSA_CUDA_TILE", "BLOSA_CUDA_BACKWARD", "BLOSA_CUDA_FORWARD",
                    "BLOSA_CUDA_SMALL_VEC", "BLOSA_CUDA_SMALL_PERSISTENT",
                    "BLOSA_CUDA_SMALL_DENSE", "BLOSA_CUDA_SMALL_LOADS_FIRST",
                    "BLOSA_CUDA_SMALL_RCP", "BLOSA_CUDA_COLUMN_SUMS",
                    "BLOSA_CUDA_SMALL_STAGED", "BLOSA_CUDA_SMALL_STAGED_BLOCKS")


# Values of BLOSA_CUDA_SMALL_STAGED by variant part.
SMALL_STAGED_PARTS = {"small-staged": "1", "small-staged-forward": "forward",
                      "small-staged-backward": "backward"}


def variant_env(variant: str) -> dict[str, str]:
    """Environment of a CUDA kernel variant: "+"-joined parts, "tileN" (BLOSA_CUDA_TILE=N),
    "split" / "fused" (BLOSA_CUDA_BACKWARD), "stream" / "staged" (BLOSA_CUDA_FORWARD), "vecN"
    (BLOSA_CUDA_SMALL_VEC=N), "persistent" (BLOSA_CUDA_SMALL_PERSISTENT=1), "general"
    (BLOSA_CUDA_SMALL_DENSE=0: no dense small-block kernels), "loads-first" / "loads-later"
    (BLOSA_CUDA_SMALL_LOADS_FIRST=1, the default / 0: whether the dense kernels issue every
    load before their math), "rcp-fma" / "rcp-mufu" (BLOSA_CUDA_SMALL_RCP=fma, the default /
    mufu: whether the dense 16-bit forward with its loads first takes 1 / sum from Newton
    steps on the FMA pipe or from the special-function unit), "sums-one" / "sums-two"
    (BLOSA_CUDA_COLUMN_SUMS=one / two, the default: d_bias's column sums in one launch of tall
    thread blocks or two), "small-staged" / "small-staged-forward" / "small-staged-backward"
    (BLOSA_CUDA_SMALL_STAGED=1 / forward / backward: the dense r = 8 kernels with each block's
    rows staged through shared memory as 16-byte vectors), "staged-blocksN"
    (BLOSA_CUDA_SMALL_STAGED_BLOCKS=N: blocks a staged thread block runs in turn), e.g.
    "stream+split"."""
    env = {}
    for part in variant.split("+"):
        if part.startswith("tile") and part[4:].isdigit():
            env["BLOSA_CUDA_TILE"] = part[4:]
        elif part in ("split", "fused"):
            env["BLOSA_CUDA_BACKWARD"] = part
        elif part in ("stream", "staged"):
            env["BLOSA_CUDA_FORWARD"] = part
        elif part.startswith("vec") and part[3:].isdigit():
            env["BLOSA_CUDA_SMALL_VEC"] = part[3:]
        elif part == "persistent":
            env["BLOSA_CUDA_SMALL_PERSISTENT"] = "1"
        elif part == "general":
            env["BLOSA_CUDA_SMALL_DENSE"] = "0"
        elif part in ("loads-first", "loads-later"):
            env["BLOSA_CUDA_SMALL_LOADS_FIRST"] = "1" if part == "loads-first" else "0"
        elif part in ("rcp-fma", "rcp-mufu"):
            env["BLOSA_CUDA_SMALL_RCP"] = part.removeprefix("rcp-")
        elif part in ("sums-one", "sums-two"):
            env["BLOSA_CUDA_COLUMN_SUMS"] = part.removeprefix("sums-")
        elif part in SMALL_STAGED_PARTS:
            env["BLOSA_CUDA_SMALL_STAGED"] = SMALL_STAGED_PARTS[part]
        elif part.startswith("staged-blocks") and part[13:].isdigit():
            env["BLOSA_CUDA_SMALL_STAGED_BLOCKS"] = part[13:]
        else:
            raise ValueError(f"unknown CUDA variant part {part!r} in {variant!r} (tileN, split, "
                             "fused, stream, staged, vecN, persistent, general, loads-first, "
                             "loads-later, rcp-fma, rcp-mufu, sums-one, sums-two, "
                             f"{', '.join(SMALL_STAGED_PARTS)}, staged-blocksN)")
    return env


# Variant parts (CUDA's and Triton's) that change the small-block kernels or their d_bias, and
# so are measured at r = 8; "vecN" too.
SMALL_BLOCK_PARTS = frozenset({
    "persistent", "general", "loads-first", "loads-later", "rcp-fma", "rcp-mufu", "per-block",
    "bias-mv", "bias-sum", "rcp-newton", "rcp-div", "sums-one", "sums-two",
    "small-staged", "small-staged-forward", "small-staged-backward", "pairs-static-d"})


def variant_config(variant: str):
    """The config a kernel variant changes the kernels of: r = 8 for one with a part in
    SMALL_BLOCK_PARTS, "vecN" or "staged-blocksN", else one block (the tiled and row-tile
    kernels)."""
    small = any(part.startswith(("vec", "staged-blocks")) or part in SMALL_BLOCK_PARTS
                for part in variant.split("+"))
    return next(c for c in CONFIGS if c[0] == ("r=8" if small else "one block"))


# Triton variants set attributes of blosa_kernels.configs, which the launcher reads at each call.
TRITON_VARIANT_PARTS = {
    "fused": {"BACKWARD": "fused"},  # bwd_fused_kernel + bwd_dkv_sums_kernel (the default)
    "split": {"BACKWARD": "split"},  # bwd_dq_kernel + bwd_dkv_kernel
    "fast32": {"FAST_TANH_DTYPES": ("float32", "float16", "bfloat16")},  # tanh.approx.f32 in float32
    "per-block": {"PAIRS_MAX": 0},  # blocks of up to 8 by the per-block kernels, not per pair
    "general": {"PAIRS_DENSE": False},  # the per-pair kernels with the mask and row tests
    "bias-mv": {"BIAS_SUM": "mv"},  # d_bias by a matrix-vector product with ones (the default)
    "bias-sum": {"BIAS_SUM": "sum"},  # d_bias by ATen's sum
    "rcp-newton": {"PAIRS_RECIPROCAL": "newton"},  # per-pair 16-bit 1 / sum by Newton (default)
    "rcp-div": {"PAIRS_RECIPROCAL": "div"},  # per-pair 1 / sum by a division
    "rows-poly": {"ROWS_EXP2": "half-poly"},  # row-tile forward: every other key's exp2 on FMAs
    "pairs-static-d": {"PAIRS_STATIC_D": True},  # per-pair kernels compiled for the call's d
    "fused-trimmed": {"FUSED_STEP": "trimmed"},  # the fused backward's trimmed key loop
}


def triton_variant_settings(variant: str) -> dict:
    """blosa_kernels.configs attributes of a Triton variant: "+"-joined parts, "split" / "fused"
    (the backward of blocks longer than 64), "fast32" (tanh.approx.f32 for float32 inputs
    too), "per-block" (the per-block kernels for blocks of up to 8, in place of the per-pair
    ones), "general" (the per-pair kernels with their mask and row tests even where there is
    no mask and every block is whole), "bias-mv" / "bias-sum" (d_bias by a matrix-vector
    product with ones, the default, or by ATen's sum) and "rcp-newton" / "rcp-div" (the per-pair
    kernels' 16-bit 1 / sum from Newton steps on the FMA pipe, the default, or a division),
    "rows-poly" (the row-tile forward's 16-bit exp2 of every other key from a polynomial on the
    FMA pipe), "pairs-static-d" (the per-pair kernels compiled for the call's d, their rows'
    offsets constants), "fused-trimmed" (the fused backward's key loop with fewer instructions
    a key, configs.FUSED_STEP), e.g. "split+fast32"."""
    settings = {}
    for part in variant.split("+"):
        if part not in TRITON_VARIANT_PARTS:
            raise ValueError(f"unknown Triton variant part {part!r} in {variant!r} "
                             f"({', '.join(TRITON_VARIANT_PARTS)})")
        settings.update(TRITON_VARIANT_PARTS[part])
    return settings


def jobs(backends, cuda_variants, triton_variants=()):
    """(label, backend, variant settings, dtype name, config, mode) of every measurement: each
    backend on every config; after a backend's own, each of its kernel variants in every dtype
    on the config whose kernels it changes (one block, or r = 8 for "vecN", "persistent",
    "general", and Triton's "per-block" and "general"; forward and forward+backward), the CUDA
    ones before any Triton job so that a slow first Triton compile cannot crowd them out.
    Settings: environment variables (CUDA) or blosa_kernels.configs attributes."""
    for backend in backends:
        for dname in DTYPES:
            for config in CONFIGS:
                for mode in config[5]:
                    yield backend, backend, {}, dname, config, mode
        variants = {"cuda": [(v, variant_env(v), variant_config(v)) for v in cuda_variants],
                    "triton": [(v, triton_variant_settings(v), variant_config(v))
                               for v in triton_variants]}
        for variant, settings, config in variants.get(backend, []):
            for dname in DTYPES:
                for mode in ("fwd", "fwd+bwd"):
                    yield f"{backend} {variant}", backend, settings, dname, config, mode


@contextlib.contextmanager
def cuda_environment(env: dict):
    """The CUDA tuning variables of `env` (all others unset) for the duration."""
    for variable in TUNING_VARIABLES:
        os.environ.pop(variable, None)
    os.environ.update(env)
    try:
        yield
    finally:
        for variable in TUNING_VARIABLES:
            os.environ.pop(variable, None)


@contextlib.contextmanager
def triton_configs(settings: dict):
    """blosa_kernels.configs attributes set as `settings` says for the duration."""
    from blosa_kernels import configs  # raises where triton is missing: the job is skipped

    saved = {name: getattr(configs, name) for name in settings}
    for name, value in settings.items():
        setattr(configs, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(configs, name, value)


def variant_applied(backend: str, settings: dict):
    """A job's variant, applied for the duration: environment variables (CUDA) or
    blosa_kernels.configs attributes (Triton)."""
    return triton_configs(settings) if backend == "triton" else cuda_environment(settings)


def variant_table(records: list[dict]) -> list[str]:
    """Markdown rows comparing each kernel variant ("cuda tile4", "triton fused") with its
    backend's default on the same (dtype, config, mode): its kernel ms, and how many times
    faster than the default it is."""
    default = {(r["backend"], r["dtype"], r["config"], r["mode"]): r["kernel_ms"]
               for r in records if " " not in r["backend"]}
    rows = ["| variant | dtype | config | mode | kernels ms | default ms | speed-up |",
            "|---|---|---|---|---|---|---|"]
    for r in records:
        backend, _, variant = r["backend"].partition(" ")
        base = default.get((backend, r["dtype"], r["config"], r["mode"]))
        if not variant or base is None:
            continue
        rows.append(f"| {r['backend']} | {r['dtype']} | {r['config']} | {r['mode']} | "
                    f"{r['kernel_ms']:.3f} | {base:.3f} | {base / r['kernel_ms']:.2f}x |")
    return rows if len(rows) > 2 else []


def triton_picks() -> list[str]:
    """The shape the Triton autotuner chose for each kernel and key it tuned in this process
    (the per-pair kernels compiled for one d, with their wide shapes, have keys ending in d)."""
    try:
        from blosa_kernels import configs
    except ImportError:
        return []
    picks = []
    for kind, tuned in [*configs.TUNED.items(), *configs.TUNED_STATIC_D.items()]:
        for key, config in getattr(tuned, "cache", {}).items():
            shape = dict(config.kwargs, num_warps=config.num_warps)
            if config.maxnreg:  # a register-capped shape (configs.ROWS_MAXNREG, FUSED_MAXNREG)
                shape["maxnreg"] = config.maxnreg
            picks.append(f"- {kind}, {key}: {shape}")
    return picks


def run_job(job, bound: float, skipped: dict, bandwidth: float) -> dict | None:
    """The record of one job of jobs(), printed as it is measured; None where its backend
    cannot run, with the reason in skipped[label]."""
    label, backend, settings, dname, (cname, B, n, d, r, _), mode = job
    try:
        with variant_applied(backend, settings):
            # Where a Triton call's host time goes at r = 8 (1.32 ms a call for 0.37 ms of
            # kernels on 2026-11-26): its default, once per dtype.
            profile = label == "triton" and cname == "r=8" and mode == "fwd+bwd"
            ms, peak, kernels = measure(backend, DTYPES[dname], B, n, d, r, mode,
                                        profile_host=profile)
    except Exception as e:  # noqa: BLE001  a backend that cannot run is skipped
        # (ImportError / RuntimeError when not built or installed; anything else from a backend
        # in progress must not stop the other's numbers)
        skipped[label] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        print(f"skipping {label!r}: {skipped[label]}")
        torch.cuda.empty_cache()
        return None
    el = elements(B, n, d, r)
    kernel_ms = sum(kernels.values()) or ms  # the call time if unprofiled
    rate = el / (kernel_ms * 1e-3)
    moved = min_bytes(B, n, d, DTYPES[dname].itemsize, mode)
    by_memory = memory_bound(el, moved, bandwidth)
    # forward costs 2 SFU ops per element; forward+backward is compared with the same forward
    # bound (its SFU work is 2-3x larger).
    rec = dict(backend=label, variant=settings, dtype=dname, config=cname, B=B, n=n, d=d,
               block_len=r, mode=mode, ms=round(ms, 4), kernel_ms=round(kernel_ms, 4),
               kernels={k: round(v, 4) for k, v in kernels.items()}, elements=el, rate=rate,
               call_rate=el / (ms * 1e-3), bound=bound, fraction_of_bound=rate / bound,
               min_bytes=moved, memory_bound=by_memory,
               fraction_of_memory_bound=rate / by_memory,
               peak_mib=round(peak / 2**20, 1),
               bnd_mib=round(B * n * d * DTYPES[dname].itemsize / 2**20, 1))
    print(f"  {label:12s} {dname:8s} {cname:12s} {mode:11s} call {ms:8.3f} ms, kernels "
          f"{kernel_ms:8.3f} ms: {rate:.3g} el/s ({rate / bound:.0%} of bound, "
          f"{rate / by_memory:.0%} of memory's) "
          f"peak +{rec['peak_mib']} MiB")
    for kernel, k_ms in sorted(kernels.items(), key=lambda kv: -kv[1])[:4]:
        print(f"      {k_ms:8.3f} ms  {kernel[:100]}")
    torch.cuda.empty_cache()
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON file to write (required but with --memory-bounds)")
    ap.add_argument("--memory-bounds", type=float, metavar="BYTES_PER_S",
                    help="print each case's least bytes and memory bound at this DRAM bandwidth "
                         "(e.g. 4.8e12, an H200's) and stop: no GPU needed")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--cuda-variants", default="",
                    help="comma-separated CUDA kernel variants to compare with the default, "
                         "e.g. tile4,split,stream+split")
    ap.add_argument("--triton-variants", default="",
                    help="comma-separated Triton kernel variants to compare with the default, "
                         "e.g. split,fast32,split+fast32")
    args = ap.parse_args(argv)
    if args.memory_bounds:
        print("\n".join(memory_bound_table(args.memory_bounds)))
        return 0
    if not args.out:
        ap.error("--out is required")
    if not torch.cuda.is_available():
        print("no CUDA device; nothing to measure")
        return 1
    name = torch.cuda.get_device_name(0)
    bound = sfu_bound()
    bandwidth = dram_bandwidth()
    print(f"device: {name}; torch {torch.__version__}; SFU bound (forward) {bound:.3g} elements/s; "
          f"DRAM {bandwidth:.3g} B/s")
    records, skipped = [], {}
    t_start = time.perf_counter()
    cuda_variants = [v for v in args.cuda_variants.split(",") if v]
    triton_variants = [v for v in args.triton_variants.split(",") if v]
    all_jobs = list(jobs(args.backends.split(","), cuda_variants, triton_variants))  # names checked
    # bench/gpu_tools/gpu_check.sh stops this with SIGINT when the check's time is up: the jobs measured by
    # then still make the tables and the JSON.
    try:
        for job in all_jobs:
            label, backend = job[:2]
            if backend in skipped or label in skipped:  # a backend, or one variant of it, failed
                continue
            rec = run_job(job, bound, skipped, bandwidth)
            if rec is not None:
                records.append(rec)
    except KeyboardInterrupt:
        skipped["interrupted"] = f"after {len(records)} of {len(all_jobs)} jobs"
        print(f"interrupted after {len(records)} of {len(all_jobs)} jobs")
    print()
    print(f"{name}, bound {bound:.2g} score elements/s (forward); memory bound: the rate if "
          f"a call's least bytes (min_bytes) moved at {bandwidth:.3g} B/s were all it cost\n")
    print("| backend | dtype | config | mode | call ms | kernels ms | elements/s (kernels) | of bound "
          "| memory bound | of memory bound | peak extra MiB (B·n·d MiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in records:
        print(f"| {r['backend']} | {r['dtype']} | {r['config']} | {r['mode']} | {r['ms']:.3f} | "
              f"{r['kernel_ms']:.3f} | {r['rate']:.3g} | {r['fraction_of_bound']:.0%} | "
              f"{r['memory_bound']:.3g} | {r['fraction_of_memory_bound']:.0%} | "
              f"{r['peak_mib']} ({r['bnd_mib']}) |")
    variants = variant_table(records)
    if variants:
        print("\nKernel variants against their backend's default (CUDA: BLOSA_CUDA_TILE, _BACKWARD, "
              "_FORWARD; Triton: blosa_kernels.configs):\n")
        print("\n".join(variants))
    picks = triton_picks() if "triton" in args.backends.split(",") and "triton" not in skipped else []
    if picks:
        print("\nTriton autotune picks (kernel, autotune key: shape):\n")
        print("\n".join(picks))
    with open(args.out, "w") as f:
        json.dump(dict(device=name, torch=torch.__version__, bound=bound, bandwidth=bandwidth,
                       skipped=skipped, seconds=round(time.perf_counter() - t_start, 1),
                       records=records,
                       triton_picks=picks), f, indent=1)
    print(f"\nwrote {args.out} ({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
