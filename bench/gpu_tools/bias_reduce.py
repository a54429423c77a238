"""Kernel time of the d_bias reduction of the Triton backward, and of two-stage forms of it.

    python bench/gpu_tools/bias_reduce.py

z = dep_i + head_j + bias, so d_bias = d_head summed over batch and queries: for blocks of at
most 64 the kernel's per-block float32 sums, [B · n/r, d], for longer ones d_head. The Triton
backward summed them with ATen (`d_bias_part.sum(0)`, `d_head.sum((0, 1))`): at r = 8 (B=64,
n=384, d=300) 0.012 ms of the 0.184 ms of bfloat16 forward+backward kernel time on an H200
(2026-11-27, bench/HISTORY.md), for 3.7 MB in and 300 sums out; since 2026-11-28 it takes the
matrix-vector product with ones (configs.BIAS_SUM = "mv"), which this measured at a half to a
third of that time (2026-11-28). (The CUDA backend sums with its own kernels,
csrc/cuda/column_sums.cuh; gpu_rates.py times them in its calls.) This compares the one-pass sum
with summing groups of G rows first (many outputs, so many thread blocks) and then the groups,
and with the product with ones (cuBLAS's gemv), on the benchmark's shapes (r = 8's per-block
sums first, as B = 1, n = 3072), and checks that each form agrees with the one-pass sum and is
bitwise repeatable.
Times are the kernels' (torch.profiler), not the call's: a call this short waits on the host.
Prints a markdown table (by hand: `make gpu-check` no longer runs it).
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cuda_timing import kernel_times  # noqa: E402

BOTH = (torch.float32, torch.bfloat16)
# (B, n, d, dtypes): r = 8's per-block sums, float32 whatever the inputs' dtype; d_head of the
# one-block and of the DiSA benchmarks in either dtype.
SHAPES = ((1, 64 * 384 // 8, 300, (torch.float32,)), (64, 384, 300, BOTH), (8, 8192, 300, BOTH))
GROUPS = (32, 128, 512)


def one_pass(d_head: torch.Tensor) -> torch.Tensor:
    return d_head.sum((0, 1))


def two_stage(d_head: torch.Tensor, group: int) -> torch.Tensor:
    """Rows summed in groups of `group`, then the groups (rows padded with zeros to a multiple
    of group)."""
    rows = d_head.reshape(-1, d_head.shape[-1])
    pad = -rows.shape[0] % group
    if pad:
        rows = torch.cat([rows, rows.new_zeros(pad, rows.shape[1])])
    return rows.view(-1, group, rows.shape[1]).sum(1).sum(0)


def ones_product(d_head: torch.Tensor, ones: torch.Tensor | None = None) -> torch.Tensor:
    """The rows summed as a matrix-vector product with ones (one cuBLAS gemv on a GPU, which
    reads the rows once at full bandwidth, in a fixed order: cuBLAS's routines give the same
    bits on every run but the ones with atomics, which gemv is not). `ones`: rows' count of
    ones of d_head's dtype, made here if not given (the benchmark passes it, as a caller
    would keep it)."""
    rows = d_head.reshape(-1, d_head.shape[-1])
    if ones is None:
        ones = rows.new_ones(rows.shape[0])
    return torch.mv(rows.t(), ones)


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device; nothing to measure")
        return 1
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(f"d_bias reduction on {torch.cuda.get_device_name(0)}\n")
    print("| B, n, d | dtype | form | kernel ms | max abs diff to one pass | repeatable |")
    print("|---|---|---|---|---|---|")
    for B, n, d, dtypes in SHAPES:
        for dtype in dtypes:
            d_head = torch.randn(B, n, d, device="cuda", generator=gen).to(dtype)
            want = one_pass(d_head)
            forms = [("sum((0, 1))", one_pass)]
            forms += [(f"groups of {g}", lambda x, g=g: two_stage(x, g)) for g in GROUPS]
            ones = d_head.new_ones(B * n)
            forms.append(("mv with ones", lambda x, ones=ones: ones_product(x, ones)))
            for name, form in forms:
                got = form(d_head)
                diff = (got.double() - want.double()).abs().max().item()
                same = torch.equal(got, form(d_head))
                ms = sum(kernel_times(lambda: form(d_head), reps=20).values())
                print(f"| {B}, {n}, {d} | {str(dtype)[6:]} | {name} | {ms:.4f} | {diff:.2g} | "
                      f"{'yes' if same else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
