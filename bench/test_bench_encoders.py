"""Forward+backward time of every encoder at the paper's SNLI sizes, on CPU (and GPU if any).

Run: `pytest bench/test_bench_encoders.py --benchmark-only`. A batch of B sentences of n tokens
with 300-d embeddings, right-padded to random lengths; hidden sizes as in the paper's Table 1
(600D baselines, 480D Bi-BloSAN). The attention encoders run on the fused op ("auto").
"""
import pytest
import torch

from blosa.nn import build_encoder

PAPER_HIDDEN = {"biblosan": 240}  # the 480D Bi-BloSAN; the others are 600D (hidden = 300)
ENCODER_NAMES = ("biblosan", "disan", "bilstm", "bigru", "bisru", "multi_cnn", "hrchy_cnn", "multi_head")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
SIZES = {"cpu": (16, 32), "cuda": (64, 64)}  # (B, n)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ENCODER_NAMES)
def test_encoder_forward_backward(benchmark, name, device):
    torch.manual_seed(0)
    B, n = SIZES[device]
    encoder = build_encoder(name, d_in=300, hidden=PAPER_HIDDEN.get(name, 300)).to(device)
    x = torch.randn(B, n, 300, device=device, requires_grad=True)
    lengths = torch.randint(1, n + 1, (B,), device=device)
    lengths[0] = n
    mask = torch.arange(n, device=device)[None, :] < lengths[:, None]

    def step():
        _, sentence = encoder(x, mask)
        sentence.sum().backward()
        if device == "cuda":
            torch.cuda.synchronize()

    benchmark.group = f"encoders fwd+bwd {device} B={B} n={n}"
    benchmark.extra_info["parameters"] = sum(p.numel() for p in encoder.parameters())
    benchmark.pedantic(step, rounds=5, warmup_rounds=1, iterations=1)
