"""Benchmark of the Triton kernels on a GPU (pytest-benchmark; skipped without CUDA).

    pytest bench/test_bench_triton.py --benchmark-only

Rates are score elements per second: one element per (query, allowed key, feature) triple, each
a tanh and an exp; KERNEL_NOTES.md section 3 puts the special-function bound near 2.1e12/s
forward on an H100 SXM (fwd+bwd recomputes them: the per-block backward once, the row-tile
backward twice). Each benchmark records its rate in extra_info, and the module prints a table
of them at the end (elements/s next to the bound). Targets (issue 4): forward >= 1.3e12/s,
forward+backward >= 0.5e12/s at B=64, d=300, n=384 with r=8 and with one block.
"""
import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
if HAS_CUDA:
    from blosa_kernels import masked_block_attn_triton

BOUND = 2.1e12  # H100 SXM, forward, KERNEL_NOTES.md section 3
RATES = []


def score_elements(B, n, d, block_len, direction):
    r = n if block_len <= 0 or block_len >= n else block_len
    total = 0
    for start in range(0, n, r):
        L = min(r, n - start)
        total += {"forward": L * (L - 1) // 2, "backward": L * (L - 1) // 2,
                  "diag": L * (L - 1), "all": L * L}[direction]
    return B * total * d


@pytest.fixture(scope="module", autouse=True)
def rate_table(request):
    yield
    if not RATES:
        return
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    write = tr.write_line if tr else print
    card = torch.cuda.get_device_name()
    write("")
    write(f"Triton masked_block_attn on {card} (score elements/s; forward bound ~{BOUND:.1e} on H100)")
    write(f"{'case':<44}{'pass':<10}{'time ms':>10}{'elem/s':>12}{'of bound':>10}")
    for case, kind, ms, rate in RATES:
        write(f"{case:<44}{kind:<10}{ms:>10.3f}{rate:>12.3e}{rate / BOUND:>10.1%}")


CASES = [  # (B, n, d, block_len, direction)
    (64, 384, 300, 8, "forward"),
    (64, 384, 300, 0, "forward"),
    (64, 384, 300, 8, "all"),
]


def _inputs(B, n, d, dtype, grad):
    g = torch.Generator(device="cuda").manual_seed(0)
    xs = [torch.randn(B, n, d, device="cuda", dtype=dtype, generator=g) for _ in range(3)]
    bias = torch.randn(d, device="cuda", dtype=dtype, generator=g)
    if grad:
        for t in xs + [bias]:
            t.requires_grad_()
    return xs, bias


def _record(benchmark, case, kind, elements):
    seconds = benchmark.stats.stats.min
    rate = elements / seconds
    benchmark.extra_info.update(score_elements=elements, elements_per_s=rate, fraction_of_bound=rate / BOUND)
    RATES.append((case, kind, seconds * 1e3, rate))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}-n{}-d{}-r{}-{}".format(*c))
def test_forward(benchmark, case, dtype):
    B, n, d, block_len, direction = case
    (dep, head, value), bias = _inputs(B, n, d, dtype, grad=False)

    def step():
        masked_block_attn_triton(dep, head, value, bias, None, block_len, direction, 5.0)
        torch.cuda.synchronize()

    step()  # compile and autotune outside the timing
    benchmark.pedantic(step, rounds=20, iterations=5, warmup_rounds=2)
    _record(benchmark, f"{benchmark.name.split('[')[1][:-1]}", "fwd", score_elements(*case))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("case", CASES[:2] + [(8, 8192, 300, 0, "forward")],
                         ids=lambda c: "B{}-n{}-d{}-r{}-{}".format(*c))
def test_forward_backward(benchmark, case, dtype):
    B, n, d, block_len, direction = case
    (dep, head, value), bias = _inputs(B, n, d, dtype, grad=True)
    grad = torch.randn(B, n, d, device="cuda", dtype=dtype)
    leaves = [dep, head, value, bias]

    def step():
        out = masked_block_attn_triton(dep, head, value, bias, None, block_len, direction, 5.0)
        torch.autograd.grad(out, leaves, grad)
        torch.cuda.synchronize()

    step()
    torch.cuda.reset_peak_memory_stats()
    rounds = 3 if n > 1024 else 10
    benchmark.pedantic(step, rounds=rounds, iterations=1, warmup_rounds=1)
    benchmark.extra_info["peak_memory_mib"] = torch.cuda.max_memory_allocated() / 2**20
    _record(benchmark, f"{benchmark.name.split('[')[1][:-1]}", "fwd+bwd", score_elements(*case))
