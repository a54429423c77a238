"""A run killed with SIGKILL part way and resumed ends bit for bit where an uninterrupted run with
the same seed ends: the same parameters, the same metrics.jsonl."""
import json
import os
import signal
import subprocess
import sys
import time

import torch

from shared_data import requires_shared_data

pytestmark = requires_shared_data

# Dropout and word dropout on, so that the random generators' state matters; a cosine learning
# rate, so that the schedule's position matters; 36 steps, a checkpoint every 4.
ARGS = ["--task", "trec", "--hidden", "6", "--head-hidden", "6", "--vectors", "glove-50d",
        "--batch-size", "24", "--dropout", "0.3", "--word-dropout", "0.2", "--lr-schedule",
        "cosine", "--max-steps", "36", "--eval-every", "4", "--eval-batch-size", "512",
        "--seed", "3", "--quiet"]


def blosa_train(out, *extra):
    return [sys.executable, "-m", "blosa", "train", *ARGS, "--out", str(out), *extra]


def dev_records(out):
    path = out / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if '"dev"' in l]


def assert_same_run(a, b):
    for name in ("last.pt", "best.pt"):
        sa = torch.load(a / name, weights_only=True)
        sb = torch.load(b / name, weights_only=True)
        for key, value in sa["model"].items():
            assert torch.equal(value, sb["model"][key]), (name, key)
    assert (a / "metrics.jsonl").read_text() == (b / "metrics.jsonl").read_text()
    ra, rb = (json.loads((d / "result.json").read_text()) for d in (a, b))
    ra.pop("seconds"), rb.pop("seconds")
    assert ra == rb


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    subprocess.run(blosa_train(whole), check=True, capture_output=True)
    last = torch.load(whole / "last.pt", weights_only=True)
    assert {"model", "optimizer", "scheduler", "step", "epoch", "position", "best",
            "rng"} <= set(last)
    assert last["step"] == 36
    assert not [p for p in os.listdir(whole) if p.endswith(".tmp")]  # no temporary file left

    proc = subprocess.Popen(blosa_train(killed), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while len(dev_records(killed)) < 3 and proc.poll() is None:  # past two checkpoints
        assert time.monotonic() < deadline, "the run made no checkpoints in time"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed"
    assert not (killed / "result.json").exists()
    step_at_kill = torch.load(killed / "last.pt", weights_only=True)["step"]
    assert 0 < step_at_kill < 36

    done = subprocess.run(blosa_train(killed, "--resume"), check=True, capture_output=True,
                          text=True)
    assert done.stdout.strip().splitlines()[-1].startswith("test: accuracy")
    assert_same_run(whole, killed)

