"""CUDA graphs: a training step of the op (forward and backward) captured with torch.cuda.graph on
each GPU backend, replayed on new inputs copied into its static tensors (new values, new padding),
matches eager calls; and an encoder compiled with torch.compile(mode="reduce-overhead"), which
captures its forward and backward as CUDA graphs, matches eager. A kernel that read anything on
the host (a mask length, a scratch size decided by the data) or launched outside the current
stream would be baked into the graph or missed by it. Skipped (with the reason) without CUDA.
"""
from __future__ import annotations

import random

import pytest
import torch

from attn_cases import RESULTS
from blosa import masked_block_attn
from blosa.ops import cuda_kernels_built
from blosa.nn import build_encoder
from nn_helpers import assert_close, assert_compiled_matches_eager, fresh_seed, random_batch

if not torch.cuda.is_available():
    pytest.skip("no CUDA device: torch.cuda.is_available() is False", allow_module_level=True)

DEV = torch.device("cuda")
GPU_BACKENDS = (["cuda"] if cuda_kernels_built() else []) + ["triton"]
# (n, block_len): blocks of at most 8 (the register-resident kernels), a length r does not
# divide, and one block of 200 keys (the fused backward and its scratch, allocated in the call).
SHAPES = ((48, 8), (11, 3), (200, 0))


def _random_padded(mask: torch.Tensor) -> None:
    """Writes into mask ([B, n] bool) new random lengths, one of them full and one 0."""
    B, n = mask.shape
    lengths = torch.randint(0, n + 1, (B,), device=mask.device)
    lengths[0], lengths[-1] = n, 0
    mask.copy_(torch.arange(n, device=mask.device) < lengths[:, None])


@pytest.mark.parametrize("n, block_len", SHAPES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_captured_training_step_replays(backend, dtype, n, block_len):
    seed = fresh_seed()
    B, d = 3, 40
    inputs = [torch.randn(*shape, device=DEV, dtype=dtype, requires_grad=True)
              for shape in ((B, n, d),) * 3 + ((d,),)]  # dep, head, value, bias
    mask = torch.ones(B, n, dtype=torch.bool, device=DEV)
    grad_out = torch.randn(B, n, d, device=DEV, dtype=dtype)

    def step():
        out = masked_block_attn(*inputs, mask, block_len=block_len, direction="forward", backend=backend)
        return (out, *torch.autograd.grad(out, inputs, grad_out))

    # Warm-up on a side stream (autotuning and lazy initialization happen here), as torch.cuda.graph asks.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()

    for replay in range(2):
        with torch.no_grad():
            for t in inputs + [grad_out]:
                t.copy_(torch.randn_like(t))
        _random_padded(mask)
        graph.replay()
        want = step()
        for label, got, w in zip(RESULTS, captured, want):
            assert_close(got, w, f"{backend} {dtype} n={n} r={block_len} replay {replay}: {label}", seed,
                         atol=0.0, rtol=0.0)


def test_reduce_overhead_compile_of_an_encoder():
    """torch.compile(mode="reduce-overhead") of Bi-BloSAN on the default GPU backend: three
    training steps on new batches of one shape (a CUDA graph serves one shape), each matching
    eager in outputs and every gradient."""
    seed = fresh_seed()
    torch._dynamo.reset()
    model = build_encoder("biblosan", 16, 12, block_len=4).to(DEV)
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    for step in range(3):
        x, mask = random_batch(4, 30, 16, lengths=[30, random.randint(1, 29), random.randint(0, 29), 0])
        torch.compiler.cudagraph_mark_step_begin()
        assert_compiled_matches_eager(model, compiled, x.float().to(DEV), mask.to(DEV),
                                      f"reduce-overhead step {step}", seed, atol=1e-4, rtol=1e-3)  # as test_nn_cuda's compile test
