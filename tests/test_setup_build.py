"""setup.py's parallel compiles (run_forked): every source's compile runs, several at once, and
a failed one is named once the others have ended."""
import importlib.util
import pathlib
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
