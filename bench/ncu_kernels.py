"""The CUDA C++ kernels of the benchmark sizes, each launched once, for Nsight Compute.

    ncu --clock-control none --kernel-name regex:'_small|_tiled|_sums|_staged' --launch-count 9 \
        python bench/ncu_kernels.py

B=64, n=384, d=300, float32, direction "forward": blocks of 8 (forward_small, backward_small)
and one block (forward_tiled, backward_query_tiled, backward_key_tiled), then forward_tiled
again with a padding mask (the last quarter of every sequence), whose mask bytes the key loop
reads, then the fused one-block backward (backward_fused_tiled, head_grad_from_sums) and the
staged one-block forward (forward_staged).
bench/gpu_check.sh runs it under ncu when ncu is there, to tell which unit (special
functions, memory, issue) holds each kernel back.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import blosa  # noqa: E402,F401  (registers torch.ops.blosa)


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 1
    gen = torch.Generator(device="cuda").manual_seed(0)
    dep, head, value, grad_out = (torch.randn(64, 384, 300, device="cuda", generator=gen) for _ in range(4))
    bias = torch.randn(300, device="cuda", generator=gen)
    for block_len in (8, 0):
        settings = (block_len, "forward", 5.0)
        out, lse = torch.ops.blosa.masked_block_attn_fwd(dep, head, value, bias, None, *settings)
        torch.ops.blosa.masked_block_attn_bwd(grad_out, dep, head, value, bias, None, out, lse, *settings)
    # The sixth launch: the one-block forward with padding, to compare with the unmasked one.
    mask = torch.ones(64, 384, dtype=torch.bool, device="cuda")
    mask[:, 288:] = False
    torch.ops.blosa.masked_block_attn_fwd(dep, head, value, bias, mask, 0, "forward", 5.0)
    # The seventh and eighth: the fused backward of the unmasked one block (out and lse from
    # the loop's last round).
    os.environ["BLOSA_CUDA_BACKWARD"] = "fused"
    torch.ops.blosa.masked_block_attn_bwd(grad_out, dep, head, value, bias, None, out, lse, 0, "forward", 5.0)
    # The ninth: the staged forward of the unmasked one block.
    os.environ["BLOSA_CUDA_FORWARD"] = "staged"
    torch.ops.blosa.masked_block_attn_fwd(dep, head, value, bias, None, 0, "forward", 5.0)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
