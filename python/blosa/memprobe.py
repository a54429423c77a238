"""Peak memory of one masked_block_attn call (forward, or forward+backward), in a fresh process.

CPU tensors have no allocator statistics, so peak memory is how far the process's resident set
rises above its size before the call: Linux's high-water mark (VmHWM) is reset just before the
call (/proc/self/clear_refs), and a fresh process keeps other work out of that number.
Run `python -m blosa.memprobe IMPL B n d block_len [--forward-only] [--no-grad]` to print the
growth in MiB.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from blosa.bench import procmem
from blosa.nn.layers import check_width

IMPLS = ("fused", "reference")


def peak_memory_mib(impl: str, B: int, n: int, d: int, block_len: int, backward: bool = True,
                    grad: bool = True) -> float:
    """Peak memory growth (MiB) of forward (and backward) of `impl` on random [B, n, d] inputs;
    grad=False: inputs that require no gradient, forward only."""
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    for name, size in (("B", B), ("n", n), ("d", d)):
        check_width(name, size)
    if backward and not grad:
        raise ValueError("backward=True needs grad=True: there is no backward without a gradient")
    cmd = [sys.executable, "-m", "blosa.memprobe", impl, str(B), str(n), str(d), str(block_len)]
    if not backward:
        cmd.append("--forward-only")
    if not grad:
        cmd.append("--no-grad")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:  # the child's own words, not just its exit status
        raise RuntimeError(f"`{' '.join(cmd[1:])}` failed (exit status {run.returncode}):\n"
                           + run.stderr.strip()[-2000:])
    return json.loads(run.stdout.strip().splitlines()[-1])["peak_mib"]


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m blosa.memprobe", description=__doc__.splitlines()[0])
    parser.add_argument("impl", choices=IMPLS)
    for size in ("B", "n", "d"):
        parser.add_argument(size, type=_positive_int)
    parser.add_argument("block_len", type=int, help="<= 0 or >= n: one block")
    parser.add_argument("--forward-only", action="store_true", help="no backward")
    parser.add_argument("--no-grad", action="store_true", help="inputs that require no gradient")
    args = parser.parse_args(argv)
    if args.no_grad and not args.forward_only:
        parser.error("--no-grad needs --forward-only: there is no backward without a gradient")
    return args


def _main(argv: list[str]) -> None:
    args = _parse(argv)
    import torch

    from blosa import masked_block_attn, masked_block_attn_ref

    fn = masked_block_attn if args.impl == "fused" else masked_block_attn_ref
    B, n, d, block_len = args.B, args.n, args.d, args.block_len
    dep, head, value = (torch.randn(B, n, d, requires_grad=not args.no_grad) for _ in range(3))
    fn(dep[:1, :4], head[:1, :4], value[:1, :4], None, None, block_len)  # load code, warm pools
    before = procmem.reset_peak()  # the high-water mark, reset to the current resident set
    out = fn(dep, head, value, None, None, block_len)
    if not args.forward_only:
        out.sum().backward()
    grown = (procmem.peak_bytes() - before) / 2**20
    print(json.dumps({"peak_mib": grown}))


if __name__ == "__main__":
    _main(sys.argv[1:])
