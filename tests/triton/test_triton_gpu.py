"""GPU-only checks of the compiled Triton kernels (skipped without CUDA).

The CPU-interpreter tests in this folder also run on CUDA, with the compiled kernels; these add
what the interpreter cannot do: autotuned tile shapes, the tanh.approx path for half inputs,
large shapes, opcheck and torch.compile(fullgraph=True).
"""
import pytest
import torch

from blosa.reference import masked_block_attn_ref
from blosa_kernels import configs, masked_block_attn_triton, masked_block_attn_triton_fwd
from attn_cases import RESULTS, assert_padding_ignored, assert_zero_at_padding
from triton_testing import (HAS_CUDA, assert_within_twice_reference, make_inputs, run,
                            use_only_config, use_path, wide_pair_shapes)

pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (compiled Triton kernels)")
DIRECTIONS = ("forward", "backward", "diag", "all")


def reference64_cuda(dep, head, value, bias, mask, grad, *settings):
    """The float64 oracle on the GPU (same as helpers.reference64, faster for medium shapes)."""
    f64 = [None if t is None else t.double() if t.is_floating_point() else t
           for t in (dep, head, value, bias, mask, grad)]
    return run(masked_block_attn_ref, *f64, *settings)


@pytest.mark.parametrize("direction", DIRECTIONS)
# per-pair kernels up to 8 (per-block ones too, as the variant), per-block up to 64, rows above
@pytest.mark.parametrize("block_len, path", [(8, "default"), (8, "per-block"), (37, "default"),
                                             (100, "default"), (0, "default")])
def test_compiled_float32_matches_reference(request, direction, block_len, path):
    use_path(request, path)
    inputs = make_inputs(2, 300, 96, "holes", True, block_len, torch.float32, "cuda")
    settings = (block_len, direction, 5.0)
    got = run(masked_block_attn_triton, *inputs, *settings)
    want = reference64_cuda(*inputs, *settings)
    for name, g, w in zip(RESULTS, got, want):
        torch.testing.assert_close(g.double(), w, atol=5e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")


def check_half(dtype, n, block_len, direction, seed):
    """The compiled kernels (tanh.approx for half inputs) at B=2, d=96 with padding holes,
    against the float64 oracle by the flash-attention criterion."""
    inputs = make_inputs(2, n, 96, "holes", True, seed, dtype, "cuda")
    settings = (block_len, direction, 5.0)
    got = run(masked_block_attn_triton, *inputs, *settings)
    low = run(masked_block_attn_ref, *inputs, *settings)
    assert_within_twice_reference(got, low, reference64_cuda(*inputs, *settings))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("block_len, direction", [(8, "forward"), (0, "backward"), (100, "diag")])
def test_compiled_half_within_twice_reference_error(dtype, block_len, direction):
    check_half(dtype, 256, block_len, direction, seed=3)


@pytest.mark.parametrize("path, block_len", [("default", 5), ("default", 37), ("per-block", 8),
                                             ("rows", 0), ("fused", 100), ("trimmed", 100)])
def test_compiled_half_padding_holds_nan(request, path, block_len):
    # tanh.approx.f32 of NaN is NaN (the float32 tanh clamps its argument and gives -1, so the
    # interpreter's test_what_padding_holds_does_not_matter cannot show it): NaN at padding in
    # the half kernels (bfloat16 here; float16 runs the same code) must change no bit of any
    # result, and give zeros there.
    use_path(request, path)
    dep, head, value, bias, mask, grad = make_inputs(2, 130, 96, "holes", True, block_len,
                                                     torch.bfloat16, "cuda")
    settings = (block_len, "diag", 5.0)

    def run_with(inputs):
        return run(masked_block_attn_triton, *inputs, mask, grad, *settings)

    assert_zero_at_padding(
        assert_padding_ignored(run_with, [dep, head, value, bias], mask, float("nan")), mask)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("block_len, direction", [(0, "forward"), (100, "all"), (0, "diag")])
def test_compiled_row_tile_polynomial_exp2(monkeypatch, dtype, block_len, direction):
    # configs.ROWS_EXP2 = "half-poly" compiled, with tanh.approx: several row tiles, keys that
    # every query of a tile attends and keys at its diagonal, odd and even key counts (257).
    monkeypatch.setattr(configs, "ROWS_EXP2", "half-poly")
    check_half(dtype, 257, block_len, direction, seed=5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("block_len, direction", [(0, "forward"), (130, "backward"), (0, "diag")])
def test_compiled_trimmed_fused_backward(monkeypatch, autotuned, dtype, block_len, direction):
    # configs.FUSED_STEP = "trimmed", autotuned (the shape it picks is the one the benchmark
    # runs), with tanh.approx: n = 257, one block of five query tiles (the last of one row) and
    # blocks of 130 (three tiles, the second block short), an odd key count in every tile.
    monkeypatch.setattr(configs, "FUSED_STEP", "trimmed")
    check_half(dtype, 257, block_len, direction, seed=7)


@pytest.mark.parametrize("mask_kind", ["none", "holes"])  # dense (the benchmark's), general
def test_compiled_pair_kernels_for_one_d_at_the_benchmarks_d(monkeypatch, mask_kind):
    # configs.PAIRS_STATIC_D compiled at d = 300, r = 8, bfloat16 (rows 600 bytes apart: the
    # offsets compile_check's test reads in the machine code): the bits of the kernels that take
    # d as an argument, and within twice the reference's error.
    inputs = make_inputs(4, 384, 300, mask_kind, True, 17, torch.bfloat16, "cuda")
    settings = (8, "forward", 5.0)
    monkeypatch.setattr(configs, "PAIRS_STATIC_D", True)
    got = run(masked_block_attn_triton, *inputs, *settings)
    monkeypatch.setattr(configs, "PAIRS_STATIC_D", False)
    runtime = run(masked_block_attn_triton, *inputs, *settings)
    for name, a, b in zip(RESULTS, got, runtime):
        assert torch.equal(a, b), name
    low = run(masked_block_attn_ref, *inputs, *settings)
    assert_within_twice_reference(got, low, reference64_cuda(*inputs, *settings))


@pytest.mark.parametrize("kind, config", wide_pair_shapes())
@pytest.mark.parametrize("mask_kind", ["none", "holes"])
def test_compiled_wide_pair_shapes_at_the_benchmarks_d(monkeypatch, kind, config, mask_kind):
    # configs.PAIRS_WIDE_CONFIGS at d = 300, r = 8, bfloat16, each alone: compiled for this
    # launch (aligned inputs, 4 · 48 · 300 elements), so their rows move as 4- and 8-byte
    # vectors (compile_check's test reads it in the machine code); the bits of one element a
    # thread.
    inputs = make_inputs(4, 384, 300, mask_kind, True, 19, torch.bfloat16, "cuda")
    settings = (8, "forward", 5.0)
    monkeypatch.setattr(configs, "PAIRS_STATIC_D", True)
    one = run(masked_block_attn_triton, *inputs, *settings)
    use_only_config(monkeypatch, kind, config)
    got = run(masked_block_attn_triton, *inputs, *settings)
    for name, a, b in zip(RESULTS, got, one):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("block_len", [100, 0])  # blocks of 100 (two query tiles of 64), one block
def test_compiled_fused_backward_matches_reference(fused_backward, direction, block_len):
    inputs = make_inputs(2, 300, 96, "holes", True, block_len + 1, torch.float32, "cuda")
    settings = (block_len, direction, 5.0)
    got = run(masked_block_attn_triton, *inputs, *settings)
    want = reference64_cuda(*inputs, *settings)
    for name, g, w in zip(RESULTS, got, want):
        torch.testing.assert_close(g.double(), w, atol=5e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")


# One block of 384 takes the fused backward by default; "rows" routes it to the split one.
# r = 8 without a mask: the per-pair kernels without mask or row tests (the benchmark's calls).
@pytest.mark.parametrize("block_len, path, mask_kind", [
    (8, "default", "right_pad"), (8, "default", "none"), (8, "per-block", "right_pad"),
    (0, "default", "right_pad"), (0, "rows", "right_pad")])
def test_autotuned_tiles_match_reference(request, autotuned, block_len, path, mask_kind):
    use_path(request, path)
    inputs = make_inputs(3, 384, 300, mask_kind, True, 2, torch.bfloat16, "cuda")
    settings = (block_len, "forward", 5.0)
    got = run(masked_block_attn_triton, *inputs, *settings)
    low = run(masked_block_attn_ref, *inputs, *settings)
    want = reference64_cuda(*inputs, *settings)
    assert_within_twice_reference(got, low, want)


def test_large_one_block_forward_backward():
    inputs = make_inputs(1, 2048, 32, "right_pad", True, 4, torch.float32, "cuda")
    settings = (0, "forward", 5.0)
    got = run(masked_block_attn_triton, *inputs, *settings)
    want = reference64_cuda(*inputs, *settings)
    for name, g, w in zip(RESULTS, got, want):
        torch.testing.assert_close(g.double(), w, atol=1e-4, rtol=1e-3, msg=lambda m: f"{name}: {m}")


def _rows_reference(dep, head, value, bias, queries, direction, scale):
    """float64 out[0, j] for a few queries j of one block over the whole sequence."""
    rows = []
    n = dep.shape[1]
    for j in queries:
        keys = {"forward": range(0, j), "backward": range(j + 1, n), "diag": [i for i in range(n) if i != j],
                "all": range(n)}[direction]
        keys = torch.tensor(list(keys), device=dep.device)
        z = dep[0, keys].double() + head[0, j].double() + bias.double()
        p = torch.softmax(scale * torch.tanh(z / scale), dim=0)
        rows.append((p * value[0, keys].double()).sum(0))
    return torch.stack(rows)


@pytest.mark.parametrize("direction", ["forward", "all"])
def test_sixteen_thousand_tokens_one_block(direction):
    dep, head, value, bias, _, _ = make_inputs(1, 16384, 64, "none", True, 5, torch.bfloat16, "cuda")
    out, lse = masked_block_attn_triton_fwd(dep, head, value, bias, None, 0, direction, 5.0)
    assert torch.isfinite(out).all()
    queries = [1, 777, 8191, 16383]
    want = _rows_reference(dep, head, value, bias, queries, direction, 5.0)
    torch.testing.assert_close(out[0, queries].double(), want, atol=2e-2, rtol=2e-2)


def test_full_disa_b8_n8192_memory_is_linear(autotuned):
    B, n, d = 8, 8192, 300
    dep, head, value, bias, _, grad = make_inputs(B, n, d, "none", True, 6, torch.bfloat16, "cuda")
    leaves = [t.requires_grad_() for t in (dep, head, value, bias)]

    def step():
        out = masked_block_attn_triton(*leaves, None, 0, "forward", 5.0)
        return torch.autograd.grad(out, leaves, grad)

    step()  # compile and autotune first: the autotuner's timing allocates a cache-flush buffer
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    grads = step()
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    assert all(torch.isfinite(g).all() for g in grads)
    # out, lse (fp32), d_head (fp32) and the four gradients: about 14 bytes per (b, j, k) for
    # bf16; an n x n x d buffer would be 8192x larger.
    assert extra < 24 * B * n * d, f"peak extra memory {extra / 2**20:.0f} MiB is not O(B n d)"


def test_opcheck():
    dep, head, value, bias, mask, _ = make_inputs(2, 40, 16, "holes", True, 7, torch.float32, "cuda")
    for t in (dep, head, value, bias):
        t.requires_grad_()
    torch.library.opcheck(
        torch.ops.blosa.masked_block_attn_triton_fwd.default,
        (dep, head, value, bias, mask, 8, "forward", 5.0),
    )


@pytest.mark.parametrize("block_len, path", [(8, "default"), (100, "default")])  # 100: fused
def test_torch_compile_fullgraph_model_matches_eager(request, autotuned, block_len, path):
    use_path(request, path)
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w1 = torch.nn.Linear(d, d, bias=False)
            self.w2 = torch.nn.Linear(d, d)
            self.out = torch.nn.Linear(d, d)

        def forward(self, x, mask):
            y = masked_block_attn_triton(self.w1(x), self.w2(x), x, self.w2.bias, mask, block_len, "forward",
                                         5.0)
            return self.out(y).relu().sum()

    model = Block(64).cuda()
    x = torch.randn(4, 160, 64, device="cuda")
    mask = torch.rand(4, 160, device="cuda") > 0.2
    eager = model(x, mask)
    eager_grads = torch.autograd.grad(eager, list(model.parameters()))
    compiled = torch.compile(model, fullgraph=True)
    got = compiled(x, mask)
    got_grads = torch.autograd.grad(got, list(model.parameters()))
    torch.testing.assert_close(got, eager, atol=1e-4, rtol=1e-4)
    for g, e in zip(got_grads, eager_grads):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
