"""Peak memory and time of one masked_block_attn call, each measured in a fresh process.

CPU tensors have no allocator statistics, so peak memory is how far the process's resident set
rises above its size before the call: Linux's high-water mark (VmHWM) is reset just before the
call (/proc/self/clear_refs), and a fresh process keeps other work out of that number.
Run `python -m blosa.memprobe IMPL B n d block_len [--forward-only] [--no-grad]` to print the
growth in MiB.
"""
from __future__ import annotations

import json
import subprocess
import sys

IMPLS = ("fused", "reference")


def peak_memory_mib(impl: str, B: int, n: int, d: int, block_len: int, backward: bool = True,
                    grad: bool = True) -> float:
    """Peak memory growth (MiB) of forward (and backward) of `impl` on random [B, n, d] inputs;
    grad=False: inputs that require no gradient, forward only."""
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    if backward and not grad:
        raise ValueError("backward=True needs grad=True: there is no backward without a gradient")
    cmd = [sys.executable, "-m", "blosa.memprobe", impl, str(B), str(n), str(d), str(block_len)]
    if not backward:
        cmd.append("--forward-only")
    if not grad:
        cmd.append("--no-grad")
    run = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])["peak_mib"]


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _main(argv: list[str]) -> None:
    import torch

    from blosa import masked_block_attn, masked_block_attn_ref

    impl, B, n, d, block_len = argv[0], *map(int, argv[1:5])
    fn = masked_block_attn if impl == "fused" else masked_block_attn_ref
    grad = "--no-grad" not in argv
    dep, head, value = (torch.randn(B, n, d, requires_grad=grad) for _ in range(3))
    fn(dep[:1, :4], head[:1, :4], value[:1, :4], None, None, block_len)  # load code, warm pools
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets the high-water mark to the current resident set
    before = _status_kib("VmRSS")
    out = fn(dep, head, value, None, None, block_len)
    if "--forward-only" not in argv:
        out.sum().backward()
    grown = (_status_kib("VmHWM") - before) / 1024
    print(json.dumps({"peak_mib": grown}))


if __name__ == "__main__":
    _main(sys.argv[1:])
