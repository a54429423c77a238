"""Which rows a Triton kernel's program owns and which pairs of them count: the direction rules
(the key range of a query, the query range of a key), the row tiles of the row-tile kernels
with the union and intersection of their rows' ranges, the arrangements of the per-block
kernels, and the probabilities a tile's pairs recompute from a saved lse. Programs are numbered
so that grids end on their lightest tiles and cover whole rows at a time.

Directions are coded DIR 0 forward (keys before the query), 1 backward (keys after), 2 diag
(every key but the query), 3 all.
"""
import triton
import triton.language as tl

FORWARD, BACKWARD, DIAG, ALL = 0, 1, 2, 3
DIRECTION_CODE = {"forward": FORWARD, "backward": BACKWARD, "diag": DIAG, "all": ALL}


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
