"""Where the real datasets live for the tests: ../shared/data beside the repository (its README
says formats and provenance). Tests that read it skip, saying so, where it is absent."""
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

requires_shared_data = pytest.mark.skipif(
    not SHARED_DATA.is_dir(), reason=f"the shared datasets are not at {SHARED_DATA}")
