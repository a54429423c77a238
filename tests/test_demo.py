"""`make demo` runs end to end (at tiny sizes here) and writes its plot."""
import sys

import pytest

from blosa import demo


def test_demo_prints_the_table_and_writes_the_plot(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(demo, "CONFIGS", [("tiny, r=2", 2, 6, 4, 2)])
    monkeypatch.setattr(demo, "SWEEP_LENGTHS", (4, 8))
    monkeypatch.setattr(demo, "SWEEP_B", 2)
    monkeypatch.setattr(demo, "SWEEP_D", 4)
    plot = tmp_path / "sweep.png"
    demo.main(["--plot", str(plot)])
    table = capsys.readouterr().out
    assert "tiny, r=2 (B=2, n=6, d=4)" in table and "speed-up" in table
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("where, problem", [
    ("missing/sweep.png", "does not exist"),
    ("sweep.docx", "matplotlib cannot write .docx files; use one of"),
    (".", "is a folder"),
])
def test_a_bad_plot_path_is_refused_before_any_timing(where, problem, tmp_path, monkeypatch, capsys):
    def no_work():
        raise AssertionError("timed something before refusing --plot")

    monkeypatch.setattr(demo, "print_table", no_work)
    with pytest.raises(SystemExit) as exit_info:
        demo.main(["--plot", str(tmp_path / where)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--plot: " in err and problem in err, err


def test_a_missing_matplotlib_is_named_before_any_timing(tmp_path, monkeypatch, capsys):
    for module in ("matplotlib", "matplotlib.backends.backend_agg", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, module, None)  # importing it raises ImportError
    monkeypatch.setattr(demo, "print_table", lambda: pytest.fail("timed something first"))
    with pytest.raises(SystemExit):
        demo.main(["--plot", str(tmp_path / "sweep.png")])
    assert "--plot: the plot needs matplotlib" in capsys.readouterr().err
