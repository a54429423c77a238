"""Per-element math shared by the Triton kernels (same formulas as csrc/blosa_math.h): tanh,
exp2, the online softmax and its result, the conversion of results to store. The tiling and
direction rules are in _tiles.py, the row loads in _rows.py.

Notation: x = z / c with z = dep_i + head_j + bias, t = tanh(x), score s = c * t in [-c, c].
The kernels work in base 2: s2 = s * log2(e), so every exponential is one `exp2`.

A product added to another product is written as one `tl.fma` (tanh_arg, the exponents from a
saved lse in _tiles.py, the running-max softmax update), and a tl.sum of products sums
rounded_product's: left as `a * b + c * d`, LLVM fuses one of the two products and picks which
by how often each is used, which differs between compiled variants of one kernel. On an H200
(2026-11-28) the per-pair forward with and without lse (WRITE_LSE) fused different products
into tanh's argument, and their float32 outputs differed in the last bits. compile_check (CI
runs it: tests/triton/test_triton_compiles.py) fails a kernel whose LLVM IR has such a sum, or
whose PTX leaves ptxas a product to fuse into a sum or not.
"""
import os

import triton
import triton.language as tl

# constexpr globals: the only kind a @triton.jit function may read.
# Whether the kernels run in Triton's interpreter (TRITON_INTERPRET=1 when triton was imported;
# configs.INTERPRET is this): code under it compiles away on a GPU.
INTERPRET = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"))
LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def tanh_exact_denominator(x):
    """exp2(2 x log2 e) + 1, x clamped to [-15, 15] so that exp2 never overflows (tanh(15) is 1
    in float32): tanh(x) = 1 - 2 / this, tanh_f32's exact form."""
    xc = tl.minimum(tl.maximum(x, -15.0), 15.0)
    return tl.exp2(xc * 2.8853900817779268) + 1.0


@triton.jit
def tanh_f32(x, FAST: tl.constexpr, POLY: tl.constexpr):
    """tanh(x) in float32.

    FAST: the `tanh.approx.f32` instruction (one special-function op, max relative error about
    2^-11; GPU only). Otherwise 1 - 2 / tanh_exact_denominator(x): an exp2 and a reciprocal,
    with an absolute error of a few float32 ulps of 1, and so a relative one of up to 1e-3 at
    small |x|, which the score c·t multiplies by c: harmless up to c = 40, 0.06 in the exponent
    at c = 1e6. POLY (the op sets it for scales above 40, configs.TANH_POLY_MIN_SCALE): |x| <
    0.625 from tanh_odd_poly instead, so the error stays relative at every x.
    """
    if FAST:
        t = tl.inline_asm_elementwise(
            "tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
        )
    else:
        t = 1.0 - 2.0 / tanh_exact_denominator(x)
        if POLY:
            t = tl.where(tl.abs(x) < 0.625, tanh_odd_poly(x), t)
    return t


@triton.jit
def tanh_odd_poly(x):
    """tanh(x) for |x| <= 0.625 as x + x^3·P(x^2), P of degree 4, evaluated by fma on the FMA pipe:
    within 2^-23 of the result, relatively (test_poly_tanh_error_is_relative), where 1 - 2 /
    (e^2x + 1) loses all but a few bits of a small tanh to the subtraction. Coefficients fitted
    for relative error on that interval (Lawson's reweighted least squares in float64, as
    exp2_poly's), then rounded to float32. Odd: tanh(-x) is -tanh(x) exactly."""
    s = x * x
    p = tl.fma(s, -5.7051936e-3, 2.0639267e-2)
    p = tl.fma(p, s, -5.3739768e-2)
    p = tl.fma(p, s, 1.3331443e-1)
    p = tl.fma(p, s, -3.3333281e-1)
    return tl.fma(x * s, p, x)


@triton.jit
def exp2_poly(x):
    """2^x for float32 x in [-126, 1] on the FMA and integer units only, no special-function op
    (how flash-attention 4 shares exp2 between the two units): x rounded to an integer n by the
    1.5·2^23 trick, 2^(x - n) by a degree-5 polynomial in f = x - n in [-1/2, 1/2], n added to
    the exponent bits. The coefficients were fitted for relative error on that interval
    (Lawson's reweighted least squares in float64), then rounded to float32: evaluated by fma,
    the error stays under 4e-7 (tests/triton/test_triton_math.py), where the Taylor
    coefficients' alone is (ln 2 / 2)^6 / 720 = 2.4e-6 at f = ±1/2. Outside
    that range the exponent wraps: callers keep x inside it (the fixed pivot's c·log2(e)·(t - 1)
    >= -115.5 for c <= 40) and select 0 for pairs that are not allowed."""
    j = x + 12582912.0
    f = x - (j - 12582912.0)
    p = tl.fma(f, 1.3276444e-3, 9.6755372e-3)
    p = tl.fma(p, f, 5.5507135e-2)
    p = tl.fma(p, f, 2.4022120e-1)
    p = tl.fma(p, f, 6.9314694e-1)
    p = tl.fma(p, f, 1.0000001)
    bits = p.to(tl.int32, bitcast=True) + (j.to(tl.int32, bitcast=True) << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def tanh_arg(unscaled, inv_c, scaled):
    """x = z / c for z = dep + head + bias as two parts, one still to scale and one already
    scaled by 1/c: unscaled / c + scaled, rounded once (one fused multiply-add). The row-tile and
    per-block kernels scale each query's head + bias and pass a key's dep unscaled; the
    per-pair kernels scale each key's dep, which they hold for all R queries, and pass a query's
    head + bias (that way their dense bfloat16 forward issues every load before its first
    math, as before the fma; the other way round it read 4 loads early)."""
    return tl.fma(unscaled, inv_c, scaled)


@triton.jit
def rounded_product(a, b):
    """a · b, rounded on its own (an fma with a zero addend, which LLVM keeps): for the terms of
    a tl.sum, whose first addition would otherwise add two plain products."""
    return tl.fma(a, b, 0.0)


@triton.jit
def zero_padding(x, real):
    """x with the rows of padding tokens zeroed (`real` False there, broadcast against x).
    Padded batches hold anything there, inf and NaN included, which a pair's zero probability
    does not cancel (0 · inf and 0 · NaN are NaN, and so is tanh.approx.f32 of NaN). Applied
    where a kernel would carry a padding row into a real token's sums; a loop that skips padding
    rows, or a padding query whose own results are discarded, needs none."""
    return tl.where(real, x, 0.0)


@triton.jit
def rounded_to(x, dtype: tl.constexpr):
    """float32 x in `dtype` (a result's, to store), rounded to nearest, ties to even, as a GPU's
    conversion rounds. Triton's interpreter (3.6 to 3.8) converts float32 to bfloat16 by dropping
    the low 16 bits, toward zero (1 - 1e-7 became 0.99609375): an output that is one key's value
    (p = 1 - 1e-7) came out an ulp off it, and d_dep an ulp of value where the true one is 0
    (test_one_key_gives_its_value_exactly). So there it rounds on the bits: adding 0x7FFF and the
    lowest bit kept, then dropping 16 bits, rounds to nearest even (a carry moves into the
    exponent; inf stays inf; NaN kept). On a GPU, where INTERPRET is False, the plain conversion."""
    if INTERPRET and dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = bits + (0x7FFF + ((bits >> 16) & 1))
        y = tl.where(x == x, (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True), x.to(dtype))
    else:
        y = x.to(dtype)
    return y


@triton.jit
def store_result(pointers, x, mask):
    """Stores float32 results x at `pointers` (out or a gradient) in the pointed-to dtype, rounded
    by rounded_to: every result the kernels write in the input dtype goes through here."""
    tl.store(pointers, rounded_to(x, pointers.dtype.element_ty), mask=mask)


@triton.jit
def online_softmax_step(b_sum, b_acc, b_m, t, val, allow, c_log2e, FIXED_PIVOT: tl.constexpr):
    """One key's step of a query tile's online softmax: the state (sum, acc, running max in log2
    units) after the key with t = tanh(z / c) and value val (both broadcast against the tile).
    `allow` says which (query, key) pairs count, with size 1 on the feature axis of the tile
    kernels (the per-pair kernels' threads hold one feature each): at the fixed pivot it becomes
    -inf in the exponent of a pair that is not allowed, one select per (query, key) and none per
    feature; otherwise it keeps the running max and p of such a pair."""
    if FIXED_PIVOT:
        off = tl.where(allow, -c_log2e, float("-inf"))
        p = tl.exp2(t * c_log2e + off)
        b_sum = b_sum + p
        b_acc = b_acc + p * val
    else:
        s2 = t * c_log2e
        m_new = tl.where(allow, tl.maximum(b_m, s2), b_m)
        alpha = tl.exp2(b_m - m_new)
        p = tl.where(allow, tl.exp2(s2 - m_new), 0.0)
        b_sum = b_sum * alpha + p
        b_acc = tl.fma(p, val, b_acc * alpha)
        b_m = m_new
    return b_sum, b_acc, b_m


@triton.jit
def reciprocal_newton(y, STEPS: tl.constexpr):
    """1 / y for positive normal float32 y on the FMA and integer units only: a first guess from
    the bits (a magic constant minus y's bits), then STEPS Newton steps r += r·(1 - y·r), each
    squaring the relative error (about 2.6e-3, 6.6e-6, then an ulp or two: 2 steps are plenty
    for a bfloat16 result, 3 for float16's and float32's). 2 + 2·STEPS instructions in place of
    a division's special-function op, the same trade as csrc's reciprocal_newton."""
    r = (0x7EF311C3 - y.to(tl.int32, bitcast=True)).to(tl.float32, bitcast=True)
    for _ in tl.static_range(STEPS):
        r = tl.fma(r, tl.fma(-y, r, 1.0), r)
    return r


@triton.jit
def softmax_result(b_sum, b_acc, b_m, has, c, FIXED_PIVOT: tl.constexpr,
                   RCP_STEPS: tl.constexpr = 0):
    """(out, lse) of the online softmax state: out = acc / sum and the natural-log lse, whose
    pivot is c (FIXED_PIVOT) or the running max b_m (log2 units); where `has` is False (no
    key) out is 0 and lse +inf, and nothing divides by or takes the log of a zero sum.
    RCP_STEPS > 0: out = acc · reciprocal_newton(sum, RCP_STEPS) instead of the division (the
    sum is normal: each term is at least exp(-2c) >= 2^-116 at the fixed pivot, and the
    running max's term is 1)."""
    safe_sum = tl.where(has, b_sum, 1.0)
    if RCP_STEPS > 0:
        b_out = tl.where(has, b_acc * reciprocal_newton(safe_sum, RCP_STEPS), 0.0)
    else:
        b_out = tl.where(has, b_acc / safe_sum, 0.0)
    if FIXED_PIVOT:
        b_lse = c + tl.log2(safe_sum) * LN2
    else:
        b_lse = (b_m + tl.log2(safe_sum)) * LN2
    return b_out, tl.where(has, b_lse, float("inf"))


@triton.jit
def f32(x):
    """A float scalar argument as float32. torch.compile may pass Python floats to the kernels
    as float64, which would turn the float32 softmax accumulators into float64 in the loop."""
    return tl.cast(x, tl.float32)
