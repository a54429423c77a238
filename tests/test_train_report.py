"""blosa report: a row per setup, the seeds of a setup as mean ± std, the paper's number beside
ours; presets: resolution order, errors, and the commands the table prints."""
import dataclasses
import json
import random
import statistics

import pytest

from blosa.cli import _config, main, parser
from blosa.train.config import TASK_DEFAULTS, TrainConfig
from blosa.train.paper import paper_result
from blosa.train.presets import PRESETS
from blosa.train.report import ablation, command_of, report


def fake_run(path, config, test, seconds, folds=None, dev=None):
    """A finished run's folder as blosa train leaves it (config.json, result.json)."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(config.resolved().to_json())
    result = {"task": config.task, "encoder": config.encoder, "test": test, "dev": dev or test,
              "seconds": seconds, "commit": "abc1234"}
    if folds:
        result["folds"] = [{"fold": i, "test": f, "dev": f} for i, f in enumerate(folds)]
        result["std"] = {"test": {m: statistics.stdev(f[m] for f in folds) for m in test}}
    (path / "result.json").write_text(json.dumps(result))
    return path


def row_cells(table, index):
    return [cell.strip() for cell in table.splitlines()[2 + index].strip("|").split("|")]


def test_seeds_of_a_setup_share_a_row(tmp_path):
    rng = random.Random()
    accuracies = [rng.uniform(0.8, 0.95) for _ in range(3)]
    dirs = [fake_run(tmp_path / f"trec-{s}", TrainConfig(task="trec", preset="best", seed=s),
                     {"accuracy": a}, 100 + 10 * s) for s, a in enumerate(accuracies)]
    other = fake_run(tmp_path / "disan", TrainConfig(task="trec", encoder="disan", preset="best"),
                     {"accuracy": 0.5}, 50)
    table = report([dirs[0], other, *dirs[1:]], paper=True)
    assert len(table.splitlines()) == 4  # header, rule, two setups in the order first seen
    task, encoder, test, paper, seeds, seconds, commit, command = row_cells(table, 0)
    mean, std = statistics.fmean(accuracies), statistics.stdev(accuracies)
    assert (task, encoder, seeds, seconds) == ("trec", "biblosan", "0, 1, 2", "110")
    assert test == f"accuracy {100 * mean:.1f} ± {100 * std:.1f} (3 seeds)"
    assert paper == "accuracy 94.8 (0.2)" and commit == "abc1234"
    assert command.strip("`") == "blosa train --task trec --preset best"
    assert row_cells(table, 1)[1:4] == ["disan", "accuracy 50.0", "accuracy 94.2 (0.1)"]
    assert "paper" not in report(dirs).splitlines()[0]  # the column only when asked for


def test_the_dev_column_shows_what_the_setups_were_chosen_on(tmp_path):
    rng = random.Random()
    dev = [{"accuracy": rng.uniform(0.6, 0.7)} for _ in range(2)]
    test = [{"accuracy": rng.uniform(0.8, 0.9)} for _ in range(2)]
    runs = [fake_run(tmp_path / f"sst2-{s}", TrainConfig(task="sst2", seed=s), test[s], 9,
                     dev=dev[s]) for s in range(2)]
    lone = fake_run(tmp_path / "lone", TrainConfig(task="sst2", lr=0.25), test[0], 9, dev=dev[1])
    table = report([*runs, lone], dev=True)
    assert table.splitlines()[0].startswith("| task | encoder | dev | test |")
    values = [d["accuracy"] for d in dev]
    mean, std = statistics.fmean(values), statistics.stdev(values)
    assert row_cells(table, 0)[2] == f"accuracy {100 * mean:.1f} ± {100 * std:.1f}"
    mean_test = statistics.fmean(t["accuracy"] for t in test)
    assert row_cells(table, 0)[3].startswith(f"accuracy {100 * mean_test:.1f} ± ")
    assert row_cells(table, 1)[2:4] == [f"accuracy {100 * values[1]:.1f}",
                                        f"accuracy {100 * test[0]['accuracy']:.1f}"]


def test_a_cross_validated_run_reports_its_folds_spread(tmp_path):
    folds = [{"accuracy": random.uniform(0.7, 0.9)} for _ in range(10)]
    mean = {"accuracy": statistics.fmean(f["accuracy"] for f in folds)}
    run = fake_run(tmp_path / "cr", TrainConfig(task="cr"), mean, 700, folds=folds)
    test = row_cells(report([run]), 0)[2]
    std = statistics.stdev(f["accuracy"] for f in folds)
    assert test == f"accuracy {100 * mean['accuracy']:.1f} ± {100 * std:.1f} (10 folds)"


def test_relatedness_metrics_keep_four_decimals(tmp_path):
    values = [{"pearson": random.random(), "spearman": random.random(), "mse": random.random()}
              for _ in range(2)]
    runs = [fake_run(tmp_path / f"sick-{s}", TrainConfig(task="sick", seed=s), v, 10)
            for s, v in enumerate(values)]
    test = row_cells(report(runs), 0)[2]
    mse = [v["mse"] for v in values]
    assert f"mse {statistics.fmean(mse):.4f} ± {statistics.stdev(mse):.4f}" in test


def test_an_unfinished_run_is_named(tmp_path):
    (tmp_path / "half").mkdir()
    with pytest.raises(ValueError, match="half holds no finished run"):
        report([tmp_path / "half"])


def test_presets_sit_between_task_defaults_and_flags():
    for name, tasks in PRESETS.items():
        for task, settings in tasks.items():
            config = TrainConfig(task=task, preset=name).resolved()
            for key, value in settings.items():
                assert getattr(config, key) == value, (name, task, key)
            for key, value in TASK_DEFAULTS.get(task, {}).items():
                if key not in settings:  # what the preset leaves, the task's default gives
                    assert getattr(config, key) == value, (name, task, key)
            flag = TrainConfig(task=task, preset=name, lr=0.123, hidden=7, lr_schedule="cosine",
                               word_dropout=0.125).resolved()
            assert (flag.lr, flag.hidden) == (0.123, 7)  # a flag wins over the preset
            # the printed command gives the same settings back
            seeded = dataclasses.replace(flag, seed=3)
            flipped = dataclasses.replace(seeded, fine_tune=not seeded.fine_tune)
            for config in (seeded, flipped):
                words = command_of(config).split()
                assert _config(parser().parse_args(words[1:])).resolved() == config


def test_bad_presets_are_refused_by_flag(capsys):
    assert main(["train", "--task", "squad", "--preset", "best", "--out", "/nonexistent/x"]) == 2
    assert "--preset: best has no setup for task 'squad'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--preset: unknown preset 'fast'"):
        TrainConfig(task="trec", preset="fast").resolved()


def test_paper_numbers_are_where_the_paper_puts_them():
    # Table 4 prints SST-1/SST-2 swapped; SST-1 (5 classes) is the lower one.
    assert paper_result("sst1", "biblosan") == {"accuracy": "50.6 (0.5)"}
    assert paper_result("sst2", "biblosan") == {"accuracy": "87.4 (0.2)"}
    assert paper_result("sick", "disan")["pearson"] == "0.8695 (0.0012)"
    assert paper_result("snli", "biblosan") == {"accuracy": "85.7"}
    assert paper_result("sick_e", "biblosan") == {}


def test_make_reproduce_trains_each_seed_then_prints_the_row():
    """`make reproduce` (dry run: the commands it would run): a resumable run per seed, three
    seeds (one for the cross-validated tasks, whose spread is over folds), then the report."""
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]

    def dry_run(*variables):
        run = subprocess.run(["make", "-n", "--no-print-directory", "reproduce", *variables],
                             cwd=repo, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        return " ".join(run.stdout.replace("\\\n", " ").split())

    trec = dry_run("TASK=trec", "ENCODER=disan")
    assert "for seed in 0 1 2; do" in trec
    assert ("-m blosa train --task trec --encoder disan --preset best --seed $seed --out "
            "runs/reproduce/trec-disan-best/seed-$seed --resume --quiet") in trec
    assert trec.endswith("-m blosa report --dev --paper " + " ".join(
        f"runs/reproduce/trec-disan-best/seed-{s}" for s in range(3)))
    cr = dry_run("TASK=cr", "PRESET=paper")
    assert "for seed in 0; do" in cr and "runs/reproduce/cr-biblosan-paper/seed-0" in cr
    assert "name the row" in dry_run()  # no TASK: the recipe stops with the message


# base: the control of runs made under an older default (vocabulary "train" before issue 67).
@pytest.mark.parametrize("base, control_vocab, varied_vocab", [
    (None, None, "train"), ({"vocab": "train"}, "train", "vectors")])
def test_the_ablation_table_pairs_each_setup_with_its_control_by_seed(tmp_path, base,
                                                                      control_vocab, varied_vocab):
    rng = random.Random()
    control = {s: rng.uniform(0.7, 0.9) for s in (0, 1, 2)}
    varied = {s: rng.uniform(0.7, 0.9) for s in (1, 2)}
    dirs = [fake_run(tmp_path / f"c{s}", TrainConfig(task="sst2", encoder="disan", preset="best",
                                                     seed=s, vocab=control_vocab),
                     {"accuracy": a}, 10, dev={"accuracy": a / 2}) for s, a in control.items()]
    dirs += [fake_run(tmp_path / f"v{s}", TrainConfig(task="sst2", encoder="disan", preset="best",
                                                      seed=s, vocab=varied_vocab, lr=0.002),
                      {"accuracy": a}, 10, dev={"accuracy": a / 2}) for s, a in varied.items()]
    table = ablation(dirs, base)
    assert len(table.splitlines()) == 4
    task, encoder, setup, seeds, dev, _, test, change = row_cells(table, 0)
    assert (task, encoder, setup, seeds) == ("sst2", "disan", "control", "0, 1, 2")
    assert test == f"{100 * statistics.fmean(control.values()):.1f}" and change == "-"
    _, _, setup, seeds, dev, dev_change, test, change = row_cells(table, 1)
    assert setup == f"`--vocab {varied_vocab} --lr 0.002`"
    assert seeds == "1, 2"
    delta = statistics.fmean(varied[s] - control[s] for s in (1, 2))  # paired: seeds 1, 2 only
    assert change == ("+" if delta >= 0 else "−") + f"{100 * abs(delta):.1f}"
    assert dev_change == ("+" if delta >= 0 else "−") + f"{50 * abs(delta):.1f}"


def test_ablation_base_reads_each_setting_as_its_type(tmp_path, capsys):
    run = fake_run(tmp_path / "r", TrainConfig(task="trec", encoder="disan", preset="best",
                                               seed=0, vocab="train"), {"accuracy": 0.8}, 10)
    assert main(["report", "--ablation", "--ablation-base", "vocab=train", str(run)]) == 0
    assert "| trec | disan | control | 0 |" in capsys.readouterr().out
    assert main(["report", "--ablation", str(run)]) == 0  # today's default: the whole vocabulary
    assert "| trec | disan | `--vocab train` | 0 |" in capsys.readouterr().out
    args = parser().parse_args(["report", "--ablation", "--ablation-base", "lr=0.5",
                                "--ablation-base", "fine_tune=false", "--ablation-base",
                                "adadelta_rho=none", "--ablation-base", "vectors=none", "x"])
    assert dict(args.ablation_base) == dict(lr=0.5, fine_tune=False, adadelta_rho=None,
                                            vectors="none")
    for bad in ("vocab", "colour=red", "epochs=many", "fine_tune=maybe", "task=trec"):
        with pytest.raises(SystemExit):
            parser().parse_args(["report", "--ablation", "--ablation-base", bad, "x"])


def test_ablation_says_on_how_many_seeds_a_change_is_paired(tmp_path):
    rng = random.Random()
    dirs = [fake_run(tmp_path / f"c{s}", TrainConfig(task="trec", encoder="disan", preset="best",
                                                     seed=s), {"accuracy": rng.random()}, 10)
            for s in (0, 1)]
    for seeds, tag in (((1, 5), " (1 seed)"), ((0, 1, 7), " (2 seeds)"), ((0, 1), "")):
        varied = [fake_run(tmp_path / f"{tag}{s}", TrainConfig(
            task="trec", encoder="disan", preset="best", seed=s, lr=0.01 * len(seeds)),
            {"accuracy": rng.random()}, 10) for s in seeds]
        change = row_cells(ablation(dirs + varied), 1)[-1]
        assert change.endswith(tag) and change[0] in "+−" and "(" not in change[:-len(tag) or None]
