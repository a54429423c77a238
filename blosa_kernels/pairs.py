"""Per-pair kernels of masked_block_attn for short blocks (R <= configs.PAIRS_MAX, 8): the
paper's r = 8 and shorter.

fwd_blocks_kernel and bwd_blocks_kernel keep a block's R rows on an axis of their tile, so each
key step computes all R queries and masks out the pairs the direction forbids: at r = 8 under
"forward" or "backward", 56 (query, key) pairs per block and feature for 28 allowed ones. Here
a thread owns one (block, feature) element (or a few: below), holds each of the block's R
rows as a tile of its own (a tuple of R [BLOCK] tiles), and the loops over queries and keys are
unrolled at compile time (`tl.static_range`), so the direction's rule is decided while
compiling and only its pairs are computed: r(r - 1)/2 under "forward" and "backward", r(r - 1)
under "diag", r² under "all". What the compiler cannot know stays a per-pair test: a row past
the end of a short block (r < R) or of the sequence, and the padding mask. With DENSE (no mask,
and every block has all R tokens: r = R divides n) the compiler knows those too: no mask byte is
loaded and no row tested.

A program owns BLOCK consecutive elements of the flattened [B · nblk, d] grid of (block,
feature) elements, as the CUDA small-block kernels' thread blocks do (program_elements):
consecutive threads take consecutive features, so each of a program's row loads covers BLOCK
contiguous elements (one run per block it spans), consecutive programs take the elements after,
and the grid reads and writes its tensors in address order. BLOCK is 32 x warps (one element a
thread) or, for kernels compiled for one d, also 2 or 4 times that (configs.PAIRS_WIDE_CONFIGS):
a thread's consecutive elements, whose rows then move as vectors. (Tiles of [G blocks, BD
features], as these kernels had before, read a 300-feature row in pieces of 32 or 64 features,
the rest of the row by programs of other feature tiles that ran at another time, and padded
d = 300 to 320 lanes.)

Same meaning, numerics and conventions as the per-block kernels (forward.py, backward.py): scores
in [-c, c] shifted by c (FIXED_PIVOT) or by a running max that starts at -c; lse +inf for a
query with no key; a backward that recomputes each query's softmax from the keys it holds
(SAVED_LSE=False, what a differentiable call runs) or reads the saved lse; d_head in the input
dtype and each block's d_head sum in float32 (d_bias_part [B · nblk, d], added up by the op).
Every output element is written by one program, sums run in a fixed order: deterministic.

Arguments as the per-block kernels': pointers to contiguous [B, n, d] tensors (lse float32),
bias [d] (zeros when None), mask [B, n] uint8 (ones when None); n, d, r (the resolved block
length, <= R), nblk, total = B · nblk · d (the elements), scalars c, 1/c, c·log2(e); DIR 0
forward / 1 backward / 2 diag / 3 all; INDEX64 where total comes within a program of 2^31
(element indices in int64; configs.PAIRS_INDEX32_MAX); RCP_STEPS, Newton steps of each query's
1 / sum in place of the division (0: the division; configs.pairs_reciprocal_steps); D, d itself
where the kernels are compiled for the call's feature count (configs.PAIRS_STATIC_D), else 0 (d
from the argument: one binary for every d). A thread reads and writes its element's rows at
offsets u · d from its first: with d known while compiling, those offsets are constants of the
load and store instructions, and the split of an element's index into block and feature a
multiply, where a runtime d costs each row a 64-bit address of its own and the split a division.
"""
import triton
import triton.language as tl

from blosa_kernels._math import (LOG2E, f32, online_softmax_step, reciprocal_newton,
                                 softmax_result, store_result, tanh_arg, tanh_f32, zero_padding)


@triton.constexpr_function
def pair_allowed(u, v, DIR):
    """Whether query offset v may attend key offset u of its block under direction DIR, all three
    compile-time constants: the answer is one too, so an `if` on it is resolved while compiling
    (and a tuple may grow inside it, which it may not inside a runtime branch)."""
    return DIR == 3 or (DIR == 0 and u < v) or (DIR == 1 and u > v) or (DIR == 2 and u != v)


@triton.jit
def program_elements(n, d, r, nblk, total, R: tl.constexpr, BLOCK: tl.constexpr,
                     DENSE: tl.constexpr, INDEX64: tl.constexpr):
    """The BLOCK (block, feature) elements of program pid, all [BLOCK]: e (the index in the
    flattened [B · nblk, d] grid, also the element's offset in d_bias_part), m_e (it exists), f
    (its feature), start (its block's first position in the sequence; unused under DENSE), row0
    (that token's row of the [B · n] rows) and base (the offset of feature f of row row0,
    int64)."""
    if INDEX64:
        e = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m_e = e < total
    bb = e // d  # b · nblk + the block's index in its sequence
    f = e - bb * d
    if DENSE:
        # Every sequence is nblk whole blocks of R rows: block bb starts at row bb · R.
        start = bb
        row0 = bb * R
    else:
        b = bb // nblk
        start = (bb - b * nblk) * r
        row0 = b * n + start
    base = row0.to(tl.int64) * d + f
    return e, m_e, f, start, row0, base


@triton.jit
def row_exists(n, r, start, m_e, u, DENSE: tl.constexpr):
    """[BLOCK]: whether row offset u of each element's block exists (u < r, inside the sequence;
    under DENSE every block has all R rows): the elements of that row to load or store."""
    if DENSE:
        m_u = m_e
    else:
        m_u = m_e & (u < r) & (start + u < n)
    return m_u


@triton.jit
def block_keys(mask, dep, value, n, d, r, m_e, start, row0, base, inv_c, R: tl.constexpr,
               DENSE: tl.constexpr):
    """The blocks' R rows as keys, each a [BLOCK] float32 tile: dep / c, value (0 in padding
    rows: zero_padding); and real (the row exists and is not padding; the same for the row as a
    query): three tuples of R. Each row's mask byte, dep and value are loaded together, not
    tensor by tensor as block_rows would: that order compiled to another schedule, with more
    registers in the backward."""
    deps = ()
    vals = ()
    reals = ()
    for u in tl.static_range(R):
        m_u = row_exists(n, r, start, m_e, u, DENSE)
        if DENSE:
            real_u = m_u
        else:
            real_u = m_u & (tl.load(mask + row0 + u, mask=m_u, other=0) != 0)
        b_dep = tl.load(dep + base + u * d, mask=m_u, other=0.0).to(tl.float32) * inv_c
        b_val = tl.load(value + base + u * d, mask=m_u, other=0.0).to(tl.float32)
        if not DENSE:
            b_dep = zero_padding(b_dep, real_u)
            b_val = zero_padding(b_val, real_u)
        deps = deps + (b_dep,)
        vals = vals + (b_val,)
        reals = reals + (real_u,)
    return deps, vals, reals


@triton.jit
def block_rows(x, n, d, r, m_e, start, base, R: tl.constexpr, DENSE: tl.constexpr):
    """The blocks' R rows of x as loaded (input dtype; 0 where a row does not exist): a tuple
    of R [BLOCK] tiles. Loaded before any math, with the keys: ptxas issues a load where the
    code puts it, and with each query's rows loaded at its turn, most of the forward's loads were
    read before its last one was issued, each a wait for memory (6 now, the mask bytes among
    them, and none under DENSE; `python bench/gpu_tools/sass_loads.py --whole`, bench/HISTORY.md)."""
    rows = ()
    for u in tl.static_range(R):
        m_u = row_exists(n, r, start, m_e, u, DENSE)
        rows = rows + (tl.load(x + base + u * d, mask=m_u, other=0.0),)
    return rows


@triton.jit
def fwd_pairs_kernel(
    dep, head, value, bias, mask, out, lse,
    n, d, r, nblk, total, c, inv_c, c_log2e,
    DIR: tl.constexpr,
    FIXED_PIVOT: tl.constexpr, FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
    WRITE_LSE: tl.constexpr,
    DENSE: tl.constexpr, INDEX64: tl.constexpr, RCP_STEPS: tl.constexpr,
    R: tl.constexpr, BLOCK: tl.constexpr, D: tl.constexpr,
):
    if D > 0:
        d = D  # compiled for this d (module docstring)
    c, inv_c, c_log2e = f32(c), f32(inv_c), f32(c_log2e)
    e, m_e, f, start, row0, base = program_elements(n, d, r, nblk, total, R, BLOCK, DENSE, INDEX64)
    b_bias = tl.load(bias + f, mask=m_e, other=0.0).to(tl.float32)
    # The order of the loads that lets ptxas issue all of them before any math (sm_90, bfloat16,
    # r = 8): under DENSE with a runtime d, head's rows first (the keys first, it moved the last
    # head row behind the first query's math: 4 loads read before it was issued); under DENSE
    # with a static d (D), the keys first (head's first: 16 read early); with the mask, the keys
    # first (6 loads read early, the mask bytes among them, against 11 with head's first).
    if DENSE and D == 0:
        heads = block_rows(head, n, d, r, m_e, start, base, R, DENSE)
        deps, vals, reals = block_keys(mask, dep, value, n, d, r, m_e, start, row0, base, inv_c,
                                       R, DENSE)
    else:
        deps, vals, reals = block_keys(mask, dep, value, n, d, r, m_e, start, row0, base, inv_c,
                                       R, DENSE)
        heads = block_rows(head, n, d, r, m_e, start, base, R, DENSE)
    for v in tl.static_range(R):
        m_v = row_exists(n, r, start, m_e, v, DENSE)
        real_v = reals[v]
        b_q = heads[v].to(tl.float32) + b_bias
        b_sum = tl.zeros_like(b_q)
        b_acc = tl.zeros_like(b_q)
        b_m = tl.full(b_q.shape, -1.0, dtype=tl.float32) * c_log2e  # running max (log2 units)
        for u in tl.static_range(R):
            if pair_allowed(u, v, DIR):
                allow = reals[u] & real_v
                t = tanh_f32(tanh_arg(b_q, inv_c, deps[u]), FAST_TANH, TANH_POLY)
                b_sum, b_acc, b_m = online_softmax_step(b_sum, b_acc, b_m, t, vals[u], allow,
                                                        c_log2e, FIXED_PIVOT)
        b_out, b_lse = softmax_result(b_sum, b_acc, b_m, b_sum > 0.0, c, FIXED_PIVOT, RCP_STEPS)
        store_result(out + base + v * d, b_out, m_v)
        if WRITE_LSE:
            tl.store(lse + base + v * d, b_lse, mask=m_v)


@triton.jit
def query_probs(deps, reals, real_v, b_q, b_nlse2, inv_c, c_log2e, v: tl.constexpr,
                DIR: tl.constexpr, R: tl.constexpr, FAST_TANH: tl.constexpr,
                TANH_POLY: tl.constexpr, SAVED_LSE: tl.constexpr, FIXED_PIVOT: tl.constexpr,
                RCP_STEPS: tl.constexpr):
    """Query v's t = tanh(z / c) with each key of its block and its softmax probabilities as
    p = e · inv: two tuples of R [BLOCK] tiles, t and e (b_q where the direction forbids the
    pair: never read), and inv [BLOCK]. With the saved lse (b_nlse2 = -lse·log2(e)) e is p and
    inv 1; without it e = exp(s - pivot) from the keys held here and inv = 1 / Σ e: a sum and
    a division per query, no tanh or exp more (pivot c, or the largest allowed score, at least
    -c, so a query with no key sums to 0 and gets p = 0). Left unnormalized, e serves the
    backward's per-pair products with inv folded into per-query factors. RCP_STEPS > 0: inv
    from reciprocal_newton rather than a division."""
    ts = ()
    es = ()
    m2 = tl.full(b_q.shape, -1.0, dtype=tl.float32) * c_log2e
    for u in tl.static_range(R):
        if pair_allowed(u, v, DIR):
            t = tanh_f32(tanh_arg(b_q, inv_c, deps[u]), FAST_TANH, TANH_POLY)
            ts = ts + (t,)
            if not SAVED_LSE and not FIXED_PIVOT:
                m2 = tl.where(reals[u] & real_v, tl.maximum(m2, t * c_log2e), m2)
        else:
            ts = ts + (b_q,)
    total = tl.zeros_like(b_q)
    for u in tl.static_range(R):
        if pair_allowed(u, v, DIR):
            allow = reals[u] & real_v
            if SAVED_LSE:
                e = tl.where(allow, tl.exp2(tl.fma(ts[u], c_log2e, b_nlse2)), 0.0)
            elif FIXED_PIVOT:
                e = tl.where(allow, tl.exp2(ts[u] * c_log2e - c_log2e), 0.0)
            else:
                e = tl.where(allow, tl.exp2(ts[u] * c_log2e - m2), 0.0)
            total += e
            es = es + (e,)
        else:
            es = es + (b_q,)
    if SAVED_LSE:
        inv = tl.full(b_q.shape, 1.0, dtype=tl.float32)
    else:
        # total is 0 (no key) or normal, as softmax_result's sum.
        has = total > 0.0
        if RCP_STEPS > 0:
            inv = tl.where(has, reciprocal_newton(tl.where(has, total, 1.0), RCP_STEPS), 0.0)
        else:
            inv = tl.where(has, 1.0 / total, 0.0)
    return ts, es, inv


@triton.jit
def bwd_pairs_kernel(
    grad_out, dep, head, value, bias, mask, out, lse, d_dep, d_head, d_value, d_bias_part,
    n, d, r, nblk, total, inv_c, c_log2e,
    DIR: tl.constexpr,
    FAST_TANH: tl.constexpr, TANH_POLY: tl.constexpr,
    SAVED_LSE: tl.constexpr,
    FIXED_PIVOT: tl.constexpr,
    DENSE: tl.constexpr, INDEX64: tl.constexpr, RCP_STEPS: tl.constexpr,
    R: tl.constexpr, BLOCK: tl.constexpr, D: tl.constexpr,
):
    if D > 0:
        d = D  # compiled for this d (module docstring)
    inv_c, c_log2e = f32(inv_c), f32(c_log2e)
    e, m_e, f, start, row0, base = program_elements(n, d, r, nblk, total, R, BLOCK, DENSE, INDEX64)
    b_bias = tl.load(bias + f, mask=m_e, other=0.0).to(tl.float32)
    deps, vals, reals = block_keys(mask, dep, value, n, d, r, m_e, start, row0, base, inv_c, R,
                                   DENSE)
    if DENSE:
        # Every pair of an element counts, including an element past the grid's end (in the last
        # program: its rows load as zeros and its stores are masked), so the compiler drops each
        # pair's select of its probability (sm_90, bfloat16, r = 8: 42 -> 14 FSEL, 760 -> 736
        # instructions, 712 -> 680 with D). Not in the forward: it has a select a query, not a
        # pair, and there ptxas then read 12 of the loads (with D) before issuing its last one.
        reals = ()
        for u in tl.static_range(R):
            reals = reals + (tl.full([BLOCK], 1, tl.int1),)
    heads = block_rows(head, n, d, r, m_e, start, base, R, DENSE)
    grads = block_rows(grad_out, n, d, r, m_e, start, base, R, DENSE)
    if SAVED_LSE:
        lses = block_rows(lse, n, d, r, m_e, start, base, R, DENSE)
    else:
        lses = heads  # unused
    dds = ()  # d_dep and d_value of each key, summed over the queries that attend it
    dvs = ()
    for u in tl.static_range(R):
        dds = dds + (tl.zeros([BLOCK], dtype=tl.float32),)
        dvs = dvs + (tl.zeros([BLOCK], dtype=tl.float32),)
    b_db = tl.zeros([BLOCK], dtype=tl.float32)  # each block's d_head, summed over its queries
    for v in tl.static_range(R):
        m_v = row_exists(n, r, start, m_e, v, DENSE)
        real_v = reals[v]
        p_v = base + v * d
        # A padding query's t and g multiply into its keys' d_dep and d_value (by p = 0):
        # finite they must be.
        b_q = heads[v].to(tl.float32)
        b_g = grads[v].to(tl.float32)
        if not DENSE:
            b_q = zero_padding(b_q, real_v)
            b_g = zero_padding(b_g, real_v)
        b_q = b_q + b_bias
        if SAVED_LSE:
            b_nlse2 = -lses[v] * LOG2E
        else:
            b_nlse2 = b_q  # unused
        ts, es, inv = query_probs(deps, reals, real_v, b_q, b_nlse2, inv_c, c_log2e, v, DIR, R,
                                  FAST_TANH, TANH_POLY, SAVED_LSE, FIXED_PIVOT, RCP_STEPS)
        # The query's output recomputed in float32 from the keys held here, not read from the
        # saved `out` (rounded to the input dtype: its error would be summed into d_bias).
        b_o = tl.zeros_like(b_q)
        for u in tl.static_range(R):
            if pair_allowed(u, v, DIR):
                b_o += es[u] * vals[u]
        # p = e · inv: o and p·g take the query's inv in one product each, not one a pair.
        b_o = b_o * inv
        b_ig = inv * b_g
        # dz = p g (value_u - o)(1 - t²): d_head[v] = Σ_u dz, d_dep[u] = Σ_v dz and
        # d_value[u] = Σ_v p g.
        b_dh = tl.zeros_like(b_q)
        new_dds = ()
        new_dvs = ()
        for u in tl.static_range(R):
            if pair_allowed(u, v, DIR):
                pg = es[u] * b_ig
                dz = pg * (vals[u] - b_o) * (1.0 - ts[u] * ts[u])
                b_dh += dz
                new_dds = new_dds + (dds[u] + dz,)
                new_dvs = new_dvs + (dvs[u] + pg,)
            else:
                new_dds = new_dds + (dds[u],)
                new_dvs = new_dvs + (dvs[u],)
        dds = new_dds
        dvs = new_dvs
        b_db += b_dh
        # Every existing row gets its d_head, 0 for a query with no key: no zero-fill needed.
        store_result(d_head + p_v, b_dh, m_v)
    for u in tl.static_range(R):
        m_u = row_exists(n, r, start, m_e, u, DENSE)
        store_result(d_dep + base + u * d, dds[u], m_u)
        store_result(d_value + base + u * d, dvs[u], m_u)
    # Each block's d_head summed over its queries, unrounded: d_bias's part (the caller adds up
    # the B · nblk rows), as bwd_blocks_kernel; row bb, feature f of it is element e.
    tl.store(d_bias_part + e, b_db, mask=m_e)
