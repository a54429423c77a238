"""Data-parallel training: 2 CPU processes under torchrun (gloo) end with identical parameters,
equal (within float tolerance) to one process with the same global batch."""
import json
import os
import subprocess
import sys

import pytest
import torch

from blosa.train.inference import evaluate_run

from shared_data import requires_shared_data

pytestmark = requires_shared_data
WORKER = os.path.join(os.path.dirname(__file__), "ddp_worker.py")

# No dropout: the processes' dropout masks differ from one process's, by design. Adadelta (the
# task's default), not Adam, whose normalized steps make float noise in tiny gradients visible.
ARGS = ["--task", "trec", "--hidden", "6", "--head-hidden", "6", "--vectors", "glove-50d",
        "--batch-size", "32", "--dropout", "0", "--max-steps", "12", "--eval-every", "6",
        "--seed", "5", "--quiet", "--block-len", "3"]  # a fixed r: results that padding cannot change
# The options of issue 67 that act under DDP: random batches split as the bucketed ones, one r
# for the run computed by every process (fixed too), Adadelta's constants.
AUTHORS = ["--batching", "random", "--block-len", "dataset", "--adadelta-rho", "0.95",
           "--adadelta-eps", "1e-8"]


@pytest.mark.parametrize("options", [[], AUTHORS], ids=["defaults", "authors-options"])
def test_two_processes_match_one(tmp_path, options):
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run([sys.executable, "-m", "blosa", "train", *ARGS, *options, "--out", str(one)],
                   check=True, capture_output=True)
    launched = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         WORKER, "train", *ARGS, *options, "--out", str(two)],
        capture_output=True, text=True, timeout=600)
    assert launched.returncode == 0, launched.stderr[-3000:]
    # Only rank 0 printed: one result line.
    assert launched.stdout.count("test: accuracy") == 1

    # last.pt: the parameters at the last step, as rank{0,1}.pt are.
    single = torch.load(one / "last.pt", weights_only=True)["model"]
    ranks = [torch.load(two / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    for key, value in single.items():
        assert torch.equal(ranks[0][key], ranks[1][key]), key  # the ranks agree exactly
        torch.testing.assert_close(ranks[0][key], value, rtol=1e-4, atol=1e-5, msg=key)
    # The training loss was reduced over both processes: one process's figures.
    logs = [[json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
            for d in (one, two)]
    assert [(r["step"], r["split"]) for r in logs[0]] == [(r["step"], r["split"]) for r in logs[1]]
    for a, b in zip(*logs):
        if a["split"] == "train":
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)
    # Each process evaluated half of test and the predictions were gathered: the metrics of the
    # same checkpoint evaluated whole in one process.
    tested = json.loads((two / "result.json").read_text())["test"]
    assert evaluate_run(two, "test") == {"split": "test", **tested}


def torchrun(out, *extra, env=None):
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         WORKER, "train", *RESUME_ARGS, "--out", str(out), *extra],
        capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})


# Dropout and word dropout on: each process draws its own masks (their batches differ), so each
# must resume from its own generators' state.
RESUME_ARGS = ["--task", "trec", "--hidden", "6", "--head-hidden", "6", "--vectors", "glove-50d",
               "--batch-size", "32", "--dropout", "0.3", "--word-dropout", "0.2", "--max-steps",
               "12", "--eval-every", "3", "--seed", "5", "--quiet", "--block-len", "3"]


def test_two_processes_killed_and_resumed_end_where_an_uninterrupted_pair_ends(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert torchrun(whole).returncode == 0
    died = torchrun(killed, env={"BLOSA_TEST_DIE_AFTER_STEP": "6"})
    assert died.returncode != 0 and not (killed / "result.json").exists()
    assert torch.load(killed / "last.pt", weights_only=True)["step"] == 6
    resumed = torchrun(killed, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for rank in (0, 1):
        a = torch.load(whole / f"rank{rank}.pt", weights_only=True)
        b = torch.load(killed / f"rank{rank}.pt", weights_only=True)
        for key, value in a.items():
            assert torch.equal(value, b[key]), (rank, key)
    assert (whole / "metrics.jsonl").read_text() == (killed / "metrics.jsonl").read_text()
