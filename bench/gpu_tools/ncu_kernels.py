"""The kernels of the benchmark sizes, each launched once, for Nsight Compute.

    ncu --clock-control none --kernel-name regex:'_small|_tiled|_sums|_staged' --launch-count 15 \
        python bench/gpu_tools/ncu_kernels.py
    ncu --clock-control none --nvtx --nvtx-include 'blosa_ncu/' --kernel-name regex:'fwd_|bwd_' \
        --launch-count 9 python bench/gpu_tools/ncu_kernels.py --backend triton

B=64, n=384, d=300, direction "forward". Blocks of 8, bfloat16, as a training step runs them
(the forward saves no lse, the backward recomputes it): forward_small and
backward_small_recompute, dense (no mask, whole blocks: the default here) with the two
column_sums launches that make d_bias of its per-block sums, then both kernels again general
(BLOSA_CUDA_SMALL_DENSE=0) and without a bias, so with no column_sums after them (the general
backward then skips its one store of the per-block sums, of 25 stores a thread). One block,
float32, without a bias: forward_tiled, backward_query_tiled, backward_key_tiled; forward_tiled
again with a padding mask (the last quarter of every sequence), whose mask bytes the key loop
reads; the fused backward (backward_fused_tiled, head_grad_from_sums); the staged forward
(forward_staged); then blocks of 8 again, dense, staged through shared memory
(forward_small_staged and backward_small_staged: BLOSA_CUDA_SMALL_STAGED=1, off by default),
without a bias.

--backend triton: the Triton kernels at the same sizes, bfloat16 unless said: blocks of 8 as a
training step runs them (fwd_pairs_kernel and bwd_pairs_kernel, dense), one block
(fwd_rows_kernel writing lse, bwd_fused_kernel, bwd_dkv_sums_kernel), one block's forward in
float32 (fwd_rows_kernel with the exact tanh: three special-function ops an element), then the
one-block step again with the fused backward's trimmed key loop (configs.FUSED_STEP =
"trimmed", off by default): fwd_rows_kernel, bwd_fused_kernel, bwd_dkv_sums_kernel. Each call
runs once first, outside the NVTX range "blosa_ncu", so that the autotuner's trial launches (and
compiles) happen there; ncu's --nvtx-include 'blosa_ncu/' then profiles only the picked configs.

bench/gpu_tools/gpu_check.sh runs both under ncu when ncu is there, to tell which unit (special functions,
memory, issue) holds each kernel back.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import blosa  # noqa: E402,F401  (registers torch.ops.blosa)


# The range ncu's --nvtx-include selects ('blosa_ncu/': a push/pop range).
NVTX_RANGE = "blosa_ncu"


def inputs():
    """dep, head, value, grad_out [64, 384, 300] and bias [300], float32, the same every run."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    dep, head, value, grad_out = (torch.randn(64, 384, 300, device="cuda", generator=gen) for _ in range(4))
    bias = torch.randn(300, device="cuda", generator=gen)
    return dep, head, value, grad_out, bias


def triton_calls(dep, head, value, grad_out, bias):
    """The Triton launches, as zero-argument calls in launch order (see the module docstring)."""
    from blosa_kernels import masked_block_attn_triton_bwd, masked_block_attn_triton_fwd

    small = [t.bfloat16() for t in (dep, head, value, bias, grad_out)]
    r8, one = (8, "forward", 5.0), (0, "forward", 5.0)

    def training_step(tensors, settings, compute_lse):
        d, h, v, b, g = tensors
        out, lse = masked_block_attn_triton_fwd(d, h, v, b, None, *settings, compute_lse)
        masked_block_attn_triton_bwd(g, d, h, v, b, None, out, lse, *settings)

    def trimmed_training_step(tensors, settings):
        from gpu_rates import triton_configs  # bench/gpu_tools/, as cuda_timing for gpu_rates

        with triton_configs({"FUSED_STEP": "trimmed"}):
            training_step(tensors, settings, True)

    return [
        # fwd_pairs_kernel, bwd_pairs_kernel (dense: no mask, whole blocks)
        lambda: training_step(small, r8, False),
        # fwd_rows_kernel, bwd_fused_kernel, bwd_dkv_sums_kernel
        lambda: training_step(small, one, True),
        # fwd_rows_kernel in float32
        lambda: masked_block_attn_triton_fwd(dep, head, value, None, None, *one, False),
        # fwd_rows_kernel, bwd_fused_kernel (trimmed), bwd_dkv_sums_kernel
        lambda: trimmed_training_step(small, one),
    ]


def profile_triton() -> None:
    """triton_calls, each once to autotune, then each once inside the NVTX range."""
    calls = triton_calls(*inputs())
    for call in calls:  # autotune and compile, outside the range
        call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    for call in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def profile_cuda() -> None:
    """The CUDA launches of the module docstring, in its order."""
    dep, head, value, grad_out, bias = inputs()
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
    # The fourteenth and fifteenth: blocks of 8, dense, staged through shared memory, no bias.
    os.environ["BLOSA_CUDA_SMALL_STAGED"] = "1"
    settings = (8, "forward", 5.0)
    out, lse = fwd(*small[:3], None, None, *settings, compute_lse=False)
    bwd(small[4], *small[:3], None, None, out.new_empty(0), lse, *settings)
    os.environ.pop("BLOSA_CUDA_SMALL_STAGED")
    torch.cuda.synchronize()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("cuda", "triton"), default="cuda",
                    help="whose kernels to launch (default cuda)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 1
    if args.backend == "cuda":
        profile_cuda()
    else:
        profile_triton()
    return 0


if __name__ == "__main__":
    sys.exit(main())
