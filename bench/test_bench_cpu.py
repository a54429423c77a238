"""CPU benchmark of masked_block_attn: fused op vs eager reference vs torch.compile(reference).

Run: `pytest bench/test_bench_cpu.py --benchmark-only` (or `make bench`). Each row also records
the peak memory of one forward+backward in extra_info (measured in a fresh process).
Targets on a 2-core machine: fused forward+backward >= 5x faster than eager, >= 2x faster than
compiled, peak memory <= 1/5 of eager's.
"""
import pytest
import torch

from blosa import masked_block_attn, masked_block_attn_ref
from blosa.memprobe import peak_memory_mib

CONFIGS = {"r8_B32_n64": (32, 64, 300, 8), "oneblock_B8_n128": (8, 128, 300, 0)}
_compiled_ref = torch.compile(masked_block_attn_ref, dynamic=False)
IMPLS = {"fused": masked_block_attn, "reference": masked_block_attn_ref, "compiled_reference": _compiled_ref}


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mode", ["forward", "forward_backward"])
def test_masked_block_attn_cpu(benchmark, impl, config, mode):
    B, n, d, r = CONFIGS[config]
    torch.manual_seed(0)
    inputs = [torch.randn(B, n, d, requires_grad=True) for _ in range(3)]
    fn = IMPLS[impl]

    def run():
        if mode == "forward":
            with torch.no_grad():
                return fn(*inputs, None, None, r)
        out = fn(*inputs, None, None, r)
        out.backward(torch.ones_like(out))

    run()  # compile / warm up outside the timing
    benchmark.group = f"{config} {mode}"
    benchmark.extra_info["score_elements"] = B * (n // (r or n)) * (r or n) * ((r or n) - 1) // 2 * d
    if impl != "compiled_reference":
        benchmark.extra_info["peak_mib"] = peak_memory_mib(impl, B, n, d, r, backward=mode != "forward")
    benchmark.pedantic(run, rounds=5, warmup_rounds=1, iterations=1)
