"""Per-element math shared by the Triton kernels (same formulas as csrc/blosa_math.h), and the
tiling and row loads the row-tile kernels share.

Notation: x = z / c with z = dep_i + head_j + bias, t = tanh(x), score s = c * t in [-c, c].
The kernels work in base 2: s2 = s * log2(e), so every exponential is one `exp2`.

A product added to another product is written as one `tl.fma` (tanh_arg, the exponents from a
saved lse, the running-max softmax update), and a tl.sum of products sums rounded_product's:
left as `a * b + c * d`, LLVM fuses one of the two products and picks which by how often each
is used, which differs between compiled variants of one kernel. On an H200 (2026-11-28) the
per-pair forward with and without lse (WRITE_LSE) fused different products into tanh's
argument, and their float32 outputs differed in the last bits. compile_check (CI runs it:
tests/triton/test_triton_compiles.py) fails a kernel whose LLVM IR has such a sum, or whose PTX
leaves ptxas a product to fuse into a sum or not.
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
FORWARD, BACKWARD, DIAG, ALL = 0, 1, 2, 3
DIRECTION_CODE = {"forward": FORWARD, "backward": BACKWARD, "diag": DIAG, "all": ALL}


@triton.jit
def tanh_exact_denominator(x):
    """exp2(2 x log2 e) + 1, x clamped to [-15, 15] so that exp2 never overflows (tanh(15) is 1
    in float32): tanh(x) = 1 - 2 / this, tanh_f32's exact form."""
    xc = tl.minimum(tl.maximum(x, -15.0), 15.0)
    return tl.exp2(xc * 2.8853900817779268) + 1.0


@triton.jit
def tanh_f32(x, FAST: tl.constexpr):
    """tanh(x) in float32.

    FAST: the `tanh.approx.f32` instruction (one special-function op, max relative error about
    2^-11; GPU only). Otherwise 1 - 2 / tanh_exact_denominator(x): an exp2 and a reciprocal,
    with an absolute error of a few float32 ulps of 1.
    """
    if FAST:
        t = tl.inline_asm_elementwise(
            "tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
        )
    else:
        t = 1.0 - 2.0 / tanh_exact_denominator(x)
    return t


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
def dir_allows(i, j, DIR: tl.constexpr):
    """Whether query j may attend key i of its block under direction DIR (broadcasts)."""
    if DIR == 0:
        ok = i < j
    elif DIR == 1:
        ok = i > j
    elif DIR == 2:
        ok = i != j
    else:
        ok = i == i
    return ok


@triton.jit
def keys_of(j, n, r, DIR: tl.constexpr):
    """Keys [lo, hi) that query j (scalar or vector) may attend, before the padding mask;
    under DIR == 2 (diag) the query itself must still be excluded."""
    start = (j // r) * r
    end = tl.minimum(start + r, n)
    if DIR == 0:
        lo = start
        hi = j
    elif DIR == 1:
        lo = j + 1
        hi = end
    else:
        lo = start
        hi = end
    return lo, hi


@triton.jit
def queries_of(i, n, r, DIR: tl.constexpr):
    """Queries [lo, hi) that may attend key i (same conventions as keys_of)."""
    start = (i // r) * r
    end = tl.minimum(start + r, n)
    if DIR == 0:
        lo = i + 1
        hi = end
    elif DIR == 1:
        lo = start
        hi = i
    else:
        lo = start
        hi = end
    return lo, hi


@triton.jit
def tile_ranges(mask, b, m0, end, n, r, BM: tl.constexpr, DIR: tl.constexpr, KEYS: tl.constexpr):
    """Rows [m0, min(m0 + BM, end)) of sequence b as a row tile: queries that stream their keys
    (KEYS) or keys that stream their queries (not KEYS).

    Returns o_j, m_j, real_j ([BM] rows, which exist, which are real tokens); lo_j, hi_j (each
    row's range, empty for padding rows); last (the last row); s_lo, s_hi (the union of the
    ranges, what the program streams; empty when the tile is) and inner_lo, inner_hi (their
    intersection). Ranges are nondecreasing in the row, so the union runs from the first row's
    lo to the last row's hi; on the intersection every row of the tile takes part, so no
    per-row mask is needed there (padding rows are zeroed at the end).
    """
    o_j = m0 + tl.arange(0, BM)
    m_j = o_j < end
    last = tl.minimum(m0 + BM, end) - 1
    if KEYS:
        lo_j, hi_j = keys_of(o_j, n, r, DIR)
        s_lo, inner_hi = keys_of(m0, n, r, DIR)
        inner_lo, s_hi = keys_of(last, n, r, DIR)
    else:
        lo_j, hi_j = queries_of(o_j, n, r, DIR)
        s_lo, inner_hi = queries_of(m0, n, r, DIR)
        inner_lo, s_hi = queries_of(last, n, r, DIR)
    s_hi = tl.where(m0 < end, s_hi, s_lo)
    real_j = m_j & (tl.load(mask + b * n + o_j, mask=m_j, other=0) != 0)
    hi_j = tl.where(real_j, hi_j, lo_j)
    return o_j, m_j, real_j, lo_j, hi_j, last, s_lo, s_hi, inner_lo, inner_hi


@triton.jit
def heaviest_first(x, count, REVERSE: tl.constexpr):
    """Tile number x of `count`, counted from the end when REVERSE: programs start in pid order,
    and a grid that ends on its heaviest tiles leaves most SMs idle while they finish."""
    if REVERSE:
        x = count - 1 - x
    return x


@triton.jit
def features_fastest(d, BD: tl.constexpr):
    """(pid, o_k) of a program of a 1-D grid whose fastest axis is the feature tiles: its
    index over the other axes and its BD features. Programs that run at the same time then
    cover whole rows, read and written in address order, rather than one piece of each of many
    rows (the per-block kernels and bwd_dkv_sums_kernel; pairs.py says why that order
    matters)."""
    tiles = tl.cdiv(d, BD)
    pid = tl.program_id(0)
    rest = pid // tiles
    # pid - rest · tiles, not pid % tiles: the same number, but from `%` ptxas (triton 3.6)
    # scheduled the per-block forward's loop otherwise, reading a streamed row 27 and 24
    # instructions after its load on 8 and 16 warps instead of 122 and 30
    # (test_loops_load_ahead).
    return rest, (pid - rest * tiles) * BD + tl.arange(0, BD)


@triton.jit
def row_tile(mask, n, r, BM: tl.constexpr, DIR: tl.constexpr, KEYS: tl.constexpr, pid):
    """The tile of program pid (over the grid's sequences and row tiles) of a row-tile kernel:
    BM consecutive rows of one sequence (tiles may straddle blocks). Returns b, m0 (the
    sequence and first row), then tile_ranges. A sequence's tiles are numbered heaviest first:
    under "forward" later queries have more keys, under "backward" later keys more queries."""
    tiles = tl.cdiv(n, BM)
    b = pid // tiles
    tile = heaviest_first(pid % tiles, tiles, (KEYS and DIR == 0) or ((not KEYS) and DIR == 1))
    m0 = tile * BM
    o_j, m_j, real_j, lo_j, hi_j, last, s_lo, s_hi, inner_lo, inner_hi = tile_ranges(
        mask, b, m0, n, n, r, BM, DIR, KEYS)
    return b, m0, o_j, m_j, real_j, lo_j, hi_j, last, s_lo, s_hi, inner_lo, inner_hi


@triton.jit
def block_row_tile(mask, n, r, nblk, U, BM: tl.constexpr, DIR: tl.constexpr):
    """The tile of program (pid 0) of a kernel whose query tiles never straddle blocks: program
    (b · nblk + block) · U + x owns the block's queries [u·BM, (u + 1)·BM), u = x (U - 1 - x
    under "forward": heaviest first, as in row_tile), empty past the end of a short last block.
    Returns b, u, m0, then tile_ranges (queries streaming their keys)."""
    pid = tl.program_id(0)
    u = heaviest_first(pid % U, U, DIR == 0)
    blk = (pid // U) % nblk
    b = pid // (U * nblk)
    m0 = blk * r + u * BM
    end = tl.minimum(blk * r + r, n)
    o_j, m_j, real_j, lo_j, hi_j, last, s_lo, s_hi, inner_lo, inner_hi = tile_ranges(
        mask, b, m0, end, n, r, BM, DIR, True)
    return b, u, m0, o_j, m_j, real_j, lo_j, hi_j, last, s_lo, s_hi, inner_lo, inner_hi


# The per-block kernels hold a [G, R, BD] or [R, G, BD] tile (G blocks, R rows of each, BD
# features) and sum over the rows of a block; ROW_AXIS (0 or 1) says where the rows are. The
# sums stay inside a thread only when Triton puts the warps on the block axis, and where it puts
# them changed between versions (configs.BLOCK_ROW_AXIS), hence both arrangements.


@triton.jit
def block_rows(start, o_w, ROW_AXIS: tl.constexpr):
    """Positions start[g] + o_w[w] of row offsets o_w [R] in blocks starting at start [G],
    arranged [R, G] (ROW_AXIS 0) or [G, R]."""
    if ROW_AXIS == 0:
        x = o_w[:, None] + start[None, :]
    else:
        x = start[:, None] + o_w[None, :]
    return x


@triton.jit
def spread_offsets(o_w, ROW_AXIS: tl.constexpr):
    """Row offsets [R] as a column [R, 1] (ROW_AXIS 0) or a row [1, R] of the 2-d arrangement."""
    if ROW_AXIS == 0:
        x = o_w[:, None]
    else:
        x = o_w[None, :]
    return x


@triton.jit
def spread_blocks(x, ROW_AXIS: tl.constexpr):
    """Per-block values [G] broadcastable against the [R, G] / [G, R] arrangement."""
    if ROW_AXIS == 0:
        y = x[None, :]
    else:
        y = x[:, None]
    return y


@triton.jit
def spread_block_rows(x, ROW_AXIS: tl.constexpr):
    """Per-block rows [G, BD] broadcastable against the [R, G, BD] / [G, R, BD] tile."""
    if ROW_AXIS == 0:
        y = x[None, :, :]
    else:
        y = x[:, None, :]
    return y


@triton.jit
def spans_tile(s, inner_lo, inner_hi, m0, last, DIR: tl.constexpr):
    """Whether every row of a row tile (rows m0..last) pairs with streamed row s: s lies in the
    intersection of their ranges (tile_ranges) and, under "diag", is none of the rows."""
    inner = (s >= inner_lo) & (s < inner_hi)
    if DIR == 2:
        inner = inner & ((s < m0) | (s > last))
    return inner


@triton.jit
def pairs_with(s, lo_j, hi_j, o_j, DIR: tl.constexpr):
    """[BM] whether each row o_j of a row tile (its range [lo_j, hi_j)) pairs with streamed
    row s."""
    allow = (lo_j <= s) & (s < hi_j)
    if DIR == 2:
        allow = allow & (o_j != s)
    return allow


@triton.jit
def saved_probs(t, nlse2, c_log2e, s, inner_lo, inner_hi, m0, last, lo_j, hi_j, o_j,
                DIR: tl.constexpr):
    """p = exp2(c·log2(e)·t + nlse2) of a row tile's pairs with streamed row s, recomputed
    from the saved lse (nlse2 = -lse·log2(e), broadcast against t [BM, BD]), 0 for the rows
    that do not pair with s; on the tiles' common range no mask at all."""
    if spans_tile(s, inner_lo, inner_hi, m0, last, DIR):
        p = tl.exp2(tl.fma(t, c_log2e, nlse2))
    else:
        allow = pairs_with(s, lo_j, hi_j, o_j, DIR)
        p = tl.where(allow[:, None], tl.exp2(tl.fma(t, c_log2e, nlse2)), 0.0)
    return p


@triton.jit
def block_tile_probs(t, nlse2, c_log2e, s, inner_lo, inner_hi, m0, last, BM: tl.constexpr,
                     DIR: tl.constexpr):
    """saved_probs of a row tile inside one block (block_row_tile). Its rows without keys have
    nlse2 = -inf (lse = +inf: padding rows too, and rows past the end, as query_tile loads
    them), so p = 0 there and every other row pairs with streamed row s exactly where the
    direction allows: s - m0 against the row's place in the tile, computed in the arrangement
    of t (saved_probs' [BM] mask goes from its own arrangement to t's through shared memory
    and a barrier, for each such s)."""
    if spans_tile(s, inner_lo, inner_hi, m0, last, DIR):
        p = tl.exp2(tl.fma(t, c_log2e, nlse2))
    else:
        allow = dir_allows(s - m0, tl.arange(0, BM)[:, None], DIR)
        p = tl.where(allow, tl.exp2(tl.fma(t, c_log2e, nlse2)), 0.0)
    return p


@triton.jit
def scaled_queries(head, bias, p_j, m_jk, o_k, m_k, inv_c):
    """(head + bias) / c of a tile's queries [BM, BD] (offsets p_j), in float32."""
    b_q = tl.load(head + p_j, mask=m_jk, other=0.0).to(tl.float32)
    b_q += tl.load(bias + o_k, mask=m_k, other=0.0).to(tl.float32)[None, :]
    return b_q * inv_c


@triton.jit
def query_tile(head, bias, grad_out, lse, out, p_j, m_jk, real_j, o_k, m_k, inv_c):
    """What the backward needs of a tile's queries [BM, BD], in float32: (head + bias) / c and
    grad_out (both 0 in padding rows, real_j [BM] False: their p and p·g must come out 0, not
    NaN), -lse·log2(e) (-inf where lse is +inf: padding rows, rows past the end and rows with no
    key, so their p is exactly 0) and the saved out."""
    real = real_j[:, None]
    b_q = zero_padding(scaled_queries(head, bias, p_j, m_jk, o_k, m_k, inv_c), real)
    b_g = zero_padding(tl.load(grad_out + p_j, mask=m_jk, other=0.0).to(tl.float32), real)
    b_nlse2 = -tl.load(lse + p_j, mask=m_jk, other=float("inf")) * LOG2E
    b_os = tl.load(out + p_j, mask=m_jk, other=0.0).to(tl.float32)
    return b_q, b_g, b_nlse2, b_os


@triton.jit
def stream_row(i, hi):
    """The row to load for step i of a loop over [.., hi) that loads one row ahead: i, clamped
    to the last row of the range (and to row 0 when it is empty), so every load reads an
    existing row and none needs a test."""
    return tl.maximum(tl.minimum(i, hi - 1), 0)


@triton.jit
def key_pointers(mask, dep, value, row, d, o_k):
    """Pointers to key `row`'s (b·n + position) mask byte and to its features o_k [BD] of dep
    and value, for a loop that bumps them by row_step instead of recomputing 64-bit offsets
    each step (fwd_rows_kernel: 135 -> 125 instructions a step with triton 3.8; the backward
    kernels' loops came out longer that way, so they keep key_row / query_row)."""
    p = row.to(tl.int64) * d + o_k
    return mask + row, dep + p, value + p


@triton.jit
def row_step(i, hi):
    """How far the row to load moves from step i to step i + 1 of a loop over [.., hi) that
    loads one row ahead: 1, or 0 at the last row (loaded again rather than tested, as
    stream_row)."""
    return (i + 1 < hi).to(tl.int32)


@triton.jit
def load_key(m_ptr, dep_ptr, val_ptr, m_k, KEY_MASK: tl.constexpr):
    """The key at key_pointers as loaded: whether it is real, its dep and value [BD]. Without
    KEY_MASK (a call with no padding mask) every key is real, and no mask byte is read."""
    if KEY_MASK:
        real = tl.load(m_ptr) != 0
    else:
        real = True
    return real, tl.load(dep_ptr, mask=m_k, other=0.0), tl.load(val_ptr, mask=m_k, other=0.0)


@triton.jit
def stream_row_in_block(i, start, hi):
    """stream_row within a block that starts at row `start`, as an offset from it: i clamped to
    [start, hi - 1] (to start when the range is empty), less start."""
    return tl.maximum(stream_row(i, hi), start) - start


@triton.jit
def key_row(mask, dep, value, row, d, o_k, m_k):
    """Key `row` (b·n + position) as loaded: whether it is real, its dep and value [BD]."""
    p = row.to(tl.int64) * d + o_k
    real = tl.load(mask + row) != 0
    return real, tl.load(dep + p, mask=m_k, other=0.0), tl.load(value + p, mask=m_k, other=0.0)


@triton.jit
def key_row_in_block(mask, dep, value, row, d, o_k, m_k, KEY_MASK: tl.constexpr):
    """key_row with mask, dep and value pointing at a block's first row and `row` an offset from
    it (stream_row_in_block), taken by a 32-bit product: row·d + o_k stays under r·d + d.
    KEY_MASK as load_key's."""
    p = row * d + o_k
    return load_key(mask + row, dep + p, value + p, m_k, KEY_MASK)


@triton.jit
def query_row(mask, head, grad_out, out, lse, row, d, o_k, m_k):
    """Query `row` as loaded: whether it is real, its head, grad_out, out and lse [BD]."""
    p = row.to(tl.int64) * d + o_k
    real = tl.load(mask + row) != 0
    return (real, tl.load(head + p, mask=m_k, other=0.0),
            tl.load(grad_out + p, mask=m_k, other=0.0), tl.load(out + p, mask=m_k, other=0.0),
            tl.load(lse + p, mask=m_k, other=float("inf")))


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
