"""What is missing is named with the way to get it: the built extension (blosa._C), triton,
onnxscript."""
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


HIDE = """
import importlib.abc, sys

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == {package!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Hide())
"""
HIDE_TRITON = HIDE.format(package="triton") + """
import torch, blosa
x = torch.randn(1, 3, 2)
print(blosa.masked_block_attn(x, x, x).shape)  # the CPU backend needs no triton
blosa.masked_block_attn(x, x, x, backend="triton")
"""


def test_triton_backend_without_triton_says_what_to_install():
    run = subprocess.run([sys.executable, "-c", HIDE_TRITON], capture_output=True, text=True)
    assert run.stdout.strip() == "torch.Size([1, 3, 2])", run.stderr[-2000:]
    assert "backend='triton' needs the triton package (pip install triton" in run.stderr, run.stderr[-2000:]


def test_onnx_export_without_triton_translates_the_cpu_and_cuda_op():
    code = HIDE.format(package="triton") + "import blosa.onnx; print(sorted(map(str, blosa.onnx.translations())))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.strip() == "['blosa.masked_block_attn_fwd.default']", run.stderr[-2000:]


def test_onnx_export_without_onnxscript_says_what_to_install():
    code = HIDE.format(package="onnxscript") + "import blosa.onnx"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode != 0
    assert "blosa.onnx needs the onnx and onnxscript packages (pip install onnx onnxscript" in run.stderr, \
        run.stderr[-2000:]
