"""`blosa train` refuses bad input before any work, with an error naming the flag or the folder;
`blosa train --help` documents every flag with its default."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from blosa.cli import main, parser
from blosa.train.config import FROM_DATA, TrainConfig
from shared_data import requires_shared_data

TINY = ["--hidden", "4", "--head-hidden", "4", "--vectors", "none", "--batch-size", "16"]


def run_main(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_names_every_flag_with_its_default():
    help_text = parser()._subparsers._group_actions[0].choices["train"].format_help()
    flags = [a for a in parser()._subparsers._group_actions[0].choices["train"]._actions
             if a.option_strings and a.dest != "help"]
    for action in flags:
        assert action.option_strings[0] in help_text
        if action.default not in (None, False) and action.dest != "task":
            assert "default" in action.help, action.dest
    # every setting of a run is a flag (extra is reserved for later versions; FROM_DATA the
    # trainer fills in from the training data)
    dests = {a.dest for a in flags}
    assert set(TrainConfig.__dataclass_fields__) - {"extra", "task", *FROM_DATA} <= dests
    assert not set(FROM_DATA) & dests


@pytest.mark.parametrize("command", [[sys.executable, "-m", "blosa"],
                                     [str(Path(sys.executable).with_name("blosa"))]],
                         ids=["python -m blosa", "console script"])
def test_the_command_runs(command):
    out = subprocess.run([*command, "train", "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "--max-steps" in out and "--resume" in out


@pytest.mark.parametrize("argv, message", [
    (["--task", "nope"], "invalid choice: 'nope'"),
    (["--task", "trec", "--encoder", "bert"], "invalid choice: 'bert'"),
    (["--task", "trec", "--device", "tpu"], "invalid choice: 'tpu'"),
    (["--task", "trec", "--amp", "fp8"], "invalid choice: 'fp8'"),
    (["--task", "trec", "--lr-schedule", "step"], "invalid choice: 'step'"),
])
def test_unknown_choices(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(["train", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--batch-size", "0"], "--batch-size: must be an int >= 1"),
    (["--dropout", "1.0"], "--dropout: must be in [0, 1)"),
    (["--word-dropout", "1.0"], "--word-dropout: must be in [0, 1)"),
    (["--word-dropout", "-0.1"], "--word-dropout: must be in [0, 1)"),
    (["--lr", "-1"], "--lr: must be > 0"),
    (["--epochs", "0"], "--epochs: must be an int >= 1"),
    (["--max-steps", "0"], "--max-steps: must be >= 1"),
    (["--folds", "1"], "--folds: must be 0"),
    (["--folds", "5"], "trec has a test split"),
    (["--block-len", "x"], '--block-len: must be "auto", "dataset" or an int'),
    (["--block-len", "0"], '--block-len: must be "auto", "dataset" or an int'),
    (["--encoder", "bilstm", "--block-len", "4"], "only Bi-BloSAN has blocks"),
    (["--encoder", "disan", "--block-len", "dataset"], "--block-len: only Bi-BloSAN has blocks"),
    (["--sst-phrases", "all"], "--sst-phrases: only SST (sst1, sst2) trains on phrases"),
    (["--sst-phrases", "some"], "--sst-phrases: choose from ('distinct', 'all', 'none'), got 'some'"),
    (["--batching", "sorted"], "--batching: choose from ('bucket', 'random'), got 'sorted'"),
    (["--adadelta-rho", "1.0"], "--adadelta-rho: must be in [0, 1)"),
    (["--adadelta-rho", "-0.5"], "--adadelta-rho: must be in [0, 1)"),
    (["--adadelta-rho", "nan"], "--adadelta-rho: must be in [0, 1)"),
    (["--adadelta-eps", "0"], "--adadelta-eps: must be in (0, 1)"),
    (["--adadelta-eps", "inf"], "--adadelta-eps: must be in (0, 1)"),
    (["--optimizer", "adam", "--adadelta-eps", "1e-8"],
     "--adadelta-eps: applies to --optimizer adadelta, not adam"),
    (["--preset", "best", "--adadelta-rho", "0.95"],
     "--adadelta-rho: applies to --optimizer adadelta, not adam"),
    (["--train", "x.txt"], "--train/--test name the files of the generic task"),
    (["--dev-fraction", "1.5"], "--dev-fraction: must be in (0, 1)"),
])
def test_bad_values_are_refused_before_any_work(capsys, tmp_path, extra, message):
    out = tmp_path / "run"
    code, _, err = run_main(capsys, ["train", "--task", "trec", *TINY, "--out", str(out), *extra])
    assert code == 2 and message in err, err
    assert not out.exists()  # nothing was written


def test_generic_needs_its_training_file(capsys, tmp_path):
    code, _, err = run_main(capsys, ["train", "--task", "generic", "--out", str(tmp_path / "r")])
    assert code == 2 and "needs --train FILE" in err


def test_missing_data_file_names_the_path_and_how_to_get_it(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = run_main(capsys, ["train", "--task", "trec", *TINY, "--data-dir",
                                     str(tmp_path), "--out", str(out)])
    assert code == 2 and "TREC.train.all" in err and "blosa download" in err, err


@requires_shared_data
def test_run_folder_with_another_run_and_resume_with_other_settings(capsys, tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--task", "trec", *TINY, "--max-steps", "2", "--out", str(out), "--quiet"]
    assert run_main(capsys, argv)[0] == 0
    code, _, err = run_main(capsys, argv)
    assert code == 2 and "holds another run" in err and "--resume" in err
    code, _, err = run_main(capsys, [*argv[:-1], "--lr", "0.1", "--resume", "--quiet"])
    assert code == 2 and "other settings" in err and "lr" in err, err
    assert json.loads((out / "result.json").read_text())["task"] == "trec"  # nothing lost
    code, _, err = run_main(capsys, [*argv, "--resume"])  # same settings: it has finished
    assert code == 0


def test_not_empty_folder_without_a_run(capsys, tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    code, _, err = run_main(capsys, ["train", "--task", "trec", *TINY, "--out", str(tmp_path)])
    assert code == 2 and "not empty" in err
    assert (tmp_path / "keep.txt").read_text() == "mine"
