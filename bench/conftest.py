import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# Sizes of bench/test_bench_models.py: (B, n, d, hidden) a device; hidden None = the paper's
# (240 for the 480D Bi-BloSAN, 300 for the 600D baselines).
MODEL_SIZES = {
    # The default: a few minutes for the whole file on a 2-core CPU.
    "default": {"cpu": (16, 64, 300, None), "cuda": (64, 64, 300, None)},
    # --paper-sizes: the paper's SNLI setup, batch 64 and 300-d embeddings (the length is ours).
    "paper": {"cpu": (64, 64, 300, None), "cuda": (64, 64, 300, None)},
    # --tiny-sizes: every case once in seconds, for tests/test_bench_smoke.py.
    "tiny": {"cpu": (2, 8, 16, 8), "cuda": (2, 8, 16, 8)},
}

_RECORDS = pytest.StashKey[list]()


def pytest_addoption(parser):
    group = parser.getgroup("blosa", "blosa benchmarks")
    group.addoption("--paper-sizes", action="store_true",
                    help="test_bench_models: the paper's sizes (batch 64, n 64, 300-d, paper hidden)")
    group.addoption("--tiny-sizes", action="store_true",
                    help="test_bench_models: tiny sizes, for a smoke test (with --benchmark-disable)")
    group.addoption("--model-records", metavar="PATH",
                    help="test_bench_models: write every case's memory and time to PATH as JSON")


@pytest.fixture(scope="session")
def model_sizes(pytestconfig):
    """{device: (B, n, d, hidden)} of the size preset the options chose."""
    paper, tiny = pytestconfig.getoption("--paper-sizes"), pytestconfig.getoption("--tiny-sizes")
    if paper and tiny:
        raise pytest.UsageError("--paper-sizes and --tiny-sizes exclude each other")
    return MODEL_SIZES["paper" if paper else "tiny" if tiny else "default"]


@pytest.fixture(scope="session")
def model_records(pytestconfig):
    """A list each model benchmark appends its record (a dict) to; summarized at the end."""
    return pytestconfig.stash.setdefault(_RECORDS, [])


def pytest_terminal_summary(terminalreporter, config):
    records = config.stash.get(_RECORDS, [])
    if not records:
        return
    write = terminalreporter.write_line
    terminalreporter.section("whole models: peak memory, and the fused op against the reference")
    write(f"{'case':44} {'mode':9} {'peak MiB':>9} {'median ms':>10} {'reference/fused':>16}")
    for r in records:
        ms = "-" if r["seconds"] is None else f"{r['seconds'] * 1e3:.1f}"
        ratio = r.get("reference_over_fused")
        write(f"{r['label'] + ' ' + r['device']:44} {r['mode']:9} {r['peak_mib']:9.1f} {ms:>10} "
              f"{'' if ratio is None else f'{ratio:.2f}x':>16}")


def pytest_sessionfinish(session):
    path = session.config.getoption("--model-records", None)
    if path:
        with open(path, "w") as out:
            json.dump(session.config.stash.get(_RECORDS, []), out, indent=1)
