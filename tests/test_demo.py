"""`make demo` runs end to end (at tiny sizes here) and writes its plot."""
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
