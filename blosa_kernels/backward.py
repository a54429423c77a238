"""Backward kernels of masked_block_attn, recomputing probabilities from the saved lse.

With t = tanh(z / c), p = exp(c t - lse), g = grad_out[j], o = out[j] = sum_i p value_i:
    dz = p g (value_i - o) (1 - t^2)
    d_head[j] = sum_i dz,  d_dep[i] = sum_j dz,  d_value[i] = sum_j p g
(d_bias = sum of d_head over batch and queries: the caller adds up d_head, or for small blocks
the per-block sums `bwd_blocks_kernel` writes into d_bias_part [B · nblk, d], float32). lse = +inf for a query
with no key makes p exactly 0, and disallowed pairs are masked to 0, so such queries pass no
gradient. Every output element is written by exactly one program and summed in a fixed order:
no atomics, bitwise-deterministic results.

- `bwd_blocks_kernel`, small blocks (r <= 64): a program owns G = TILE // R whole blocks and a
  feature tile. It holds the blocks' keys ([G, R, BD] dep and value), steps through the query
  offsets, and accumulates d_dep and d_value in registers while writing each query's d_head row:
  every (query, key, feature) element is computed once. Its forward saves no lse
  (SAVED_LSE=False; op.py): holding all of a block's keys, it recomputes each query's softmax
  (recomputed_probs) with no tanh or exp more and reads no lse.
- Large blocks, split (full DiSA, blocks over configs.FUSED_MAX_BLOCK, and all of them under
  `configs.BACKWARD = "split"`): `bwd_dq_kernel` owns BM queries (loops over keys, writes
  d_head) and `bwd_dkv_kernel` owns BN keys (loops over the queries that attend them, writes
  d_dep and d_value), so every element's tanh and exp are computed twice.
- Large blocks up to configs.FUSED_MAX_BLOCK, fused (`configs.BACKWARD = "fused"`, the
  default): `bwd_fused_kernel` computes each element once. It owns BM queries of one block, as
  `bwd_dq_kernel`, and for each key it streams also sums the tile's d_dep and d_value terms over
  its queries (a reduction across the tile's rows) into a float32 scratch `sums`
  [2, U, B, n, d], U = cdiv(r, BM) query tiles per block. `bwd_dkv_sums_kernel` then adds each
  key's U parts in tile order (deterministic). Scratch: 2·U·B·n·d floats (12 at one block of
  384 in tiles of 64), so the fused path stops at blocks of FUSED_MAX_BLOCK; full DiSA keeps
  the split kernels and O(B·n·d) memory. Its key loop is `fused_keys`, or with
  configs.FUSED_STEP = "trimmed" `fused_keys_trimmed` (fewer instructions a key; same results
  within float32 rounding).

Arguments: pointers to contiguous [B, n, d] tensors (lse float32; d_head float32 but for the
per-block kernel, which writes the input dtype), bias [d] (zeros
when None), mask [B, n] uint8 (ones when None); n, d, r (the resolved block length), scalars
c, 1/c and c·log2(e); DIR 0 forward / 1 backward / 2 diag / 3 all; FAST_TANH: tanh.approx.f32;
TANH_POLY: the exact tanh with small |x| from a polynomial (scales above 40, _math.tanh_f32).
"""
import triton
import triton.language as tl

from blosa_kernels._math import (LOG2E, f32, rounded_product, store_result, tanh_arg, tanh_f32,
                                 zero_padding)
from blosa_kernels._rows import (key_row, key_row_in_block, query_row, query_tile, stream_row,
                                 stream_row_in_block)
from blosa_kernels._tiles import (block_row_tile, block_rows, block_tile_probs, dir_allows,
                                  features_fastest, row_tile, saved_probs, spread_block_rows,
                                  spread_blocks, spread_offsets)


@triton.jit
def block_query_rows(mask, head, grad_out, lse, b, n, d, start, v, m_blk, o_k, m_k,
                     SAVED_LSE: tl.constexpr):
    """The rows of query offset v of the blocks starting at `start` ([G]), as loaded: each
    query's mask byte [G] (nonzero: real; 0 past the end; tested where it is used, as in
    forward.block_key_rows), its head and grad_out [G, BD] (input dtype) and lse [G, BD]
    (+inf past the sequence; zeros, unused, without SAVED_LSE)."""
    o_j = start + v
    m_j = m_blk & (o_j < n)
    p_j = (b * n + o_j).to(tl.int64)[:, None] * d + o_k[None, :]
    m_jk = m_j[:, None] & m_k[None, :]
    if SAVED_LSE:
        raw_lse = tl.load(lse + p_j, mask=m_jk, other=float("inf"))
    else:
        raw_lse = tl.zeros_like(p_j).to(tl.float32)
    return (tl.load(mask + b * n + o_j, mask=m_j, other=0),
            tl.load(head + p_j, mask=m_jk, other=0.0),
            tl.load(grad_out + p_j, mask=m_jk, other=0.0), raw_lse)


@triton.jit
def store_zero_rows(x, b, n, d, start, v, m_blk, o_k, m_k, G: tl.constexpr, BD: tl.constexpr):
    """Zeros into rows start + v ([G] blocks) of x [B, n, d], for the features o_k."""
    o_j = start + v
    p_j = (b * n + o_j).to(tl.int64)[:, None] * d + o_k[None, :]
    m_jk = (m_blk & (o_j < n))[:, None] & m_k[None, :]
    tl.store(x + p_j, tl.zeros([G, BD], dtype=x.dtype.element_ty), mask=m_jk)


@triton.jit
def recomputed_probs(t, allow, c_log2e, ROW_AXIS: tl.constexpr, FIXED_PIVOT: tl.constexpr):
    """Softmax probabilities [G, R, BD] (or [R, G, BD]) of each query's allowed keys from their
    t = tanh(z / c), when the forward saved no lse: the block's keys are all here, so the sum
    over them costs an in-thread reduction and a division per query, no tanh or exp more.
    Pivot: c (FIXED_PIVOT), or the largest allowed score; -c bounds every score from below, so
    a query with no key sums to 0 and gets p = 0."""
    s2 = t * c_log2e
    if FIXED_PIVOT:
        e = tl.where(allow[:, :, None], tl.exp2(s2 - c_log2e), 0.0)
    else:
        m2 = tl.max(tl.where(allow[:, :, None], s2, -c_log2e), axis=ROW_AXIS)
        e = tl.where(allow[:, :, None], tl.exp2(s2 - spread_block_rows(m2, ROW_AXIS)), 0.0)
    total = tl.sum(e, axis=ROW_AXIS)
    inv = tl.where(total > 0.0, 1.0 / total, 0.0)
    return e * spread_block_rows(inv, ROW_AXIS)


@triton.jit
def bwd_blocks_kernel(
    grad_out, dep, head, value, bias, mask, out, lse, d_dep, d_head, d_value, d_bias_part,
    n, d, r, nblk, inv_c, c_log2e,
    DIR: tl.constexpr,
    FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
    ROW_AXIS: tl.constexpr,
    SAVED_LSE: tl.constexpr,
    FIXED_PIVOT: tl.constexpr,
    R: tl.constexpr, TILE: tl.constexpr, BD: tl.constexpr,
):
    G: tl.constexpr = TILE // R
    inv_c, c_log2e = f32(inv_c), f32(c_log2e)
    pid, o_k = features_fastest(d, BD)  # o_k: [BD] features
    groups = tl.cdiv(nblk, G)
    b = pid // groups
    o_blk = (pid % groups) * G + tl.arange(0, G)
    o_w = tl.arange(0, R)  # [R] key offset inside the block
    m_k = o_k < d
    m_blk = o_blk < nblk
    start = o_blk * r
    # Keys [R, G, BD] or [G, R, BD] (ROW_AXIS, configs.BLOCK_ROW_AXIS): the arrangement in which
    # this triton puts the warps on the blocks, so that a thread holds all R keys of its
    # (block, feature) and the sums over a query's keys need no exchange between threads.
    o_i = block_rows(start, o_w, ROW_AXIS)  # key positions
    m_i = spread_blocks(m_blk, ROW_AXIS) & (spread_offsets(o_w, ROW_AXIS) < r) & (o_i < n)
    real_i = m_i & (tl.load(mask + b * n + o_i, mask=m_i, other=0) != 0)
    p_i = (b * n + o_i).to(tl.int64)[:, :, None] * d + o_k[None, None, :]
    m_ik = m_i[:, :, None] & m_k[None, None, :]
    real_ik = real_i[:, :, None]
    b_dep = zero_padding(tl.load(dep + p_i, mask=m_ik, other=0.0).to(tl.float32), real_ik)
    b_val = zero_padding(tl.load(value + p_i, mask=m_ik, other=0.0).to(tl.float32), real_ik)
    b_bias = tl.load(bias + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_dd = tl.zeros_like(b_val)
    b_dv = tl.zeros_like(b_val)
    b_db = tl.zeros([G, BD], dtype=tl.float32)  # each block's d_head, summed over its queries

    # Query offsets that can have a key; the one that cannot (the first under "forward", the
    # last under "backward") gets d_head = 0 here, so the caller need not zero-fill d_head.
    v_lo = 0
    v_hi = r
    if DIR == 0:
        v_lo = 1
        store_zero_rows(d_head, b, n, d, start, 0, m_blk, o_k, m_k, G, BD)
    elif DIR == 1:
        v_hi = r - 1
        store_zero_rows(d_head, b, n, d, start, r - 1, m_blk, o_k, m_k, G, BD)
    # Queries stream two offsets ahead, as fwd_blocks_kernel's keys: offset v + 2's rows are
    # loaded at step v (the last offset is loaded again rather than tested).
    nxt_real, nxt_head, nxt_g, nxt_lse = block_query_rows(mask, head, grad_out, lse, b, n, d,
                                                          start, v_lo, m_blk, o_k, m_k, SAVED_LSE)
    aft_real, aft_head, aft_g, aft_lse = block_query_rows(
        mask, head, grad_out, lse, b, n, d, start, stream_row(v_lo + 1, v_hi), m_blk, o_k, m_k,
        SAVED_LSE)
    for v in range(v_lo, v_hi):
        raw_real, raw_head, raw_g, raw_lse = nxt_real, nxt_head, nxt_g, nxt_lse
        nxt_real, nxt_head, nxt_g, nxt_lse = aft_real, aft_head, aft_g, aft_lse
        aft_real, aft_head, aft_g, aft_lse = block_query_rows(
            mask, head, grad_out, lse, b, n, d, start, tl.minimum(v + 2, v_hi - 1), m_blk, o_k, m_k,
            SAVED_LSE)
        real_j = raw_real != 0
        o_j = start + v  # [G] query position, one per block
        m_j = m_blk & (o_j < n)
        p_j = (b * n + o_j).to(tl.int64)[:, None] * d + o_k[None, :]
        m_jk = m_j[:, None] & m_k[None, :]
        # A padding query's t and g multiply into its keys' d_dep and d_value (by p = 0):
        # finite they must be.
        b_q = zero_padding(raw_head.to(tl.float32), real_j[:, None])
        b_q += b_bias[None, :]
        b_q = b_q * inv_c
        b_g = spread_block_rows(zero_padding(raw_g.to(tl.float32), real_j[:, None]), ROW_AXIS)
        o_v = tl.zeros_like(o_i) + v
        allow = real_i & spread_blocks(real_j, ROW_AXIS)
        allow = allow & dir_allows(spread_offsets(o_w, ROW_AXIS), o_v, DIR)
        t = tanh_f32(tanh_arg(b_dep, inv_c, spread_block_rows(b_q, ROW_AXIS)), FAST_TANH, TANH_POLY)
        if SAVED_LSE:
            b_lse2 = spread_block_rows(raw_lse * LOG2E, ROW_AXIS)
            p = tl.where(allow[:, :, None], tl.exp2(tl.fma(t, c_log2e, -b_lse2)), 0.0)
        else:
            p = recomputed_probs(t, allow, c_log2e, ROW_AXIS, FIXED_PIVOT)
        # The query's output recomputed in float32 from the keys held here, not read from the
        # saved `out`: that one is rounded to the input dtype, and its rounding error would be
        # summed into d_head (and d_bias) over all queries.
        b_o = tl.sum(rounded_product(p, b_val), axis=ROW_AXIS)
        pg = p * b_g
        dz = rounded_product(pg * (b_val - spread_block_rows(b_o, ROW_AXIS)), 1.0 - t * t)
        b_dd += dz
        b_dv += pg
        b_dh = tl.sum(dz, axis=ROW_AXIS)
        b_db += b_dh
        store_result(d_head + p_j, b_dh, m_jk)

    store_result(d_dep + p_i, b_dd, m_ik)
    store_result(d_value + p_i, b_dv, m_ik)
    # Each block's d_head summed over its queries, unrounded: d_bias's part (the caller adds up
    # the B · nblk rows), so d_head itself can be stored in the input dtype.
    p_b = (b * nblk + o_blk).to(tl.int64)[:, None] * d + o_k[None, :]
    tl.store(d_bias_part + p_b, b_db, mask=m_blk[:, None] & m_k[None, :])


@triton.jit
def bwd_dq_kernel(
    grad_out, dep, head, value, bias, mask, out, lse, d_head,
    n, d, r, n_bucket, r_bucket, inv_c, c_log2e,
    DIR: tl.constexpr,
    FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
    BM: tl.constexpr, BD: tl.constexpr,
):
    # n_bucket, r_bucket: unused here; autotune keys. Key ranges as in fwd_rows_kernel.
    inv_c, c_log2e = f32(inv_c), f32(c_log2e)
    b, m0, o_j, m_j, real_j, lo_j, hi_j, last, i_lo, i_hi, inner_lo, inner_hi = row_tile(
        mask, n, r, BM, DIR, True, tl.program_id(0))
    o_k = tl.program_id(1) * BD + tl.arange(0, BD)
    m_k = o_k < d

    p_j = (b * n + o_j).to(tl.int64)[:, None] * d + o_k[None, :]
    m_jk = m_j[:, None] & m_k[None, :]
    b_q, b_g, b_nlse2, b_os = query_tile(head, bias, grad_out, lse, out, p_j, m_jk, real_j, o_k,
                                         m_k, inv_c)
    # d_head = g sum_i p w (v_i - o), w = 1 - t^2. The saved `out` o_s is rounded to the input
    # dtype, and that error would add up in d_bias over all queries, so o = o_s + e with
    # e = sum_i p (v_i - o_s) accumulated here in float32:
    #   d_head = g (sum_i p w (v_i - o_s) - e sum_i p w)
    # (the terms are centred on o_s, so nothing large cancels).
    b_pwv = tl.zeros([BM, BD], dtype=tl.float32)
    b_pw = tl.zeros([BM, BD], dtype=tl.float32)
    b_pv = tl.zeros([BM, BD], dtype=tl.float32)
    # Keys stream one ahead, as in fwd_rows_kernel.
    nxt_real, nxt_dep, nxt_val = key_row(mask, dep, value, b * n + stream_row(i_lo, i_hi), d,
                                         o_k, m_k)
    for i in range(i_lo, i_hi):
        real_i, raw_dep, raw_val = nxt_real, nxt_dep, nxt_val
        nxt_real, nxt_dep, nxt_val = key_row(mask, dep, value, b * n + stream_row(i + 1, i_hi),
                                             d, o_k, m_k)
        if real_i:
            b_dep = raw_dep.to(tl.float32)
            b_val = raw_val.to(tl.float32)
            t = tanh_f32(tanh_arg(b_dep[None, :], inv_c, b_q), FAST_TANH, TANH_POLY)
            p = saved_probs(t, b_nlse2, c_log2e, i, inner_lo, inner_hi, m0, last, lo_j, hi_j, o_j,
                            DIR)
            vd = b_val[None, :] - b_os
            pw = p * (1.0 - t * t)
            b_pwv += pw * vd
            b_pw += pw
            b_pv += p * vd
    b_dh = b_g * (b_pwv - b_pv * b_pw)
    store_result(d_head + p_j, b_dh, m_jk)


@triton.jit
def bwd_dkv_kernel(
    grad_out, dep, head, value, bias, mask, out, lse, d_dep, d_value,
    n, d, r, n_bucket, r_bucket, inv_c, c_log2e,
    DIR: tl.constexpr,
    FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
    BN: tl.constexpr, BD: tl.constexpr,
):
    # n_bucket, r_bucket: unused here; autotune keys. The roles of fwd_rows_kernel swapped: the
    # program owns BN consecutive keys and steps through the union of their query ranges.
    inv_c, c_log2e = f32(inv_c), f32(c_log2e)
    # Padding keys get an empty range: attended by no query.
    b, m0, o_i, m_i, real_i, lo_i, hi_i, last, j_lo, j_hi, inner_lo, inner_hi = row_tile(
        mask, n, r, BN, DIR, False, tl.program_id(0))
    o_k = tl.program_id(1) * BD + tl.arange(0, BD)
    m_k = o_k < d

    p_i = (b * n + o_i).to(tl.int64)[:, None] * d + o_k[None, :]
    m_ik = m_i[:, None] & m_k[None, :]
    b_dep = tl.load(dep + p_i, mask=m_ik, other=0.0).to(tl.float32)
    b_val = tl.load(value + p_i, mask=m_ik, other=0.0).to(tl.float32)
    b_bias = tl.load(bias + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_dd = tl.zeros([BN, BD], dtype=tl.float32)
    b_dv = tl.zeros([BN, BD], dtype=tl.float32)
    # Queries stream one ahead, as the keys of fwd_rows_kernel.
    nxt_real, nxt_head, nxt_g, nxt_o, nxt_lse = query_row(
        mask, head, grad_out, out, lse, b * n + stream_row(j_lo, j_hi), d, o_k, m_k)
    for j in range(j_lo, j_hi):
        real_j, raw_head, raw_g, raw_o, raw_lse = nxt_real, nxt_head, nxt_g, nxt_o, nxt_lse
        nxt_real, nxt_head, nxt_g, nxt_o, nxt_lse = query_row(
            mask, head, grad_out, out, lse, b * n + stream_row(j + 1, j_hi), d, o_k, m_k)
        if real_j:  # a padding query passes no gradient
            b_q = raw_head.to(tl.float32)
            b_q += b_bias
            b_q = b_q * inv_c
            b_g = raw_g.to(tl.float32)
            b_o = raw_o.to(tl.float32)
            b_nlse2 = -raw_lse * LOG2E
            t = tanh_f32(tanh_arg(b_dep, inv_c, b_q[None, :]), FAST_TANH, TANH_POLY)
            p = saved_probs(t, b_nlse2[None, :], c_log2e, j, inner_lo, inner_hi, m0, last, lo_i,
                            hi_i, o_i, DIR)
            pg = p * b_g[None, :]
            b_dd += pg * (b_val - b_o[None, :]) * (1.0 - t * t)
            b_dv += pg
    # Padding keys get zero gradient; the inner steps did not mask them. The mask is
    # reloaded rather than kept live through the loop (registers).
    keep = (tl.load(mask + b * n + o_i, mask=m_i, other=0) != 0)[:, None]
    b_dd = tl.where(keep, b_dd, 0.0)
    b_dv = tl.where(keep, b_dv, 0.0)
    store_result(d_dep + p_i, b_dd, m_ik)
    store_result(d_value + p_i, b_dv, m_ik)


@triton.jit
def bwd_fused_kernel(
    grad_out, dep, head, value, bias, mask, out, lse, d_head, sums,
    B, n, d, r, nblk, U, n_bucket, r_bucket, inv_c, c_log2e,
    DIR: tl.constexpr,
    FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
    TRIMMED: tl.constexpr, KEY_MASK: tl.constexpr,
    BM: tl.constexpr, BD: tl.constexpr,
):
    # bwd_dq_kernel's loop on a query tile that stays inside one block (block_row_tile), plus,
    # per key, the tile's parts of d_dep and d_value: sums[0 / 1, u, b, i, :]. n_bucket,
    # r_bucket: unused here; autotune keys. TRIMMED: the key loop of fused_keys_trimmed
    # (configs.FUSED_STEP), which reads no key's mask byte without KEY_MASK.
    inv_c, c_log2e = f32(inv_c), f32(c_log2e)
    b, u, m0, o_j, m_j, real_j, lo_j, hi_j, last, i_lo, i_hi, inner_lo, inner_hi = block_row_tile(
        mask, n, r, nblk, U, BM, DIR)
    o_k = tl.program_id(1) * BD + tl.arange(0, BD)
    m_k = o_k < d

    p_j = (b * n + o_j).to(tl.int64)[:, None] * d + o_k[None, :]
    m_jk = m_j[:, None] & m_k[None, :]
    b_q, b_g, b_nlse2, b_os = query_tile(head, bias, grad_out, lse, out, p_j, m_jk, real_j, o_k,
                                         m_k, inv_c)
    plane = tl.cast(U, tl.int64) * B * n * d  # the d_value parts follow the d_dep parts
    if TRIMMED:
        b_dh = fused_keys_trimmed(dep, value, mask, sums, b_q, b_g, b_nlse2, b_os, B, n, d, b, u,
                                  m0, last, i_lo, i_hi, inner_lo, inner_hi, plane, o_k, m_k,
                                  inv_c, c_log2e, DIR, FAST_TANH, TANH_POLY, KEY_MASK, BM)
    else:
        b_dh = fused_keys(dep, value, mask, sums, b_q, b_g, b_nlse2, b_os, B, n, d, b, u, m0,
                          o_j, lo_j, hi_j, last, i_lo, i_hi, inner_lo, inner_hi, plane, o_k, m_k,
                          inv_c, c_log2e, DIR, FAST_TANH, TANH_POLY, BM, BD)
    store_result(d_head + p_j, b_dh, m_jk)


@triton.jit
def fused_keys(dep, value, mask, sums, b_q, b_g, b_nlse2, b_os, B, n, d, b, u, m0, o_j, lo_j,
               hi_j, last, i_lo, i_hi, inner_lo, inner_hi, plane, o_k, m_k, inv_c, c_log2e,
               DIR: tl.constexpr, FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
               BM: tl.constexpr, BD: tl.constexpr):
    """bwd_fused_kernel's loop over the keys of its query tile: d_head [BM, BD] (float32), and
    each key's parts of d_dep and d_value stored into the tile's plane of `sums`."""
    b_pwv = tl.zeros([BM, BD], dtype=tl.float32)
    b_pw = tl.zeros([BM, BD], dtype=tl.float32)
    b_pv = tl.zeros([BM, BD], dtype=tl.float32)
    tile_sums = sums + (tl.cast(u, tl.int64) * B * n + b * n) * d + o_k
    nxt_real, nxt_dep, nxt_val = key_row(mask, dep, value, b * n + stream_row(i_lo, i_hi), d,
                                         o_k, m_k)
    for i in range(i_lo, i_hi):
        real_i, raw_dep, raw_val = nxt_real, nxt_dep, nxt_val
        nxt_real, nxt_dep, nxt_val = key_row(mask, dep, value, b * n + stream_row(i + 1, i_hi),
                                             d, o_k, m_k)
        if real_i:  # a padding key's parts are never read (bwd_dkv_sums_kernel zeroes it)
            b_dep = raw_dep.to(tl.float32)
            b_val = raw_val.to(tl.float32)
            t = tanh_f32(tanh_arg(b_dep[None, :], inv_c, b_q), FAST_TANH, TANH_POLY)
            p = saved_probs(t, b_nlse2, c_log2e, i, inner_lo, inner_hi, m0, last, lo_j, hi_j, o_j,
                            DIR)
            vd = b_val[None, :] - b_os
            pw = p * (1.0 - t * t)
            pwv = pw * vd
            b_pwv += pwv
            b_pw += pw
            b_pv += p * vd
            # d_dep[i] = sum_j g p w (v_i - o_j), d_value[i] = sum_j g p, over this tile's j.
            row = tile_sums + tl.cast(i, tl.int64) * d
            # [BD, 2]: one reduction
            both = tl.sum(tl.join(rounded_product(pwv, b_g), rounded_product(p, b_g)), axis=0)
            dd_i, dv_i = tl.split(both)
            tl.store(row, dd_i, mask=m_k)
            tl.store(row + plane, dv_i, mask=m_k)
    return b_g * (b_pwv - b_pv * b_pw)  # as in bwd_dq_kernel


@triton.jit
def fused_keys_trimmed(dep, value, mask, sums, b_q, b_g, b_nlse2, b_os, B, n, d, b, u, m0, last,
                       i_lo, i_hi, inner_lo, inner_hi, plane, o_k, m_k, inv_c, c_log2e,
                       DIR: tl.constexpr, FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
                       KEY_MASK: tl.constexpr, BM: tl.constexpr):
    """fused_keys with fewer instructions a key:
    - g folded into p first: pg = p g, and d_head = sum pg w vd - (sum pg vd)(sum p w), so
      each element's terms take one multiply fewer than fused_keys' g (sum p w vd -
      (sum p vd)(sum p w));
    - the keys addressed from the block's first row by 32-bit offsets (below r·d: the
      launcher keeps (r + 1)·d under 2^31), not each by a 64-bit product;
    - a key within the tile masked by its place against each row's (block_tile_probs), where
      each element lives: no [BM] mask moved between arrangements (through shared memory and
      a barrier, every such key);
    - without KEY_MASK (a call with no padding mask), no key's mask byte read and tested."""
    start = m0 - u * BM  # the block's first row
    first = (b * n + start).to(tl.int64)
    tile_sums = sums + (tl.cast(u, tl.int64) * B * n + first) * d + o_k
    k_mask, k_dep, k_val = mask + first, dep + first * d, value + first * d
    b_a = tl.zeros_like(b_q)  # sum pg w vd
    b_e = tl.zeros_like(b_q)  # sum pg vd
    b_w = tl.zeros_like(b_q)  # sum p w
    nxt_real, nxt_dep, nxt_val = key_row_in_block(
        k_mask, k_dep, k_val, stream_row_in_block(i_lo, start, i_hi), d, o_k, m_k, KEY_MASK)
    for i in range(i_lo, i_hi):
        real_i, raw_dep, raw_val = nxt_real, nxt_dep, nxt_val
        nxt_real, nxt_dep, nxt_val = key_row_in_block(
            k_mask, k_dep, k_val, stream_row_in_block(i + 1, start, i_hi), d, o_k, m_k, KEY_MASK)
        if real_i:
            b_dep = raw_dep.to(tl.float32)
            b_val = raw_val.to(tl.float32)
            t = tanh_f32(tanh_arg(b_dep[None, :], inv_c, b_q), FAST_TANH, TANH_POLY)
            p = block_tile_probs(t, b_nlse2, c_log2e, i, inner_lo, inner_hi, m0, last, BM, DIR)
            vd = b_val[None, :] - b_os
            w = 1.0 - t * t
            pg = rounded_product(p, b_g)
            pgwv = rounded_product(pg * w, vd)
            b_a += pgwv
            b_e = tl.fma(pg, vd, b_e)
            b_w = tl.fma(p, w, b_w)
            both = tl.sum(tl.join(pgwv, pg), axis=0)  # d_dep[i] and d_value[i]'s parts, [BD, 2]
            dd_i, dv_i = tl.split(both)
            row = tile_sums + (i - start) * d
            tl.store(row, dd_i, mask=m_k)
            tl.store(row + plane, dv_i, mask=m_k)
    return tl.fma(-b_e, b_w, b_a)


@triton.jit
def bwd_dkv_sums_kernel(
    sums, mask, d_dep, d_value,
    B, n, d, r, U,
    DIR: tl.constexpr,
    QT: tl.constexpr,
    TRIMMED: tl.constexpr,
    BN: tl.constexpr, BD: tl.constexpr,
):
    # d_dep and d_value of BN keys: the parts bwd_fused_kernel left for them, one per query tile
    # (of QT rows) that attends them, added in tile order. Padding keys get an empty range: 0.
    # The feature tiles are the grid's fastest axis (_tiles.features_fastest). TRIMMED (with
    # the fused backward's trimmed loop): two tiles a loop trip, so a thread has both tiles'
    # loads in flight at once (the same sums, in the same order).
    pid, o_k = features_fastest(d, BD)
    b, m0, o_i, m_i, real_i, lo_i, hi_i, last, j_lo, j_hi, inner_lo, inner_hi = row_tile(
        mask, n, r, BN, DIR, False, pid)
    m_k = o_k < d
    start = (o_i // r) * r
    u_lo = (lo_i - start) // QT
    u_hi = tl.where(hi_i > lo_i, (hi_i - start + QT - 1) // QT, u_lo)
    p_i = (b * n + o_i).to(tl.int64)[:, None] * d + o_k[None, :]
    plane = tl.cast(U, tl.int64) * B * n * d
    m_ik = m_i[:, None] & m_k[None, :]
    b_dd = tl.zeros([BN, BD], dtype=tl.float32)
    b_dv = tl.zeros([BN, BD], dtype=tl.float32)
    for u in tl.range(0, U, loop_unroll_factor=2 if TRIMMED else 1):
        take = m_ik & ((u_lo <= u) & (u < u_hi))[:, None]
        part = sums + tl.cast(u, tl.int64) * B * n * d + p_i
        b_dd += tl.load(part, mask=take, other=0.0)
        b_dv += tl.load(part + plane, mask=take, other=0.0)
    store_result(d_dep + p_i, b_dd, m_ik)
    store_result(d_value + p_i, b_dv, m_ik)
