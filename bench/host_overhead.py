"""Host cost of one call of blosa.masked_block_attn, at a size where the kernel costs nothing.

    python bench/host_overhead.py [--device cpu|cuda] [--backend auto|triton-stubbed]

B=1, n=2, d=1, one CPU thread: the time per call is the Python, dispatcher and autograd
overhead that every call pays on top of its kernels (on a GPU, the part that small or fast
kernels cannot hide). Prints the mean over 3000 calls of the forward under no_grad and of
forward+backward through torch.autograd.grad, at block length 1 (8 with triton-stubbed).

--backend triton-stubbed: the Triton op on CPU tensors (TRITON_INTERPRET=1) with its kernel
launches replaced by nothing, so the time is the op's own Python and autograd (block length 8:
the per-block kernels of a Bi-BloSA step), without Triton's launcher, which needs a GPU.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import blosa  # noqa: E402


def mean_us(fn, calls: int = 3000, warmup: int = 200, sync=lambda: None) -> float:
    for _ in range(warmup):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default="auto", choices=("auto", "triton-stubbed"))
    args = ap.parse_args(argv)
    backend, block_len = "auto", 1
    if args.backend == "triton-stubbed":
        if args.device != "cpu":
            ap.error("--backend triton-stubbed runs on CPU tensors")
        os.environ["TRITON_INTERPRET"] = "1"  # before blosa_kernels imports triton
        import blosa_kernels.op as triton_op

        triton_op._launch = lambda *args, **kwargs: None
        backend, block_len = "triton", 8
    torch.set_num_threads(1)
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    n = 2 * block_len
    leaves = [torch.randn(1, n, 1, device=dev, requires_grad=True) for _ in range(3)]
    leaves.append(torch.randn(1, device=dev, requires_grad=True))  # bias
    grad_out = torch.randn(1, n, 1, device=dev)

    def call():
        return blosa.masked_block_attn(*leaves, None, block_len, "forward", 5.0, backend=backend)

    def forward():
        with torch.no_grad():
            call()

    def forward_backward():
        torch.autograd.grad(call(), leaves, grad_out)

    print(f"device {dev}, torch {torch.__version__}, backend {args.backend}")
    print(f"forward (no_grad):            {mean_us(forward, sync=sync):7.1f} us per call")
    print(f"forward+backward (autograd):  {mean_us(forward_backward, sync=sync):7.1f} us per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
