"""Compile every kernel to a GPU binary without a GPU: `python -m blosa_kernels.compile_check`.

Triton's interpreter (how the CPU tests run the kernels) is lenient about things the compiler
rejects (types of loop-carried values, constexpr rules, inline PTX), so CI also compiles each
kernel ahead of time for one architecture, with Triton's bundled ptxas. Each kernel compiles
twice: with its float scalars (c, 1/c, c·log2 e) as float32, as eager launches pass them, and as
float64, as torch.compile may. Needs TRITON_INTERPRET unset. Exit status 0 when all compile.
With --cubin-dir DIR it also writes each binary there, named kernel-dtype-scalars.cubin, for
`cuobjdump -sass` (the cuobjdump that triton bundles will do).
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def _signature(fn, dtype, constexprs, float_scalars):
    sig = {}
    for name in fn.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name in ("mask",):
            sig[name] = "*u8"
        elif name in ("lse", "d_head"):
            sig[name] = "*fp32"
        elif name in ("dep", "head", "value", "bias", "out", "grad_out", "d_dep", "d_value"):
            sig[name] = f"*{dtype}"
        elif name in ("c", "inv_c", "c_log2e"):
            sig[name] = float_scalars
        else:
            sig[name] = "i32"
    return sig


def cases():
    """(kernel, pointer dtype, constexprs): every kernel, each dtype, both tanh and pivot modes."""
    from blosa_kernels import backward, forward

    flags = dict(DIR=0)
    yield forward.fwd_blocks_kernel, "fp32", dict(flags, FAST_TANH=False, FIXED_PIVOT=True, R=8, TILE=64, BD=64)
    yield forward.fwd_blocks_kernel, "bf16", dict(flags, DIR=2, FAST_TANH=True, FIXED_PIVOT=False, R=16, TILE=64, BD=32)
    yield forward.fwd_rows_kernel, "fp16", dict(flags, DIR=1, FAST_TANH=True, FIXED_PIVOT=True, BM=64, BD=64)
    yield forward.fwd_rows_kernel, "fp32", dict(flags, DIR=2, FAST_TANH=False, FIXED_PIVOT=False, BM=64, BD=64)
    yield backward.bwd_blocks_kernel, "bf16", dict(flags, FAST_TANH=True, R=8, TILE=64, BD=32)
    yield backward.bwd_blocks_kernel, "fp32", dict(flags, DIR=3, FAST_TANH=False, R=64, TILE=64, BD=32)
    yield backward.bwd_dq_kernel, "fp16", dict(flags, DIR=2, FAST_TANH=True, BM=64, BD=64)
    yield backward.bwd_dkv_kernel, "fp32", dict(flags, DIR=1, FAST_TANH=False, BN=64, BD=32)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability, e.g. 80 or 90")
    parser.add_argument("--cubin-dir", help="also write every compiled binary to this folder")
    args = parser.parse_args(argv)
    if args.cubin_dir:
        os.makedirs(args.cubin_dir, exist_ok=True)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("compile_check: unset TRITON_INTERPRET first", file=sys.stderr)
        return 2
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", args.arch, 32)
    for fn, dtype, constexprs in cases():
        for float_scalars in ("fp32", "fp64"):
            t0 = time.time()
            signature = _signature(fn, dtype, constexprs, float_scalars)
            kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs), target=target)
            assert kernel.asm.get("cubin"), fn.__name__
            if args.cubin_dir:
                name = f"{fn.__name__}-{dtype}-{float_scalars}.cubin"
                with open(os.path.join(args.cubin_dir, name), "wb") as out:
                    out.write(kernel.asm["cubin"])
            print(f"ok  {fn.__name__:<18} {dtype:<5} scalars {float_scalars} sm_{args.arch}  "
                  f"{time.time() - t0:5.1f}s  {constexprs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
