"""CPU training step with lse saved by the forward vs recomputed by the backward.

    python bench/gpu_tools/cpu_lse_recompute.py [--block-len 8] [--rounds 8]

Times forward+backward of masked_block_attn_fwd (B=64, n=384, d=300, float32, direction
"forward") called with compute_lse=True (backward reads lse and out) and compute_lse=False
(backward recomputes them with a second tanh and exp per pair), in alternating rounds of 5 steps,
and prints the minimum and median ms per step of each. It is why the CPU keeps saving lse in
training (csrc/op_checks.h, forward_saves_lse); CUDA and Triton recompute it in short blocks.
"""
import argparse
import statistics
import time

import torch

import blosa  # noqa: F401  (registers torch.ops.blosa)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--block-len", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    B, n, d = 64, 384, 300
    leaves = [torch.randn(B, n, d, generator=gen).requires_grad_() for _ in range(3)]
    bias = torch.randn(d, generator=gen).requires_grad_()
    grad_out = torch.randn(B, n, d, generator=gen)

    def step(compute_lse: bool) -> None:
        out, _ = torch.ops.blosa.masked_block_attn_fwd(*leaves, bias, None, args.block_len, "forward",
                                                        5.0, compute_lse)
        out.backward(grad_out)

    times = {True: [], False: []}
    for _ in range(args.rounds):
        for compute_lse in times:
            step(compute_lse)  # warm-up
            start = time.perf_counter()
            for _ in range(5):
                step(compute_lse)
            times[compute_lse].append((time.perf_counter() - start) / 5 * 1e3)
    for compute_lse, ms in times.items():
        label = "lse saved" if compute_lse else "lse recomputed"
        print(f"{label:15s} min {min(ms):7.1f} ms  median {statistics.median(ms):7.1f} ms "
              f"(r={args.block_len}, {torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
