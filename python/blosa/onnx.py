"""ONNX export of models that call blosa's op: its translation for torch.onnx.

torch.onnx.export (dynamo=True) translates aten ops by itself; blosa's op is its own, so the
export needs this translation too:

    torch.onnx.export(model, (x, mask), dynamo=True, dynamic_shapes=...,
                      custom_translation_table=blosa.onnx.translations())

The translation writes the op as the reference does (blosa/reference.py), in ONNX operators: the
sequence cut into blocks of r tokens, one [B, m, r, r, d] score tensor (B·n·r·d elements; one
block over the whole sequence, DiSAN's, holds B·n·n·d), computed in float32 (float64 for float64
inputs, except the Triton op's, which computes those in float32 too) and returned in the input's
dtype, as the kernels do. The block count comes from the length inside the graph, so one model
serves every batch size and length that `dynamic_shapes` leaves free. What padding holds does not
matter (zeroed first, as the CPU and CUDA kernels ignore it).

Needs the `onnx` and `onnxscript` packages (blosa's [onnx] extra); onnxruntime runs the result.
"""
from __future__ import annotations

import math

import numpy
import torch

try:
    from onnxscript import ir
    from onnxscript import opset18 as op
except ModuleNotFoundError as error:
    raise ModuleNotFoundError(
        "blosa.onnx needs the onnx and onnxscript packages (pip install onnx onnxscript, or "
        "blosa's [onnx] extra), as torch.onnx.export(dynamo=True) does",
        name=error.name) from error

from blosa._validate import check_direction

_BOOL, _INT32 = ir.DataType.BOOL, ir.DataType.INT32


def _ints(*values: int):
    return op.Constant(value_ints=list(values))


def _scalar(value: float, like):
    return op.CastLike(op.Constant(value_float=value), like)


def _empty(dtype: ir.DataType):
    return op.Constant(value=ir.tensor(numpy.empty(0, dtype=dtype.numpy())))


def _forward(dep, head, value, bias, mask, block_len: int, direction: str, scale: float,
             compute_lse: bool, compute: ir.DataType):
    """masked_block_attn_fwd in ONNX operators, computing in `compute` (FLOAT or DOUBLE).

    dep, head, value: [B, n, d]; bias: [d] or None; mask: [B, n] bool or None.
    Returns out [B, n, d] (dep's dtype) and lse [B, n, d] (`compute`; +inf where a query has
    no key), or an empty [0] lse without compute_lse."""
    check_direction(direction)
    in_type = dep.dtype
    dep, head, value = (op.Cast(t, to=compute) for t in (dep, head, value))
    B = op.Shape(dep, start=0, end=1)
    n = op.Shape(dep, start=1, end=2)
    d = op.Shape(dep, start=2, end=3)
    zero = _scalar(0.0, dep)
    # r = min(block_len, n) (n for one block), at least 1 so that an empty sequence divides.
    r = n if block_len <= 0 else op.Min(n, _ints(block_len))
    r = op.Max(r, _ints(1))
    m = op.Div(op.Sub(op.Add(n, r), _ints(1)), r)  # ceil(n / r) blocks
    padded = op.Mul(m, r)
    pad = op.Sub(padded, n)  # the last block's padding, past the sequence's end

    if mask is None:
        mask = op.Expand(op.Constant(value=ir.tensor(True)), op.Concat(B, n, axis=0))
    real = op.Unsqueeze(mask, _ints(2))  # [B, n, 1]

    def blocks(t):  # [B, n, d] -> [B, m, r, d]; padding zeroed (its inf or NaN too)
        t = op.Pad(op.Where(real, t, zero), op.Concat(_ints(0, 0, 0, 0), pad, _ints(0), axis=0))
        return op.Reshape(t, op.Concat(B, m, r, d, axis=0))

    dep_b, head_b, value_b = blocks(dep), blocks(head), blocks(value)
    real_b = op.Pad(op.Cast(mask, to=_INT32), op.Concat(_ints(0, 0, 0), pad, axis=0))
    real_b = op.Cast(op.Reshape(real_b, op.Concat(B, m, r, axis=0)), to=_BOOL)  # [B, m, r]

    z = op.Add(op.Unsqueeze(dep_b, _ints(2)), op.Unsqueeze(head_b, _ints(3)))  # [B,m,r(j),r(i),d]
    if bias is not None:
        z = op.Add(z, op.Cast(bias, to=compute))
    c = _scalar(float(scale), dep)
    logits = op.Mul(c, op.Tanh(op.Div(z, c)))

    # Allowed (query j, key i) pairs [B, m, r, r, 1]: both real, and the direction's rule.
    pairs = op.And(op.Unsqueeze(real_b, _ints(3)), op.Unsqueeze(real_b, _ints(2)))
    if direction != "all":
        pos = op.Range(op.Constant(value_int=0), op.Squeeze(r), op.Constant(value_int=1))
        j, i = op.Unsqueeze(pos, _ints(1)), op.Unsqueeze(pos, _ints(0))
        rule = {"forward": op.Less, "backward": op.Greater}.get(direction)
        pairs = op.And(pairs, rule(i, j) if rule else op.Not(op.Equal(i, j)))
    pairs = op.Unsqueeze(pairs, _ints(4))
    has_key = op.Cast(op.ReduceMax(op.Cast(pairs, to=_INT32), _ints(3), keepdims=1), to=_BOOL)
    # A query with no key would have an all -inf row (softmax: NaN); it gets a finite row
    # instead and its output is zeroed.
    logits = op.Where(has_key, op.Where(pairs, logits, _scalar(-math.inf, dep)), zero)
    probs = op.Mul(op.Softmax(logits, axis=3), op.CastLike(has_key, dep))
    out = op.ReduceSum(op.Mul(probs, op.Unsqueeze(value_b, _ints(2))), _ints(3), keepdims=0)
    out = op.Slice(op.Reshape(out, op.Concat(B, padded, d, axis=0)), _ints(0), n, _ints(1))
    out = op.Cast(out, to=in_type)
    if not compute_lse:
        return out, _empty(compute)
    top = op.ReduceMax(logits, _ints(3), keepdims=1)  # finite: scores lie in [-c, c] or are 0
    lse = op.Add(op.Log(op.ReduceSum(op.Exp(op.Sub(logits, top)), _ints(3), keepdims=1)), top)
    lse = op.Where(has_key, lse, _scalar(math.inf, dep))
    lse = op.Reshape(op.Squeeze(lse, _ints(3)), op.Concat(B, padded, d, axis=0))
    return out, op.Slice(lse, _ints(0), n, _ints(1))


def masked_block_attn_fwd(dep, head, value, bias=None, mask=None, block_len: int = 0,
                          direction: str = "forward", scale: float = 5.0, compute_lse: bool = True):
    """torch.ops.blosa.masked_block_attn_fwd: float64 inputs computed in float64, others in
    float32, as the CPU and CUDA kernels."""
    compute = ir.DataType.DOUBLE if dep.dtype == ir.DataType.DOUBLE else ir.DataType.FLOAT
    return _forward(dep, head, value, bias, mask, block_len, direction, scale, compute_lse, compute)


def masked_block_attn_triton_fwd(dep, head, value, bias=None, mask=None, block_len: int = 0,
                                 direction: str = "forward", scale: float = 5.0,
                                 compute_lse: bool = True):
    """torch.ops.blosa.masked_block_attn_triton_fwd: every dtype computed in float32, as the
    Triton kernels."""
    return _forward(dep, head, value, bias, mask, block_len, direction, scale, compute_lse,
                    ir.DataType.FLOAT)


def translations() -> dict:
    """torch.onnx.export's custom_translation_table for blosa's forward ops: the CPU/CUDA op,
    and the Triton op where triton is installed."""
    table = {torch.ops.blosa.masked_block_attn_fwd.default: masked_block_attn_fwd}
    try:
        import blosa_kernels  # noqa: F401  (registers the Triton op)
    except ModuleNotFoundError as error:
        if error.name != "triton":
            raise
    else:
        table[torch.ops.blosa.masked_block_attn_triton_fwd.default] = masked_block_attn_triton_fwd
    return table
