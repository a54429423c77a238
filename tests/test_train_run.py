"""What a run leaves and prints, and the options around it: the run folder's files, the last line,
cross-validation, --skip-bad-lines, --amp bf16 and --compile on CPU, blosa eval and encode."""
import io
import json
import random
import subprocess
import sys

import numpy as np
import pytest

from blosa.cli import _config, main, parser
from blosa.train.config import TrainConfig
from blosa.train.build import make_splits
from blosa.train.inference import evaluate_run, length_bins, load_run
from blosa.train.run import train
from shared_data import requires_shared_data

TINY = dict(hidden=6, head_hidden=6, vectors="glove-50d", dropout=0.0, optimizer="adam",
            lr=3e-3, batch_size=16)
WORDS = "good great fine nice bad awful poor sad movie film plot actor the a is was".split()


def write_generic(path, rng, n, bad_lines=()):
    """`label sentence` lines whose label says whether the sentence holds a good word."""
    lines = []
    for i in range(n):
        label = rng.choice(["pos", "neg"])
        words = rng.sample(WORDS[8:], 3) + [rng.choice(WORDS[:4] if label == "pos" else WORDS[4:8])]
        rng.shuffle(words)
        lines.append(f"{label} {' '.join(words)}")
    for index in bad_lines:
        lines[index] = "pos"  # a label and no sentence: malformed
    path.write_text("\n".join(lines) + "\n")
    return path


def test_run_folder_metrics_and_last_line(tmp_path, capsys):
    rng = random.Random(21)
    train_file = write_generic(tmp_path / "train.txt", rng, 300)
    test_file = write_generic(tmp_path / "test.txt", rng, 80)
    out = tmp_path / "run"
    # No dropout and lr 1e-2: a 6-unit model then learns the task in 40 steps from any seed
    # (with the generic task's dropout 0.4 and lr 3e-3 most seeds stay at chance that long).
    code = main(["train", "--task", "generic", "--train", str(train_file), "--test",
                 str(test_file), "--hidden", "6", "--head-hidden", "6", "--optimizer", "adam",
                 "--lr", "1e-2", "--dropout", "0", "--batch-size", "16", "--max-steps", "40",
                 "--eval-every", "10", "--out", str(out), "--quiet"])
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads((out / "result.json").read_text())
    assert lines[-1] == f"test: accuracy {result['test']['accuracy']:.4f} at the best dev step " \
                        f"{result['best_step']}"
    assert sum(line.startswith("step ") for line in lines) == 4  # one line per evaluation
    assert {"config.json", "vocab.txt", "metrics.jsonl", "log.txt", "curves.png", "last.pt",
            "best.pt", "result.json"} <= {p.name for p in out.iterdir()}
    assert (out / "log.txt").read_text().splitlines() == lines  # what it printed, kept
    assert set(result) == {"task", "encoder", "best_step", "best_epoch", "dev", "test", "seconds",
                           "commit"}
    assert result["test"]["accuracy"] > 0.75  # the good word decides: learnable in 40 steps
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["split"]) for r in records] == [
        (s, split) for s in (10, 20, 30, 40) for split in ("train", "dev")] + [
        (result["best_step"], "test")]
    dev = [r["accuracy"] for r in records if r["split"] == "dev"]
    assert result["dev"]["accuracy"] == max(dev)  # the test is of the best dev checkpoint
    config = TrainConfig.load(out / "config.json")
    assert config.optimizer == "adam" and config.weight_decay == 1e-4  # resolved defaults
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # blosa report: the run's row, whose command gives the run's settings again.
    assert main(["report", str(out)]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"| generic | biblosan | accuracy {100 * result['test']['accuracy']:.1f} |" in row
    command = row.split("`")[1].split()
    assert command[:2] == ["blosa", "train"]
    # (but what the trainer reads off the data: Bi-BloSAN's dataset block length, FROM_DATA)
    assert _config(parser().parse_args(command[1:])).resolved().differences(config) == {}
    assert config.block_len == "dataset" and config.block_len_dataset >= 1


def test_cross_validation_without_a_test_file(tmp_path):
    train_file = write_generic(tmp_path / "all.txt", random.Random(22), 120)
    config = TrainConfig(task="generic", train_file=str(train_file), folds=3, max_steps=6,
                         **TINY)
    result = train(config, tmp_path / "cv", quiet=True)
    assert [f["fold"] for f in result["folds"]] == [0, 1, 2]
    tests = [f["test"]["accuracy"] for f in result["folds"]]
    assert result["mean"]["test"]["accuracy"] == pytest.approx(np.mean(tests))
    assert result["std"]["test"]["accuracy"] == pytest.approx(np.std(tests, ddof=1))
    assert result["test"] == result["mean"]["test"]
    for fold in range(3):  # each fold a run folder of its own
        assert (tmp_path / "cv" / f"fold-{fold}" / "best.pt").exists()
    # eval of a fold rebuilds that fold's held-out split
    assert evaluate_run(tmp_path / "cv" / "fold-1", "test")["accuracy"] == \
        pytest.approx(result["folds"][1]["test"]["accuracy"])


def test_skip_bad_lines(tmp_path, capsys):
    train_file = write_generic(tmp_path / "train.txt", random.Random(23), 100, bad_lines=(4, 50))
    argv = ["train", "--task", "generic", "--train", str(train_file), "--hidden", "4",
            "--head-hidden", "4", "--folds", "2", "--max-steps", "2", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 2
    assert f"{train_file}:5:" in capsys.readouterr().err  # file and 1-based line
    assert not (tmp_path / "a").exists()
    assert main([*argv, "--out", str(tmp_path / "b"), "--skip-bad-lines"]) == 0
    assert "skipped 2 malformed lines" in capsys.readouterr().out


# --compile with Multi-head: how each encoder compiles is tests/test_nn_compile.py's; here, that the
# trainer's switch works, where Bi-BloSAN's many graphs (train and eval, a block length per
# length) would take minutes of Inductor's C++ compiles on a cold cache.
@pytest.mark.parametrize("option", [dict(amp="bf16"), dict(compile=True, encoder="multi_head")])
def test_amp_and_compile_train_on_cpu(tmp_path, option):
    rng = random.Random(24)
    train_file = write_generic(tmp_path / "train.txt", rng, 300)
    test_file = write_generic(tmp_path / "test.txt", rng, 80)
    config = TrainConfig(task="generic", train_file=str(train_file), test_file=str(test_file),
                         max_steps=40, eval_every=20, seed=24, **TINY, **option)
    result = train(config, tmp_path / "run", quiet=True)
    assert result["test"]["accuracy"] > 0.75, result


@requires_shared_data
def test_eval_and_encode(tmp_path):
    out = tmp_path / "run"
    config = TrainConfig(task="trec", max_steps=20, eval_every=20, seed=25, **TINY)
    result = train(config, out, quiet=True)
    assert evaluate_run(out, "test") == {"split": "test", **result["test"]}
    assert evaluate_run(out, "dev") == {"split": "dev", **result["dev"]}
    # Per length: the bins partition the split by the task's lengths, and accuracy, a mean, is
    # the bins' accuracies weighted by their sizes.
    edges = tuple(sorted(random.Random(25).sample(range(2, 20), 3)))
    binned = evaluate_run(out, "dev", by_length=edges)
    rows = binned.pop("by_length")
    assert binned == {"split": "dev", **result["dev"]}
    run_config, _, _, task, dataset, _ = load_run(out)
    lengths = [task.length(e) for e in make_splits(run_config, dataset, None).dev]
    bounds = [(1, edges[0] - 1), (edges[0], edges[1] - 1), (edges[1], edges[2] - 1),
              (edges[2], max(lengths))]
    labels = [f"1-{edges[0] - 1}", f"{edges[0]}-{edges[1] - 1}", f"{edges[1]}-{edges[2] - 1}",
              f"{edges[2]}+"]
    counts = [sum(lo <= n <= hi for n in lengths) for lo, hi in bounds]
    assert [(r["lengths"], r["examples"]) for r in rows] == [
        (label, count) for label, count in zip(labels, counts) if count]
    assert sum(r["accuracy"] * r["examples"] for r in rows) / len(lengths) == pytest.approx(
        result["dev"]["accuracy"])
    sentences = ["What is the capital of France ?", "Who wrote Hamlet ?", "", "Why ?"]
    encoded = subprocess.run([sys.executable, "-m", "blosa", "encode", str(out)],
                             input="".join(s + "\n" for s in sentences).encode(),
                             capture_output=True, check=True)
    vectors = np.load(io.BytesIO(encoded.stdout))
    assert vectors.shape == (4, 12) and vectors.dtype == np.float32  # biblosan: 2 * hidden
    assert np.all(vectors[2] == 0) and np.any(vectors[0] != vectors[1])  # empty line: no token


def test_progress_bar_on_a_terminal(tmp_path):
    """On a terminal: a tqdm bar with loss, accuracy and examples/s, evaluation lines above it."""
    from blosa.train.progress import Progress

    stream = io.StringIO()
    rng = random.Random(26)
    train_file = write_generic(tmp_path / "train.txt", rng, 100)
    test_file = write_generic(tmp_path / "test.txt", rng, 20)
    config = TrainConfig(task="generic", train_file=str(train_file), test_file=str(test_file),
                         max_steps=8, eval_every=4, **TINY)
    import blosa.train.run as run_module

    original = run_module.Progress
    run_module.Progress = lambda enabled, bars: Progress(enabled, bars=True, stream=stream)
    try:
        train(config, tmp_path / "run")
    finally:
        run_module.Progress = original
    text = stream.getvalue()
    assert "loss=" in text and "acc=" in text and "ex/s=" in text and "step 4 (epoch" in text


def test_length_bins():
    rng = random.Random()
    edges = tuple(sorted(rng.sample(range(2, 200), rng.randint(1, 6))))
    bins = length_bins(edges)
    assert bins[0][0] == 1 and bins[-1] == (edges[-1], None)
    assert all(hi + 1 == next_lo for (_, hi), (next_lo, _) in zip(bins, bins[1:]))
    for bad in [(), (1, 4), (4, 4), (8, 4), (2.5,), (True, 4)]:
        with pytest.raises(ValueError, match="increasing ints >= 2"):
            length_bins(bad)
    with pytest.raises(SystemExit) as exit_:  # argparse's usage error, before any file is read
        main(["eval", "nowhere", "--by-length", "8,4"])
    assert exit_.value.code == 2
