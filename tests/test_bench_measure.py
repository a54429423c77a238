"""blosa.bench's measurements: a child's memory grows with its case, the memory cap turns a case
too big into a clean "out of memory", children's failures and time limits are named, and the
sweep stops a series where it should."""
import subprocess
import sys
import time

import pytest

from blosa.bench import EncoderCase, OutOfMemory, measure
from blosa.bench.child import CaseFailed, CaseTimeout, run_in_child
from blosa.bench.sweep import _skip_reason

MIB = 2**20


def test_a_bigger_case_takes_more_memory_in_its_child():
    # The reference DiSAN holds [B, n, n, hidden] scores: 4 x 256^2 x 64 floats = 64 MiB a tensor
    # at n = 256, 1 MiB at n = 32.
    small, big = (measure(EncoderCase("disan", 4, n, d=64, hidden=64, backend="reference"), "inference",
                          threads=1) for n in (32, 256))
    assert big.peak_mib > small.peak_mib + 30, (small, big)
    assert big.static_mib > small.static_mib > 0  # parameters and the batch x [B, n, d]


def test_a_training_step_and_its_timing_are_measured():
    m = measure(EncoderCase("biblosan", 2, 16, d=32, hidden=16), "train", repeats=2, threads=1)
    assert m.peak_mib >= 0 and m.static_mib > 0 and m.seconds > 0 and m.first_seconds > 0
    assert m.repeats == 2 and m.threads == 1


def test_the_memory_cap_turns_a_case_too_big_into_out_of_memory():
    # 1024^2 x 300 floats (1.2 GiB) a score tensor: the machine could hold it, the cap cannot.
    case = EncoderCase("disan", 1, 1024, backend="reference")
    start = time.perf_counter()
    message = r"disan\[reference\] B=1 n=1024 inference: out of memory, capped at 0\.25 GiB"
    with pytest.raises(OutOfMemory, match=message):
        measure(case, "inference", limit_bytes=256 * MIB, timeout_s=60, threads=1)
    assert time.perf_counter() - start < 30  # failed at the allocation, not after computing


def test_the_command_line_reports_out_of_memory_with_its_own_status():
    run = subprocess.run([sys.executable, "-m", "blosa.bench.memcase", "disan", "1", "1024", "--backend",
                          "reference", "--mode", "inference", "--limit-gib", "0.25"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 3 and run.stdout == "", run.stderr
    assert "out of memory, capped at 0.25 GiB" in run.stderr


def test_a_child_failure_comes_back_in_its_own_words():
    with pytest.raises(CaseFailed, match="(?s)int-case failed in its child process.*invalid literal"):
        run_in_child(int, ("not a number",), "int-case")


def test_a_child_past_its_time_limit_is_killed():
    start = time.perf_counter()
    with pytest.raises(CaseTimeout, match="sleeper: still running after 0.5 s, killed"):
        run_in_child(time.sleep, (30,), "sleeper", timeout_s=0.5)
    assert time.perf_counter() - start < 10


@pytest.mark.parametrize("field, value, message", [
    ("name", "lstm", "name must be an encoder of blosa.nn.ENCODERS"),
    ("B", 0, "B must be an int >= 1, got 0"),
    ("backend", "reference", "backend='reference' needs an attention encoder"),
    ("device", "tpu", "device must be 'cpu' or 'cuda"),
    ("dropout", 1.0, r"dropout must be in \[0, 1\)"),
])
def test_a_bad_case_names_its_field(field, value, message):
    fields = dict(name="bilstm", B=2, n=8)
    fields[field] = value
    with pytest.raises(ValueError, match=message):
        EncoderCase(**fields)


def _row(n, status="ok", seconds=1.0, peak_mib=100.0, note=""):
    return dict(n=str(n), status=status, seconds=str(seconds), peak_mib=str(peak_mib), static_mib="0",
                note=note)


def test_a_series_stops_after_running_out_of_memory_or_time():
    case = EncoderCase("disan", 1, 2048)
    gib = 2**30

    def reason(last, last_ok=None, timeout_s=60):
        return _skip_reason(case, last, last_ok or last, 0, gib, timeout_s)

    assert reason(None) is None
    assert "ran out of memory" in reason(_row(1024, "oom"), _row(512))
    assert "not measured in time" in reason(_row(1024, "timeout"), _row(512, peak_mib=10.0))
    # 20 s at n = 1024 -> 80 s predicted at 2048: past 60 s, and 400 MiB fits in the cap: skipped.
    assert "predicted 80 s" in reason(_row(1024, seconds=20.0))
    # ... but 400 MiB x 4 would pass a 1 GiB cap: run it, to see where memory ran out, even after
    # a case that timed out.
    assert reason(_row(1024, seconds=20.0, peak_mib=400.0)) is None
    assert reason(_row(1024, "timeout"), _row(512, peak_mib=100.0)) is None
    assert reason(_row(1024, seconds=20.0), timeout_s=None) is None  # no time limit
