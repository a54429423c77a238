"""bench/test_bench_models.py runs whole at tiny sizes, each case once, and records every case's
memory. No timing is checked: this is whether the benchmark works, not how fast anything is."""
import json
import math
import os
import pathlib
import subprocess
import sys

import torch

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_the_model_benchmarks_run_and_record_memory(tmp_path):
    records = tmp_path / "records.json"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/test_bench_models.py", "--tiny-sizes", "--benchmark-disable",
         "-q", "-p", "no:cacheprovider", "--model-records", str(records)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTEST_ADDOPTS": ""})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    cases = json.loads(records.read_text())
    devices = 2 if torch.cuda.is_available() else 1
    assert len(cases) == 10 * 2 * devices  # 8 encoders + 2 on the reference attention, 2 modes
    for case in cases:
        assert math.isfinite(case["peak_mib"]) and case["peak_mib"] >= 0, case
        assert case["static_mib"] > 0, case
    assert "whole models: peak memory" in run.stdout

