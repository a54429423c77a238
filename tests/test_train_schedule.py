"""--lr-schedule and --word-dropout: the learning rate each step trains at, and which words a
training batch reads as <unk>. (Their survival across a kill: test_train_resume.py.)"""
import math
import random

import pytest
import torch
from torch import nn

from blosa.data import Vocab
from blosa.train.build import build_optimizer, build_scheduler, lr_factor
from blosa.train.config import TrainConfig
from blosa.train.word_dropout import WordDropoutEmbedding


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
def test_the_optimizer_steps_at_the_schedules_rate(schedule):
    rng = random.Random()
    total, lr = rng.randint(3, 40), rng.uniform(1e-4, 1e-1)
    config = TrainConfig(task="trec", lr=lr, lr_schedule=schedule, optimizer="sgd",
                         weight_decay=0.0)
    model = nn.Linear(3, 2)
    optimizer = build_optimizer(config, model)
    scheduler = build_scheduler(config, optimizer, total)
    for step in range(total):
        want = {"constant": lr, "linear": lr * (1 - step / total),
                "cosine": lr * (1 + math.cos(math.pi * step / total)) / 2}[schedule]
        for group in optimizer.param_groups:
            assert group["lr"] == pytest.approx(want, rel=1e-12, abs=1e-15), step
        model(torch.randn(4, 3)).sum().backward()
        optimizer.step()
        scheduler.step()


def test_decays_start_at_the_full_rate_and_fall_to_near_zero():
    total = random.randint(10, 1000)
    for schedule in ("linear", "cosine"):
        factors = [lr_factor(schedule, s, total) for s in range(total)]
        assert factors[0] == 1.0
        assert all(a > b for a, b in zip(factors, factors[1:]))
    assert lr_factor("linear", total - 1, total) == pytest.approx(1 / total)
    last_cosine = (1 - math.cos(math.pi / total)) / 2
    assert lr_factor("cosine", total - 1, total) == pytest.approx(last_cosine)
    assert lr_factor("cosine", total, 2 * total) == pytest.approx(0.5)


def _embedding(p, vocab_size=50, dim=5):
    weight = torch.randn(vocab_size, dim)
    weight[Vocab.PAD] = 0
    embedding = WordDropoutEmbedding.from_pretrained(weight, freeze=False, padding_idx=Vocab.PAD)
    embedding.word_dropout = p
    return embedding, weight


def _ids(batch=64, length=30, vocab_size=50):
    ids = torch.randint(2, vocab_size, (batch, length))
    lengths = torch.randint(1, length + 1, (batch,))
    ids[torch.arange(length) >= lengths[:, None]] = Vocab.PAD
    return ids


def test_word_dropout_reads_a_share_of_words_as_unk_and_leaves_padding():
    p = random.uniform(0.05, 0.5)
    embedding, weight = _embedding(p)
    ids = _ids()
    out = embedding.train()(ids)
    real = ids != Vocab.PAD
    unk = (out == weight[Vocab.UNK]).all(-1) & real
    kept = (out == weight[ids]).all(-1)
    assert (kept | unk).all()  # every vector is the word's own or <unk>'s
    assert (out[~real] == 0).all()  # padding stays padding
    n = real.sum().item()
    share = unk.sum().item() / n
    assert abs(share - p) < 5 * math.sqrt(p * (1 - p) / n), (share, p)  # 5 sigma


def test_word_dropout_is_plain_embedding_in_eval_and_at_zero():
    embedding, weight = _embedding(random.uniform(0.1, 0.9))
    ids = _ids()
    plain = nn.Embedding.from_pretrained(weight, padding_idx=Vocab.PAD)
    assert torch.equal(embedding.eval()(ids), plain(ids))
    embedding.train().word_dropout = 0.0
    assert torch.equal(embedding(ids), plain(ids))
    assert embedding.state_dict().keys() == plain.state_dict().keys()  # checkpoints load as before


def test_word_dropout_repeats_with_the_seed():
    embedding, _ = _embedding(0.3)
    ids = _ids()
    torch.manual_seed(7)
    first = embedding.train()(ids)
    torch.manual_seed(7)
    assert torch.equal(embedding(ids), first)
