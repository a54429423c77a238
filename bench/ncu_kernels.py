"""The CUDA C++ kernels of the benchmark sizes, each launched once, for Nsight Compute.

    ncu --clock-control none --kernel-name regex:'_small|_tiled|_sums|_staged' --launch-count 13 \
        python bench/ncu_kernels.py

B=64, n=384, d=300, direction "forward". Blocks of 8, bfloat16, as a training step runs them
(the forward saves no lse, the backward recomputes it): forward_small and
backward_small_recompute, dense (no mask, whole blocks: the default here) with the two
column_sums launches that make d_bias of its per-block sums, then both kernels again general
(BLOSA_CUDA_SMALL_DENSE=0) and without a bias, so with no column_sums after them (the general
backward then skips its one store of the per-block sums, of 25 stores a thread). One block,
float32, without a bias: forward_tiled, backward_query_tiled, backward_key_tiled; forward_tiled
again with a padding mask (the last quarter of every sequence), whose mask bytes the key loop
reads; the fused backward (backward_fused_tiled, head_grad_from_sums); the staged forward
(forward_staged). bench/gpu_check.sh runs it under ncu when ncu is there, to tell which unit
(special functions, memory, issue) holds each kernel back.
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
    fwd, bwd = torch.ops.blosa.masked_block_attn_fwd, torch.ops.blosa.masked_block_attn_bwd
    # Launches 1-6: blocks of 8 in bfloat16, dense (with the bias: then column_sums twice) and
    # general (without); the backward gets empty out and lse, as autograd passes them after a
    # forward that kept none.
    small = [t.bfloat16() for t in (dep, head, value, bias, grad_out)]
    settings = (8, "forward", 5.0)
    for dense, small_bias in (("1", small[3]), ("0", None)):
        os.environ["BLOSA_CUDA_SMALL_DENSE"] = dense
        out, lse = fwd(*small[:3], small_bias, None, *settings, compute_lse=False)
        bwd(small[4], *small[:3], small_bias, None, out.new_empty(0), lse, *settings)
    os.environ.pop("BLOSA_CUDA_SMALL_DENSE")
    # Launches 7-9: one block in float32, the streaming forward and the split backward.
    os.environ["BLOSA_CUDA_FORWARD"] = "stream"
    os.environ["BLOSA_CUDA_BACKWARD"] = "split"
    settings = (0, "forward", 5.0)
    out, lse = fwd(dep, head, value, None, None, *settings)
    bwd(grad_out, dep, head, value, None, None, out, lse, *settings)
    # The tenth: the one-block forward with padding, to compare with the unmasked one.
    mask = torch.ones(64, 384, dtype=torch.bool, device="cuda")
    mask[:, 288:] = False
    fwd(dep, head, value, None, mask, *settings)
    # The eleventh and twelfth: the fused backward of the unmasked one block (the default).
    os.environ["BLOSA_CUDA_BACKWARD"] = "fused"
    bwd(grad_out, dep, head, value, None, None, out, lse, *settings)
    # The thirteenth: the staged forward of the unmasked one block (the default).
    os.environ["BLOSA_CUDA_FORWARD"] = "staged"
    fwd(dep, head, value, None, None, *settings)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
