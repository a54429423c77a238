"""The fused backward's trimmed key loop (configs.FUSED_STEP = "trimmed", backward.py's
fused_keys_trimmed) against its plain one: the same probabilities, so the same d_value bits;
g folded into p first, so d_dep, d_head and d_bias within float32 rounding. The other suites
run it against the reference through use_path's "trimmed", and each of its autotune shapes
(test_triton_config_shapes.py's test_every_fused_backward_shape)."""
import pytest
import torch

from attn_cases import DIRECTIONS
from blosa_kernels import configs, masked_block_attn_triton
from triton_testing import DEVICE, HAS_CUDA, make_inputs, record_launches, run, seed_of

# Blocks of several query tiles (FUSED_ROWS: 64 on a GPU, 16 in the interpreter), whole and cut
# short by the end of the sequence.
SHAPE, BLOCK_LENS = ((2, 300, 40), (0, 130)) if HAS_CUDA else ((2, 40, 6), (0, 20, 17))


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("block_len", BLOCK_LENS)
@pytest.mark.parametrize("mask_kind", ["holes", "none"])
def test_trimmed_loop_matches_the_plain_one(monkeypatch, fused_backward, direction, block_len,
                                            mask_kind):
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
