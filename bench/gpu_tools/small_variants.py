"""The machine code of every small-block CUDA kernel the dispatcher can pick, in 90 s.

    python bench/gpu_tools/small_variants.py [--out TABLE.md] [--compare BEFORE.md] [--kernels REGEX]
    python bench/gpu_tools/small_variants.py --ptx-sums [--kernels REGEX]

No GPU needed. It writes one .cu file that instantiates each template variant of
forward_small, backward_small_recompute and backward_small that csrc/cuda/dispatch.h's
with_small_variant can launch (types × directions × vector width × pivot × persistent × dense ×
loads first, and the 16-bit dense forwards with reciprocal_newton), and the staged dense
kernels of staged_small.cuh (272 kernels), compiles it
alone with nvcc for sm_90 with setup.py's device flags (far faster than `make build`, which
compiles every kernel of the extension), and prints
bench/gpu_tools/sass_loads.py's --whole table of them (registers, stack, instructions, loads, early
reads). With --compare it prints instead, for each kernel, what moved against a table saved
before a change (--out), and a last line with how many kernels got more registers, stack,
loads, parameter reloads or early reads, and the total instruction count: how an edit to
csrc/cuda/small_blocks.cuh is judged on every variant at once. With --ptx-sums it compiles to
PTX instead and counts, kernel by kernel, the additions that take a product neither rounded on
its own nor fused (blosa_kernels.compile_check.products_left_to_ptxas): sums whose rounding
ptxas chooses, kernel by kernel.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import sass_loads  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
# setup.py's nvcc flags that shape device code (not -lineinfo, which adds only line tables).
NVCC_FLAGS = ["-O3", "-std=c++20", "--use_fast_math", "--expt-relaxed-constexpr"]
TYPES = (("c10::BFloat16", "float"), ("c10::Half", "float"), ("float", "float"),
         ("double", "double"))
DIRECTIONS = ("kForward", "kBackward", "kDiag", "kAll")
# The types whose dense forward can take 1 / sum from reciprocal_newton (16-bit: dispatch.h).
RECIPROCAL_TYPES = ("c10::BFloat16", "c10::Half")


def variants(accumulate: str, double: bool):
    """The template arguments after the direction (fixed pivot, V, persistent, dense, loads
    first) of forward_small and backward_small_recompute, as with_small_variant instantiates
    them: width 2 not for double; persistent for float accumulation; dense at width 1, with
    its loads first for float accumulation."""
    for width in (1,) if double else (1, 2):
        if accumulate == "float":
            yield "true", width, "true", "false", "false"
        if width == 1:
            if accumulate == "float":
                yield "true", width, "false", "true", "true"
            yield "true", width, "false", "true", "false"
        yield "true", width, "false", "false", "false"
        yield "false", width, "false", "false", "false"


def source(types=TYPES, directions=DIRECTIONS) -> str:
    """The .cu file instantiating every kernel of those types ((T, A) pairs) and directions
    (explicit instantiations of the templates)."""
    lines = ["#include <c10/util/BFloat16.h>", "#include <c10/util/Half.h>",
             f'#include "{os.path.join(ROOT, "csrc", "cuda", "staged_small.cuh")}"',
             "namespace blosa::cuda {"]
    for scalar, acc in types:
        args = f"const Args<{scalar}, {acc}>"
        for direction in directions:
            head = f"{scalar}, {acc}, Direction::{direction}"
            for variant in variants(acc, scalar == "double"):
                flags = ", ".join(map(str, variant))
                for kernel in ("forward_small", "backward_small_recompute"):
                    lines.append(f"template __global__ void {kernel}<{head}, {flags}>({args});")
                if variant[3:] == ("true", "true") and scalar in RECIPROCAL_TYPES:
                    # the dense forward with its loads first dividing by reciprocal_newton
                    # (KernelOptions::small_fma_reciprocal), its steps as dispatch.h takes them
                    lines.append(f"template __global__ void forward_small<{head}, {flags}, "
                                 f"kReciprocalSteps<{scalar}>>({args});")
            lines.append(f"template __global__ void backward_small<{head}>({args});")
            if acc == "float":  # the staged dense kernels (KernelOptions::small_staged_*)
                steps = ("0",) + ((f"kReciprocalSteps<{scalar}>",)
                                  if scalar in RECIPROCAL_TYPES else ())
                for rcp in steps:
                    lines.append(f"template __global__ void forward_small_staged<{head}, {rcp}>"
                                 f"({args}, int64_t);")
                lines.append(f"template __global__ void backward_small_staged<{head}>"
                             f"({args}, int64_t);")
    return "\n".join(lines + ["}"]) + "\n"


def nvcc() -> str:
    from torch.utils.cpp_extension import CUDA_HOME

    if not CUDA_HOME:
        raise SystemExit("no CUDA toolkit: set CUDA_HOME (the Makefile does)")
    return os.path.join(CUDA_HOME, "bin", "nvcc")


def compile_all(folder: str, text: str | None = None, output: str = "cubin") -> str:
    """The binary ("cubin") or PTX ("ptx") of `text` (default source()), compiled in `folder`."""
    from torch.utils.cpp_extension import include_paths

    cu, out = os.path.join(folder, "small.cu"), os.path.join(folder, f"small.{output}")
    with open(cu, "w") as f:
        f.write(source() if text is None else text)
    includes = [f"-I{path}" for path in include_paths()]
    subprocess.run([nvcc(), *NVCC_FLAGS, "-arch=sm_90", f"-{output}", *includes, "-o", out, cu],
                   check=True)
    return out


def ptx_sums(ptx: str, kernels: str = ".") -> str:
    """One line per kernel matching `kernels` with its PTX additions that take an unfused
    product (products_left_to_ptxas), then a total line."""
    sys.path.insert(0, ROOT)
    from blosa_kernels.compile_check import products_left_to_ptxas

    lines, total, kernels_with = [], 0, 0
    # Register names restart in each kernel: count one .entry at a time.
    for entry in re.split(r"^\.visible \.entry ", ptx, flags=re.M)[1:]:
        name = entry.split("(", 1)[0]
        if not re.search(kernels, name):
            continue
        found = len(products_left_to_ptxas(entry))
        lines.append(f"{name}: {found}")
        total += found
        kernels_with += found > 0
    lines.append(f"{len(lines)} kernels; {kernels_with} leave ptxas {total} additions that take an "
                 "unfused product")
    return "\n".join(lines)


def rows(table: str) -> dict[str, list[str]]:
    """{kernel: its cells} of a --whole table."""
    out = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[0] != "kernel" and not cells[0].startswith("---"):
            out[cells[0]] = cells[1:]
    return out


# Columns of a --whole row after the kernel, and whether more is worse.
COLUMNS = ("registers", "stack", "instructions", "MUFU", "loads", "stores", "reloads", "early")
WORSE = ("registers", "stack", "loads", "reloads", "early")


def compare(before: str, after: str) -> str:
    """What moved, kernel by kernel, and the summary line (see the module docstring)."""
    old, new = rows(before), rows(after)
    kernels = sorted(old.keys() & new.keys())
    lines, worse = [], dict.fromkeys(WORSE, 0)
    for kernel in kernels:
        cells = list(zip(COLUMNS, old[kernel], new[kernel]))
        moved = [f"{col} {a} -> {b}" for col, a, b in cells if a != b]
        up = [col for col, a, b in cells
              if col in WORSE and a.isdigit() and b.isdigit() and int(b) > int(a)]
        for col in up:
            worse[col] += 1
        if moved:
            lines.append(f"{'WORSE ' if up else ''}{kernel}: {', '.join(moved)}")
    instructions = [sum(int(table[k][2]) for k in kernels) for table in (old, new)]
    lines.append(f"{len(kernels)} kernels; more {', '.join(f'{c} in {n}' for c, n in worse.items())}; "
                 f"instructions {instructions[0]} -> {instructions[1]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--compare", metavar="TABLE", help="a table written before (--out)")
    parser.add_argument("--kernels", default=".", help="regex on mangled names (default: all)")
    parser.add_argument("--ptx-sums", action="store_true",
                        help="count the PTX additions that ptxas may fuse or not, instead")
    args = parser.parse_args(argv)
    if args.ptx_sums:
        with tempfile.TemporaryDirectory() as folder:
            with open(compile_all(folder, output="ptx")) as f:
                print(ptx_sums(f.read(), args.kernels))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        table = sass_loads.whole_report(*sass_loads.dump(compile_all(folder), args.kernels),
                                        args.kernels)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    if args.compare:
        with open(args.compare) as f:
            print(compare(f.read(), table))
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
