"""Row loads of the Triton kernels that stream rows one at a time: a key's mask byte, dep and
value, a query's head, grad_out, out and lse, and a query tile's scaled head + bias. The loops
that stream rows load one row ahead, clamped to the range (stream_row), so that no load needs a
test.
"""
import triton
import triton.language as tl

from blosa_kernels._math import LOG2E, zero_padding


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
