"""setup.py's parallel compiles (run_forked): every source's compile runs, several at once, and
a failed one is named once the others have ended. And its CUDA decisions: whether the toolkit
can compile the CUDA sources, and which architectures to compile for with no GPU visible."""
import importlib.util
import pathlib
import subprocess
import sys
import tarfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def setup_module():
    spec = importlib.util.spec_from_file_location("blosa_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines the build helpers; setup() runs only as a script
    return module


def wait_for(path, seconds=30.0):
    end = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > end:
            raise TimeoutError(f"{path.name} never appeared")
        time.sleep(0.01)


def test_tasks_run_at_once_in_forked_processes(setup_module, tmp_path):
    # Each of the two tasks waits for the other's file: they end only if both run together.
    a, b = tmp_path / "a", tmp_path / "b"

    def first():
        a.touch()
        wait_for(b)

    def second():
        b.touch()
        wait_for(a)

    setup_module.run_forked([("first.cu", first), ("second.cpp", second)], workers=2)
    assert a.exists() and b.exists()


def test_a_failed_compile_is_named_after_the_others_end(setup_module, tmp_path):
    def writes(name):
        return lambda: (tmp_path / name).touch()

    def fails():
        raise RuntimeError("nvcc: error")

    tasks = [("csrc/ok1.cpp", writes("ok1")), ("csrc/bad.cu", fails), ("csrc/ok2.cpp", writes("ok2")),
             ("csrc/ok3.cpp", writes("ok3"))]
    with pytest.raises(setup_module.CompileError) as caught:
        setup_module.run_forked(tasks, workers=2)
    assert str(caught.value) == "compiling failed: csrc/bad.cu"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok1", "ok2", "ok3"]


def toolkit(tmp_path, with_header):
    """A folder laid out like a CUDA toolkit, with or without include/cuda_runtime.h."""
    (tmp_path / "include").mkdir(parents=True)
    if with_header:
        (tmp_path / "include" / "cuda_runtime.h").touch()
    return str(tmp_path)


def test_toolkit_problems_are_named(setup_module, tmp_path):
    problem = setup_module.cuda_toolkit_problem
    assert problem(None, "/usr/local/cuda") == "this torch is a CPU build"
    assert "no CUDA toolkit found" in problem("13.0", None)
    wrapper_home = toolkit(tmp_path / "wrapper", with_header=False)
    assert problem("13.0", wrapper_home) == (
        f"CUDA_HOME={wrapper_home} has no include/cuda_runtime.h (set CUDA_HOME to the toolkit)")
    assert problem("13.0", toolkit(tmp_path / "real", with_header=True)) is None


@pytest.mark.parametrize("forced, with_header, want, says", [
    (None, True, True, ""),
    (None, False, False, "building without the CUDA kernels"),
    ("1", False, True, "has no include/cuda_runtime.h"),  # forced on: warned, still compiled
    ("0", False, False, ""),
])
def test_want_cuda(setup_module, tmp_path, monkeypatch, capsys, forced, with_header, want, says):
    import torch

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(setup_module.cpp_extension, "CUDA_HOME", toolkit(tmp_path, with_header))
    if forced is None:
        monkeypatch.delenv("BLOSA_CUDA", raising=False)
    else:
        monkeypatch.setenv("BLOSA_CUDA", forced)
    assert setup_module.want_cuda() is want
    err = capsys.readouterr().err
    assert says in err if says else err == ""


def test_default_architectures_only_without_a_gpu_or_a_choice(setup_module):
    default = setup_module.default_cuda_archs

    def no_gpu_asked():
        raise AssertionError("counted the GPUs though TORCH_CUDA_ARCH_LIST was set")

    assert default({}, lambda: 0) == setup_module.DEFAULT_CUDA_ARCHS == "8.0;9.0+PTX"
    assert default({"TORCH_CUDA_ARCH_LIST": "9.0"}, no_gpu_asked) is None
    assert default({"TORCH_CUDA_ARCH_LIST": ""}, lambda: 0) == "8.0;9.0+PTX"
    assert default({}, lambda: 1) is None


def test_sdist_holds_every_source_and_header(tmp_path):
    """An sdist must compile where it is unpacked: setuptools packs only the .cpp files setup.py
    names, so the headers (.h, .cuh) and the .cu files come from MANIFEST.in."""
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path),
                    "sdist", "--dist-dir", str(tmp_path)], cwd=ROOT, check=True, capture_output=True)
    (sdist,) = tmp_path.glob("blosa-*.tar.gz")
    with tarfile.open(sdist) as archive:
        packed = {pathlib.Path(*pathlib.Path(name).parts[1:]).as_posix() for name in archive.getnames()}
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc").rglob("*")
               if p.is_file() and p.suffix in (".h", ".cuh", ".cpp", ".cu")}
    assert len(sources) > 10
    assert sources <= packed, f"missing from the sdist: {sorted(sources - packed)}"


def test_without_torch_the_build_says_to_install_it_first():
    """pip's isolated build (no --no-build-isolation) has no torch: a bare ModuleNotFoundError
    before; now the way to install."""
    hide_torch = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = ['setup.py', '--version']; "
                  "runpy.run_path('setup.py', run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", hide_torch], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "torch must be installed first" in run.stderr
    assert "pip install --no-build-isolation" in run.stderr
