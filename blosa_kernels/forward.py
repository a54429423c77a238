"""Forward kernels of masked_block_attn: out [B, n, d] (input dtype) and lse [B, n, d] (float32).

Online softmax per (query, feature) over the keys of the query's block, accumulating in float32.
With FIXED_PIVOT (scale <= 40, KERNEL_NOTES.md section 1) the scores s in [-c, c] are shifted by
the constant c: one exp per element, no rescaling; otherwise by a running maximum that starts at
-c (a lower bound of every score), so the pivot is always finite and no -inf - -inf can occur.
A query with no allowed key gets out = 0 and lse = +inf (backward then recomputes p = 0).
WRITE_LSE=False (a call no gradient will reach) skips lse: its stores and its logarithms.

Two tilings (neither holds an r x r x d or n x n x d tensor; extra memory is the lse output):
- `fwd_blocks_kernel`, small blocks (r <= 64): a program owns G = TILE // R whole blocks of one
  sequence (R = next power of two >= r) and a feature tile; its [G, R, BD] queries step through
  the r key offsets of their blocks, each step loading one key row per block (shared by that
  block's R queries).
- `fwd_rows_kernel`, large blocks and full DiSA: a program owns BM consecutive queries and a
  feature tile and steps through the union of their key ranges one key row at a time (a [BD]
  load shared by all BM queries); pairs outside a query's range are masked.

Arguments: pointers to contiguous [B, n, d] tensors (lse and d_head float32), bias [d] (zeros
when None), mask [B, n] uint8 (ones when None; fwd_blocks_kernel's MASKED: a mask was given,
zero its padding keys' rows); n, d, r (the resolved block length), scalars c, 1/c and
c·log2(e); DIR 0 forward / 1 backward / 2 diag / 3 all; FAST_TANH: tanh.approx.f32; TANH_POLY:
the exact tanh with small |x| from a polynomial (scales above 40, _math.tanh_f32);
fwd_rows_kernel's POLY_EXP2: at the fixed pivot, every other key's exp2 from exp2_poly on the
FMA pipe (configs.rows_poly_exp2).
"""
import triton
import triton.language as tl

from blosa_kernels._math import (exp2_poly, f32, online_softmax_step, softmax_result, store_result,
                                 tanh_arg, tanh_f32, zero_padding)
from blosa_kernels._rows import key_pointers, load_key, row_step, scaled_queries, stream_row
from blosa_kernels._tiles import (block_rows, dir_allows, features_fastest, pairs_with, row_tile,
                                  spans_tile, spread_block_rows, spread_blocks, spread_offsets)


@triton.jit
def block_key_rows(mask, dep, value, b, n, d, start, u, m_blk, o_k, m_k):
    """The rows of key offset u of the blocks starting at `start` ([G]), as loaded: each key's
    mask byte [G] (nonzero: real; 0 past the end; tested where it is used: a test here would
    wait for the load), its dep and value [G, BD] (input dtype)."""
    o_i = start + u
    m_i = m_blk & (o_i < n)
    p_i = (b * n + o_i).to(tl.int64)[:, None] * d + o_k[None, :]
    m_ik = m_i[:, None] & m_k[None, :]
    return (tl.load(mask + b * n + o_i, mask=m_i, other=0),
            tl.load(dep + p_i, mask=m_ik, other=0.0), tl.load(value + p_i, mask=m_ik, other=0.0))


@triton.jit
def fwd_blocks_kernel(
    dep, head, value, bias, mask, out, lse,
    n, d, r, nblk, c, inv_c, c_log2e,
    DIR: tl.constexpr,
    FIXED_PIVOT: tl.constexpr, FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
    WRITE_LSE: tl.constexpr,
    ROW_AXIS: tl.constexpr, MASKED: tl.constexpr,
    R: tl.constexpr, TILE: tl.constexpr, BD: tl.constexpr,
):
    G: tl.constexpr = TILE // R
    c, inv_c, c_log2e = f32(c), f32(inv_c), f32(c_log2e)
    pid, o_k = features_fastest(d, BD)  # o_k: [BD] features
    groups = tl.cdiv(nblk, G)
    b = pid // groups
    o_blk = (pid % groups) * G + tl.arange(0, G)  # [G] block index
    o_v = tl.arange(0, R)  # [R] query offset inside the block
    m_k = o_k < d
    m_blk = o_blk < nblk
    start = o_blk * r
    # Queries [R, G, BD] or [G, R, BD] (ROW_AXIS, configs.BLOCK_ROW_AXIS): the arrangement in
    # which this triton puts the warps on the blocks, so that a thread holds all R queries of
    # its (block, feature) and uses each key row it loads for all of them, with no exchange
    # between threads.
    o_j = block_rows(start, o_v, ROW_AXIS)  # query positions
    m_j = spread_blocks(m_blk, ROW_AXIS) & (spread_offsets(o_v, ROW_AXIS) < r) & (o_j < n)
    real_j = m_j & (tl.load(mask + b * n + o_j, mask=m_j, other=0) != 0)
    row_j = (b * n + o_j).to(tl.int64) * d
    p_j = row_j[:, :, None] + o_k[None, None, :]
    m_jk = m_j[:, :, None] & m_k[None, None, :]
    b_q = tl.load(head + p_j, mask=m_jk, other=0.0).to(tl.float32)
    b_q += tl.load(bias + o_k, mask=m_k, other=0.0).to(tl.float32)[None, None, :]
    b_q = b_q * inv_c

    b_sum = tl.zeros_like(b_q)
    b_acc = tl.zeros_like(b_q)
    b_m = tl.full(b_q.shape, -1.0, dtype=tl.float32) * c_log2e  # running max (log2 units)
    # Key offsets that some query of the block may attend.
    u_lo = 0
    u_hi = r
    if DIR == 0:
        u_hi = r - 1
    elif DIR == 1:
        u_lo = 1
    # Keys stream two offsets ahead: offset u + 2's rows are loaded at step u (the last offset
    # is loaded again rather than tested). ptxas issues these loads at the end of the step's
    # math, so one offset ahead each step waited for its rows (SASS, sm_90; bench/HISTORY.md).
    nxt_real, nxt_dep, nxt_val = block_key_rows(mask, dep, value, b, n, d, start, u_lo, m_blk,
                                                o_k, m_k)
    aft_real, aft_dep, aft_val = block_key_rows(mask, dep, value, b, n, d, start,
                                                stream_row(u_lo + 1, u_hi), m_blk, o_k, m_k)
    for u in range(u_lo, u_hi):
        raw_real, raw_dep, raw_val = nxt_real, nxt_dep, nxt_val
        nxt_real, nxt_dep, nxt_val = aft_real, aft_dep, aft_val
        aft_real, aft_dep, aft_val = block_key_rows(mask, dep, value, b, n, d, start,
                                                    tl.minimum(u + 2, u_hi - 1), m_blk, o_k, m_k)
        b_dep = raw_dep.to(tl.float32)
        b_val = raw_val.to(tl.float32)
        if MASKED:
            # Padding keys' rows zeroed only with a mask: under triton 3.6 the select made ptxas
            # read the mask byte 20 instructions after its load (8 warps, 64 features), which
            # test_loops_load_ahead refuses in the autotune configs (compiled unmasked). `raw_real
            # != 0` is taken here and for `allow`: taken once above, it moved in unmasked kernels.
            key_real = (raw_real != 0)[:, None]
            b_dep = zero_padding(b_dep, key_real)
            b_val = zero_padding(b_val, key_real)
        b_dep = spread_block_rows(b_dep, ROW_AXIS)
        b_val = spread_block_rows(b_val, ROW_AXIS)
        o_u = tl.zeros_like(o_j) + u
        allow = real_j & spread_blocks(raw_real != 0, ROW_AXIS)
        allow = allow & dir_allows(o_u, spread_offsets(o_v, ROW_AXIS), DIR)
        t = tanh_f32(tanh_arg(b_dep, inv_c, b_q), FAST_TANH, TANH_POLY)
        b_sum, b_acc, b_m = online_softmax_step(b_sum, b_acc, b_m, t, b_val, allow[:, :, None],
                                                c_log2e, FIXED_PIVOT)

    b_out, b_lse = softmax_result(b_sum, b_acc, b_m, b_sum > 0.0, c, FIXED_PIVOT)
    store_result(out + p_j, b_out, m_jk)
    if WRITE_LSE:
        tl.store(lse + p_j, b_lse, mask=m_jk)


@triton.jit
def rows_fixed_pivot_step(i, i_hi, m_ptr, dep_ptr, val_ptr, real_i, raw_dep, raw_val, b_q, b_sum,
                          b_acc, d, m_k, inv_c, c_log2e, lo_j, hi_j, o_j, inner_lo, inner_hi, m0,
                          last, DIR: tl.constexpr, FAST_TANH: tl.constexpr,
                          TANH_POLY: tl.constexpr, POLY: tl.constexpr):
    """fwd_rows_kernel's fixed-pivot step for streamed key i (as loaded: real_i, raw_dep,
    raw_val): loads key i + 1 (the pointers moved by row_step) and adds key i to the tile's sum
    and acc, p from the special-function unit's exp2, or (POLY) from exp2_poly on the FMA
    pipe; a padding key is skipped by every query. Returns the moved pointers, key i + 1 as
    loaded, sum and acc. online_softmax_step's fixed-pivot step, with the select made on the
    [BM] rows before broadcasting: through that helper (allow [BM, 1]) the loop compiled to a
    longer one on sm_90. (Through this one it compiles to the same 234-instruction loop as
    written in the kernel, with one register more, under the 168 cap.)"""
    step = row_step(i, i_hi)
    m_ptr, dep_ptr, val_ptr = m_ptr + step, dep_ptr + step * d, val_ptr + step * d
    nxt_real, nxt_dep, nxt_val = load_key(m_ptr, dep_ptr, val_ptr, m_k, True)
    if real_i:
        b_dep = raw_dep.to(tl.float32)
        b_val = raw_val.to(tl.float32)
        t = tanh_f32(tanh_arg(b_dep[None, :], inv_c, b_q), FAST_TANH, TANH_POLY)
        if spans_tile(i, inner_lo, inner_hi, m0, last, DIR):
            if POLY:
                p = exp2_poly(tl.fma(t, c_log2e, -c_log2e))
            else:
                p = tl.exp2(t * c_log2e - c_log2e)
        else:
            allow = pairs_with(i, lo_j, hi_j, o_j, DIR)
            if POLY:
                p = tl.where(allow[:, None], exp2_poly(tl.fma(t, c_log2e, -c_log2e)), 0.0)
            else:
                off = tl.where(allow, -c_log2e, float("-inf"))
                p = tl.exp2(t * c_log2e + off[:, None])
        b_sum += p
        b_acc += p * b_val[None, :]
    return m_ptr, dep_ptr, val_ptr, nxt_real, nxt_dep, nxt_val, b_sum, b_acc


@triton.jit
def fwd_rows_kernel(
    dep, head, value, bias, mask, out, lse,
    n, d, r, n_bucket, r_bucket, c, inv_c, c_log2e,
    DIR: tl.constexpr,
    FIXED_PIVOT: tl.constexpr, FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
    WRITE_LSE: tl.constexpr,
    POLY_EXP2: tl.constexpr,
    BM: tl.constexpr, BD: tl.constexpr,
):
    # n_bucket, r_bucket: unused here; autotune keys (powers of two of n and r).
    c, inv_c, c_log2e = f32(c), f32(inv_c), f32(c_log2e)
    b, m0, o_j, m_j, real_j, lo_j, hi_j, last, i_lo, i_hi, inner_lo, inner_hi = row_tile(
        mask, n, r, BM, DIR, True, tl.program_id(0))
    o_k = tl.program_id(1) * BD + tl.arange(0, BD)
    m_k = o_k < d

    p_j = (b * n + o_j).to(tl.int64)[:, None] * d + o_k[None, :]
    m_jk = m_j[:, None] & m_k[None, :]
    b_q = scaled_queries(head, bias, p_j, m_jk, o_k, m_k, inv_c)

    b_sum = tl.zeros([BM, BD], dtype=tl.float32)
    b_acc = tl.zeros([BM, BD], dtype=tl.float32)
    b_m = tl.full([BM, BD], -1.0, dtype=tl.float32) * c_log2e
    # Keys stream one ahead (as the CUDA kernels' stream_rows): key i + 1's mask byte and row
    # are loaded before key i's math, so their latency hides behind it instead of stalling
    # the loop inside `if real_i`. The last key is loaded twice rather than tested (stream_row).
    # The pointers move by row_step each step (no 64-bit offset recomputed: 10 instructions).
    first = b * n + stream_row(i_lo, i_hi)
    m_ptr, dep_ptr, val_ptr = key_pointers(mask, dep, value, first, d, o_k)
    nxt_real, nxt_dep, nxt_val = load_key(m_ptr, dep_ptr, val_ptr, m_k, True)
    if FIXED_PIVOT and POLY_EXP2:
        # Two keys a step, the second's exp2 from exp2_poly: the special-function unit and the
        # FMA pipe share the tile's exp2 half and half (configs.ROWS_EXP2); an odd last key
        # alone after the loop.
        for i in range(i_lo, i_hi - 1, 2):
            m_ptr, dep_ptr, val_ptr, nxt_real, nxt_dep, nxt_val, b_sum, b_acc = (
                rows_fixed_pivot_step(i, i_hi, m_ptr, dep_ptr, val_ptr, nxt_real, nxt_dep,
                                      nxt_val, b_q, b_sum, b_acc, d, m_k, inv_c, c_log2e, lo_j,
                                      hi_j, o_j, inner_lo, inner_hi, m0, last, DIR, FAST_TANH,
                                      TANH_POLY, False))
            m_ptr, dep_ptr, val_ptr, nxt_real, nxt_dep, nxt_val, b_sum, b_acc = (
                rows_fixed_pivot_step(i + 1, i_hi, m_ptr, dep_ptr, val_ptr, nxt_real, nxt_dep,
                                      nxt_val, b_q, b_sum, b_acc, d, m_k, inv_c, c_log2e, lo_j,
                                      hi_j, o_j, inner_lo, inner_hi, m0, last, DIR, FAST_TANH,
                                      TANH_POLY, True))
        if (i_hi > i_lo) & ((i_hi - i_lo) % 2 == 1):
            m_ptr, dep_ptr, val_ptr, nxt_real, nxt_dep, nxt_val, b_sum, b_acc = (
                rows_fixed_pivot_step(i_hi - 1, i_hi, m_ptr, dep_ptr, val_ptr, nxt_real,
                                      nxt_dep, nxt_val, b_q, b_sum, b_acc, d, m_k, inv_c,
                                      c_log2e, lo_j, hi_j, o_j, inner_lo, inner_hi, m0, last, DIR,
                                      FAST_TANH, TANH_POLY, False))
    elif FIXED_PIVOT:
        for i in range(i_lo, i_hi):
            m_ptr, dep_ptr, val_ptr, nxt_real, nxt_dep, nxt_val, b_sum, b_acc = (
                rows_fixed_pivot_step(i, i_hi, m_ptr, dep_ptr, val_ptr, nxt_real, nxt_dep,
                                      nxt_val, b_q, b_sum, b_acc, d, m_k, inv_c, c_log2e, lo_j,
                                      hi_j, o_j, inner_lo, inner_hi, m0, last, DIR, FAST_TANH,
                                      TANH_POLY, False))
    else:
        for i in range(i_lo, i_hi):
            real_i, raw_dep, raw_val = nxt_real, nxt_dep, nxt_val
            step = row_step(i, i_hi)
            m_ptr, dep_ptr, val_ptr = m_ptr + step, dep_ptr + step * d, val_ptr + step * d
            nxt_real, nxt_dep, nxt_val = load_key(m_ptr, dep_ptr, val_ptr, m_k, True)
            if real_i:  # a padding key is skipped by every query
                b_dep = raw_dep.to(tl.float32)
                b_val = raw_val.to(tl.float32)
                t = tanh_f32(tanh_arg(b_dep[None, :], inv_c, b_q), FAST_TANH, TANH_POLY)
                allow = pairs_with(i, lo_j, hi_j, o_j, DIR)
                b_sum, b_acc, b_m = online_softmax_step(b_sum, b_acc, b_m, t, b_val[None, :],
                                                        allow[:, None], c_log2e, False)

    # Reloaded rather than kept live through the loop (registers).
    real_j = m_j & (tl.load(mask + b * n + o_j, mask=m_j, other=0) != 0)
    has = (b_sum > 0.0) & real_j[:, None]
    b_out, b_lse = softmax_result(b_sum, b_acc, b_m, has, c, FIXED_PIVOT)
    store_result(out + p_j, b_out, m_jk)
    if WRITE_LSE:
        tl.store(lse + p_j, b_lse, mask=m_jk)
