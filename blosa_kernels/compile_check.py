"""Compile every kernel to a GPU binary without a GPU: `python -m blosa_kernels.compile_check`.

Triton's interpreter (how the CPU tests run the kernels) is lenient about things the compiler
rejects (types of loop-carried values, constexpr rules, inline PTX), so CI also compiles each
kernel ahead of time for one architecture, with Triton's bundled ptxas. Each kernel compiles
twice: with its float scalars (c, 1/c, c·log2 e) as float32, as eager launches pass them, and as
float64, as torch.compile may. Then every autotune config of each kernel (configs.py) compiles
too, and must not spill: a config the GPU autotuner tries must build, and one that spills would
only waste its time (registers and stack from `cuobjdump -res-usage`, the copy triton bundles).
Nor may a per-block kernel whose warps fit on its blocks have a barrier, nor a per-pair kernel any
(must_not_sync). Nor may any kernel add two plain products in its LLVM IR (summed_products), nor
leave a product and a sum for ptxas to fuse or not (products_left_to_ptxas). The per-pair
kernels' configs compiled for one d (D) compile as the JIT compiles the benchmark's call, with
its aligned pointers and sizes (launch_attrs): their wide shapes' vector loads show only then.
Needs TRITON_INTERPRET unset. Exit status 0 when all compile, none spills, none syncs and no sum
is left to the compiler's choice.
With --cubin-dir DIR it also writes each binary there, named kernel-dtype-scalars.cubin (with
-2, -3, ... for a kernel's second, third case in one dtype, in the order of cases()), and
each autotune config's, kernel-dtype-wWARPS-TILES.cubin (config_binary_name; e.g.
bwd_fused_kernel-bf16-w8-BM64-BD32, -RN at the end for a config whose registers are capped at N,
then -poly for the row-tile forward's POLY_EXP2 loop, -dN for a per-pair kernel compiled for d = N,
-trimmed for the fused backward's TRIMMED loop),
for `cuobjdump -sass` (the cuobjdump that triton bundles will do) or
`python bench/gpu_tools/sass_loads.py --so FILE --kernels NAME` (loop sizes, MUFU, barriers, load distances),
and beside each its PTX (the same name, .ptx): the order Triton issued, before ptxas's schedule.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time


def _signature(fn, dtype, constexprs, float_scalars):
    sig = {}
    for name in fn.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name in ("mask",):
            sig[name] = "*u8"
        elif name in ("lse", "sums", "d_bias_part"):
            sig[name] = "*fp32"
        elif name == "d_head":  # float32 but for the per-block and per-pair kernels'
            sig[name] = f"*{dtype}" if fn.__name__ in ("bwd_blocks_kernel", "bwd_pairs_kernel") else "*fp32"
        elif name in ("dep", "head", "value", "bias", "out", "grad_out", "d_dep", "d_value"):
            sig[name] = f"*{dtype}"
        elif name in ("c", "inv_c", "c_log2e"):
            sig[name] = float_scalars
        elif name == "total" and constexprs.get("INDEX64"):
            sig[name] = "i64"
        else:
            sig[name] = "i32"
    return sig


def cases():
    """(kernel, pointer dtype, constexprs): every kernel, each dtype, both tanh and pivot modes."""
    from blosa_kernels import backward, configs, forward, pairs

    flags = dict(DIR=0)
    # The kernels that compute tanh, as launched up to c = 40: TANH_POLY (its exact form's small
    # |x| from a polynomial, above that scale) in the cases at the end.
    tanh = dict(flags, TANH_POLY=False)
    # The per-block kernels in the arrangement this triton runs, and (once) in the other one.
    ax = dict(tanh, ROW_AXIS=configs.BLOCK_ROW_AXIS)
    other = dict(tanh, ROW_AXIS=1 - configs.BLOCK_ROW_AXIS)
    lse, no_lse = dict(WRITE_LSE=True), dict(WRITE_LSE=False)
    # First, so that the autotune configs compile on it: the forward of a bfloat16 training step
    # at r = 8 (no lse, no mask, bench/HISTORY.md); then others, with a mask (MASKED: padding
    # keys' rows zeroed) or without, the last the first's step with a mask.
    yield forward.fwd_blocks_kernel, "bf16", dict(ax, **no_lse, FAST_TANH=True, FIXED_PIVOT=True, MASKED=False,
                                                  R=8, TILE=64, BD=32)
    yield forward.fwd_blocks_kernel, "fp32", dict(ax, **lse, FAST_TANH=False, FIXED_PIVOT=True, MASKED=True,
                                                  R=8, TILE=64, BD=64)
    yield forward.fwd_blocks_kernel, "bf16", dict(ax, **no_lse, DIR=2, FAST_TANH=True, FIXED_PIVOT=False,
                                                  MASKED=True, R=16, TILE=64, BD=32)
    yield forward.fwd_blocks_kernel, "fp16", dict(other, **lse, FAST_TANH=True, FIXED_PIVOT=True, MASKED=False,
                                                  R=8, TILE=64, BD=32)
    yield forward.fwd_blocks_kernel, "bf16", dict(ax, **no_lse, FAST_TANH=True, FIXED_PIVOT=True, MASKED=True,
                                                  R=8, TILE=64, BD=32)
    # The per-pair kernels: first a bfloat16 training step at r = 8 (its forward without lse, its
    # backward recomputing it), with a mask, then without one in whole blocks (DENSE: the
    # benchmark's), then lse, the running max, short blocks (R = 4, 1), every direction.
    pair = dict(tanh, FIXED_PIVOT=True, DENSE=False, INDEX64=False, R=8, BLOCK=128, D=0)
    fwd_pair = bwd_pair = dict(pair, RCP_STEPS=0)
    yield pairs.fwd_pairs_kernel, "bf16", dict(fwd_pair, **no_lse, FAST_TANH=True)
    yield pairs.fwd_pairs_kernel, "bf16", dict(fwd_pair, **no_lse, FAST_TANH=True, DENSE=True)
    yield pairs.fwd_pairs_kernel, "fp32", dict(fwd_pair, **lse, DIR=1, FAST_TANH=False)
    yield pairs.fwd_pairs_kernel, "fp16", dict(fwd_pair, **no_lse, DIR=2, FIXED_PIVOT=False, FAST_TANH=True, R=4)
    yield pairs.fwd_pairs_kernel, "bf16", dict(fwd_pair, **lse, DIR=3, FAST_TANH=True, DENSE=True)
    yield pairs.bwd_pairs_kernel, "bf16", dict(bwd_pair, SAVED_LSE=False, FAST_TANH=True)
    yield pairs.bwd_pairs_kernel, "bf16", dict(bwd_pair, SAVED_LSE=False, FAST_TANH=True, DENSE=True)
    yield pairs.bwd_pairs_kernel, "fp32", dict(bwd_pair, SAVED_LSE=True, DIR=3, FAST_TANH=False)
    yield pairs.bwd_pairs_kernel, "fp16", dict(bwd_pair, SAVED_LSE=False, FIXED_PIVOT=False, DIR=2, FAST_TANH=True,
                                               R=4, DENSE=True)
    yield pairs.bwd_pairs_kernel, "fp32", dict(bwd_pair, SAVED_LSE=False, DIR=1, FAST_TANH=False, R=1)
    # 1 / sum by Newton steps (configs.PAIRS_RECIPROCAL = "newton"): the forward's 2 (bfloat16)
    # and 3 (float16), the backward's 3.
    yield pairs.fwd_pairs_kernel, "bf16", dict(fwd_pair, **no_lse, FAST_TANH=True, DENSE=True, RCP_STEPS=2)
    yield pairs.fwd_pairs_kernel, "fp16", dict(fwd_pair, **lse, FAST_TANH=True, RCP_STEPS=3)
    yield pairs.bwd_pairs_kernel, "bf16", dict(bwd_pair, SAVED_LSE=False, FAST_TANH=True, DENSE=True, RCP_STEPS=3)
    # Element indices in int64 (more than configs.PAIRS_INDEX32_MAX elements).
    yield pairs.fwd_pairs_kernel, "bf16", dict(fwd_pair, **no_lse, FAST_TANH=True, INDEX64=True)
    yield pairs.bwd_pairs_kernel, "bf16", dict(bwd_pair, SAVED_LSE=False, FAST_TANH=True, DENSE=True,
                                               INDEX64=True)
    # Compiled for one d (configs.PAIRS_STATIC_D): the benchmark's bfloat16 training step at
    # r = 8 (d = 300, the dense cases with Newton steps above, D = 0), the first two cases with
    # a mask, then odd d in float32, float16 and short blocks.
    yield pairs.fwd_pairs_kernel, "bf16", dict(fwd_pair, **no_lse, FAST_TANH=True, DENSE=True, RCP_STEPS=2, D=300)
    yield pairs.bwd_pairs_kernel, "bf16", dict(bwd_pair, SAVED_LSE=False, FAST_TANH=True, DENSE=True, RCP_STEPS=3,
                                               D=300)
    yield pairs.fwd_pairs_kernel, "bf16", dict(fwd_pair, **no_lse, FAST_TANH=True, D=300)
    yield pairs.bwd_pairs_kernel, "bf16", dict(bwd_pair, SAVED_LSE=False, FAST_TANH=True, D=300)
    yield pairs.fwd_pairs_kernel, "fp32", dict(fwd_pair, **lse, DIR=2, FAST_TANH=False, D=37)
    yield pairs.bwd_pairs_kernel, "fp16", dict(bwd_pair, SAVED_LSE=False, FIXED_PIVOT=False, DIR=1, FAST_TANH=True,
                                               R=4, D=37)
    # First, for the autotune configs: the one-block forward of a bfloat16 training step (lse
    # written for the row-tile backward), the benchmark's.
    rows = dict(tanh, POLY_EXP2=False)
    yield forward.fwd_rows_kernel, "bf16", dict(rows, **lse, FAST_TANH=True, FIXED_PIVOT=True, BM=64, BD=64)
    yield forward.fwd_rows_kernel, "fp16", dict(rows, **lse, DIR=1, FAST_TANH=True, FIXED_PIVOT=True, BM=64,
                                                BD=64)
    yield forward.fwd_rows_kernel, "fp32", dict(rows, **no_lse, DIR=2, FAST_TANH=False, FIXED_PIVOT=False,
                                                BM=64, BD=64)
    # Every other key's exp2 by polynomial (configs.ROWS_EXP2 = "half-poly"): the benchmark's
    # bfloat16 forward without lse, then float16 with lse in direction "diag".
    yield forward.fwd_rows_kernel, "bf16", dict(rows, **no_lse, FAST_TANH=True, FIXED_PIVOT=True, POLY_EXP2=True,
                                                BM=64, BD=64)
    yield forward.fwd_rows_kernel, "fp16", dict(rows, **lse, DIR=2, FAST_TANH=True, FIXED_PIVOT=True,
                                                POLY_EXP2=True, BM=64, BD=64)
    # With a saved lse, and recomputing it (what a differentiable call runs) at both pivots.
    saved, fixed, running = (dict(SAVED_LSE=s, FIXED_PIVOT=f) for s, f in ((True, True), (False, True), (False, False)))
    yield backward.bwd_blocks_kernel, "bf16", dict(ax, **fixed, FAST_TANH=True, R=8, TILE=64, BD=32)
    yield backward.bwd_blocks_kernel, "fp32", dict(ax, **saved, DIR=3, FAST_TANH=False, R=64, TILE=64, BD=32)
    yield backward.bwd_blocks_kernel, "fp16", dict(other, **running, DIR=1, FAST_TANH=True, R=8, TILE=64, BD=32)
    yield backward.bwd_blocks_kernel, "bf16", dict(ax, **saved, FAST_TANH=True, R=8, TILE=64, BD=32)
    # float32 first: the autotune configs compile on a kernel's first case, and the split
    # backward kernels' loops compare best in one dtype (bwd_dkv_kernel's too).
    yield backward.bwd_dq_kernel, "fp32", dict(tanh, FAST_TANH=False, BM=64, BD=32)
    yield backward.bwd_dq_kernel, "fp16", dict(tanh, DIR=2, FAST_TANH=True, BM=64, BD=64)
    yield backward.bwd_dkv_kernel, "fp32", dict(tanh, DIR=1, FAST_TANH=False, BN=64, BD=32)
    # First, for the autotune configs: the fused backward of the benchmark's bfloat16 one-block
    # training step (the one its register cap is for, configs.FUSED_MAXNREG).
    plain = dict(tanh, TRIMMED=False, KEY_MASK=True)
    trimmed = dict(tanh, TRIMMED=True, KEY_MASK=False)
    yield backward.bwd_fused_kernel, "bf16", dict(plain, FAST_TANH=True, BM=64, BD=64)
    yield backward.bwd_fused_kernel, "fp32", dict(plain, FAST_TANH=False, BM=64, BD=32)
    yield backward.bwd_fused_kernel, "bf16", dict(plain, DIR=2, FAST_TANH=True, BM=64, BD=64)
    # Its trimmed key loop (configs.FUSED_STEP = "trimmed"): the same step (no mask), then every
    # other direction and dtype, with a mask.
    yield backward.bwd_fused_kernel, "bf16", dict(trimmed, FAST_TANH=True, BM=64, BD=64)
    yield backward.bwd_fused_kernel, "fp32", dict(trimmed, DIR=1, KEY_MASK=True, FAST_TANH=False, BM=64, BD=32)
    yield backward.bwd_fused_kernel, "fp16", dict(trimmed, DIR=2, KEY_MASK=True, FAST_TANH=True, BM=64, BD=64)
    yield backward.bwd_fused_kernel, "bf16", dict(trimmed, DIR=3, KEY_MASK=True, FAST_TANH=True, BM=64, BD=64)
    yield backward.bwd_dkv_sums_kernel, "fp32", dict(flags, QT=64, TRIMMED=False, BN=64, BD=64)
    yield backward.bwd_dkv_sums_kernel, "fp16", dict(flags, DIR=3, QT=64, TRIMMED=False, BN=64, BD=64)
    yield backward.bwd_dkv_sums_kernel, "bf16", dict(flags, QT=64, TRIMMED=True, BN=64, BD=64)
    # Triton specializes an int argument of 1 into a constant: one sequence, one block, one tile.
    yield backward.bwd_fused_kernel, "fp16", dict(plain, B=1, nblk=1, U=1, FAST_TANH=True, BM=64, BD=32)
    yield backward.bwd_fused_kernel, "bf16", dict(trimmed, B=1, nblk=1, U=1, FAST_TANH=True, BM=64, BD=32)
    yield backward.bwd_dkv_sums_kernel, "bf16", dict(flags, B=1, U=1, QT=64, TRIMMED=False, BN=32, BD=32)
    # Scales above 40 in float32 (TANH_POLY; last, so that the binaries above keep their names):
    # every kernel that computes tanh, the forwards at the running max, the backwards with a
    # saved lse and, for the short blocks, recomputing it.
    poly = dict(TANH_POLY=True, FAST_TANH=False, FIXED_PIVOT=False)
    yield forward.fwd_blocks_kernel, "fp32", dict(ax, **lse, **poly, MASKED=True, R=8, TILE=64, BD=64)
    yield pairs.fwd_pairs_kernel, "fp32", dict(fwd_pair, **lse, **poly)
    yield forward.fwd_rows_kernel, "fp32", dict(rows, **lse, **poly, BM=64, BD=64)
    yield backward.bwd_blocks_kernel, "fp32", dict(ax, **poly, SAVED_LSE=False, R=16, TILE=64, BD=32)
    yield pairs.bwd_pairs_kernel, "fp32", dict(bwd_pair, **poly, SAVED_LSE=False)
    poly.pop("FIXED_PIVOT")
    yield backward.bwd_dq_kernel, "fp32", dict(tanh, **poly, BM=64, BD=32)
    yield backward.bwd_dkv_kernel, "fp32", dict(tanh, **poly, BN=64, BD=32)
    yield backward.bwd_fused_kernel, "fp32", dict(plain, **poly, BM=64, BD=32)
    yield backward.bwd_fused_kernel, "fp32", dict(trimmed, **poly, KEY_MASK=True, BM=64, BD=32)


def named_cases():
    """(kernel, pointer dtype, constexprs, name) for each of cases(): name is the stem of the
    binaries --cubin-dir writes for it, kernel-dtype-{scalars}[-N], -N (2, 3, ...) for a
    kernel's Nth case in one dtype, {scalars} to be filled with fp32 or fp64."""
    seen: dict[tuple[str, str], int] = {}
    for fn, dtype, constexprs in cases():
        n = seen[fn.__name__, dtype] = seen.get((fn.__name__, dtype), 0) + 1
        repeat = f"-{n}" if n > 1 else ""  # else a later case's binary would replace this one's
        yield fn, dtype, constexprs, f"{fn.__name__}-{dtype}-{{scalars}}{repeat}"


def case_binary(kernel: str, dtype: str, **constexprs) -> str:
    """The name (no .cubin) of the float32-scalar binary of the first case of cases() of
    `kernel` in `dtype` whose constexprs include `constexprs`."""
    for fn, case_dtype, case, name in named_cases():
        if fn.__name__ == kernel and case_dtype == dtype and constexprs.items() <= case.items():
            return name.format(scalars="fp32")
    raise LookupError(f"compile_check has no {dtype} case of {kernel} with {constexprs}")


def config_cases():
    """(kernel, pointer dtype, constexprs, num_warps, maxnreg or None): every autotune config of
    every kernel, on the kernel's first case of cases(); the row-tile forward's also on its first
    case with POLY_EXP2 (configs.ROWS_EXP2 = "half-poly", which has another loop), the per-pair
    kernels' on their first with D (configs.PAIRS_STATIC_D: compiled for one d), the fused
    backward's on its first with TRIMMED (configs.FUSED_STEP = "trimmed", another loop), with
    D also configs.PAIRS_WIDE_CONFIGS."""
    from blosa_kernels import configs

    first = {}
    for fn, dtype, constexprs in cases():
        variant = (bool(constexprs.get("POLY_EXP2")), bool(constexprs.get("D")),
                   bool(constexprs.get("TRIMMED")))
        first.setdefault((fn, variant), (dtype, constexprs))
    for kind, (kernel_configs, _) in configs.CONFIGS.items():
        fn = configs.PLAIN[kind]
        for variant in ((False, False, False), (True, False, False), (False, True, False),
                        (False, False, True)):
            if (fn, variant) not in first:
                continue
            dtype, constexprs = first[fn, variant]
            if variant[1]:
                kernel_configs = kernel_configs + configs.PAIRS_WIDE_CONFIGS.get(kind, [])
            for config in kernel_configs:
                yield fn, dtype, dict(constexprs, **config.kwargs), config.num_warps, config.maxnreg


def launch_attrs(fn, signature: dict, constexprs: dict) -> dict:
    """What the JIT knows of the benchmark's dense per-pair call compiled for its d (D): its
    pointers 16-byte aligned, its sequence length (384), blocks a sequence (48) and element
    count (921600 at B = 64) multiples of 16. A launch specializes on both (a pointer's
    alignment, an integer's divisibility by 16) and, with D, the per-pair kernels' loads and
    stores vectorize on them (configs.PAIRS_WIDE_CONFIGS); without them no binary here would
    show it. Every other case compiles as for any pointers and sizes."""
    if not constexprs.get("D"):  # only the per-pair kernels have a D
        return {}
    aligned = [name for name, kind in signature.items()
               if kind.startswith("*") or name in ("n", "nblk", "total")]
    return {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in aligned}


# The constexprs that name an autotune config's tile, in its binary's name and its printout.
TILE_KEYS = ("TILE", "BLOCK", "BM", "BN", "BD")


def config_binary_name(kernel: str, dtype: str, num_warps: int, constexprs: dict,
                       maxnreg: int | None) -> str:
    """The name (no .cubin or .ptx) --cubin-dir gives an autotune config's binary:
    kernel-dtype-wWARPS-TILES, TILES the config's TILE_KEYS in constexprs' order (e.g.
    bwd_fused_kernel-bf16-w8-BM64-BD32), with -RN at the end for registers capped at N, then
    -poly for POLY_EXP2, -dN for D = N (the per-pair kernels compiled for one d) and -trimmed
    for TRIMMED (the fused backward)."""
    tiles = "-".join(f"{k}{v}" for k, v in constexprs.items() if k in TILE_KEYS)
    cap = f"-R{maxnreg}" if maxnreg else ""
    poly = "-poly" if constexprs.get("POLY_EXP2") else ""
    static = f"-d{constexprs['D']}" if constexprs.get("D") else ""
    trimmed = "-trimmed" if constexprs.get("TRIMMED") else ""
    return f"{kernel}-{dtype}-w{num_warps}-{tiles}{cap}{poly}{static}{trimmed}"


def cuobjdump(cubin: bytes, option: str) -> str | None:
    """`cuobjdump OPTION` of a one-kernel cubin (the copy that triton bundles), or None
    without it."""
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.access(tool, os.X_OK):
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, option, f.name], capture_output=True, text=True).stdout


def resources(cubin: bytes) -> tuple[int, int] | None:
    """(registers per thread, stack bytes: spills) of a one-kernel cubin, or None without
    cuobjdump."""
    m = re.search(r"REG:(\d+) STACK:(\d+)", cuobjdump(cubin, "-res-usage") or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def barriers(cubin: bytes) -> int | None:
    """BAR.SYNC instructions in a one-kernel cubin's SASS, or None without cuobjdump."""
    sass = cuobjdump(cubin, "-sass")
    return None if sass is None else len(re.findall(r"\bBAR\.SYNC", sass))


# An LLVM IR float operation and its two operands: `%5 = fadd float %3, %4`, with any
# fast-math flags after the opcode, and vector types (`<2 x float>`) too.
_FLOAT_OP = re.compile(r"^\s*(%[\w.]+) = (fmul|fadd|fsub)\b[^%]*?(%[\w.]+), (%[\w.]+)")


def summed_products(llir: str) -> list[str]:
    """The additions and subtractions of two plain products in a kernel's LLVM IR. The backend
    fuses one of the two into a multiply-add and picks which by how often each is used, so two
    compiled variants of one kernel can round the same sum differently (blosa_kernels/_math.py's
    docstring); the kernels write such sums as `tl.fma` instead."""
    products = set()  # SSA names: each is defined once
    found = []
    for line in llir.splitlines():
        m = _FLOAT_OP.match(line)
        if not m:
            continue
        name, op, a, b = m.groups()
        if op == "fmul":
            products.add(name)
        elif a in products and b in products:
            found.append(line.split(", !dbg")[0].strip())
    return found


# A PTX float32 multiply, add or subtract: `mul.f32 %r5, %r3, %r4;`, `add.rn.ftz.f32 ...`.
_PTX_FLOAT_OP = re.compile(r"^\s*(mul|add|sub)((?:\.\w+)*)\.f32\s+(%\w+),\s*([%\w.]+),\s*([%\w.]+)")


def products_left_to_ptxas(ptx: str) -> list[str]:
    """The PTX additions and subtractions (without `.rn`) that take a product (a `mul` without
    `.rn`): ptxas may fuse such a pair into a multiply-add or not, as it likes. Triton's LLVM
    fuses every product it can before that, so in these kernels there are none, and
    summed_products's check covers the only choice left."""
    products = set()
    found = []
    for line in ptx.splitlines():
        m = _PTX_FLOAT_OP.match(line)
        if not m:
            continue
        op, modifiers, dst, a, b = m.groups()
        rounded = ".rn" in modifiers
        if op == "mul":
            (products.discard if rounded else products.add)(dst)
            continue
        products.discard(dst)
        if not rounded and (a in products or b in products):
            found.append(line.strip().rstrip(";"))
    return found


def sums_left_to_the_compiler(kernel) -> list[str]:
    """A compiled kernel's summed_products (LLVM IR) and products_left_to_ptxas (PTX)."""
    return summed_products(kernel.asm["llir"]) + products_left_to_ptxas(kernel.asm["ptx"])


def must_not_sync(fn, constexprs: dict, num_warps: int) -> bool:
    """A per-block kernel whose warps all fit on its blocks (G = TILE // R >= warps) sums a
    block's rows inside each thread: a barrier there means the tile's arrangement
    (configs.BLOCK_ROW_AXIS) put warps on the rows. The per-pair kernels sum nothing across
    threads at all."""
    if fn.__name__ in ("fwd_pairs_kernel", "bwd_pairs_kernel"):
        return True
    if "ROW_AXIS" not in constexprs:
        return False
    from blosa_kernels import configs

    return (constexprs["ROW_AXIS"] == configs.BLOCK_ROW_AXIS
            and constexprs["TILE"] // constexprs["R"] >= num_warps)


def write_binary(kernel, folder: str, name: str) -> None:
    """Write a compiled kernel's cubin to folder/name.cubin and its PTX beside it, name.ptx:
    the PTX shows Triton's instruction order before ptxas schedules it."""
    path = os.path.join(folder, name)
    with open(path + ".cubin", "wb") as out:
        out.write(kernel.asm["cubin"])
    with open(path + ".ptx", "w") as out:
        out.write(kernel.asm["ptx"])


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
    failed = 0
    for fn, dtype, constexprs, stem in named_cases():
        for float_scalars in ("fp32", "fp64"):
            t0 = time.time()
            signature = _signature(fn, dtype, constexprs, float_scalars)
            kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs), target=target)
            assert kernel.asm.get("cubin"), fn.__name__
            if args.cubin_dir:
                write_binary(kernel, args.cubin_dir, stem.format(scalars=float_scalars))
            sums = sums_left_to_the_compiler(kernel)
            failed += bool(sums)
            status = "FUSES" if sums else "ok "
            print(f"{status} {fn.__name__:<18} {dtype:<5} scalars {float_scalars} sm_{args.arch}  "
                  f"{time.time() - t0:5.1f}s  {constexprs}")
            for line in sums[:3]:
                print(f"      a sum of products: {line}")
    for fn, dtype, constexprs, num_warps, maxnreg in config_cases():
        t0 = time.time()
        signature = _signature(fn, dtype, constexprs, "fp32")
        options = dict(num_warps=num_warps, num_stages=1)
        if maxnreg:
            options["maxnreg"] = maxnreg
        source = ASTSource(fn=fn, signature=signature, constexprs=constexprs,
                           attrs=launch_attrs(fn, signature, constexprs))
        kernel = triton.compile(source, target=target, options=options)
        usage = resources(kernel.asm["cubin"])
        if args.cubin_dir:
            write_binary(kernel, args.cubin_dir,
                         config_binary_name(fn.__name__, dtype, num_warps, constexprs, maxnreg))
        regs, stack = usage if usage else ("?", 0)
        syncs = barriers(kernel.asm["cubin"])
        synced = bool(syncs) and must_not_sync(fn, constexprs, num_warps)
        fuses = bool(sums_left_to_the_compiler(kernel))
        failed += stack > 0 or synced or fuses
        status = "SPILLS" if stack else "SYNCS " if synced else "FUSES " if fuses else "ok "
        capped = f" maxnreg={maxnreg}" if maxnreg else ""
        print(f"{status} {fn.__name__:<18} {dtype:<5} autotune config num_warps={num_warps:<2}{capped} "
              f"registers {regs} stack {stack} barriers {syncs}  {time.time() - t0:5.1f}s  "
              f"{ {k: v for k, v in constexprs.items() if k in TILE_KEYS or (k == 'D' and v)} }")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
