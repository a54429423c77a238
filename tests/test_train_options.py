"""The options of issue 67 that bring a run closer to the authors' code: --block-len dataset (one
r per run from the training sentences' lengths, kept for blosa eval and encode), --sst-phrases
all, --batching random, --adadelta-rho and --adadelta-eps; and old run folders without them."""
import dataclasses
import json
import math
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from torch import nn

from blosa.cli import _config, parser
from blosa.data.batching import BucketBatchSampler, RandomBatchSampler, training_sampler
from blosa.data.datasets import DATASETS, Dataset
from blosa.data.examples import Pair, Passage, Sentence
from blosa.nn import MaskedBlockSelfAttention
from blosa.train.build import build_optimizer, read_dataset
from blosa.train.config import FROM_DATA, TrainConfig, validate
from blosa.train.dataset_block_len import (LengthStats, block_len_as_coded, length_stats,
                                           training_lengths)
from blosa.train.inference import evaluate_run, load_run
from blosa.train.run import train
from blosa.train.run_dir import RunDir, RunDirError
from test_train_resume import assert_same_run, dev_records

TINY = dict(hidden=4, head_hidden=4, vectors="none", dropout=0.0, optimizer="adam", lr=3e-3,
            batch_size=16)
NEW_FIELDS = ("block_len_dataset", "adadelta_rho", "adadelta_eps", "batching", "sst_phrases")


def block_len_by_hand(lengths, batch_size):
    """ceil(cbrt(2 (mean + std sqrt(2 ln B)))) + 1 in plain Python, the population std, and the
    cube root's ceiling as the least integer whose cube reaches 2 n_est."""
    mean = sum(lengths) / len(lengths)
    std = math.sqrt(sum((x - mean) ** 2 for x in lengths) / len(lengths))
    n_est = mean + std * math.sqrt(2 * math.log(batch_size))
    r = 1
    while r ** 3 < 2 * n_est:
        r += 1
    return r + 1


# ---------------------------------------------------------------- --block-len dataset


@pytest.mark.parametrize("seed", range(8))
def test_block_len_matches_the_formula_by_hand(seed):
    rng = random.Random(seed)
    lengths = [rng.randint(0 if seed % 2 else 1, rng.choice([5, 30, 200]))
               for _ in range(rng.randint(1, 500))]
    lengths[0] = max(lengths[0], 1)  # at least one token somewhere
    batch_size = rng.choice([1, 2, 32, 64, rng.randint(1, 512)])
    stats = length_stats(lengths)
    assert stats.count == len(lengths)
    assert stats.mean == pytest.approx(np.mean(lengths)) and stats.std == pytest.approx(
        np.std(lengths))  # numpy's default: the population std, as the authors' np.std
    assert block_len_as_coded(stats, batch_size) == block_len_by_hand(lengths, batch_size)


@pytest.mark.parametrize("lengths, batch_size, r", [
    ([10] * 7, 32, 4),  # std 0: cbrt(20) = 2.71 -> 3, + 1
    ([2, 4], 64, 4),  # n_est = 3 + 1 * sqrt(2 ln 64) = 5.88; cbrt(11.77) = 2.27 -> 3, + 1
    ([1], 1, 3),  # B = 1: n_est = mean = 1; cbrt(2) = 1.26 -> 2, + 1
    # 2 n_est = 27 exactly: cbrt 3, so r = 4 (the float 27 ** (1/3) = 3.0000000000000004 would
    # round up to 4, r = 5)
    ([13, 14], 1, 4),
    # mean 15, std 17.32: n_est = 15 + 17.32 * sqrt(2 ln 8) = 50.3; cbrt(100.6) = 4.65 -> 5, + 1
    ([5] * 3 + [45], 8, 6),
])
def test_block_len_by_hand_computed_cases(lengths, batch_size, r):
    assert block_len_as_coded(length_stats(lengths), batch_size) == r


def test_block_len_refuses_no_tokens():
    with pytest.raises(ValueError, match="hold no tokens"):
        block_len_as_coded(length_stats([0, 0, 0]), 32)
    with pytest.raises(ValueError, match="no lengths"):
        length_stats([])
    with pytest.raises(ValueError, match="batch_size"):
        block_len_as_coded(LengthStats(3, 4.0, 1.0), 0)


def test_training_lengths_count_every_sequence_the_encoder_reads():
    rng = random.Random(5)
    words = lambda: tuple("w" for _ in range(rng.randint(0, 9)))  # noqa: E731
    sentences = [Sentence(words(), 0) for _ in range(6)]
    pairs = [Pair(words(), words(), 1) for _ in range(4)]
    passages = [Passage(words(), (words(), words(), words()), 2) for _ in range(3)]
    spec = DATASETS["trec"]
    assert training_lengths(Dataset(spec, {"train": sentences}, ())) == [
        len(e.tokens) for e in sentences]
    assert training_lengths(Dataset(spec, {"train": pairs}, ())) == [
        n for p in pairs for n in (len(p.first), len(p.second))]
    assert training_lengths(Dataset(spec, {"train": passages}, ())) == [
        n for p in passages for n in (len(p.question), *map(len, p.sentences))]
    # SST: the whole sentences, not the phrases the train split holds
    phrases = [Sentence(("a",), 1)] * 50
    assert training_lengths(Dataset(spec, {"train": phrases}, (), sentences)) == [
        len(e.tokens) for e in sentences]


def write_generic(path, rng, n, low, high):
    """`label sentence` lines of low..high plain words (so tokens are the blank-split words)."""
    words = "good great fine bad awful poor movie film plot actor the a is was".split()
    lines = []
    for _ in range(n):
        label = rng.choice(["pos", "neg"])
        tokens = [rng.choice(words[:3] if label == "pos" else words[3:6])]
        tokens += [rng.choice(words[6:]) for _ in range(rng.randint(low, high) - 1)]
        lines.append(f"{label} {' '.join(tokens)}")
    path.write_text("\n".join(lines) + "\n")
    return [len(line.split()) - 1 for line in lines]


def block_lens(model):
    return {m.block_len for m in model.modules() if isinstance(m, MaskedBlockSelfAttention)}


def test_dataset_block_len_is_kept_for_eval_and_encode(tmp_path):
    rng = random.Random(31)
    train_file, test_file = tmp_path / "train.txt", tmp_path / "test.txt"
    lengths = write_generic(train_file, rng, 200, 3, 40)
    write_generic(test_file, rng, 40, 1, 4)  # short test sentences: "auto" would pick r = 2
    r = block_len_by_hand(lengths, 16)  # the whole training file, before the dev split
    assert r == 6
    config = TrainConfig(task="generic", train_file=str(train_file), test_file=str(test_file),
                         block_len="dataset", max_steps=6, eval_every=3, **TINY)
    out = tmp_path / "run"
    result = train(config, out, quiet=True)
    saved = json.loads((out / "config.json").read_text())
    assert saved["block_len"] == "dataset" and saved["block_len_dataset"] == r
    assert f"block length r = {r} for every batch" in (out / "log.txt").read_text()
    assert block_lens(load_run(out)[-1]) == {r}
    assert evaluate_run(out, "test") == {"split": "test", **result["test"]}
    # New text, and even other training data, do not move it: eval and encode use the saved r.
    write_generic(train_file, rng, 200, 1, 2)
    assert block_lens(load_run(out)[-1]) == {r}
    # A resumed run must begin from the same data: here the lengths changed, and r with them.
    (out / "result.json").unlink()
    with pytest.raises(RunDirError, match=f"began with block length {r}, its training data "
                                          "gives 3 now"):
        train(config, out, resume=True, quiet=True)


def test_block_len_dataset_is_no_setting_to_compare():
    a = TrainConfig(task="trec", block_len="dataset")
    b = dataclasses.replace(a, block_len_dataset=5)
    assert set(FROM_DATA) == {"block_len_dataset"}
    assert a.differences(b) == {}  # --resume compares it once the data is read (run.py)
    assert a.differences(dataclasses.replace(b, block_len="7")) == {"block_len": ("dataset", "7")}
    for bad in (dict(block_len="auto", block_len_dataset=5),
                dict(block_len="dataset", block_len_dataset=0)):
        with pytest.raises(ValueError, match="--block-len: a resolved dataset block length"):
            validate(TrainConfig(task="trec", **bad).resolved())


# ---------------------------------------------------------------- --sst-phrases


def test_sst_phrases_all_reaches_the_data(tmp_path):
    (tmp_path / "sst").mkdir()
    tree = "(3 (3 (2 a) (4 b)) (2 c))\n"
    for split in ("train", "dev", "test"):
        (tmp_path / "sst" / f"{split}.txt").write_text(tree * (3 if split == "train" else 1))
    train = {phrases: read_dataset(TrainConfig(task="sst2", data_dir=str(tmp_path),
                                               sst_phrases=phrases))[0].splits["train"]
             for phrases in ("distinct", "all", "none")}
    kept = [Sentence(("b",), 1), Sentence(("a", "b"), 1), Sentence(("a", "b", "c"), 1)]
    assert train == {"distinct": kept, "all": kept * 3, "none": [kept[-1]] * 3}


# ---------------------------------------------------------------- --batching


@pytest.mark.parametrize("seed", range(3))
def test_batching_picks_the_sampler(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 50, int(rng.integers(40, 300))).tolist()
    world = int(rng.integers(1, 4))
    for batching, kind in (("bucket", BucketBatchSampler), ("random", RandomBatchSampler)):
        config = TrainConfig(task="trec", batching=batching, seed=seed,
                             batch_size=int(rng.integers(world, 40)))
        samplers = [training_sampler(config.batching, lengths, config.batch_size, config.seed,
                                     rank, world) for rank in range(world)]
        assert all(type(s) is kind for s in samplers)
        s = samplers[-1]
        assert (s.batch_size, s.seed, s.rank, s.world_size, s.shuffle) == (
            config.batch_size, seed, world - 1, world, True)
        expected = kind(lengths, config.batch_size, seed=seed) if kind is RandomBatchSampler \
            else kind(lengths, config.batch_size, True, seed=seed)
        if world == 1:
            assert list(s) == list(expected)


# ---------------------------------------------------------------- --adadelta-rho, --adadelta-eps


@pytest.mark.parametrize("seed", range(4))
def test_adadelta_constants_reach_the_optimizer(seed):
    rng = random.Random(seed)
    rho = rng.choice([None, rng.uniform(0, 0.999)])
    eps = rng.choice([None, 10 ** rng.uniform(-10, -3)])
    config = TrainConfig(task="trec", adadelta_rho=rho, adadelta_eps=eps).resolved()
    assert config.optimizer == "adadelta"
    validate(config)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    optimizer = build_optimizer(config, model)
    assert isinstance(optimizer, torch.optim.Adadelta)
    for group in optimizer.param_groups:  # None: torch's own defaults
        assert group["rho"] == (0.9 if rho is None else rho)
        assert group["eps"] == (1e-6 if eps is None else eps)
    # one step with these constants is Adadelta's step with them
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(seed))
    copies = [p.detach().clone().requires_grad_() for p in model.parameters()]
    # The trainer's L2 (--weight-decay) is on the weight matrices only, as build_optimizer says.
    reference = torch.optim.Adadelta(
        [dict(params=copies[0::2], weight_decay=config.weight_decay),
         dict(params=copies[1::2], weight_decay=0.0)], lr=config.lr,
        rho=0.9 if rho is None else rho, eps=1e-6 if eps is None else eps)
    for opt, params in ((optimizer, list(model.parameters())), (reference, copies)):
        loss = nn.functional.linear(nn.functional.linear(x, params[0], params[1]), params[2],
                                    params[3]).square().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for a, b in zip(model.parameters(), copies):
        assert torch.allclose(a, b, atol=0, rtol=1e-6)


def test_the_flags_reach_the_config():
    args = parser().parse_args(["train", "--task", "sst2", "--block-len", "dataset",
                                "--sst-phrases", "all", "--batching", "random",
                                "--optimizer", "adadelta", "--adadelta-rho", "0.95",
                                "--adadelta-eps", "1e-8"])
    config = _config(args).resolved()
    validate(config)
    assert (config.block_len, config.sst_phrases, config.batching, config.adadelta_rho,
            config.adadelta_eps, config.block_len_dataset) == (
        "dataset", "all", "random", 0.95, 1e-8, None)
    defaults = _config(parser().parse_args(["train", "--task", "sst2"]))
    assert (defaults.block_len, defaults.sst_phrases, defaults.batching, defaults.adadelta_rho,
            defaults.adadelta_eps) == (None, "distinct", "bucket", None, None)


@pytest.mark.parametrize("encoder, block_len", [
    ("biblosan", "dataset"), ("biblosan_no_local", "dataset"), ("biblosan_no_global", "dataset"),
    ("biblosan_no_mblosa", "auto"), ("disan", "auto"), ("bilstm", "auto")])
def test_the_block_length_defaults_to_the_datasets_where_there_are_blocks(tmp_path, encoder,
                                                                           block_len):
    for task, preset in (("trec", "best"), ("sst2", None), ("generic", "paper")):
        config = TrainConfig(task=task, encoder=encoder, preset=preset).resolved()
        assert config.block_len == block_len
        validate(dataclasses.replace(config, train_file="x.txt") if task == "generic" else config)
        given = TrainConfig(task=task, encoder=encoder, preset=preset, block_len="4").resolved()
        assert given.block_len == "4"  # a flag wins over the default
    # A run folder from before the default changed names no block length: "auto", as it ran.
    old = json.loads(TrainConfig(task="trec", encoder=encoder).resolved().to_json())
    del old["block_len"]
    (tmp_path / "config.json").write_text(json.dumps(old))
    assert TrainConfig.load(tmp_path / "config.json").block_len == "auto"


# ---------------------------------------------------------------- old run folders


def test_an_old_config_json_takes_the_defaults(tmp_path):
    """A run folder from before these options (its config.json without them) loads with their
    defaults, which are today's behaviour, and resumes with today's flags."""
    config = TrainConfig(task="trec", seed=4).resolved()
    old = json.loads(config.to_json())
    for name in NEW_FIELDS:
        old.pop(name)
    (tmp_path / "config.json").write_text(json.dumps(old))
    loaded = TrainConfig.load(tmp_path / "config.json")
    assert loaded == config
    assert (loaded.block_len_dataset, loaded.adadelta_rho, loaded.adadelta_eps, loaded.batching,
            loaded.sst_phrases) == (None, None, None, "bucket", "distinct")
    assert RunDir(tmp_path).check(config, resume=True) is True


# ---------------------------------------------------------------- all of them, killed and resumed


def random_tree(rng, words) -> str:
    if len(words) == 1:
        return f"({rng.randint(0, 4)} {words[0]})"
    cut = rng.randint(1, len(words) - 1)
    return f"({rng.randint(0, 4)} {random_tree(rng, words[:cut])} {random_tree(rng, words[cut:])})"


def write_sst_trees(root, rng):
    """sst/{train,dev,test}.txt of random trees over few words: phrases repeat (so --sst-phrases
    all differs from distinct) and sentence lengths vary (1-8 words). At most 25 * 15 training
    nodes: 16 steps an epoch in batches of 24."""
    words = "good bad film plot the a".split()
    for split, n in (("train", 25), ("dev", 30), ("test", 30)):
        trees = [random_tree(rng, [rng.choice(words) for _ in range(rng.randint(1, 8))])
                 for _ in range(n)]
        (root / "sst").mkdir(exist_ok=True)
        (root / "sst" / f"{split}.txt").write_text("\n".join(trees) + "\n")


def test_sigkill_then_resume_with_every_option(tmp_path):
    """tests/test_train_resume.py's check (a run killed with SIGKILL after an epoch's end and
    resumed ends bit for bit as an uninterrupted one) with all four options at once, on SST-2
    trees the test writes (Adadelta is SST's default optimizer)."""
    write_sst_trees(tmp_path, random.Random(random.randrange(2**32)))
    data = read_dataset(TrainConfig(task="sst2", data_dir=str(tmp_path), sst_phrases="all"))[0]
    steps_per_epoch = -(-len(data.splits["train"]) // 24)
    assert len(data.splits["train"]) > len(set(data.splits["train"]))  # duplicates kept
    argv = [sys.executable, "-m", "blosa", "train", "--task", "sst2", "--data-dir", str(tmp_path),
            "--sst-phrases", "all", "--block-len", "dataset", "--batching", "random",
            "--adadelta-rho", "0.95", "--adadelta-eps", "1e-8", "--hidden", "6",
            "--head-hidden", "6", "--vectors", "none", "--batch-size", "24", "--dropout", "0.3",
            "--word-dropout", "0.2", "--lr-schedule", "cosine", "--max-steps", "36",
            "--eval-every", "4", "--seed", "3", "--quiet", "--out"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    subprocess.run([*argv, str(whole)], check=True, capture_output=True)
    config = TrainConfig.load(whole / "config.json")
    r = block_len_by_hand([len(e.tokens) for e in data.train_sentences], 24)
    assert (config.sst_phrases, config.batching, config.adadelta_rho, config.adadelta_eps,
            config.block_len_dataset) == ("all", "random", 0.95, 1e-8, r)

    proc = subprocess.Popen([*argv, str(killed)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    # Evaluations (one every 4 steps) before the kill: last.pt is written after the dev record,
    # so it may be the checkpoint before, which must be past the first epoch's end too.
    kill_after = steps_per_epoch // 4 + 2
    assert kill_after * 4 < 36  # killed before the run ends
    while len(dev_records(killed)) < kill_after and proc.poll() is None:
        assert time.monotonic() < deadline, "the run made no checkpoints in time"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed"
    step_at_kill = torch.load(killed / "last.pt", weights_only=True)["step"]
    assert steps_per_epoch < step_at_kill < 36
    subprocess.run([*argv, str(killed), "--resume"], check=True, capture_output=True)
    assert_same_run(whole, killed)
