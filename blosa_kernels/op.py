"""torch.library registration of the Triton kernels: two ops and their autograd.

  blosa::masked_block_attn_triton_fwd(dep, head, value, bias, mask, block_len, direction, scale,
                                      compute_lse=True)
      -> (out [B, n, d] input dtype, lse [B, n, d] float32; lse = +inf where a query has no key;
          with compute_lse=False lse is empty ([0]) and never written)
  blosa::masked_block_attn_triton_bwd(grad_out, dep, head, value, bias, mask, out, lse,
                                      block_len, direction, scale)
      -> (d_dep, d_head, d_value [B, n, d], d_bias [d]), all in the input dtype; an empty lse
         (a forward with compute_lse=False) is recomputed, and out is then not read

A differentiable call saves lse only for blocks longer than configs.SMALL_BLOCK_MAX: the
per-pair and per-block backwards hold a whole block's keys and recompute the softmax for free.

Both are `triton_op`s launching through `wrap_triton`, so torch.compile(fullgraph=True) sees the
kernels; under TRITON_INTERPRET=1 they run on CPU tensors (launched directly, not wrapped).

masked_block_attn_triton, called eagerly on plain tensors (no torch.compile, jit trace, functorch
transform, tensor subclass or torch function/dispatch mode: nothing that must see the op), runs
the same kernels through a torch.autograd.Function instead: torch.library's dispatch, its
autograd wrapper and wrap_triton cost a call more host time than the kernels themselves at the
paper's sizes (bench/gpu_tools/host_overhead.py; bench/HISTORY.md). Under torch.profiler its ranges carry
the ops' names; like the ops' backward, its backward has no derivative; its launches reuse the
autotuner's pick without Autotuner.run (_picked).
"""
from __future__ import annotations

import math
from contextlib import nullcontext

import torch
from torch.library import triton_op, wrap_triton
from torch.utils._python_dispatch import is_in_torch_dispatch_mode
from triton.runtime.autotuner import Autotuner

from blosa._functorch import FuncSupport, transform_active
from blosa._validate import check_attn_args
from blosa.ops import needs_lse
from blosa_kernels import configs
from blosa_kernels._tiles import DIRECTION_CODE


def _cdiv(a, b):
    """ceil(a / b), as triton.cdiv, in plain Python: triton.cdiv is a JIT-aware function that
    costs about 2 µs a call on the host, and a call of the op made up to six."""
    return (a + b - 1) // b


def _launch(kind, L, grid, *args, **flags):
    kernel, meta = configs.kernel_and_meta(kind, L.d, L.R, static_d=bool(flags.get("D")))
    if L.traced:
        kernel = wrap_triton(kernel)
    elif isinstance(kernel, Autotuner):
        kernel, meta = _picked(kernel, L, grid, args, flags)
        if kernel is None:  # launched by the autotuner, which picked for this key
            return
    kernel[grid](*args, **flags, **meta)


# The autotuner's pick for each of its kernels and keys, once it has made it. Autotuner.run
# builds its key from every argument on each launch (a list search per argument: about 12 µs a
# launch on the project's CI machine); the eager path looks the pick up here instead and
# launches the autotuned kernel itself with it, as Autotuner.run does.
_PICKS: dict = {}


def _picked(tuned, L, grid, args, flags):
    """(kernel, launch keyword arguments) for a launch of the autotuned `tuned`, or (None, None)
    once `tuned` has launched it itself (the first launch of a key: it picks, then launches). The
    key holds what the autotuner's does: its key arguments are among L's sizes and the flags,
    and the dtypes of the tensor arguments follow from the inputs' and the flags (which
    tensors stand in for lse or the mask). A pick is only tile shapes, so a key too coarse could
    cost speed, never results."""
    key = (tuned, L.dtype, L.d, L.R, L.buckets, tuple(flags.items()))
    config = _PICKS.get(key)
    if config is None:
        tuned[grid](*args, **flags)
        _PICKS[key] = tuned.best_config
        return None, None
    return tuned.fn, config.all_kwargs()


def _check_device(t: torch.Tensor) -> None:
    if t.device.type == "cuda" or (configs.INTERPRET and t.device.type == "cpu"):
        return
    raise ValueError(
        f"backend='triton' needs CUDA tensors (or CPU tensors with TRITON_INTERPRET=1 set before "
        f"triton is imported), got tensors on {t.device}"
    )


def _block_lengths(n, block_len):
    """(r, R): the resolved block length and the power of two >= r the kernels compile for."""
    r = n if block_len <= 0 or block_len >= n else block_len
    # int(): under torch.compile with dynamic shapes this specializes on the block length (the
    # kernels are compiled per power of two of it anyway).
    return r, 1 << max(int(r) - 1, 0).bit_length()


class _Launch:
    """Everything the kernels of one call share: sizes, flags and scalar arguments."""

    def __init__(self, dep, bias, mask, block_len, direction, scale, traced):
        # traced: launched through wrap_triton (inside the ops, which torch.compile may trace),
        # or directly (the eager path, and the interpreter).
        self.traced = traced and not configs.INTERPRET
        B, n, d = dep.shape
        self.B, self.n, self.d, self.dtype = B, n, d, dep.dtype
        self.dtype_name = str(dep.dtype).split(".")[-1]  # "bfloat16", ...
        self.r, self.R = _block_lengths(n, block_len)
        self.nblk = _cdiv(n, self.r) if n else 0
        self.small = self.R <= configs.SMALL_BLOCK_MAX
        # Short blocks: the per-pair kernels (pairs.py) rather than the per-block ones; compiled
        # without the mask and the short-block tests where there is no mask and every block has
        # all R tokens (configs.PAIRS_DENSE).
        self.pairs = self.small and self.R <= configs.PAIRS_MAX
        self.dense = (self.pairs and configs.PAIRS_DENSE and mask is None and self.r == self.R
                      and n % self.r == 0)
        self.masked = mask is not None
        # The per-pair kernels' (block, feature) elements, indexed in int64 only where int32
        # could overflow.
        self.elements = B * self.nblk * d
        self.index64 = self.elements > configs.PAIRS_INDEX32_MAX
        scale = float(scale)
        self.c, self.inv_c, self.c_log2e = scale, 1.0 / scale, scale * math.log2(math.e)
        fast_tanh = (not configs.INTERPRET) and self.dtype_name in configs.FAST_TANH_DTYPES
        self.flags = dict(
            DIR=DIRECTION_CODE[direction],
            FAST_TANH=fast_tanh,
            TANH_POLY=not fast_tanh and scale > configs.TANH_POLY_MIN_SCALE,
        )
        self.buckets = (1 << max(int(n) - 1, 0).bit_length(), self.R)

    def blocks_grid(self):
        # One axis, the feature tiles fastest (_tiles.features_fastest).
        return lambda m: (self.B * _cdiv(self.nblk, m["TILE"] // self.R)
                          * _cdiv(self.d, m["BD"]),)

    def pairs_grid(self):
        return lambda m: (_cdiv(self.elements, m["BLOCK"]),)

    def rows_grid(self, rows, features_fastest=False):
        """Programs of `rows` consecutive rows of a sequence by BD features: two grid axes, or
        one with the feature tiles fastest (_tiles.features_fastest)."""
        if features_fastest:
            return lambda m: (self.B * _cdiv(self.n, m[rows]) * _cdiv(self.d, m["BD"]),)
        return lambda m: (self.B * _cdiv(self.n, m[rows]), _cdiv(self.d, m["BD"]))

    def fused_backward(self) -> bool:
        """Whether backward takes the fused kernels (configs.BACKWARD, blocks it allows)."""
        return configs.BACKWARD == "fused" and not self.small and self.r <= configs.FUSED_MAX_BLOCK

    def block_tiles(self) -> int:
        """U: query tiles of configs.FUSED_ROWS rows per block (the fused backward's tiling)."""
        return _cdiv(self.r, configs.FUSED_ROWS)

    def block_rows_grid(self, U):
        """Programs of block_row_tile: U query tiles of every block of every sequence."""
        return lambda m: (self.B * self.nblk * U, _cdiv(self.d, m["BD"]))


def _bias_or_zeros(bias, dep):
    # The kernels always add a bias (one [BD] load per program): one compiled variant fewer.
    return bias if bias is not None else torch.zeros(dep.shape[-1], dtype=dep.dtype, device=dep.device)


def _mask_or_ones(mask_u8, dep, L):
    # Likewise the kernels always read a mask (a byte per key step, next to BM x BD elements of
    # work); halving the compiled variants matters more for compile and autotune time. The
    # dense per-pair kernels read none: dep stands in for it, and no ones tensor is made (an
    # allocation and a fill kernel each call).
    if mask_u8 is not None:
        return mask_u8
    if L.dense:
        return dep
    return torch.ones(dep.shape[:2], dtype=torch.uint8, device=dep.device)


def _prepare(dep, head, value, bias, mask):
    """Contiguous inputs; a uint8 copy of the mask (None stays None).

    A copy, not a dtype view: torch.compile cannot trace `view(torch.uint8)` of a bool tensor.
    """
    dep, head, value = dep.contiguous(), head.contiguous(), value.contiguous()
    bias = bias.contiguous() if bias is not None else None
    mask_u8 = mask.to(torch.uint8).contiguous() if mask is not None else None
    return dep, head, value, bias, mask_u8


@triton_op("blosa::masked_block_attn_triton_fwd", mutates_args=())
def masked_block_attn_triton_fwd(
    dep: torch.Tensor, head: torch.Tensor, value: torch.Tensor, bias: torch.Tensor | None,
    mask: torch.Tensor | None, block_len: int, direction: str, scale: float, compute_lse: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    # The schema types block_len as SymInt; int() specializes it (torch.compile, dynamic shapes).
    block_len = int(block_len)
    # float64 inputs too: the kernels take c as float32
    check_attn_args(dep, head, value, bias, mask, block_len, direction, scale, compute=torch.float32)
    _check_device(dep)
    return _forward(dep, head, value, bias, mask, block_len, direction, scale, compute_lse, traced=True)


def _forward(dep, head, value, bias, mask, block_len, direction, scale, compute_lse, traced):
    """masked_block_attn_triton_fwd's work on checked arguments; traced as _Launch's."""
    dep, head, value, bias, mask_u8 = _prepare(dep, head, value, bias, mask)
    out = torch.empty_like(dep)
    lse = torch.empty(dep.shape if compute_lse else (0,), dtype=torch.float32, device=dep.device)
    if out.numel() == 0:
        return out, lse
    L = _Launch(dep, bias, mask, block_len, direction, scale, traced)
    bias_arg = _bias_or_zeros(bias, dep)
    mask_arg = _mask_or_ones(mask_u8, dep, L)
    fixed = L.c <= configs.FIXED_PIVOT_MAX_SCALE
    # Without lse the kernels never store through its pointer: out stands in for it.
    lse_arg = lse if compute_lse else out
    flags = dict(L.flags, FIXED_PIVOT=fixed, WRITE_LSE=compute_lse)
    if L.pairs:
        _launch(
            "fwd_pairs", L, L.pairs_grid(), dep, head, value, bias_arg, mask_arg, out, lse_arg,
            L.n, L.d, L.r, L.nblk, L.elements, L.c, L.inv_c, L.c_log2e, R=L.R, DENSE=L.dense,
            INDEX64=L.index64, RCP_STEPS=configs.pairs_reciprocal_steps(L.dtype_name),
            D=configs.pairs_static_d(L.d), **flags,
        )
    elif L.small:
        _launch(
            "fwd_blocks", L, L.blocks_grid(), dep, head, value, bias_arg, mask_arg, out, lse_arg,
            L.n, L.d, L.r, L.nblk, L.c, L.inv_c, L.c_log2e, R=L.R, ROW_AXIS=configs.BLOCK_ROW_AXIS,
            MASKED=L.masked, **flags,
        )
    else:
        _launch(
            "fwd_rows", L, L.rows_grid("BM"), dep, head, value, bias_arg, mask_arg, out, lse_arg,
            L.n, L.d, L.r, *L.buckets, L.c, L.inv_c, L.c_log2e,
            POLY_EXP2=configs.rows_poly_exp2(L.dtype_name), **flags,
        )
    return out, lse


@triton_op("blosa::masked_block_attn_triton_bwd", mutates_args=())
def masked_block_attn_triton_bwd(
    grad_out: torch.Tensor, dep: torch.Tensor, head: torch.Tensor, value: torch.Tensor,
    bias: torch.Tensor | None, mask: torch.Tensor | None, out: torch.Tensor, lse: torch.Tensor,
    block_len: int, direction: str, scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return _backward_kernels(grad_out, dep, head, value, bias, mask, out, lse, int(block_len),
                             direction, scale, traced=True)


def _backward_kernels(grad_out, dep, head, value, bias, mask, out, lse, block_len, direction,
                      scale, traced):
    """masked_block_attn_triton_bwd's work; traced as _Launch's."""
    L = _Launch(dep, bias, mask, block_len, direction, scale, traced)
    saved_lse = lse.numel() > 0 or dep.numel() == 0
    if not saved_lse and not L.small:
        # Only the per-block kernel recomputes lse; the row-tile kernels get the forward's.
        out, lse = _forward(dep, head, value, bias, mask, block_len, direction, scale, True, traced)
        saved_lse = True
    dep, head, value, bias, mask_u8 = _prepare(dep, head, value, bias, mask)
    grad_out = grad_out.contiguous()
    # Without lse the per-block kernel reads neither lse nor out: grad_out stands in for both.
    out, lse = (out.contiguous(), lse.contiguous()) if saved_lse else (grad_out, grad_out)
    B, n, d = dep.shape
    d_dep = torch.empty_like(dep)
    d_value = torch.empty_like(value)
    if dep.numel() == 0:
        return d_dep, torch.empty_like(dep), d_value, dep.new_zeros(d)
    bias_arg = _bias_or_zeros(bias, dep)
    mask_arg = _mask_or_ones(mask_u8, dep, L)
    common = (grad_out, dep, head, value, bias_arg, mask_arg, out, lse)
    # z = dep_i + head_j + bias, so d_bias is d_head summed over batch and queries, from
    # unrounded values (torch's reductions: deterministic for a given shape).
    if L.small:
        # The per-block and per-pair kernels sum each block's d_head (float32) themselves, and
        # write every row.
        d_head = torch.empty_like(dep)
        d_bias_part = torch.empty((B * L.nblk, d), dtype=torch.float32, device=dep.device)
        tensors = (*common, d_dep, d_head, d_value, d_bias_part)
        scalars = (L.inv_c, L.c_log2e)
        flags = dict(L.flags, R=L.R, SAVED_LSE=saved_lse,
                     FIXED_PIVOT=saved_lse or L.c <= configs.FIXED_PIVOT_MAX_SCALE)
        if L.pairs:
            _launch("bwd_pairs", L, L.pairs_grid(), *tensors, L.n, L.d, L.r, L.nblk, L.elements,
                    *scalars, DENSE=L.dense, INDEX64=L.index64,
                    RCP_STEPS=configs.pairs_reciprocal_steps(L.dtype_name, backward=True),
                    D=configs.pairs_static_d(L.d), **flags)
        else:
            _launch("bwd_blocks", L, L.blocks_grid(), *tensors, L.n, L.d, L.r, L.nblk, *scalars,
                    ROW_AXIS=configs.BLOCK_ROW_AXIS, **flags)
        return d_dep, d_head, d_value, _column_sums(d_bias_part).to(dep.dtype)
    # The row-tile kernels write d_head in float32, summed for d_bias, then rounded; zero-filled
    # because they skip queries that can have no key.
    d_head = torch.zeros(dep.shape, dtype=torch.float32, device=dep.device)
    sums = _fused_scratch(L, dep.device) if L.fused_backward() else None
    if sums is not None:
        _fused_backward(L, common, mask_arg, d_dep, d_head, d_value, sums)
    else:
        _launch(
            "bwd_dq", L, L.rows_grid("BM"), *common, d_head,
            L.n, L.d, L.r, *L.buckets, L.inv_c, L.c_log2e, **L.flags,
        )
        _launch(
            "bwd_dkv", L, L.rows_grid("BN"), *common, d_dep, d_value,
            L.n, L.d, L.r, *L.buckets, L.inv_c, L.c_log2e, **L.flags,
        )
    return d_dep, d_head.to(dep.dtype), d_value, _column_sums(d_head).to(dep.dtype)


def _column_sums(x):
    """[d] sums of x ([..., d], float32, contiguous) over all its other dimensions, as
    configs.BIAS_SUM says: ATen's sum, or ("mv") a matrix-vector product with ones, one gemv
    reading x once."""
    if configs.setting("BIAS_SUM", "sum", "mv") == "mv":
        rows = x.view(-1, x.shape[-1])
        return torch.mv(rows.t(), rows.new_ones(rows.shape[0]))
    return x.sum(dim=tuple(range(x.dim() - 1)))


def _fused_scratch(L, device):
    """The fused backward's [2, U, B, n, d] float32 sums (up to 16 floats an element), or None
    where they do not fit in memory: the split backward, which needs none, runs instead."""
    try:
        return torch.empty((2, L.block_tiles(), L.B, L.n, L.d), dtype=torch.float32, device=device)
    except torch.OutOfMemoryError:
        return None


def _fused_backward(L, common, mask_arg, d_dep, d_head, d_value, sums):
    """bwd_fused_kernel (d_head, and per query tile the parts of d_dep and d_value, into sums),
    then bwd_dkv_sums_kernel (adds the parts in tile order)."""
    U = sums.shape[1]
    trimmed = configs.fused_trimmed(L.r, L.d)
    _launch(
        "bwd_fused", L, L.block_rows_grid(U), *common, d_head, sums,
        L.B, L.n, L.d, L.r, L.nblk, U, *L.buckets, L.inv_c, L.c_log2e, **L.flags,
        # Only the trimmed loop skips the keys' mask bytes where there is no mask: the plain
        # one compiles once for both.
        TRIMMED=trimmed, KEY_MASK=L.masked or not trimmed,
    )
    _launch(
        "bwd_dkv_sums", L, L.rows_grid("BN", features_fastest=True), sums, mask_arg, d_dep,
        d_value, L.B, L.n, L.d, L.r, U, DIR=L.flags["DIR"], QT=configs.FUSED_ROWS,
        TRIMMED=trimmed,
    )


def _save(ctx, inputs, out, lse):
    """Saves what the backward needs (out and lse only where the forward computed lse: without
    it the backward recomputes both). inputs: the forward's nine."""
    dep, head, value, bias, mask, block_len, direction, scale, compute_lse = inputs
    ctx.save_for_backward(dep, head, value, bias, mask, *((out, lse) if compute_lse else (None, None)))
    ctx.attn_settings = (block_len, direction, scale)
    # lse never gets a gradient: no zero [B, n, d] tensor filled for it before each backward.
    ctx.set_materialize_grads(False)


def _gradients(ctx, grad_out, backward):
    """The nine inputs' gradients (dep, head, value and bias only) from backward, called as
    masked_block_attn_triton_bwd."""
    if grad_out is None:  # no gradient reached out
        return None, None, None, None, None, None, None, None, None
    dep, head, value, bias, mask, out, lse = ctx.saved_tensors
    if lse is None:  # empty ones: the backward recomputes them
        out, lse = dep.new_empty(0), torch.empty(0, dtype=torch.float32, device=dep.device)
    block_len, direction, scale = ctx.attn_settings
    d_dep, d_head, d_value, d_bias = backward(
        grad_out, dep, head, value, bias, mask, out, lse, block_len, direction, scale
    )
    d_bias = d_bias if bias is not None and ctx.needs_input_grad[3] else None
    return d_dep, d_head, d_value, d_bias, None, None, None, None, None


def _setup_context(ctx, inputs, output):
    out, lse = output
    _save(ctx, inputs, out, lse)
    ctx.mark_non_differentiable(lse)


def _backward(ctx, grad_out, _grad_lse):
    return _gradients(ctx, grad_out, masked_block_attn_triton_bwd)


masked_block_attn_triton_fwd.register_autograd(_backward, setup_context=_setup_context)
# torch.func transforms and forward-mode AD, which torch.library's autograd does not serve:
# see blosa/_functorch.py.
_FUNC_SUPPORT = FuncSupport("blosa::masked_block_attn_triton_fwd", "blosa::masked_block_attn_triton_bwd")


def _backward_eager(*args):
    return _backward_kernels(*args, traced=False)


class _EagerAttn(torch.autograd.Function):
    """masked_block_attn_triton_fwd and its autograd, with the kernels launched directly: for
    calls that nothing traces (_untraced), where torch.library's machinery is only host time."""

    @staticmethod
    def forward(ctx, dep, head, value, bias, mask, block_len, direction, scale, compute_lse):
        out, lse = _forward(dep, head, value, bias, mask, block_len, direction, scale, compute_lse,
                            traced=False)
        _save(ctx, (dep, head, value, bias, mask, block_len, direction, scale, compute_lse), out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        with _profiled("blosa::masked_block_attn_triton_bwd"):
            grads = _gradients(ctx, grad_out, _backward_eager)
        if not torch.is_grad_enabled():
            return grads
        # create_graph=True: the gradients depend on grad_out and the saved inputs, through
        # kernels with no autograd formula. Tied to them, differentiating them raises, as it
        # does through the op's backward, rather than leaving that dependence out unseen.
        sources = [t for t in (grad_out, *ctx.saved_tensors) if t is not None and t.requires_grad]
        present = [g for g in grads if g is not None]
        tied = iter(_NoSecondDerivative.apply(len(present), *present, *sources))
        return tuple(None if g is None else next(tied) for g in grads)


class _NoSecondDerivative(torch.autograd.Function):
    """The first `count` tensors unchanged, depending (for autograd) on all of them; their
    backward raises."""

    @staticmethod
    def forward(ctx, count, *tensors):
        return tuple(t.view_as(t) for t in tensors[:count])

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("masked_block_attn with backend='triton' has no second derivative: its "
                           "backward is not differentiable")


def _profiled(name):
    """Under torch.profiler, a range named as the op the eager path stands in for (profiles show
    where its kernels came from); otherwise nothing."""
    return torch.profiler.record_function(name) if torch.autograd._profiler_enabled() else nullcontext()


# Tensor types a call may take the eager path with: nn.Parameter (a bias) is a plain tensor to
# torch; every other subclass (FakeTensor, FunctionalTensor, DTensor, ...) must see the op.
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _untraced(*tensors) -> bool:
    """Whether nothing that must see the op (torch.compile, jit tracing, a functorch transform,
    a torch function or dispatch mode, a tensor subclass) would miss it in a call on `tensors`."""
    return (
        not torch.compiler.is_compiling()
        and not torch.jit.is_tracing()
        and not torch._C._are_functorch_transforms_active()
        and not torch._C._is_torch_function_mode_enabled()
        and not is_in_torch_dispatch_mode()
        and all(t is None or type(t) in _PLAIN_TENSORS for t in tensors)
    )


def masked_block_attn_triton(dep, head, value, bias=None, mask=None, block_len=0,
                             direction="forward", scale=5.0):
    """masked_block_attn computed by the Triton kernels; differentiable in dep, head, value, bias.

    Args:
        dep, head, value: [B, n, d] on CUDA (or CPU under TRITON_INTERPRET=1); float32, float16
            or bfloat16 (float64 is accepted but computed in float32).
        bias: [d] or None. mask: [B, n] bool (True = real token) or None.
        block_len, direction, scale: as in blosa.masked_block_attn.

    Returns:
        out: [B, n, d] in the input dtype; exactly 0 for a query with no allowed key.
    """
    # float64 inputs too: the kernels take c as float32
    check_attn_args(dep, head, value, bias, mask, block_len, direction, scale, compute=torch.float32)
    _check_device(dep)
    if transform_active():
        return _FUNC_SUPPORT.attn(dep, head, value, bias, mask, block_len, direction, float(scale))
    differentiable = needs_lse(dep, head, value, bias)
    compute_lse = differentiable and saves_lse(dep.shape[1], block_len)
    if _untraced(dep, head, value, bias, mask):
        with _profiled("blosa::masked_block_attn_triton_fwd"):
            if not differentiable:
                return _forward(dep, head, value, bias, mask, block_len, direction, scale, False,
                                traced=False)[0]
            return _EagerAttn.apply(dep, head, value, bias, mask, block_len, direction,
                                    float(scale), compute_lse)
    return masked_block_attn_triton_fwd(dep, head, value, bias, mask, block_len, direction, float(scale),
                                        compute_lse)[0]


def saves_lse(n: int, block_len: int) -> bool:
    """Whether a differentiable call's forward saves lse: only for blocks the per-block backward
    (which recomputes the softmax from the whole block it holds) does not take."""
    return _block_lengths(n, block_len)[1] > configs.SMALL_BLOCK_MAX
