"""Per-sentence gradients of Bi-BloSAN: torch.func's vmap(grad(...)) against a loop of backward
passes, on the fused op and on the reference (on CPU, and GPU if any).

Run: `pytest bench/test_bench_per_sample.py --benchmark-only`. B sentences of n tokens with
300-d embeddings, the paper's 480D Bi-BloSAN (hidden 240). Each round returns one gradient per
sentence for every parameter, as differential privacy (per-sample clipping) or influence
functions need.
"""
import pytest
import torch
from torch.func import functional_call, grad, vmap

from blosa.nn import build_encoder, set_backend

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
SIZES = {"cpu": (8, 32), "cuda": (64, 64)}  # (B, n)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["auto", "reference"])
@pytest.mark.parametrize("method", ["vmap_grad", "loop"])
def test_per_sentence_gradients(benchmark, method, backend, device):
    torch.manual_seed(0)
    B, n = SIZES[device]
    encoder = set_backend(build_encoder("biblosan", d_in=300, hidden=240).to(device), backend)
    x = torch.randn(B, n, 300, device=device)
    mask = torch.arange(n, device=device)[None, :] < torch.randint(1, n + 1, (B, 1), device=device)
    params = {name: p.detach() for name, p in encoder.named_parameters()}

    def loss(p, x1, mask1):
        return functional_call(encoder, p, (x1[None], mask1[None]))[1].square().sum()

    per_sentence = vmap(grad(loss), in_dims=(None, 0, 0))
    live = dict(encoder.named_parameters())

    def loop():
        return [torch.autograd.grad(loss(live, x[i], mask[i]), list(live.values())) for i in range(B)]

    def step():
        per_sentence(params, x, mask) if method == "vmap_grad" else loop()
        if device == "cuda":
            torch.cuda.synchronize()

    benchmark.group = f"per-sentence gradients {device} B={B} n={n}"
    benchmark.pedantic(step, rounds=5, warmup_rounds=1, iterations=1)
