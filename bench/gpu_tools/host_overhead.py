"""Host cost of one call of blosa.masked_block_attn, at a size where the kernel costs nothing.

    python bench/gpu_tools/host_overhead.py [--device cpu|cuda] [--calls N]
                                  [--backend auto|triton|triton-stand-in|triton-stubbed|baseline]
                                  [--via-op]

B=1, n=2, d=1, one CPU thread: the time per call is the Python, dispatcher and autograd
overhead that every call pays on top of its kernels (on a GPU, the part that small or fast
kernels cannot hide). Prints the mean over --calls calls (3000) of the forward under no_grad
and of forward+backward through torch.autograd.grad, at block length 1 (8 with the triton
backends: the small-block kernels of a Bi-BloSA step).

--backend triton: the Triton op with its kernels (CUDA tensors), launcher and autotuner
included. --backend triton-stand-in: the Triton op on CPU tensors with bench/gpu_tools/triton_stand_in.py
in place of triton's GPU driver: Triton's whole launch path in Python (autotuner lookup, JIT
binding, specialization, cache key), all but the C launcher and the GPU. --backend
triton-stubbed: the Triton op on CPU tensors (taken as under TRITON_INTERPRET=1) with its
kernel launches replaced by nothing, so the time is the op's own Python and autograd.
--via-op: the Triton backends through blosa::masked_block_attn_triton_fwd (torch.library's
dispatch and autograd, what torch.compile traces), not the eager path that plain calls take
(blosa_kernels/op.py).
--backend baseline: one ATen op on the same tensors (torch.addcmul(value, dep, head): one
kernel forward, two backward) through the same autograd calls, the floor that the machine's
autograd engine and launches set for any op. On a GPU machine auto (the CUDA C++ op), triton,
triton-stand-in, triton-stubbed and baseline tell apart the op's Python, Triton's launcher and
the machine (bench/gpu_tools/gpu_check.sh runs them).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

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


def use_triton_on_cpu(variant: str) -> None:
    """Sets up the Triton op for CPU tensors: "triton-stubbed", taking them as under
    TRITON_INTERPRET=1 with its launches replaced by nothing; "triton-stand-in", with
    bench/gpu_tools/triton_stand_in.py's driver."""
    if variant == "triton-stubbed":
        import blosa_kernels.op

        # No kernel runs, so no TRITON_INTERPRET (which triton 3.6 refuses with numpy 2.4 and
        # later, the GPU machines' pair): the op only needs to take CPU tensors, as it does
        # under the interpreter.
        blosa_kernels.configs.INTERPRET = True
        blosa_kernels.op._launch = lambda *args, **kwargs: None
    else:
        import triton_stand_in

        triton_stand_in.install()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default="auto",
                    choices=("auto", "triton", "triton-stand-in", "triton-stubbed", "baseline"))
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--via-op", action="store_true",
                    help="Triton backends: through the torch.library op, not the eager path")
    args = ap.parse_args(argv)
    if args.via_op:
        if not args.backend.startswith("triton"):
            ap.error("--via-op is for the triton backends")
        import blosa_kernels.op

        blosa_kernels.op._untraced = lambda *tensors: False
    if args.backend in ("triton-stubbed", "triton-stand-in"):
        if args.device != "cpu":
            ap.error(f"--backend {args.backend} runs on CPU tensors")
        use_triton_on_cpu(args.backend)
    elif args.backend == "triton" and args.device == "cpu":
        ap.error("--backend triton runs on CUDA tensors (--device cuda); on CPU, use "
                 "triton-stand-in or triton-stubbed")
    backend = "triton" if args.backend.startswith("triton") else args.backend
    block_len = 8 if backend == "triton" else 1
    torch.set_num_threads(1)
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    n = 2 * block_len
    leaves = [torch.randn(1, n, 1, device=dev, requires_grad=True) for _ in range(3)]
    leaves.append(torch.randn(1, device=dev, requires_grad=True))  # bias
    grad_out = torch.randn(1, n, 1, device=dev)

    def call():
        if backend == "baseline":
            return torch.addcmul(leaves[2], leaves[0], leaves[1])
        return blosa.masked_block_attn(*leaves, None, block_len, "forward", 5.0, backend=backend)

    def forward():
        with torch.no_grad():
            call()

    inputs = leaves[:3] if backend == "baseline" else leaves  # addcmul takes no bias

    def forward_backward():
        torch.autograd.grad(call(), inputs, grad_out)

    print(f"device {dev}, torch {torch.__version__}, backend {args.backend}"
          f"{' via the op' if args.via_op else ''}")
    for name, fn in (("forward (no_grad):          ", forward),
                     ("forward+backward (autograd):", forward_backward)):
        print(f"{name}  {mean_us(fn, args.calls, sync=sync):7.1f} us per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
