"""Each autotune shape of the Triton kernels on its own, against the float64 reference.

The autotuner times a kernel's configs, it does not check them: here each config (tile shape,
elements a thread, register cap) runs alone (use_only_config) on shapes its tiles do not divide
(n, d, or the elements of a program). The per-pair kernels compiled for the call's d
(configs.PAIRS_STATIC_D) and their wide shapes (PAIRS_WIDE_CONFIGS) give the bits of those that
take d as an argument; the row-tile forward's shapes; the fused backward's, with either key loop.
(The case matrix over directions, block lengths and masks: test_triton_matches_reference.py.)
"""
import pytest
import torch

from blosa_kernels import configs, masked_block_attn_triton
from attn_cases import RESULTS
from triton_testing import (DEVICE, HAS_CUDA, check, compare, distinct_configs, make_inputs,
                            record_launches, reference64, run, seed_of, use_only_config,
                            wide_pair_shapes)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("mask_kind, n, d, block_len, direction, scale", [
    ("none", 16, 6, 8, "forward", 5.0),  # dense, the benchmark's kind of call
    ("none", 24, 37, 4, "all", 100.0),  # dense, odd d, the running-max softmax
    ("holes", 13, 9, 5, "diag", 5.0),  # a mask, a short last block
    ("right_pad", 21, 33, 8, "backward", 5.0),  # d above a program's 32 elements
    ("empty_row", 7, 5, 1, "forward", 5.0),  # block_len 1: no query has a key; a padded row
])
def test_pair_kernels_compiled_for_one_d(monkeypatch, dtype, mask_kind, n, d, block_len,
                                         direction, scale):
    # configs.PAIRS_STATIC_D: the per-pair kernels compiled for the call's d (D) match the
    # reference and give the bits of the kernels that take d as an argument: only the integer
    # index arithmetic differs between the two (compiled too: compile_check leaves ptxas no
    # float product to fuse or not).
    flags = record_launches(monkeypatch, "D")
    seed = seed_of(mask_kind, n, d, block_len, direction, scale, str(dtype), "static d")
    inputs = make_inputs(3, n, d, mask_kind, True, seed, dtype, DEVICE)
    settings = (block_len, direction, scale)
    monkeypatch.setattr(configs, "PAIRS_STATIC_D", True)
    got = run(masked_block_attn_triton, *inputs, *settings)
    assert flags == [("fwd_pairs", d), ("bwd_pairs", d)]
    if dtype == torch.float32:
        check(("static d", mask_kind, n, d, block_len, direction, scale), got,
              reference64(*inputs, *settings), scale)
    monkeypatch.setattr(configs, "PAIRS_STATIC_D", False)
    runtime = run(masked_block_attn_triton, *inputs, *settings)
    assert flags[2:] == [("fwd_pairs", 0), ("bwd_pairs", 0)]
    for name, a, b in zip(RESULTS, got, runtime):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("mask_kind", ["none", "holes"])
def test_pair_kernels_compiled_for_one_d_with_int64_indices(monkeypatch, mask_kind):
    # configs.PAIRS_STATIC_D with the int64 element indices (INDEX64, forced as in
    # test_triton_matches_reference.py's test_pair_kernels_with_int64_indices): a static d
    # divides an int64 index too.
    monkeypatch.setattr(configs, "PAIRS_INDEX32_MAX", 0)
    monkeypatch.setattr(configs, "PAIRS_STATIC_D", True)
    flags = record_launches(monkeypatch, "INDEX64")
    compare(3, 24, 7, 8, "backward", mask_kind, bias=True, scale=5.0,
            seed=seed_of(mask_kind, "static d, int64"))
    assert flags == [("fwd_pairs", True), ("bwd_pairs", True)]


WIDE_PAIR_SHAPES = wide_pair_shapes()


@pytest.mark.parametrize("index", range(len(WIDE_PAIR_SHAPES)))
@pytest.mark.parametrize("mask_kind, n, d, block_len, direction", [
    ("none", 48, 36, 8, "forward"),  # dense; 4 divides d: a thread's elements share one block
    ("holes", 45, 37, 8, "all"),  # a mask, a short last block, odd d
    ("right_pad", 40, 22, 5, "diag"),  # blocks of 5 (R = 8), 2 but not 4 dividing d
])
def test_every_wide_pair_shape(monkeypatch, index, mask_kind, n, d, block_len, direction):
    # Each of configs.PAIRS_WIDE_CONFIGS (2 or 4 elements a thread; the per-pair kernels
    # compiled for the call's d) on its own (use_only_config): the reference's results and the
    # bits of one element a thread. 3 sequences of 6 or 8 blocks: 528 to 666 elements, so
    # programs of 256 and 512 elements start inside blocks and sequences.
    kind, config = WIDE_PAIR_SHAPES[index]
    monkeypatch.setattr(configs, "PAIRS_STATIC_D", True)
    inputs = make_inputs(3, n, d, mask_kind, True, seed_of(index, mask_kind, "wide"),
                         torch.float32, DEVICE)
    settings = (block_len, direction, 5.0)
    one = run(masked_block_attn_triton, *inputs, *settings)
    use_only_config(monkeypatch, kind, config)
    flags = record_launches(monkeypatch, "D")
    got = run(masked_block_attn_triton, *inputs, *settings)
    assert flags == [("fwd_pairs", d), ("bwd_pairs", d)]
    check(("wide", kind, config, mask_kind, n, d), got, reference64(*inputs, *settings))
    for name, a, b in zip(RESULTS, got, one):
        assert torch.equal(a, b), name


def test_pair_launches_for_one_d_ask_for_the_wide_shapes(monkeypatch):
    # The op asks configs.kernel_and_meta for the autotuner with PAIRS_WIDE_CONFIGS (static_d)
    # exactly where it compiles the per-pair kernels for the call's d.
    asked = []
    kernel_and_meta = configs.kernel_and_meta

    def recording(kind, d, R, static_d=False):
        asked.append((kind, static_d))
        return kernel_and_meta(kind, d, R, static_d)

    monkeypatch.setattr(configs, "kernel_and_meta", recording)
    for setting in (True, False):
        monkeypatch.setattr(configs, "PAIRS_STATIC_D", setting)
        compare(2, 16, 12, 8, "forward", "none", True, 5.0, seed=seed_of("asks", setting))
    assert asked == [("fwd_pairs", True), ("bwd_pairs", True), ("fwd_pairs", False),
                     ("bwd_pairs", False)]


ROW_TILE_CONFIGS = distinct_configs(configs.ROWS_CONFIGS)


FUSED_CONFIGS = distinct_configs(configs.FUSED_CONFIGS)


@pytest.mark.parametrize("index", range(len(ROW_TILE_CONFIGS)))
def test_every_row_tile_forward_shape(monkeypatch, index):
    # Each autotune shape (BM rows x BD features) of the row-tile forward on its own
    # (use_only_config). d = 37 leaves the last feature tile partly past d in every shape (of
    # 16 features: 5 below d), and one block of 40 ends in a partial query tile in every shape
    # (of 16, 32 or 64 rows); the gradients through the fused backward.
    monkeypatch.setattr(configs, "SMALL_BLOCK_MAX", 0)
    use_only_config(monkeypatch, "fwd_rows", ROW_TILE_CONFIGS[index])
    seed = seed_of("row tile shape", index)
    compare(2, 40, 37, 0, "forward", "right_pad", True, 5.0, seed=seed)


@pytest.mark.parametrize("index", range(len(FUSED_CONFIGS)))
@pytest.mark.parametrize("step", ["plain", "trimmed"])  # configs.FUSED_STEP
@pytest.mark.parametrize("direction, block_len", [("forward", 0), ("diag", 20)])
def test_every_fused_backward_shape(monkeypatch, fused_backward, index, step, direction,
                                    block_len):
    # Each autotune shape (FUSED_ROWS rows x BD features) of the fused backward on its own
    # (use_only_config), with either key loop: d = 37 leaves every shape's last feature tile
    # partly past d, n = 40 (300 on a GPU, with 64-row tiles) a partial last query tile.
    monkeypatch.setattr(configs, "FUSED_STEP", step)
    use_only_config(monkeypatch, "bwd_fused", FUSED_CONFIGS[index])
    seed = seed_of("fused shape", index, step, direction)
    compare(2, 300 if HAS_CUDA else 40, 37, block_len, direction, "right_pad", True, 5.0, seed)


def test_unautotuned_launch_takes_the_configs_register_cap(monkeypatch):
    # With autotuning off (the GPU tests), a launch takes the first config's whole launch
    # arguments: a capped shape's register cap too, so the tests above compile it as tuned.
    monkeypatch.setattr(configs, "INTERPRET", False)
    monkeypatch.setattr(configs, "AUTOTUNE", False)
    capped, = [c for c in configs.FUSED_CONFIGS if c.maxnreg]
    use_only_config(monkeypatch, "bwd_fused", capped)
    kernel, meta = configs.kernel_and_meta("bwd_fused", 300, 1)
    assert kernel is configs.PLAIN["bwd_fused"]
    assert meta == dict(capped.kwargs, num_warps=1, num_ctas=1, num_stages=1,
                        maxnreg=configs.FUSED_MAXNREG)
