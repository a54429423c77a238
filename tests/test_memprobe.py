"""blosa.memprobe's arguments: refused by name before a process starts, and a child's failure
reported in its own words."""
import subprocess
import sys

import pytest

from blosa.memprobe import peak_memory_mib


def probe_cli(*args):
    return subprocess.run([sys.executable, "-m", "blosa.memprobe", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    "args, message",
    [
        # A misspelt impl measured the reference before, silently.
        (("fuse", "1", "8", "4", "0"), "argument impl: invalid choice: 'fuse'"),
        (("fused", "0", "8", "4", "0"), "argument B: must be >= 1, got 0"),
        (("fused", "1", "8", "four", "0"), "argument d: invalid"),
        (("fused", "1", "8", "4"), "the following arguments are required: block_len"),
        (("fused", "1", "8", "4", "0", "--no-grad"), "--no-grad needs --forward-only"),
    ],
)
def test_cli_refuses_bad_arguments_with_usage(args, message):
    run = probe_cli(*args)
    assert run.returncode == 2 and run.stdout == ""
    assert "usage: python -m blosa.memprobe" in run.stderr and message in run.stderr


def test_cli_prints_the_growth():
    run = probe_cli("fused", "1", "16", "4", "3", "--forward-only", "--no-grad")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith('{"peak_mib": ')


@pytest.mark.parametrize("size", ["B", "n", "d"])
@pytest.mark.parametrize("bad", [0, -2, 2.0, True])
def test_sizes_are_named_before_a_process_starts(size, bad, monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a process started"))
    sizes = dict(B=1, n=8, d=4)
    sizes[size] = bad
    with pytest.raises(ValueError, match=f"{size} must be an int >= 1, got {bad!r}"):
        peak_memory_mib("fused", sizes["B"], sizes["n"], sizes["d"], 0)


def test_a_failed_probe_says_why():
    # 2^63 elements: torch refuses to allocate them, in the child. Its message must reach the
    # caller, not only "returned non-zero exit status 1".
    with pytest.raises(RuntimeError, match="(?s)exit status 1.*Storage size calculation overflowed"):
        peak_memory_mib("fused", 2**21, 2**21, 2**21, 0)
