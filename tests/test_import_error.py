"""Importing blosa without its built extension says how to build it."""
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "blosa"
# -S skips site-packages' .pth files, whose editable-install finder would find the real blosa._C.
IMPORT = "import sys; sys.path[:0] = [{here!r}, {site!r}]; import blosa"


def test_missing_extension_names_the_build_command(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "blosa", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    code = IMPORT.format(here=str(tmp_path), site=sysconfig.get_paths()["purelib"])
    run = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert run.returncode != 0
    assert "blosa._C" in run.stderr and "make build" in run.stderr, run.stderr[-2000:]
