"""Measured ceiling of masked_block_attn's per-element work on this GPU, with no memory traffic.

    python bench/gpu_tools/sfu_peak.py --out sfu.json

The kernels' rates are set beside a nominal bound (SMs × 16 special-function ops per clock ×
1.98 GHz / 2 ops per element, bench/HISTORY.md). This measures what the card really gives: every
thread keeps a few (query, feature) pairs in registers and streams synthetic keys through the
forward's inner loop, so only arithmetic is timed. Loops:

  tanh      t = tanh.approx.f32(z)                     one special-function op
  exp2      p = exp2(z)                                one special-function op
  fwd fast  t = tanh.approx(k + q); p = exp2(a·t − a); sum += p; acc += p·v
            the forward element of the CUDA C++ kernels (all dtypes) and of the Triton kernels
            for float16/bfloat16
  fwd exact the same with the exp2-based tanh of the Triton float32 kernels (exp2, reciprocal)
  fwd exact fma   fwd exact with the reciprocal on the FMA units (reciprocal_fma: a guess from
            the bits and three Newton steps), the special-function unit doing two exp2 an
            element instead of three ops (a candidate for the Triton float32 kernels)
  fwd poly exp2   fwd fast with exp2 on the FMA units (a polynomial), the special-function
            unit doing only tanh
  fwd half poly   half the pairs take exp2 from each unit (how flash-attention 4 shares it)
  fwd bf16x2, fwd f16x2   tanh and exp2 on packed pairs of 16-bit floats: one special-function
            op per two elements, sums still in float32 (a candidate for 16-bit inputs)

Rates are elements (loop steps × pairs) per second; "of nominal ops/s" counts each loop's
special-function ops per element (SFU_OPS). About ten seconds, compile included.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from blosa_kernels._math import (exp2_poly, reciprocal_newton, tanh_exact_denominator,  # noqa: E402
                                 tanh_f32)
from cuda_timing import time_ms  # noqa: E402  (the script's own folder, bench/gpu_tools/)

CLOCK_HZ = 1.98e9  # H100/H200 SXM boost clock, as in gpu_rates.py
LOOPS = {
    "tanh": 0, "exp2": 1, "fwd fast": 2, "fwd exact": 3, "fwd exact fma": 8,
    "fwd poly exp2": 4, "fwd half poly": 5, "fwd bf16x2": 6, "fwd f16x2": 7,
}
# Special-function (MUFU) ops per element of each loop: the exact tanh takes an exp2 and a
# reciprocal (an exp2 alone with reciprocal_fma); the packed loops take one op per two elements
# for tanh and for exp2.
SFU_OPS = {
    "tanh": 1, "exp2": 1, "fwd fast": 2, "fwd exact": 3, "fwd exact fma": 2,
    "fwd poly exp2": 1, "fwd half poly": 1.5, "fwd bf16x2": 1, "fwd f16x2": 1,
}
BLOCK, WARPS = 1024, 4  # 8 independent pairs per thread


@triton.jit
def reciprocal_fma(y):
    """1 / y for float32 y in [1, 2^44] (the exact tanh's 1 + exp2(2x·log2 e), |x| <= 15) on the
    FMA and integer units only: a first guess from the bits (a magic constant minus y's bits,
    relative error under 5.1% on that range), then three Newton steps r += r·(1 - y·r), each
    squaring the error (2.6e-3, 6.6e-6, then about an ulp). Seven instructions in place of one
    special-function op (_math.reciprocal_newton with 3 steps)."""
    return reciprocal_newton(y, 3)


@triton.jit
def tanh_exact_fma(x):
    """tanh_f32's exact form with reciprocal_fma."""
    return 1.0 - 2.0 * reciprocal_fma(tanh_exact_denominator(x))


@triton.jit
def _packed(x, op: tl.constexpr):
    """One PTX op on pairs of 16-bit floats (x float16 or bfloat16): one special-function op per
    two elements, at 16-bit precision."""
    return tl.inline_asm_elementwise(op + " $0, $1;", "=r,r", [x], dtype=x.dtype, is_pure=True, pack=2)


@triton.jit
def fwd_element(k, q, a, LOOP: tl.constexpr):
    """The forward's per-element work for loop LOOP: (p, p · v) with v = k."""
    if LOOP == 6:
        t = _packed((k + q).to(tl.bfloat16), "tanh.approx.bf16x2")
        p = _packed((t.to(tl.float32) * a - a).to(tl.bfloat16), "ex2.approx.ftz.bf16x2").to(tl.float32)
    elif LOOP == 7:
        t = _packed((k + q).to(tl.float16), "tanh.approx.f16x2")
        p = _packed((t.to(tl.float32) * a - a).to(tl.float16), "ex2.approx.f16x2").to(tl.float32)
    else:
        if LOOP == 8:
            t = tanh_exact_fma(k + q)
        else:
            t = tanh_f32(k + q, LOOP != 3, False)
        if LOOP == 4:
            p = exp2_poly(t * a - a)
        else:
            p = tl.exp2(t * a - a)
    return p, p * k


@triton.jit
def sfu_loop_kernel(q_ptr, out_ptr, steps, a, LOOP: tl.constexpr, BLOCK: tl.constexpr):
    """Each of BLOCK pairs runs `steps` loop steps; the key term k changes every step (one add),
    as a new key does in the kernels, so nothing can be hoisted out of the loop. Loop 5 ("half
    poly") takes exp2 from the special-function unit for one half of the pairs and from
    exp2_poly for the other, to share the load between the two units."""
    HALF: tl.constexpr = BLOCK // 2
    offs = tl.program_id(0) * BLOCK + tl.arange(0, HALF)
    q1 = tl.load(q_ptr + offs)
    q2 = tl.load(q_ptr + offs + HALF)
    k1 = q1 * 0.5
    k2 = q2 * 0.5
    total1 = tl.zeros([HALF], dtype=tl.float32)
    total2 = tl.zeros([HALF], dtype=tl.float32)
    acc1 = tl.zeros([HALF], dtype=tl.float32)
    acc2 = tl.zeros([HALF], dtype=tl.float32)
    for _ in range(steps):
        k1 = k1 + 0.0009765625
        k2 = k2 + 0.0009765625
        if LOOP == 0:
            total1 += tanh_f32(k1 + q1, True, False)
            total2 += tanh_f32(k2 + q2, True, False)
        elif LOOP == 1:
            total1 += tl.exp2(k1 * a - a)
            total2 += tl.exp2(k2 * a - a)
        else:
            p1, pv1 = fwd_element(k1, q1, a, 2 if LOOP == 5 else LOOP)
            p2, pv2 = fwd_element(k2, q2, a, 4 if LOOP == 5 else LOOP)
            total1 += p1
            acc1 += pv1
            total2 += p2
            acc2 += pv2
    tl.store(out_ptr + offs, total1 + acc1)
    tl.store(out_ptr + offs + HALF, total2 + acc2)


def measure(loop: str, steps: int = 4096) -> float:
    """Elements per second of `loop` over the whole card."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    numel = sms * 8 * BLOCK  # 8 programs of 4 warps per SM: enough warps to hide latency
    q = torch.rand(numel, device="cuda") * 0.5
    out = torch.empty_like(q)
    a = 5.0 * 1.4426950408889634
    grid = (numel // BLOCK,)

    def run():
        sfu_loop_kernel[grid](q, out, steps, a, LOOP=LOOPS[loop], BLOCK=BLOCK, num_warps=WARPS)

    seconds = time_ms(run) / 1e3  # the first call compiles, outside the timing
    if not torch.isfinite(out).all():
        raise RuntimeError(f"loop {loop!r} produced non-finite values")
    return numel * steps / seconds


def compile_only(arch: int) -> None:
    """Compile every loop for compute capability `arch` without a GPU (CI checks this)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {"q_ptr": "*fp32", "out_ptr": "*fp32", "steps": "i32", "a": "fp32",
                 "LOOP": "constexpr", "BLOCK": "constexpr"}
    for loop, code in LOOPS.items():
        src = ASTSource(fn=sfu_loop_kernel, signature=signature,
                        constexprs={"LOOP": code, "BLOCK": BLOCK})
        kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": WARPS})
        assert kernel.asm.get("cubin"), loop
        print(f"ok  {loop} sm_{arch}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON file to write")
    ap.add_argument("--compile-only", type=int, metavar="ARCH",
                    help="only compile the loops for this compute capability (e.g. 90); no GPU needed")
    args = ap.parse_args(argv)
    if args.compile_only:
        compile_only(args.compile_only)
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device; nothing to measure")
        return 1
    props = torch.cuda.get_device_properties(0)
    nominal = props.multi_processor_count * 16 * CLOCK_HZ
    print(f"{props.name}: nominal {nominal:.3g} special-function ops/s "
          f"({nominal / 2:.3g} forward elements/s at 2 ops each)\n")
    print("| loop | elements/s | special-function ops per element | of nominal ops/s |")
    print("|---|---|---|---|")
    rates = {}
    for loop in LOOPS:
        rates[loop] = measure(loop)
        ops = SFU_OPS[loop]
        print(f"| {loop} | {rates[loop]:.3g} | {ops:g} | {rates[loop] * ops / nominal:.0%} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=props.name, nominal_ops=nominal, rates=rates), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
