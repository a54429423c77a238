"""Launch settings: tile shapes, the tiny GPU autotune lists, and the interpreter's fixed tiles.

Under TRITON_INTERPRET=1 (CPU tensors) nothing is autotuned: each kernel runs once with one
fixed, large tile (the interpreter's cost is per program and per loop step, not per element).
"""
import os

import triton

from blosa_kernels import _math, backward, forward, pairs

INTERPRET = bool(_math.INTERPRET.value)


def _environment(name: str, default: str, *allowed: str) -> str:
    """The value of environment variable `name` read at import (unset or empty: `default`),
    checked to be one of `allowed`: a value outside them ("false", "off") must not pass as one."""
    value = os.environ.get(name) or default
    if value not in allowed:
        raise ValueError(f"{name} must be {' or '.join(map(repr, allowed))}, got {value!r}")
    return value


def _version(text: str) -> tuple[int, int]:
    major, minor = (int(part) for part in text.split(".")[:2])
    return major, minor


def interpreter_problem(triton_version: str, numpy_version: str) -> str | None:
    """Why TRITON_INTERPRET=1 cannot run with these versions, or None. Triton before 3.7 (3.6 is
    torch 2.11's) takes a loop bound's value with int() of a one-element array, an error since
    numpy 2.4, so every kernel with a runtime loop bound fails in the interpreter with "only
    0-dimensional arrays can be converted to Python scalars"; triton 3.7 squeezes it first."""
    if _version(triton_version) < (3, 7) and _version(numpy_version) >= (2, 4):
        return (f"TRITON_INTERPRET=1 cannot run blosa's kernels with triton {triton_version} and "
                f"numpy {numpy_version}: triton's interpreter before 3.7 fails on numpy 2.4 and "
                f"later. Install 'numpy<2.4' (or triton >= 3.7).")
    return None


if INTERPRET:
    import numpy

    _problem = interpreter_problem(triton.__version__, numpy.__version__)
    if _problem:
        raise RuntimeError(_problem)

# Blocks up to this length use the per-block kernels; longer ones (and full DiSA) the row-tile
# kernels. Tests lower it to run the row-tile kernels on small shapes.
SMALL_BLOCK_MAX = 64
# Blocks up to this length (R, the power of two >= r: 8 or 0) take the per-pair kernels
# (pairs.py), which compute only the (query, key) pairs the direction allows: at r = 8 under
# "forward", 28 per block and feature where the per-block kernels compute 56. 0, or
# BLOSA_TRITON_PAIRS=0 at import, gives those blocks the per-block kernels.
PAIRS_MAX = 8 if _environment("BLOSA_TRITON_PAIRS", "1", "0", "1") == "1" else 0
# Calls with no mask whose blocks all have R tokens (r a power of two dividing n: the paper's
# r = 8 benchmark) run the per-pair kernels compiled for that case (DENSE), with no mask bytes
# to load, no test of a row's existence and, in the backward, no select of a pair's
# probability: at r = 8, bfloat16, 26% fewer instructions forward and 23% backward on sm_90
# (648 -> 480, 952 -> 736). False gives them the general per-pair kernels.
PAIRS_DENSE = True
# The per-pair kernels compiled for the call's d (their D, a compile-time constant: one binary
# per feature count, each autotuned on its first call) rather than for any d. Each (block,
# feature) element's R rows lie d apart: with d constant, every row's load and store takes its
# offset as an immediate from one 64-bit address, where a runtime d gives each row an address
# of its own (an IMAD.WIDE, in the forward a MOV too), and splitting the element's index into
# block and feature takes a multiply instead of a division. On sm_90 (bfloat16, r = 8,
# "forward", 4 warps; `python -m blosa_kernels.compile_check --cubin-dir DIR`, then `python
# bench/gpu_tools/sass_loads.py --whole --so DIR/FILE.cubin --kernels pairs`, the D = 0 and D = 300
# binaries of a case):
# dense forward (Newton 1 / sum) 464 -> 376 instructions, 32 registers both, every load issued
# before the first is read in both; dense recomputing backward 736 -> 680, 64 -> 56 registers
# (9 programs of 4 warps an SM instead of 8); with a mask (1 / sum by division), forward 648
# -> 560 and backward 952 -> 888. The special-function ops stay (the division's MUFU.RCP
# goes). False until an H200 measures it (bench/gpu_tools/gpu_rates.py variant pairs-static-d): the
# dense bfloat16 r = 8 forward's issue slots and its special-function unit are about equally
# loaded (464 instructions, 57 such ops of 8 cycles), so what fewer instructions gain there is
# for the GPU to say; the backward issues more (736 for 57).
PAIRS_STATIC_D = False


def pairs_static_d(d: int) -> int:
    """The per-pair kernels' D for a call with d features: d under PAIRS_STATIC_D, else 0."""
    if not isinstance(PAIRS_STATIC_D, bool):
        raise ValueError(f"configs.PAIRS_STATIC_D must be True or False, got {PAIRS_STATIC_D!r}")
    # int(): under torch.compile with dynamic shapes this specializes on d.
    return int(d) if PAIRS_STATIC_D else 0


# Input dtypes whose kernels may trade accuracy for special-function ops (below).
SIXTEEN_BIT = ("bfloat16", "float16")


def setting(name: str, *allowed: str) -> str:
    """The value of the string setting `name` of this module (which tests and gpu_rates'
    variants set at run time), checked to be one of `allowed`."""
    value = globals()[name]
    if value not in allowed:
        raise ValueError(f"configs.{name} must be {' or '.join(map(repr, allowed))}, "
                         f"got {value!r}")
    return value


# How the per-pair kernels take each query's 1 / sum for 16-bit inputs: "newton", Newton steps
# on the FMA pipe (_math.reciprocal_newton), as CUDA's small-block forward does, or "div", a
# division (one special-function op, of 64 a (block, feature) element in the dense bfloat16
# r = 8 forward, whose 56 tanh and exp are its work, and a slow-path test). Newton: that forward
# 64 -> 57 special-function ops and 480 -> 464 instructions, its backward 64 -> 57 at 760
# (sm_90; `python -m blosa_kernels.compile_check --cubin-dir DIR`, then `python
# bench/gpu_tools/sass_loads.py --whole --so`); on an H200 (2026-11-28, third run) the bfloat16 r = 8
# forward 0.0218 -> 0.0209 ms (1.04x), forward+backward 0.0732 -> 0.0720. float32 keeps the
# division.
PAIRS_RECIPROCAL = "newton"


def pairs_reciprocal_steps(dtype_name: str, backward: bool = False) -> int:
    """RCP_STEPS of a per-pair kernel for inputs of dtype `dtype_name` ("bfloat16", ...): 0 (the
    division) unless PAIRS_RECIPROCAL is "newton" and the inputs are 16-bit. Then the forward's
    output takes 2 steps in bfloat16 (relative error about 6.6e-6 against its half ulp, 2^-8)
    and 3 in float16; the backward's 3 (an ulp or two of float32), since its 1 / sum scales
    float32 gradients, some of them summed unrounded into d_bias."""
    if setting("PAIRS_RECIPROCAL", "div", "newton") == "div" or dtype_name not in SIXTEEN_BIT:
        return 0
    return 2 if dtype_name == "bfloat16" and not backward else 3


# Where the row-tile forward (one block, blocks over 64, full DiSA) takes its exp2 for 16-bit
# inputs at the fixed pivot (scale <= 40): "mufu", every one from the special-function unit, or
# "half-poly", every other key's from _math.exp2_poly on the FMA pipe (two keys a loop step; how
# flash-attention 4 shares exp2 between the two units). That unit bounds the loop: on sm_90
# (the bfloat16 16-row shape, registers capped at 168) two key steps of a tile that every
# query attends issue 274 instructions a warp, 64 of them special-function ops (32 tanh, 32
# exp2) that hold the unit 8 cycles each, 512 cycles; with half-poly 370 instructions and 48
# such ops, 384 cycles (160 -> 168 registers, no spill; `python -m blosa_kernels.compile_check
# --cubin-dir DIR`, then `python bench/gpu_tools/sass_loads.py --blocks --kernels fwd_rows --so
# DIR/fwd_rows_kernel-bf16-w2-BM16-BD64-R168[-poly].cubin`: the blocks along that path). On the
# 4-warp capped shapes ptxas waits on the next pair's mask byte once a pair. bench/
# sfu_peak.py's loops on an H200: 2.03e12 elements/s with half the exp2 by polynomial, 1.87e12
# with none (2026-11-28). float32 keeps the unit's exp2 (its exact tanh takes it too). "mufu"
# until "half-poly" is measured in the kernel (gpu_rates variant rows-poly).
ROWS_EXP2 = "mufu"


def rows_poly_exp2(dtype_name: str) -> bool:
    """The row-tile forward's POLY_EXP2 for inputs of dtype `dtype_name`: ROWS_EXP2 is
    "half-poly" and the inputs are 16-bit."""
    return setting("ROWS_EXP2", "mufu", "half-poly") == "half-poly" and dtype_name in SIXTEEN_BIT


# How d_bias sums its rows (the per-block kernels' [B · n/r, d] float32 sums, or d_head over
# batch and queries, float32 too): "mv", a matrix-vector product with ones (one cuBLAS gemv,
# which reads the rows once), or "sum", ATen's reduction. Both are deterministic. On an H200
# (2026-11-28, third run) "mv" took the bfloat16 r = 8 forward+backward 0.0732 -> 0.0665 ms
# (1.10x), float32 0.099 -> 0.092; alone (bench/gpu_tools/bias_reduce.py) 0.0095 ms against 0.0297 for
# [24576, 300] float32 rows and 0.027 against 0.096 for [65536, 300].
BIAS_SUM = "mv"
# Above this scale the scores are shifted by a running max instead of the constant c
# (exp(-2c) would underflow float32 for c > ~43; KERNEL_NOTES.md section 1).
FIXED_PIVOT_MAX_SCALE = 40.0
# tanh.approx.f32 (one special-function op) for these input dtypes; float32 keeps the accurate
# exp2-based tanh. Ignored in the interpreter, which cannot run inline PTX.
FAST_TANH_DTYPES = ("float16", "bfloat16")
# Above this scale the exact exp2-based tanh takes |x| < 0.625 from a polynomial (TANH_POLY,
# _math.tanh_f32): its absolute error of a few ulps of 1 is c times that in the score c·t, under
# 1e-5 up to c = 40 but 0.06 at c = 1e6. The same limit as the fixed pivot's, whose kernels
# compile apart anyway. (tanh.approx.f32's error is relative already.)
TANH_POLY_MIN_SCALE = FIXED_PIVOT_MAX_SCALE


def _block_row_axis(version: str) -> int:
    """Where the per-block kernels keep a block's rows in their 3-d tile: 0, [R, G, BD]; 1,
    [G, R, BD]. Their sums over a block's rows stay inside a thread only if the warps go to the
    blocks' axis (G); triton 3.7 and 3.8 give a 3-d tile's warps to its middle axis, 3.6 to its
    first (the TTGIR of both kernels), so the blocks go there. compile_check fails if a
    per-block loop has a barrier (a sum across warps)."""
    return 0 if _version(version) >= (3, 7) else 1


BLOCK_ROW_AXIS = _block_row_axis(triton.__version__)
# Backward of blocks longer than SMALL_BLOCK_MAX: "split" (bwd_dq_kernel + bwd_dkv_kernel, each
# element's tanh and exp computed twice) or "fused" (bwd_fused_kernel + bwd_dkv_sums_kernel,
# once, through a 2·cdiv(r, FUSED_ROWS)·B·n·d float32 scratch; blocks up to FUSED_MAX_BLOCK).
# Fused is the default: forward+backward 1.19-1.23x faster on an H200 at B=64, one block of
# n=384, d=300, peak memory +479 MiB instead of +197 (float32; bench/HISTORY.md, 2026-11-27).
# Split needs no scratch.
BACKWARD = _environment("BLOSA_TRITON_BACKWARD", "fused", "split", "fused")
FUSED_MAX_BLOCK = 512
# The fused backward's key loop (backward.py): "plain" (fused_keys) or "trimmed"
# (fused_keys_trimmed: g folded into p before the products, the keys addressed by 32-bit
# offsets from the block's first row, a key within the query tile masked where each element
# lives, no key mask byte read for a call without a mask; and
# bwd_dkv_sums_kernel adding two query tiles' parts a loop trip: 32 loads in flight a thread
# instead of 16, at 127 registers instead of 124, where it took 84 µs with DRAM 58% busy and
# L2 85%). For the one-block bfloat16 training step (no mask), whose fused backward took
# 1.93 of its 3.19 ms on an H200 (2026-11-28) with issue slots 64.5% busy: on sm_90 (the
# autotuner's pick there, 1 warp, 64 x 4, capped at 136 registers) a key every query of the
# tile attends issues 182 instructions a warp plain and 163 trimmed with triton 3.6 (the GPU
# machines'; 183 and 161 with 3.8), a key within the tile 236 and 178 (219, with a barrier,
# and 176); at one block of 384 under "forward" 28% of the keys a tile streams are within it,
# so 197 -> 167 instructions a key on average (1.18x fewer); 136 registers both with 3.6 (the
# same code uncapped takes 128: 16 warps an SM), 131 -> 136 with 3.8; no spill (`python
# -m blosa_kernels.compile_check --cubin-dir DIR`, then `python bench/gpu_tools/sass_loads.py --blocks
# --kernels bwd_fused --so DIR/bwd_fused_kernel-bf16-w1-BM64-BD4-R136[-trimmed].cubin`, the
# loop's blocks along each path). "plain" until "trimmed" is measured (gpu_rates variant
# fused-trimmed).
FUSED_STEP = "plain"


def fused_trimmed(r: int, d: int) -> bool:
    """TRIMMED of bwd_fused_kernel and bwd_dkv_sums_kernel: FUSED_STEP is "trimmed" and a
    block's offsets, (r + 1)·d, fit in 32 bits."""
    return setting("FUSED_STEP", "plain", "trimmed") == "trimmed" and (r + 1) * d < 2**31


# Query rows per program of the fused backward: the scratch's tiling, so every GPU config of the
# kernel has it (the interpreter's fixed tile is smaller, to reach several tiles at small n).
FUSED_ROWS = 16 if INTERPRET else 64


def _cfg(num_warps, maxnreg=None, **meta):
    return triton.Config(meta, num_warps=num_warps, num_stages=1, maxnreg=maxnreg)


# Tile elements per thread trade work per thread against warps per SM. Registers per thread on
# sm_90 over the five kernels (`python -m blosa_kernels.compile_check` prints them, and fails on
# a config that spills): at 32 elements the kernels use all 255 and spill; at 16, 145-239; at 8,
# 80-128; at 4, 55-87 (triton 3.8). The CUDA kernels run 8 per thread at 16 warps per SM. The
# first two shapes give 16, the last two 8 and 4, and the autotuner picks (four shapes: each
# costs a compile per autotune key, and make gpu-check has to fit one device call). Rows stay
# >= 64 = SMALL_BLOCK_MAX, since the per-block kernels need TILE >= R. TILE = queries per
# program (G = TILE // R whole blocks of R); BM / BN = query / key rows per program; BD =
# features per program.
_SHAPES = [(4, 64, 32), (8, 64, 64), (8, 64, 32), (16, 64, 32)]  # (num_warps, rows, BD)
BLOCK_CONFIGS = [_cfg(w, TILE=t, BD=bd) for w, t, bd in _SHAPES]
BLOCK_BWD_CONFIGS = BLOCK_CONFIGS
DQ_CONFIGS = [_cfg(w, BM=t, BD=bd) for w, t, bd in _SHAPES]
# The row-tile forward's list: the shapes, then three more with registers capped at 168
# (ROWS_MAXNREG). The autotuner picked the first shape on every one-block and DiSA key but one
# (H200, 2026-11-27), where, 16 elements a thread, it takes 236 registers with triton 3.6 and 200
# with 3.8 (the benchmark's bfloat16 training forward, compile_check's first case of the kernel):
# 2 thread blocks of 4 warps per SM. Capped, at most 168 with no spill and a key loop 6
# instructions longer (`python bench/gpu_tools/sass_loads.py --so` on compile_check's binaries), so 12
# warps fit per SM instead of 8. The other capped shapes have fewer rows and more features a
# warp, the same code a thread (16 rows of one feature: same registers and loop): a query tile's
# keys past its first row are computed for all its rows and masked for the rows before them,
# which at one block of 384 under "forward" is 16.4% more (query, key) pairs than allowed with
# 64 rows a tile, 8.1% with 32 and 3.9% with 16 (bench/HISTORY.md). The autotuner keeps
# whichever is fastest: on the H200 (2026-11-27, second run; before the 16-row shape) the capped
# 32 x 64 one for every one-block key, the forward 1.07x (bfloat16) and 1.10x (float32) faster
# than before; on 2026-11-28 (three runs) the 16-row one for the bfloat16 one-block forward
# (1.092-1.098 ms, 0.6-1.2% short of 1.3e12 elements/s). An 8-row shape on one warp (1.8% more
# pairs, 139 registers) was never picked on the two runs that had it, so it went. Inside a
# torch.compile graph Inductor tunes the list without the caps (its config_to_dict keeps kwargs,
# num_warps and num_stages, torch 2.11 and 2.14), so there the capped shapes run uncapped.
# Last, 16 rows x 16 features on one warp, for d that 32 or 64 do not divide: every lane computes
# its tile's tanh and exp2 whether its feature is below d or not, so at d = 300 tiles of 32 or 64
# features compute 320 (6.25% of the special-function work on features past d), tiles of 16
# compute 304 (1.3%). 8 elements a thread, uncapped: 91 registers with triton 3.8, 90 with 3.6
# (compile_check prints them), so 21 one-warp programs fit an SM (12 warps with the capped shapes); a key step of 89
# instructions and 16 special-function ops (128 cycles of that unit: still its bound) against
# the 16 x 64 shape's 137 and 32 for twice the elements (compile_check's binaries,
# `python bench/gpu_tools/sass_loads.py --blocks --kernels fwd_rows --so DIR/...-w1-BM16-BD16.cubin`).
# Not yet measured (2026-11-29): the autotuner takes it where it is faster.
ROWS_MAXNREG = 168
ROWS_CONFIGS = DQ_CONFIGS + [_cfg(4, BM=64, BD=32, maxnreg=ROWS_MAXNREG),
                             _cfg(4, BM=32, BD=64, maxnreg=ROWS_MAXNREG),
                             _cfg(2, BM=16, BD=64, maxnreg=ROWS_MAXNREG),
                             _cfg(1, BM=16, BD=16)]
DKV_CONFIGS = [_cfg(w, BN=t, BD=bd) for w, t, bd in _SHAPES]
# The per-pair kernels (pairs.py) hold a block's rows and every state as [BLOCK] tiles of one
# (block, feature) element a thread, BLOCK consecutive elements of the flattened [B · nblk, d]
# grid a program (BLOCK = 32 × warps): the whole kernel unrolled, at r = 8 40-46 registers
# forward and 80-90 backward on sm_90 (bfloat16, triton 3.8; `python -m
# blosa_kernels.compile_check` prints each shape's). Two elements a thread took the [G, BD]
# tiles they had before to 80-106 and 168. The shapes differ in warps a program; the first has
# the size of the autotuner's pick for every r = 8 key on the H200 (2026-11-27; 4 warps).
PAIRS_CONFIGS = [_cfg(w, BLOCK=32 * w) for w in (4, 8, 2, 16)]
# With D (PAIRS_STATIC_D), shapes of 2 and 4 elements a thread too (BLOCK = 64 or 128 x
# warps), whose loads and stores the compiler vectorizes. With d a constant it proves a thread's
# elements consecutive in memory: an element's block, e // d, is constant over runs as long as
# the largest power of two dividing d (4 at d = 300; Triton's axis analysis). With the launch's
# pointers 16-byte aligned and its element count a multiple of 16, which the JIT specializes
# on, it proves them aligned too (compile_check.launch_attrs). Then at d = 300 each row's load
# and store moves 4 bytes a thread (LDG.E) with 2 elements, 8 (LDG.E.64) with 4, where one
# element a thread moves 2 (a warp's 64 bytes of a 600-byte row), with fewer instructions an
# element and more registers; a backward of 4 elements a thread is left out for its registers.
# Figures, and the wide forwards' loads that ptxas schedules behind the first math: "Made
# without a GPU (2026-11-29, session 26)" in bench/HISTORY.md. With d an argument (D = 0) the
# compiler proves none of it: more elements a thread only take more registers, so those calls
# keep PAIRS_CONFIGS. Not yet measured (gpu_rates variant pairs-static-d, whose autotuner takes
# these where they are faster).
PAIRS_WIDE_CONFIGS = {"fwd_pairs": [_cfg(4, BLOCK=256), _cfg(4, BLOCK=512)],
                      "bwd_pairs": [_cfg(4, BLOCK=256)]}
# Element indices of the per-pair kernels stay in int32 up to this many elements (B · nblk · d),
# so that no program's index passes 2^31 - 1; beyond it they are int64 (INDEX64, a divide by d
# per element in 64 bits). Tests lower it to run that variant on small shapes.
PAIRS_INDEX32_MAX = 2**31 - 1 - 4096
# The fused backward sums, for each key it streams, the tile's d_dep and d_value terms across
# the tile's rows: a reduction across warps through shared memory, with barriers (per key: 4 on
# 8 warps, 2 on 4, 4 on 2, 1 on 1). Its shapes (warps, BD) trade that against warps per SM.
# Registers on sm_90, on compile_check's first case (the benchmark's bfloat16 training step),
# triton 3.8 / 3.6: (8, 32) 191 / 193, 8 elements a thread; (4, 8) 80 / 84, 4 elements;
# (2, 8) 130 / 167 and (1, 4) 167 / 163, 8 elements, fewer barriers. At 16 elements it spills.
# (`python -m blosa_kernels.compile_check --cubin-dir DIR`, then `python bench/gpu_tools/sass_loads.py
# --so DIR/FILE.cubin --kernels bwd_fused`.)
# Rows are FUSED_ROWS in every shape: the scratch's layout depends on them. Then (1, 4), the
# autotuner's pick for bfloat16 on the H200 (2026-11-27), with registers capped at
# FUSED_MAXNREG: there it held 12 warps per SM (Nsight Compute: 14.6% achieved occupancy, issue
# slots 51% busy); capped, 15 fit, with no spill and a key loop about as long (167 -> 135
# registers and 210 -> 220 instructions with triton 3.8, 163 -> 136 and 233 -> 232 with 3.6).
# At 128, 16 warps, it spills 24 bytes with 3.6, as (2, 8), float32's pick, does 8 at 136. The
# autotuner keeps it only where it measures faster.
FUSED_MAXNREG = 136
FUSED_CONFIGS = [_cfg(w, BM=FUSED_ROWS, BD=bd) for w, bd in ((8, 32), (4, 8), (2, 8), (1, 4))]
FUSED_CONFIGS.append(_cfg(1, BM=FUSED_ROWS, BD=4, maxnreg=FUSED_MAXNREG))
# Adds 2·U floats per output element, memory-bound: one shape, 8 elements a thread (128
# registers; at 16, 239-244, and 64 x 64 on 4 warps spills).
DKV_SUMS_CONFIGS = [_cfg(4, BN=32, BD=32)]

# Autotune keys: the block length class (R), the features, the direction; the sequence length
# only through its power-of-two bucket, so variable-length batches do not retune every call.
_SMALL_KEY = ["d", "R", "DIR", "FAST_TANH"]
_ROWS_KEY = ["d", "n_bucket", "r_bucket", "DIR", "FAST_TANH"]


def _tuned(kernel, configs, key):
    return triton.autotune(configs=configs, key=key)(kernel)


# Plain kernels (the interpreter, or AUTOTUNE off) and their autotuned twins (GPU).
PLAIN = {
    "fwd_pairs": pairs.fwd_pairs_kernel,
    "bwd_pairs": pairs.bwd_pairs_kernel,
    "fwd_blocks": forward.fwd_blocks_kernel,
    "fwd_rows": forward.fwd_rows_kernel,
    "bwd_blocks": backward.bwd_blocks_kernel,
    "bwd_dq": backward.bwd_dq_kernel,
    "bwd_dkv": backward.bwd_dkv_kernel,
    "bwd_fused": backward.bwd_fused_kernel,
    "bwd_dkv_sums": backward.bwd_dkv_sums_kernel,
}
CONFIGS = {
    "fwd_pairs": (PAIRS_CONFIGS, _SMALL_KEY + ["RCP_STEPS", "D"]),
    "bwd_pairs": (PAIRS_CONFIGS, _SMALL_KEY + ["RCP_STEPS", "D"]),
    "fwd_blocks": (BLOCK_CONFIGS, _SMALL_KEY + ["MASKED"]),
    "fwd_rows": (ROWS_CONFIGS, _ROWS_KEY + ["POLY_EXP2"]),
    "bwd_blocks": (BLOCK_BWD_CONFIGS, _SMALL_KEY),
    "bwd_dq": (DQ_CONFIGS, _ROWS_KEY),
    "bwd_dkv": (DKV_CONFIGS, _ROWS_KEY),
    "bwd_fused": (FUSED_CONFIGS, _ROWS_KEY + ["TRIMMED", "KEY_MASK"]),
    "bwd_dkv_sums": (DKV_SUMS_CONFIGS, ["d", "DIR", "TRIMMED"]),
}
TUNED = {} if INTERPRET else {k: _tuned(PLAIN[k], *CONFIGS[k]) for k in PLAIN}
# The per-pair kernels compiled for one d (D > 0) tune over PAIRS_WIDE_CONFIGS too.
TUNED_STATIC_D = {} if INTERPRET else {k: _tuned(PLAIN[k], CONFIGS[k][0] + wide, CONFIGS[k][1])
                                        for k, wide in PAIRS_WIDE_CONFIGS.items()}
# On the GPU, autotune (the first call per autotune key benchmarks each config). Off: every
# launch uses the first config of each list, which saves compile time (the GPU test suite
# turns it off; BLOSA_TRITON_AUTOTUNE=0 does the same).
AUTOTUNE = _environment("BLOSA_TRITON_AUTOTUNE", "1", "0", "1") == "1"


def kernel_and_meta(kind: str, d: int, R: int, static_d: bool = False):
    """(kernel, launch keyword arguments) for kernel `kind` under the current settings;
    static_d: a per-pair kernel (fwd_pairs, bwd_pairs) compiled for the call's d (its D), which
    autotunes over PAIRS_WIDE_CONFIGS too."""
    if INTERPRET:
        return PLAIN[kind], interpreter_meta(kind, d, R)
    if AUTOTUNE:
        return (TUNED_STATIC_D if static_d else TUNED)[kind], {}
    cfg = CONFIGS[kind][0][0]
    # all_kwargs: the tile, warps and stages, and the register cap of a capped config.
    return PLAIN[kind], cfg.all_kwargs()


def interpreter_meta(kind: str, d: int, R: int = 1) -> dict:
    """Fixed tile for the interpreter: all features of a row at once, few programs."""
    bd = min(64, triton.next_power_of_2(max(d, 1)))
    if kind in ("fwd_blocks", "bwd_blocks"):
        return {"TILE": max(R, 32), "BD": bd}
    if kind in ("fwd_pairs", "bwd_pairs"):
        # One warp's worth: the tests' small shapes still span several programs, each crossing
        # blocks and sequences.
        return {"BLOCK": 32}
    # Row tiles of 16 so that tests reach the inner (unmasked) key ranges at small n.
    if kind in ("fwd_rows", "bwd_dq"):
        return {"BM": 16, "BD": bd}
    if kind == "bwd_fused":
        return {"BM": FUSED_ROWS, "BD": bd}
    return {"BN": 16, "BD": bd}
