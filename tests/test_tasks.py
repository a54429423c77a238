"""blosa.tasks: batches, heads, losses and predictions of each task family, against values
computed by hand (numpy) or by running the encoder directly; tiny encoders and vocabularies."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from blosa.data.examples import Pair, Passage, Sentence
from blosa.data.vocab import Vocab
from blosa.nn import SentenceEncoder, build_encoder
from blosa.tasks import (TASK_FAMILIES, ClassificationTask, NLITask, RelatednessTask,
                         SelectionTask, build_task, nli_features, relatedness_features,
                         selection_features, target_distribution)

WORDS = "the a cat dog sat ran on under mat log good bad big small red blue what who why".split()
D_EMB = 8
# Tiny encoders; Bi-BloSAN with a fixed block length (under "auto" r follows the padded length,
# so a sentence's output would depend on the batch it is in, by design).
ENCODER_KW = {"multi_head": {}, "biblosan": {"block_len": 2}}


def make_encoder_fn(name: str = "multi_head"):
    return lambda d: build_encoder(name, d, 8, **ENCODER_KW[name])


@pytest.fixture(scope="module")
def vocab() -> Vocab:
    return Vocab.build([WORDS])


def random_tokens(rng: np.random.Generator, lo: int = 1, hi: int = 7) -> tuple[str, ...]:
    return tuple(rng.choice(WORDS, size=int(rng.integers(lo, hi + 1))).tolist())


def make_model(task, vocab, seed: int, encoder: str = "multi_head", **kw):
    torch.manual_seed(seed)
    embedding = nn.Embedding(len(vocab), D_EMB, padding_idx=0)
    return task.build_model(embedding, make_encoder_fn(encoder), hidden=16, **kw).eval()


def log_softmax_np(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def count_encoders(model: nn.Module) -> int:
    return sum(isinstance(m, SentenceEncoder) for m in model.modules())


# ----------------------------------------------------------------------------- the registry


def test_build_task_by_family():
    for family, cls in TASK_FAMILIES.items():
        spec = SimpleNamespace(name=f"x_{family}", family=family, num_classes=5)
        task = build_task(spec)
        assert type(task) is cls and task.family == family
        assert task.main_metric in task.metric_names
    assert build_task(SimpleNamespace(name="t", family="classification", num_classes=6)
                      ).num_classes == 6
    with pytest.raises(ValueError, match="dataset 'odd' has family 'regression'"):
        build_task(SimpleNamespace(name="odd", family="regression", num_classes=2))


def test_every_registered_dataset_has_a_task():
    from blosa.data.datasets import DATASETS
    for name, spec in DATASETS.items():
        if name == "generic":  # its classes are those of the files it is loaded from
            with pytest.raises(ValueError, match="dataset 'generic': classification: num_classes"):
                build_task(spec)
            continue
        task = build_task(spec)
        assert task.family == spec.family, name
        if spec.family != "selection":
            assert task.num_classes == spec.num_classes == len(spec.label_names), name


def test_metrics_is_names_and_callable():
    task = RelatednessTask(5)
    assert task.metric_names == ("pearson", "spearman", "mse") and task.main_metric == "pearson"
    assert task.higher_is_better
    out = task.metrics(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.5, 2.0, 5.0]))
    assert list(out) == list(task.metric_names) and all(isinstance(v, float) for v in out.values())
    assert ClassificationTask(2).metrics([1, 0], [1, 1]) == {"accuracy": 0.5}


def test_length_is_longest_sentence_at_least_one():
    assert ClassificationTask(2).length(Sentence(("a", "b", "c"), 1)) == 3
    assert ClassificationTask(2).length(Sentence((), 1)) == 1
    assert NLITask().length(Pair(("a",), ("b", "c"), 0)) == 2
    assert RelatednessTask().length(Pair(("a", "b", "c"), ("b",), 2.5)) == 3
    passage = Passage(("who", "a"), (("a",), ("a", "b", "c", "d"), ("b",)), 1)
    assert SelectionTask().length(passage) == 4


def test_bad_construction_and_model_args(vocab):
    with pytest.raises(ValueError, match="num_classes must be an int >= 2"):
        ClassificationTask(1)
    task = ClassificationTask(3)
    emb = nn.Embedding(len(vocab), D_EMB)
    with pytest.raises(TypeError, match="embedding must be a torch.nn.Embedding"):
        task.build_model(torch.zeros(3, 3), make_encoder_fn())
    with pytest.raises(ValueError, match="hidden must be an int >= 1"):
        task.build_model(emb, make_encoder_fn(), hidden=0)
    with pytest.raises(ValueError, match="dropout must be in"):
        task.build_model(emb, make_encoder_fn(), dropout=1.0)
    with pytest.raises(TypeError, match="without an int token_dim"):
        task.build_model(emb, lambda d: nn.Linear(d, d))


# ----------------------------------------------------------------------------- classification


def test_classification_collate(vocab):
    examples = [Sentence(("the", "cat", "sat"), 2), Sentence(("Dog",), 0),
                Sentence(("zzz", "a"), 1)]
    batch = ClassificationTask(3).collate(examples, vocab)
    assert set(batch) == {"ids", "mask", "label"}
    assert batch["ids"].shape == (3, 3) and batch["ids"].dtype == torch.long
    assert batch["mask"].dtype == torch.bool
    assert batch["mask"].sum(1).tolist() == [3, 1, 2]
    for b, ex in enumerate(examples):
        n = len(ex.tokens)
        assert batch["ids"][b, :n].tolist() == vocab.encode(ex.tokens)
        assert (batch["ids"][b, n:] == Vocab.PAD).all()
    assert batch["ids"][2, 0] == Vocab.UNK
    assert batch["label"].tolist() == [2, 0, 1] and batch["label"].dtype == torch.long


def test_classification_collate_errors(vocab):
    task = ClassificationTask(3)
    with pytest.raises(ValueError, match="example 1 has label 3, outside"):
        task.collate([Sentence(("a",), 0), Sentence(("a",), 3)], vocab)
    with pytest.raises(ValueError, match="example 0 has label 1.5, not a class index"):
        task.collate([Sentence(("a",), 1.5)], vocab)
    with pytest.raises(TypeError, match="example 0 must be a Sentence"):
        task.collate([Pair(("a",), ("b",), 0)], vocab)
    with pytest.raises(ValueError, match="at least one example"):
        task.collate([], vocab)


@pytest.mark.parametrize("seed", range(3))
def test_classification_output_and_loss_by_hand(vocab, seed):
    rng = np.random.default_rng(seed)
    C = int(rng.integers(2, 6))
    task = ClassificationTask(C)
    examples = [Sentence(random_tokens(rng), int(rng.integers(0, C))) for _ in range(5)]
    batch = task.collate(examples, vocab)
    model = make_model(task, vocab, seed)
    logits = model(batch)
    assert logits.shape == (5, C)
    z = logits.detach().double().numpy()
    y = batch["label"].numpy()
    expected = -log_softmax_np(z)[np.arange(5), y].mean()
    assert task.loss(logits, batch).item() == pytest.approx(expected, rel=1e-5)
    assert task.predict(logits).tolist() == z.argmax(1).tolist()
    assert task.target(batch) is batch["label"]


@pytest.mark.parametrize("encoder", sorted(ENCODER_KW))
@pytest.mark.parametrize("seed", range(2))
def test_classification_padding_does_not_change_output(vocab, encoder, seed):
    rng = np.random.default_rng(10 + seed)
    task = ClassificationTask(4)
    short = Sentence(random_tokens(rng, 2, 3), 1)
    others = [Sentence(random_tokens(rng, 6, 9), 0) for _ in range(3)]
    model = make_model(task, vocab, seed, encoder)
    with torch.no_grad():
        alone = model(task.collate([short], vocab))[0]
        padded = model(task.collate([others[0], short, *others[1:]], vocab))[1]
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- NLI


def pair_examples(rng, B: int, label) -> list[Pair]:
    return [Pair(random_tokens(rng), random_tokens(rng), label()) for _ in range(B)]


@pytest.mark.parametrize("seed", range(2))
def test_nli_head_input_is_the_four_features(vocab, seed):
    rng = np.random.default_rng(20 + seed)
    task = NLITask()
    batch = task.collate(pair_examples(rng, 4, lambda: int(rng.integers(0, 3))), vocab)
    model = make_model(task, vocab, seed)
    seen = []
    model.head.hidden.register_forward_pre_hook(lambda mod, args: seen.append(args[0]))
    with torch.no_grad():
        logits = model(batch)
        # The encoder run by hand on each side.
        _, s1 = model.encoder(model.embedding(batch["ids1"]), batch["mask1"])
        _, s2 = model.encoder(model.embedding(batch["ids2"]), batch["mask2"])
    assert logits.shape == (4, 3)
    assert len(seen) == 1 and seen[0].shape == (4, 4 * model.encoder.sentence_dim)
    torch.testing.assert_close(seen[0], torch.cat([s1, s2, s1 - s2, s1 * s2], dim=1))
    torch.testing.assert_close(nli_features(s1, s2), seen[0])
    # loss: cross-entropy by hand
    z = logits.double().numpy()
    expected = -log_softmax_np(z)[np.arange(4), batch["label"].numpy()].mean()
    assert task.loss(logits, batch).item() == pytest.approx(expected, rel=1e-5)


def swapped(batch: dict) -> dict:
    return {**batch, "ids1": batch["ids2"], "mask1": batch["mask2"],
            "ids2": batch["ids1"], "mask2": batch["mask1"]}


@pytest.mark.parametrize("task", [NLITask(), RelatednessTask(5)], ids=["nli", "relatedness"])
def test_pair_models_share_one_encoder(vocab, task):
    rng = np.random.default_rng(30)
    label = (lambda: int(rng.integers(0, 3))) if task.family == "nli" else (
        lambda: float(rng.uniform(1, 5)))
    batch = task.collate(pair_examples(rng, 4, label), vocab)
    model = make_model(task, vocab, 30)
    assert count_encoders(model) == 1
    standalone = build_encoder("multi_head", D_EMB, 8)
    n_enc = sum(p.numel() for p in model.encoder.parameters())
    assert n_enc == sum(p.numel() for p in standalone.parameters())
    n_all = sum(p.numel() for p in model.parameters())
    assert n_all == (n_enc + model.embedding.weight.numel()
                     + sum(p.numel() for p in model.head.parameters()))
    with torch.no_grad():
        out, out_swapped = model(batch), model(swapped(batch))
    if task.family == "nli":  # [s1; s2; s1 - s2; s1 * s2]: order matters
        assert (out - out_swapped).abs().max() > 1e-4
    else:  # [s1 * s2; |s1 - s2|] is symmetric
        torch.testing.assert_close(out, out_swapped)


def test_nli_activation_option(vocab):
    model = make_model(NLITask(), vocab, 0, activation="elu")
    assert model.head.hidden.act is F.elu
    assert make_model(NLITask(), vocab, 0).head.hidden.act is F.relu


@pytest.mark.parametrize("seed", range(2))
def test_nli_padding_does_not_change_output(vocab, seed):
    rng = np.random.default_rng(40 + seed)
    task = NLITask()
    pair = Pair(random_tokens(rng, 1, 2), random_tokens(rng, 2, 3), 1)
    longer = [Pair(random_tokens(rng, 5, 8), random_tokens(rng, 5, 8), 0) for _ in range(2)]
    model = make_model(task, vocab, seed, "biblosan")
    with torch.no_grad():
        alone = model(task.collate([pair], vocab))[0]
        padded = model(task.collate([longer[0], pair, longer[1]], vocab))[1]
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- relatedness


def test_target_distribution_known_values():
    p = target_distribution(torch.tensor([1.0, 2.3, 4.7, 5.0], dtype=torch.float64), 5)
    expected = torch.tensor([[1.0, 0, 0, 0, 0],
                             [0, 0.7, 0.3, 0, 0],
                             [0, 0, 0, 0.3, 0.7],
                             [0, 0, 0, 0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(p, expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("seed", range(3))
def test_target_distribution_random_scores(seed):
    g = torch.Generator().manual_seed(seed)
    K = int(torch.randint(2, 8, (1,), generator=g))
    y = 1 + (K - 1) * torch.rand(50, generator=g, dtype=torch.float64)
    y[:3] = torch.tensor([1.0, float(K), 2.0])  # ends and an integer inside
    p = target_distribution(y, K)
    assert p.shape == (50, K) and (p >= 0).all()
    torch.testing.assert_close(p.sum(1), torch.ones(50, dtype=torch.float64))
    beta = torch.arange(1, K + 1, dtype=torch.float64)
    torch.testing.assert_close(p @ beta, y)  # y = beta^T p
    assert ((p > 0).sum(1) <= 2).all()
    assert (p[:3].max(1).values == 1).all()  # integer scores are one-hot


def test_target_distribution_rejects_bad_scores():
    for bad in ([0.5, 2.0], [2.0, 5.5], [float("nan")], [float("inf")]):
        with pytest.raises(ValueError, match=r"outside \[1, 5\]"):
            target_distribution(torch.tensor(bad), 5)
    with pytest.raises(ValueError, match="1-D floating tensor"):
        target_distribution(torch.ones(2, 2), 5)
    with pytest.raises(ValueError, match="1-D floating tensor"):
        target_distribution(torch.ones(3, dtype=torch.long), 5)
    with pytest.raises(ValueError, match="example 1 has score 6.0"):
        RelatednessTask(5).collate([Pair(("a",), ("b",), 2.0), Pair(("a",), ("b",), 6.0)],
                                   Vocab.build([WORDS]))


@pytest.mark.parametrize("seed", range(3))
def test_relatedness_kl_loss_and_prediction_by_hand(vocab, seed):
    rng = np.random.default_rng(50 + seed)
    K, B = 5, 6
    task = RelatednessTask(K)
    scores = rng.uniform(1, K, size=B)
    scores[:2] = [1.0, 5.0]  # one-hot targets: the p = 0 terms must contribute 0
    batch = task.collate([Pair(random_tokens(rng), random_tokens(rng), float(s))
                          for s in scores], vocab)
    assert batch["label"].dtype == torch.float32
    model = make_model(task, vocab, seed)
    with torch.no_grad():
        out = model(batch)
        feats = model.features(batch)
        _, s1 = model.encoder(model.embedding(batch["ids1"]), batch["mask1"])
        _, s2 = model.encoder(model.embedding(batch["ids2"]), batch["mask2"])
    torch.testing.assert_close(feats, torch.cat([s1 * s2, (s1 - s2).abs()], 1))
    torch.testing.assert_close(relatedness_features(s1, s2), feats)
    assert out.shape == (B, K)
    q = out.double().exp().numpy()
    np.testing.assert_allclose(q.sum(1), 1.0, atol=1e-6)
    # the Appendix C target, written out here independently of target_distribution
    y = batch["label"].double().numpy()
    p = np.zeros((B, K))
    for b in range(B):
        lo = int(np.floor(y[b]))
        p[b, lo - 1] = lo - y[b] + 1
        if lo < K:
            p[b, lo] = y[b] - lo
    pos = p > 0
    kl = np.where(pos, p * np.log(np.where(pos, p, 1.0) / q), 0.0).sum(1).mean()
    assert task.loss(out, batch).item() == pytest.approx(kl, rel=1e-4)
    np.testing.assert_allclose(task.predict(out).double().numpy(), q @ np.arange(1, K + 1),
                               rtol=1e-5)
    assert torch.equal(task.target(batch), batch["label"])


# ----------------------------------------------------------------------------- selection


def random_passage(rng, n_sentences: int, lo: int = 1, hi: int = 6) -> Passage:
    sentences = tuple(random_tokens(rng, lo, hi) for _ in range(n_sentences))
    return Passage(random_tokens(rng, 2, 4), sentences, int(rng.integers(0, n_sentences)))


def test_selection_collate_layout(vocab):
    rng = np.random.default_rng(60)
    examples = [random_passage(rng, 3), random_passage(rng, 1), random_passage(rng, 4)]
    batch = SelectionTask().collate(examples, vocab)
    ls = max(len(s) for ex in examples for s in ex.sentences)
    assert batch["s_ids"].shape == batch["s_mask"].shape == (3, 4, ls)
    assert batch["passage_mask"].tolist() == [[True] * 3 + [False], [True] + [False] * 3,
                                              [True] * 4]
    assert batch["s_count"].tolist() == [3, 1, 4]
    assert batch["label"].tolist() == [ex.answer for ex in examples]
    for b, ex in enumerate(examples):
        assert batch["q_ids"][b, :len(ex.question)].tolist() == vocab.encode(ex.question)
        assert batch["q_mask"][b].sum() == len(ex.question)
        for k in range(4):
            row, m = batch["s_ids"][b, k], batch["s_mask"][b, k]
            if k < len(ex.sentences):
                n = len(ex.sentences[k])
                assert row[:n].tolist() == vocab.encode(ex.sentences[k]) and m.sum() == n
                assert (row[n:] == 0).all()
            else:
                assert (row == 0).all() and not m.any()
    with pytest.raises(TypeError, match="example 0 must be a Passage"):
        SelectionTask().collate([Sentence(("a",), 0)], vocab)


@pytest.mark.parametrize("seed", range(3))
def test_selection_probabilities_and_loss(vocab, seed):
    rng = np.random.default_rng(70 + seed)
    task = SelectionTask()
    examples = [random_passage(rng, 3), random_passage(rng, 1), random_passage(rng, 5),
                random_passage(rng, 2)]
    batch = task.collate(examples, vocab)
    model = make_model(task, vocab, seed)
    assert count_encoders(model) == 2
    assert model.passage_encoder.d_in == 4 * model.encoder.sentence_dim
    with torch.no_grad():
        scores = model(batch)
    assert scores.shape == (4, 5)
    probs = torch.softmax(scores, dim=1)
    keep = batch["passage_mask"]
    assert (probs[~keep] == 0).all()  # exactly 0 at padding sentences
    assert probs[1, 0] == 1.0  # the passage of one sentence
    torch.testing.assert_close(probs.sum(1), torch.ones(4))
    assert torch.isfinite(scores[keep]).all()
    # cross-entropy on each passage's real scores, by hand
    nll = []
    for b, ex in enumerate(examples):
        z = scores[b, :len(ex.sentences)].double().numpy()
        nll.append(-log_softmax_np(z)[ex.answer])
    assert task.loss(scores, batch).item() == pytest.approx(np.mean(nll), rel=1e-5)
    preds = task.predict(scores)
    assert all(0 <= int(p) < len(ex.sentences) for p, ex in zip(preds, examples))


@pytest.mark.parametrize("seed", range(2))
def test_selection_features_and_sentence_vectors(vocab, seed):
    rng = np.random.default_rng(80 + seed)
    task = SelectionTask()
    examples = [random_passage(rng, 2), random_passage(rng, 4, 3, 7)]
    batch = task.collate(examples, vocab)
    model = make_model(task, vocab, seed)
    seen = []
    model.passage_encoder.register_forward_pre_hook(lambda mod, args: seen.append(args))
    with torch.no_grad():
        model(batch)
        u = model.sentence_vectors(batch)
        _, q = model.encoder(model.embedding(batch["q_ids"]), batch["q_mask"])
        for b, ex in enumerate(examples):  # each sentence encoded on its own
            for k, sent in enumerate(ex.sentences):
                ids = torch.tensor([vocab.encode(sent)])
                mask = torch.ones_like(ids, dtype=torch.bool)
                _, alone = model.encoder(model.embedding(ids), mask)
                torch.testing.assert_close(u[b, k], alone[0], atol=1e-5, rtol=0)
    assert (u[0, 2:] == 0).all()
    c, mask = seen[0]
    qe = q[:, None, :].expand_as(u)
    torch.testing.assert_close(c, torch.cat([u, qe, u - qe, u * qe], -1))
    torch.testing.assert_close(selection_features(u, q), c)
    assert torch.equal(mask, batch["passage_mask"])


def test_selection_padding_does_not_change_output(vocab):
    rng = np.random.default_rng(90)
    task = SelectionTask()
    small = random_passage(rng, 2, 1, 3)
    big = random_passage(rng, 6, 5, 8)
    model = make_model(task, vocab, 90, "biblosan")
    with torch.no_grad():
        alone = model(task.collate([small], vocab))[0]
        padded = model(task.collate([big, small], vocab))[1]
    torch.testing.assert_close(padded[:2], alone, atol=1e-5, rtol=0)
    assert torch.isinf(padded[2:]).all()


# ----------------------------------------------------------------------------- tiny models train


def train_losses(task, model, batch, steps: int, lr: float = 1e-2) -> list[float]:
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = task.loss(model(batch), batch)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_classification_model_trains(vocab):
    rng = np.random.default_rng(100)
    # label 1 iff the sentence holds "good", else it holds "bad"
    fill = [w for w in WORDS if w not in ("good", "bad")]
    examples = []
    for i in range(24):
        tokens = list(rng.choice(fill, size=int(rng.integers(2, 6))))
        tokens.insert(int(rng.integers(0, len(tokens) + 1)), "good" if i % 2 else "bad")
        examples.append(Sentence(tuple(tokens), i % 2))
    task = ClassificationTask(2)
    batch = task.collate(examples, vocab)
    losses = train_losses(task, make_model(task, vocab, 100), batch, steps=40)
    assert losses[-1] < 0.3 * losses[0], losses


def test_relatedness_model_trains(vocab):
    rng = np.random.default_rng(101)
    # score 4.6 when both sentences hold the same colour word, else 1.4
    colours = ["red", "blue"]
    examples = []
    for i in range(24):
        a, b = colours[i % 2], colours[(i // 2) % 2]
        examples.append(Pair(random_tokens(rng, 1, 3) + (a,), (b,) + random_tokens(rng, 1, 3),
                             4.6 if a == b else 1.4))
    task = RelatednessTask(5)
    batch = task.collate(examples, vocab)
    losses = train_losses(task, make_model(task, vocab, 101), batch, steps=40)
    assert losses[-1] < 0.5 * losses[0], losses


def test_selection_model_trains(vocab):
    rng = np.random.default_rng(102)
    # the answer is the sentence holding "good"
    fill = [w for w in WORDS if w != "good"]
    examples = []
    for _ in range(12):
        n = int(rng.integers(2, 5))
        answer = int(rng.integers(0, n))
        sentences = [tuple(rng.choice(fill, size=int(rng.integers(2, 5))).tolist())
                     for _ in range(n)]
        sentences[answer] = sentences[answer] + ("good",)
        examples.append(Passage(random_tokens(rng, 2, 3), tuple(sentences), answer))
    task = SelectionTask()
    batch = task.collate(examples, vocab)
    losses = train_losses(task, make_model(task, vocab, 102), batch, steps=40)
    assert losses[-1] < 0.5 * losses[0], losses
