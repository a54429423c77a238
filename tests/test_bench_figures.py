"""bench/figures.py --quick measures its two figures at tiny sizes and writes their CSV and PNG
files; run again, it measures nothing it has already."""
import csv
import importlib.util
import json
import pathlib
import sys

import pytest
import torch

FIGURES = pathlib.Path(__file__).resolve().parents[1] / "bench" / "figures.py"


@pytest.fixture
def figures(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_figures", FIGURES)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_figures", module)  # its dataclasses look it up there
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    yield module
    torch.set_num_threads(threads)  # figures.main sets this process's to its --threads


def test_quick_writes_both_figures_csv_and_png(figures, tmp_path, monkeypatch):
    figures.main(["--quick", "--out", str(tmp_path)])
    for name in ("figure3-cpu", "long-cpu"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        rows = list(csv.DictReader(open(tmp_path / f"{name}.csv")))
        grid = figures.FIG3["quick"] if name == "figure3-cpu" else figures.LONG["quick"]
        variants = 8 if name == "figure3-cpu" else len(figures.LONG_VARIANTS)
        assert len(rows) == variants * 2 * len(grid.lengths)
        assert {r["status"] for r in rows} == {"ok"}
        assert all(float(r["seconds"]) > 0 and float(r["static_mib"]) > 0 for r in rows)
    meta = json.loads((tmp_path / "figures-cpu.json").read_text())
    assert meta["command"] == "python bench/figures.py --device cpu --quick"

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured a case the CSV already had")

    monkeypatch.setattr("blosa.bench.sweep.measure", no_measuring)
    figures.main(["--quick", "--out", str(tmp_path)])  # resumes: every row is there
