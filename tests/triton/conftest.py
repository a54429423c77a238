"""Set-up for the Triton kernel tests.

Without CUDA the kernels run on CPU tensors through Triton's interpreter, which must be switched
on before triton is imported: this conftest sets TRITON_INTERPRET=1 first thing. Run this folder
in its own pytest process (`pytest tests/triton`) so nothing imports triton earlier.
"""
import os

import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from blosa_kernels import configs  # noqa: E402  (imports triton, after the switch above)

# Each autotuned launch compiles and times four tile shapes; across this suite's many kernel
# variants that would take most of a GPU session, so tests use the first config unless they ask
# for the `autotuned` fixture.
configs.AUTOTUNE = False
USABLE = HAS_CUDA or configs.INTERPRET
SKIP_REASON = (
    "no CUDA, and triton was imported before TRITON_INTERPRET=1 could be set; "
    "run `pytest tests/triton` in its own process"
)


def pytest_collection_modifyitems(config, items):
    if USABLE:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if "tests/triton" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _interpreter_quiet(recwarn):
    # The interpreter evaluates masked-out lanes too (e.g. exp2 of large arguments that a
    # select then drops) and numpy warns about them; the results are checked, not the warnings.
    yield


@pytest.fixture
def autotuned(monkeypatch):
    """Launch through the autotuned kernels (GPU)."""
    monkeypatch.setattr(configs, "AUTOTUNE", True)


@pytest.fixture
def per_block_kernels(monkeypatch):
    """The per-block kernels for blocks of at most 8 too, in place of the per-pair ones."""
    monkeypatch.setattr(configs, "PAIRS_MAX", 0)


@pytest.fixture
def rows_kernels(monkeypatch):
    """Force the row-tile kernels (used for blocks longer than 64) with the split backward on
    small shapes."""
    monkeypatch.setattr(configs, "SMALL_BLOCK_MAX", 0)
    monkeypatch.setattr(configs, "BACKWARD", "split")


@pytest.fixture
def fused_backward(monkeypatch):
    """The row-tile path with the fused backward (bwd_fused_kernel + bwd_dkv_sums_kernel)."""
    monkeypatch.setattr(configs, "SMALL_BLOCK_MAX", 0)
    monkeypatch.setattr(configs, "BACKWARD", "fused")


@pytest.fixture
def trimmed_fused_backward(monkeypatch, fused_backward):
    """The fused backward with its trimmed key loop (configs.FUSED_STEP = "trimmed")."""
    monkeypatch.setattr(configs, "FUSED_STEP", "trimmed")


@pytest.fixture
def launches(monkeypatch):
    """(kernel kind, DENSE argument or None) of every launch, in order."""
    from triton_testing import record_launches

    return record_launches(monkeypatch, "DENSE")
