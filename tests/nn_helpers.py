"""Shared helpers of the tests/test_nn*.py files: fresh random batches and comparisons."""
from __future__ import annotations

import os
import random

import torch

F64_ATOL = 1e-12  # float64: both sides sum in different orders; 1e-12 is ~5000 ulps of O(1) values
F64_RTOL = 1e-10


def fresh_seed() -> int:
    """Seed torch and Python's `random` with a fresh seed and return it (put it in assertion
    messages). BLOSA_TEST_SEED=N replays a failure: every test then draws from seed N."""
    replay = os.environ.get("BLOSA_TEST_SEED")
    seed = int(replay) if replay else random.SystemRandom().randrange(2**31)
    torch.manual_seed(seed)
    random.seed(seed)
    return seed


def right_padded_mask(lengths: list[int], n: int) -> torch.Tensor:
    """[B, n] bool, True for the first lengths[b] positions of row b."""
    return torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]


def random_batch(B: int, n: int, d: int, lengths: list[int] | None = None, garbage: float = 100.0):
    """x [B, n, d] float64 with large random values at padding, mask [B, n] (right-padded)."""
    if lengths is None:
        lengths = [random.randint(0, n) for _ in range(B)]
        lengths[random.randrange(B)] = n  # at least one full row
    mask = right_padded_mask(lengths, n)
    x = torch.randn(B, n, d, dtype=torch.float64)
    x = torch.where(mask[..., None], x, garbage * torch.randn_like(x))
    return x, mask


def assert_close(actual: torch.Tensor, expected: torch.Tensor, what: str, seed: int,
                 atol: float = F64_ATOL, rtol: float = F64_RTOL) -> None:
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol,
                               msg=lambda m: f"{what} (seed={seed}): {m}")


def assert_near(got: dict, want: dict, rel: float, where: str, seed: int) -> None:
    """Every output and gradient of `got` within rel * max |want| + 1e-5 of `want`, label by
    label. The 1e-5 is for gradients that are 0 by structure, which float32 rounding leaves at up
    to ~1e-6: in blocks of two under "forward" each query has one key, so p = 1 and the scores
    get no gradient."""
    assert got.keys() == want.keys(), f"{where}: {sorted(got.keys() ^ want.keys())}"
    for label, w in want.items():
        assert w is not None and got[label] is not None, f"{label} got no gradient ({where})"
        assert got[label].dtype == w.dtype, f"{label}: {got[label].dtype} vs {w.dtype} ({where})"
        bound = rel * w.abs().max().item() + 1e-5
        err = (got[label].double() - w.double()).abs().max().item()
        assert err <= bound, f"{label}, {where}: error {err:.3g} > {bound:.3g} (seed={seed})"


def weighted_loss(tokens: torch.Tensor, sentence: torch.Tensor, w_tok: torch.Tensor, w_sent: torch.Tensor):
    """A scalar whose gradient reaches every output element with a different weight."""
    return (tokens * w_tok).sum() + (sentence * w_sent).sum()


def outputs_and_grads(model, x, mask, w_tok, w_sent) -> dict[str, torch.Tensor | None]:
    """Everything two runs of an encoder should agree on, by label: "tokens", "sentence",
    "d x" (the embeddings' gradient) and "d <parameter name>" for every parameter, the
    gradients being those of weighted_loss(tokens, sentence, w_tok, w_sent)."""
    model.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    tokens, sentence = model(x, mask)
    weighted_loss(tokens, sentence, w_tok, w_sent).backward()
    results = {"tokens": tokens.detach(), "sentence": sentence.detach(), "d x": x.grad}
    module = getattr(model, "_orig_mod", model)  # torch.compile's wrapper prefixes the names
    results.update({f"d {name}": p.grad for name, p in module.named_parameters()})
    return results


def assert_same_results(got: dict, want: dict, where: str, seed: int, **tol) -> None:
    """outputs_and_grads of two runs agree label by label; every parameter got a gradient."""
    assert got.keys() == want.keys(), f"{where}: {sorted(got.keys() ^ want.keys())}"
    for label, w in want.items():
        assert w is not None and got[label] is not None, f"{label} got no gradient ({where})"
        assert_close(got[label], w, f"{label}, {where}", seed, **tol)


def assert_compiled_matches_eager(model, compiled, x, mask, where: str, seed: int, **tol) -> dict:
    """A compiled encoder and its eager module (sharing parameters) agree on (x, mask): outputs
    and every gradient of a weighted loss with random weights in x's dtype and on its device.
    Returns the compiled run's outputs_and_grads."""
    B, n = mask.shape
    w_tok = torch.randn(B, n, model.token_dim, dtype=x.dtype, device=x.device)
    w_sent = torch.randn(B, model.sentence_dim, dtype=x.dtype, device=x.device)
    want = outputs_and_grads(model, x, mask, w_tok, w_sent)
    got = outputs_and_grads(compiled, x, mask, w_tok, w_sent)
    assert_same_results(got, want, where, seed, **tol)
    return got


def assert_batch_independent(model, d_in: int, L: int, extra_len: int, seed: int, name: str = "") -> None:
    """The same sentence (length L) alone and inside a batch padded to L + extra_len (garbage at
    padding) gives the same token vectors and sentence vector, and padding outputs are 0."""
    x1, m1 = random_batch(1, L, d_in, lengths=[L])
    n = L + extra_len
    B = random.randint(2, 4)
    row = random.randrange(B)
    lengths = [random.randint(0, n) for _ in range(B)]
    lengths[row] = L
    xb, mb = random_batch(B, n, d_in, lengths=lengths)
    xb[row, :L] = x1[0]
    with torch.no_grad():
        t1, s1 = model(x1, m1)
        tb, sb = model(xb, mb)
    assert_close(tb[row, :L], t1[0], f"{name} tokens of a sentence of length {L} in a batch of n={n}", seed)
    assert_close(sb[row], s1[0], f"{name} sentence vector, length {L} in a batch of n={n}", seed)
    assert torch.all(tb[~mb] == 0), f"token outputs at padding are not 0 (seed={seed})"
