"""bench/gpu_tools/targets.py: the targets table and chart made from gpu_rates.py's JSON, checked on
records drawn at random (the script needs no GPU)."""
import json
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "gpu_tools"
RESULTS = ROOT / "bench" / "results" / "2026-11-28-h200-gpu-check-56308b3"
sys.path.insert(0, str(BENCH))

import gpu_rates  # noqa: E402
import targets  # noqa: E402

TARGETED = list(targets.RATE_TARGETS) + [targets.MEMORY_TARGET]


def record(rng, backend, dtype, config, mode):
    """A gpu_rates.py record with the fields targets.py reads, its rate about the target's."""
    goal = targets.RATE_TARGETS.get((config, mode), 1e12)
    return {"backend": backend, "dtype": dtype, "config": config, "mode": mode,
            "rate": goal * rng.uniform(0.3, 1.7), "memory_bound": goal * rng.uniform(0.5, 3),
            "kernel_ms": rng.uniform(0.01, 300), "bnd_mib": 37.5,
            "peak_mib": 37.5 * rng.uniform(1, 2 * targets.MAX_TENSORS)}


def write_run(path, records, device="NVIDIA H200", bound=2.09e12):
    path.write_text(json.dumps({"device": device, "bound": bound, "records": records}))
    return str(path)


def cells(rows):
    """{(config, mode): [cell per backend-dtype column]} of a markdown table from targets.table."""
    split = [row.strip("| ").split(" | ") for row in rows[2:]]
    return {tuple(parts[:2]): parts[2:-1] for parts in split}


def columns():
    return [(b, t) for b in targets.BACKENDS for t in targets.DTYPES]


def test_targets_are_what_gpu_rates_measures():
    measured = {(name, mode) for name, *_, modes in gpu_rates.CONFIGS for mode in modes}
    assert set(TARGETED) <= measured
    assert set(targets.BACKENDS) == set(gpu_rates.BACKENDS)
    assert set(targets.DTYPES) == set(gpu_rates.DTYPES)


@pytest.mark.parametrize("seed", range(6))
def test_table_marks_what_meets_its_target(tmp_path, seed):
    rng = random.Random(seed)
    recs = [record(rng, b, t, c, m) for b, t in columns() for c, m in TARGETED
            if rng.random() < 0.85]  # some cells unmeasured
    rows = targets.table(targets.load([write_run(tmp_path / "r.json", recs)])[0])
    table = cells(rows)
    assert len(rows) == 2 + len(TARGETED)
    for (config, mode) in TARGETED:
        for (backend, dtype), cell in zip(columns(), table[config, mode]):
            found = [r for r in recs if (r["backend"], r["dtype"], r["config"], r["mode"])
                     == (backend, dtype, config, mode)]
            if not found:
                assert cell == "-"
                continue
            r = found[0]
            if (config, mode) == targets.MEMORY_TARGET:
                tensors = r["peak_mib"] / r["bnd_mib"]
                assert f"{tensors:.1f} B·n·d" in cell and f"{r['kernel_ms']:.1f} ms" in cell
                assert cell.startswith("**") == (tensors <= targets.MAX_TENSORS)
                continue
            goal = targets.RATE_TARGETS[config, mode]
            assert f"{r['rate'] / 1e12:.3g}e12" in cell
            if r["rate"] >= goal:
                assert cell.startswith("**") and "%" not in cell
            else:
                assert not cell.startswith("**") and cell.endswith(f"({r['rate'] / goal:.0%})")


def test_taken_variant_and_later_files_stand_in_for_the_default(tmp_path):
    rng = random.Random(7)
    config, mode = "r=8", "fwd+bwd"
    first = [record(rng, b, t, config, mode) for b, t in columns()]
    variant = record(rng, "cuda rcp-fma", "bfloat16", config, mode)
    later = [record(rng, "triton", "float32", config, mode),
             record(rng, "cuda", "bfloat16", config, mode)]
    a = write_run(tmp_path / "a.json", first + [variant], device="first")
    b = write_run(tmp_path / "b.json", later, device="second")

    plain, run = targets.load([a, b])
    assert plain["cuda", "float32", config, mode] == first[0]
    assert plain["triton", "float32", config, mode] == later[0]
    assert plain["cuda", "bfloat16", config, mode] == later[1]  # variants only when taken
    assert run == {"device": "first", "bound": 2.09e12}
    taken, _ = targets.load([a, b], ("cuda rcp-fma",))
    assert taken["cuda", "bfloat16", config, mode] == variant  # over the later file's default
    assert taken["cuda", "float32", config, mode] == first[0]
    assert taken["triton", "bfloat16", config, mode] == first[3]


def test_unknown_variant_is_named_before_any_output(tmp_path, capsys):
    rng = random.Random(3)
    path = write_run(tmp_path / "r.json", [record(rng, "cuda", "float32", "r=8", "fwd")])
    with pytest.raises(SystemExit) as e:
        targets.main([path, "--take", "cuda tile4", "--plot", str(tmp_path / "t.png")])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""
    assert "'cuda tile4'" in err and "labels there: cuda" in err
    assert not (tmp_path / "t.png").exists()


def test_plot_of_a_real_run(tmp_path, capsys):
    from matplotlib.image import imread  # a dev dependency: make setup installs it

    png = tmp_path / "targets.png"
    assert targets.main([str(RESULTS / "rates.json"), str(RESULTS / "rates_combined.json"),
                         "--take", "cuda rcp-fma", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert sum(line.startswith("| ") for line in out.splitlines()) == 1 + len(TARGETED)
    assert f"wrote {png}" in out
    image = imread(png)
    assert image.shape[0] > 300 and image.shape[1] > 3 * image.shape[0]
    assert image.std() > 0.05  # not a blank canvas


@pytest.mark.parametrize("measured", [True, False])
def test_gpu_check_ends_with_the_targets(tmp_path, measured):
    # gpu_check.sh's last step (from `step tables` to its end), on the files of a run whose
    # rates step wrote its JSON, and of one cut short before it did.
    script = (BENCH / "gpu_check.sh").read_text().splitlines()
    start = script.index("step tables")
    (tmp_path / "rates.md").write_text("| backend | dtype |\n|---|---|\n| cuda | float32 |\n")
    (tmp_path / "device.txt").write_text("")
    if measured:
        rng = random.Random(11)
        write_run(tmp_path / "rates.json", [record(rng, b, t, c, m) for b, t in columns()
                                            for c, m in TARGETED])
    harness = "\n".join([
        "set -uo pipefail", f"PY={sys.executable}", f"LOG={tmp_path}", "SECONDS=0",
        "tests_status=0 triton_status=0 rates_status=0", 'step() { echo "== $1"; }',
        *script[start:]])
    proc = subprocess.run(["bash", "-c", harness], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "| cuda | float32 |" in out
    assert ("== targets" in out) == measured
    assert sum(line.startswith(("| r=8 |", "| one block |", "| DiSA")) for line in
               out.splitlines()) == (len(TARGETED) if measured else 0)


def test_readme_table_is_what_its_command_prints(tmp_path, capsys):
    # The README's targets table and the shell lines under it that made it (and its chart).
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### On an H200"):readme.index("### How the CUDA kernels")]
    table = [line for line in section.splitlines() if line.startswith("|")]
    lines = re.search(r"```sh\n(.*?)```", section, flags=re.S).group(1).replace("\\\n", " ")
    folder = re.match(r"R=(\S+)\n", lines).group(1)
    command = shlex.split(lines.split("\n", 1)[1].replace("$R", folder))
    assert command[:2] == ["python", "bench/gpu_tools/targets.py"] and (ROOT / folder).is_dir()
    args = [str(ROOT / a) if a.startswith("bench/") else a for a in command[2:]]
    plot = args.index("--plot") + 1
    assert args[plot].endswith("bench/gpu_tools/targets.png") and Path(args[plot]).is_file()
    args[plot] = str(tmp_path / "targets.png")
    assert targets.main(args) == 0
    printed = capsys.readouterr().out
    assert table == [line for line in printed.splitlines() if line.startswith("|")]
