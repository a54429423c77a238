"""The fused backward's trimmed key loop (configs.FUSED_STEP = "trimmed", backward.py's
fused_keys_trimmed) against its plain one: the same probabilities, so the same d_value bits;
g folded into p first, so d_dep, d_head and d_bias within float32 rounding. The other suites
run it against the reference through use_path's "trimmed"."""
import zlib

import pytest
import torch

from blosa_kernels import configs, masked_block_attn_triton
from triton_testing import DEVICE, HAS_CUDA, make_inputs, record_launches, reference64, run

DIRECTIONS = ("forward", "backward", "diag", "all")
# Blocks of several query tiles (FUSED_ROWS: 64 on a GPU, 16 in the interpreter), whole and cut
# short by the end of the sequence.
SHAPE, BLOCK_LENS = ((2, 300, 40), (0, 130)) if HAS_CUDA else ((2, 40, 6), (0, 20, 17))


def seed_of(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


@pytest.fixture
def fused(monkeypatch):
    monkeypatch.setattr(configs, "SMALL_BLOCK_MAX", 0)  # the row-tile kernels at every size
    monkeypatch.setattr(configs, "BACKWARD", "fused")


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("block_len", BLOCK_LENS)
@pytest.mark.parametrize("mask_kind", ["holes", "none"])
def test_trimmed_loop_matches_the_plain_one(monkeypatch, fused, direction, block_len, mask_kind):
    inputs = make_inputs(*SHAPE, mask_kind, True, seed_of(direction, block_len, mask_kind),
                         torch.float32, DEVICE)
    settings = (block_len, direction, 5.0)
    trimmed_flags = record_launches(monkeypatch, "TRIMMED")
    key_mask_flags = record_launches(monkeypatch, "KEY_MASK")
    plain = run(masked_block_attn_triton, *inputs, *settings)
    monkeypatch.setattr(configs, "FUSED_STEP", "trimmed")
    trimmed = run(masked_block_attn_triton, *inputs, *settings)
    assert [(kind, f) for kind, f in trimmed_flags if kind.startswith("bwd")] == [
        ("bwd_fused", False), ("bwd_dkv_sums", False), ("bwd_fused", True), ("bwd_dkv_sums", True)]
    # The trimmed loop reads the keys' mask bytes only where the call has a mask.
    masked = mask_kind != "none"
    assert [f for kind, f in key_mask_flags if kind == "bwd_fused"] == [True, masked]
    out, d_dep, d_head, d_value, d_bias = trimmed
    assert torch.equal(out, plain[0])
    assert torch.equal(d_value, plain[3])
    for name, got, want in zip(("d_dep", "d_head", "d_bias"), (d_dep, d_head, d_bias),
                               (plain[1], plain[2], plain[4])):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")


def test_trimmed_setting(monkeypatch):
    assert not configs.fused_trimmed(384, 300)  # "plain" until measured
    monkeypatch.setattr(configs, "FUSED_STEP", "trimmed")
    assert configs.fused_trimmed(384, 300) and configs.fused_trimmed(512, 4186127)
    assert not configs.fused_trimmed(512, 4186128)  # 513·d past 2^31: 32-bit offsets would wrap
    monkeypatch.setattr(configs, "FUSED_STEP", "lean")
    with pytest.raises(ValueError, match="FUSED_STEP must be 'plain' or 'trimmed', got 'lean'"):
        configs.fused_trimmed(384, 300)


# The fused backward's autotune configs; in the interpreter, which has no warps or register
# caps, one of each tile shape (several configs share one).
FUSED_CONFIGS = [c for i, c in enumerate(configs.FUSED_CONFIGS)
                 if not configs.INTERPRET or all(c.kwargs != o.kwargs for o in configs.FUSED_CONFIGS[:i])]


@pytest.mark.parametrize("index", range(len(FUSED_CONFIGS)))
@pytest.mark.parametrize("direction, block_len", [("forward", 0), ("backward", 0), ("diag", 20)])
def test_every_fused_shape_of_the_trimmed_loop(monkeypatch, fused, index, direction, block_len):
    # Each autotune shape (FUSED_ROWS rows x BD features) of the trimmed loop on its own, which
    # the autotuner times but does not check: d = 37 leaves every shape's last feature tile
    # partly past d, n = 40 (300 on a GPU) a partial last query tile. Interpreter: the shape's
    # tile; GPU: the config compiled (with its register cap).
    config = FUSED_CONFIGS[index]
    monkeypatch.setattr(configs, "FUSED_STEP", "trimmed")
    monkeypatch.setitem(configs.CONFIGS, "bwd_fused", ([config], configs.CONFIGS["bwd_fused"][1]))
    plain_meta = configs.interpreter_meta
    monkeypatch.setattr(configs, "interpreter_meta", lambda kind, d, R=1: (
        dict(config.kwargs) if kind == "bwd_fused" else plain_meta(kind, d, R)))
    n = 300 if HAS_CUDA else 40
    inputs = make_inputs(2, n, 37, "right_pad", True, seed_of(index, direction), torch.float32,
                         DEVICE)
    settings = (block_len, direction, 5.0)
    got = run(masked_block_attn_triton, *inputs, *settings)
    want = reference64(*inputs, *settings)
    for name, g, w in zip(("out", "d_dep", "d_head", "d_value", "d_bias"), got, want):
        torch.testing.assert_close(g.double().cpu(), w, atol=5e-5, rtol=1e-4,
                                   msg=lambda m: f"{name}: {m}")


def test_unautotuned_launch_takes_the_configs_register_cap(monkeypatch):
    # With autotuning off (the GPU tests), a launch takes the first config's whole launch
    # arguments: a capped shape's register cap too, so the tests above compile it as tuned.
    monkeypatch.setattr(configs, "INTERPRET", False)
    monkeypatch.setattr(configs, "AUTOTUNE", False)
    capped, = [c for c in configs.FUSED_CONFIGS if c.maxnreg]
    monkeypatch.setitem(configs.CONFIGS, "bwd_fused", ([capped], configs.CONFIGS["bwd_fused"][1]))
    kernel, meta = configs.kernel_and_meta("bwd_fused", 300, 1)
    assert kernel is configs.PLAIN["bwd_fused"]
    assert meta == dict(capped.kwargs, num_warps=1, num_ctas=1, num_stages=1,
                        maxnreg=configs.FUSED_MAXNREG)
