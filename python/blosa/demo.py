"""A short demo of the fused op's speed and memory against the plain PyTorch reference.

Run `python -m blosa.demo` (or `make demo`). Sizes are the paper's: d = 300, block length 8
(Bi-BloSAN) and one block over the sentence (DiSAN).
"""
from __future__ import annotations

import time

import torch
from tqdm import tqdm

from blosa import masked_block_attn, masked_block_attn_ref
from blosa.memprobe import peak_memory_mib

CONFIGS = [  # (label, B, n, d, block_len)
    ("Bi-BloSA block, r=8", 32, 64, 300, 8),
    ("DiSA, one block", 8, 128, 300, 0),
]


def seconds_per_call(fn, repeats: int = 5) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def forward_backward(fn, inputs, block_len):
    def run():
        out = fn(*inputs, None, None, block_len)
        out.backward(torch.ones_like(out))

    return run


def main() -> None:
    rows = []
    for label, B, n, d, r in tqdm(CONFIGS, desc="configs"):
        inputs = [torch.randn(B, n, d, requires_grad=True) for _ in range(3)]
        times = {
            "fused": seconds_per_call(forward_backward(masked_block_attn, inputs, r)),
            "reference": seconds_per_call(forward_backward(masked_block_attn_ref, inputs, r)),
        }
        memory = {impl: peak_memory_mib(impl, B, n, d, r) for impl in times}
        rows.append((f"{label} (B={B}, n={n}, d={d})", times, memory))
    print(f"\nmasked_block_attn forward+backward on {torch.get_num_threads()} CPU threads, float32\n")
    print(f"{'config':42} {'fused ms':>9} {'ref ms':>9} {'speed-up':>9} {'fused MiB':>10} {'ref MiB':>9}")
    for label, t, m in rows:
        print(f"{label:42} {t['fused'] * 1e3:9.1f} {t['reference'] * 1e3:9.1f} "
              f"{t['reference'] / t['fused']:8.1f}x {m['fused']:10.1f} {m['reference']:9.1f}")


if __name__ == "__main__":
    main()
