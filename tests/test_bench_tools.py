"""The arithmetic of the GPU benchmark scripts, checked on CPU (the scripts themselves need a GPU).

Every rate in bench/RESULTS.md (and bench/HISTORY.md) divides bench/gpu_tools/gpu_rates.py's
element count by a time, so the count is checked here against the reference's own rule for
which pairs may attend.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from attn_cases import DIRECTIONS, generator_for
from blosa.reference import allowed_pairs, resolve_block_len

BENCH = str(Path(__file__).resolve().parents[1] / "bench" / "gpu_tools")
sys.path.insert(0, BENCH)

import bias_reduce  # noqa: E402
import gpu_rates  # noqa: E402
import ncu_stalls  # noqa: E402
import sass_loads  # noqa: E402
import small_variants  # noqa: E402


def counted_by_reference(B, n, d, block_len, direction):
    r = resolve_block_len(block_len, n)
    m = -(-n // r)
    real = torch.zeros(B, m * r, dtype=torch.bool)
    real[:, :n] = True  # positions past n pad the last block
    return int(allowed_pairs(real.view(B, m, r), r, direction).sum()) * d


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("n, block_len", [(1, 0), (7, 1), (12, 3), (13, 5), (384, 8), (50, 0), (9, 20)])
def test_element_count_matches_the_reference(direction, n, block_len):
    B, d = 2, 3
    assert gpu_rates.elements(B, n, d, block_len, direction) == counted_by_reference(B, n, d, block_len, direction)


def tensor_bytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])  # the CPU op's dtypes
def test_least_bytes_are_those_of_the_ops_tensors(dtype):
    # min_bytes against the tensors the CPU op takes and returns in each mode: the forward
    # op's inputs and outputs, then the backward op's (the recomputing backward, handed an empty
    # lse, recomputes out instead of reading it).
    B, n, d = 2, 24, 5
    gen = generator_for("least-bytes", dtype)
    dep, head, value, grad_out = (torch.randn(B, n, d, generator=gen, dtype=dtype) for _ in range(4))
    bias = torch.randn(d, generator=gen, dtype=dtype)
    inputs = (dep, head, value, bias)
    for mode in ("fwd", "fwd+lse", "fwd+bwd", "fwd+bwd+lse"):
        with_lse = mode.endswith("+lse")
        out, lse = torch.ops.blosa.masked_block_attn_fwd(*inputs, None, 8, "forward", 5.0, with_lse)
        moved = tensor_bytes(*inputs, out, lse)
        if mode.startswith("fwd+bwd"):
            grads = torch.ops.blosa.masked_block_attn_bwd(grad_out, *inputs, None, out, lse, 8,
                                                          "forward", 5.0)
            moved += tensor_bytes(grad_out, *inputs, *grads) + (tensor_bytes(out, lse) if with_lse else 0)
        assert lse.numel() == (B * n * d if with_lse else 0)
        assert gpu_rates.min_bytes(B, n, d, dtype.itemsize, mode) == moved, mode


def test_memory_bounds_print_without_a_gpu(capsys):
    # `gpu_rates.py --memory-bounds B_PER_S`: one row per config, dtype and mode, whose rate is
    # the config's elements over its least bytes' time at that bandwidth.
    assert gpu_rates.main(["--memory-bounds", "4e12"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| r=8 | bfloat16")]
    assert [r.split(" | ")[2] for r in rows] == ["fwd", "fwd+lse", "fwd+bwd", "fwd+bwd+lse"]
    moved = gpu_rates.min_bytes(64, 384, 300, 2, "fwd")
    assert rows[0].endswith(f"| {moved / 1e6:.1f} | "
                            f"{gpu_rates.elements(64, 384, 300, 8) / (moved / 4e12):.3g} |")


def test_variant_sweep_runs_each_cuda_variant_on_the_config_it_changes():
    jobs = list(gpu_rates.jobs(["cuda", "triton"], ["tile4", "tile8+fused", "vec2",
                                                     "persistent+vec2", "general"]))
    swept = [j for j in jobs if j[2]]
    # each variant: 2 dtypes x 2 modes
    assert [j[2] for j in swept] == ([{"BLOSA_CUDA_TILE": "4"}] * 4
                                     + [{"BLOSA_CUDA_TILE": "8", "BLOSA_CUDA_BACKWARD": "fused"}] * 4
                                     + [{"BLOSA_CUDA_SMALL_VEC": "2"}] * 4
                                     + [{"BLOSA_CUDA_SMALL_PERSISTENT": "1",
                                         "BLOSA_CUDA_SMALL_VEC": "2"}] * 4
                                     + [{"BLOSA_CUDA_SMALL_DENSE": "0"}] * 4)
    assert [j[3] for j in swept] == ["float32", "float32", "bfloat16", "bfloat16"] * 5
    assert [j[5] for j in swept] == ["fwd", "fwd+bwd"] * 10
    assert all(j[1] == "cuda" for j in swept)
    # vec2, persistent and general: the small kernels
    assert [j[4][0] for j in swept] == ["one block"] * 8 + ["r=8"] * 12
    assert len(jobs) == 2 * 2 * 7 + len(swept)  # every backend: 2 dtypes x 7 (config, mode)
    first_triton = next(i for i, j in enumerate(jobs) if j[1] == "triton")
    assert all(jobs.index(j) < first_triton for j in swept)  # before Triton's slow compiles


def test_triton_variants_follow_the_triton_default():
    variants = ["fused", "fused+fast32", "per-block", "general"]
    jobs = list(gpu_rates.jobs(["cuda", "triton"], ["tile4"], variants))
    triton = [j for j in jobs if j[1] == "triton"]
    assert [j[0] for j in triton] == (["triton"] * 14 + ["triton fused"] * 4
                                      + ["triton fused+fast32"] * 4 + ["triton per-block"] * 4
                                      + ["triton general"] * 4)
    assert triton[21][2] == {"BACKWARD": "fused",
                             "FAST_TANH_DTYPES": ("float32", "float16", "bfloat16")}
    assert all(j[4][0] == "one block" for j in triton[14:22])
    # per-block and general: the kernels of blocks of up to 8, so at r = 8
    assert triton[22][2] == {"PAIRS_MAX": 0} and triton[-1][2] == {"PAIRS_DENSE": False}
    assert all(j[4][0] == "r=8" for j in triton[22:])
    with pytest.raises(ValueError, match="'fast'"):
        gpu_rates.triton_variant_settings("fused+fast")


def test_triton_variant_settings_are_restored():
    from blosa_kernels import configs

    before = (configs.BACKWARD, configs.FAST_TANH_DTYPES)
    with gpu_rates.variant_applied("triton", gpu_rates.triton_variant_settings("split+fast32")):
        assert configs.BACKWARD == "split" and "float32" in configs.FAST_TANH_DTYPES
    assert (configs.BACKWARD, configs.FAST_TANH_DTYPES) == before


def test_variant_table_compares_with_the_default():
    def rec(backend, dtype, mode, ms):
        return dict(backend=backend, dtype=dtype, config="one block", mode=mode, kernel_ms=ms)
    records = [rec("cuda", "float32", "fwd", 1.5), rec("cuda", "float32", "fwd+bwd", 4.4),
               rec("triton", "float32", "fwd", 2.5), rec("cuda fused", "float32", "fwd+bwd", 2.2),
               rec("cuda staged", "float32", "fwd", 2.0), rec("triton fused", "float32", "fwd", 2.0)]
    rows = gpu_rates.variant_table(records)
    assert rows[2:] == ["| cuda fused | float32 | one block | fwd+bwd | 2.200 | 4.400 | 2.00x |",
                        "| cuda staged | float32 | one block | fwd | 2.000 | 1.500 | 0.75x |",
                        "| triton fused | float32 | one block | fwd | 2.000 | 2.500 | 1.25x |"]
    assert gpu_rates.variant_table(records[:3]) == []  # no variants measured: no table


@pytest.mark.parametrize("variant, env, config", [
    ("tile4+staged+fused", {"BLOSA_CUDA_TILE": "4", "BLOSA_CUDA_FORWARD": "staged",
                            "BLOSA_CUDA_BACKWARD": "fused"}, "one block"),
    ("stream+split", {"BLOSA_CUDA_FORWARD": "stream", "BLOSA_CUDA_BACKWARD": "split"},
     "one block"),
    ("loads-first", {"BLOSA_CUDA_SMALL_LOADS_FIRST": "1"}, "r=8"),
    ("loads-later", {"BLOSA_CUDA_SMALL_LOADS_FIRST": "0"}, "r=8"),
    ("rcp-fma", {"BLOSA_CUDA_SMALL_RCP": "fma"}, "r=8"),
    ("loads-later+rcp-mufu", {"BLOSA_CUDA_SMALL_LOADS_FIRST": "0", "BLOSA_CUDA_SMALL_RCP": "mufu"},
     "r=8"),
    ("sums-one+rcp-mufu", {"BLOSA_CUDA_COLUMN_SUMS": "one", "BLOSA_CUDA_SMALL_RCP": "mufu"}, "r=8"),
    ("small-staged", {"BLOSA_CUDA_SMALL_STAGED": "1"}, "r=8"),
    ("small-staged-backward+sums-one", {"BLOSA_CUDA_SMALL_STAGED": "backward",
                                        "BLOSA_CUDA_COLUMN_SUMS": "one"}, "r=8"),
    ("small-staged+staged-blocks8", {"BLOSA_CUDA_SMALL_STAGED": "1",
                                     "BLOSA_CUDA_SMALL_STAGED_BLOCKS": "8"}, "r=8"),
    ("staged-blocks4", {"BLOSA_CUDA_SMALL_STAGED_BLOCKS": "4"}, "r=8"),
])
def test_cuda_variants_combine(variant, env, config):
    assert gpu_rates.variant_env(variant) == env
    assert gpu_rates.variant_config(variant)[0] == config


@pytest.mark.parametrize("variant, settings, config", [
    ("bias-mv", {"BIAS_SUM": "mv"}, "r=8"),
    ("rcp-newton+bias-mv", {"PAIRS_RECIPROCAL": "newton", "BIAS_SUM": "mv"}, "r=8"),
    ("bias-sum+rcp-div", {"BIAS_SUM": "sum", "PAIRS_RECIPROCAL": "div"}, "r=8"),
    ("rows-poly", {"ROWS_EXP2": "half-poly"}, "one block"),
    ("pairs-static-d", {"PAIRS_STATIC_D": True}, "r=8"),
    ("fused-trimmed", {"FUSED_STEP": "trimmed"}, "one block"),
    ("split+fast32", {"BACKWARD": "split",
                      "FAST_TANH_DTYPES": ("float32", "float16", "bfloat16")}, "one block"),
])
def test_triton_variants_combine(variant, settings, config):
    assert gpu_rates.triton_variant_settings(variant) == settings
    assert gpu_rates.variant_config(variant)[0] == config


@pytest.mark.parametrize("variant, part", [("tile", "'tile'"), ("fused+tilex", "'tilex'"),
                                           ("tile4+sideways", "'sideways'")])
def test_unknown_variant_is_named(variant, part):
    with pytest.raises(ValueError, match=part):
        gpu_rates.variant_env(variant)


@pytest.mark.parametrize("group", [1, 4, 32, 1000])
def test_two_stage_bias_sum_matches_one_pass(group):
    # 3 * 37 = 111 rows: padded to a multiple of every group but 1.
    gen = torch.Generator().manual_seed(group)
    d_head = torch.randn(3, 37, 5, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(bias_reduce.two_stage(d_head, group), bias_reduce.one_pass(d_head),
                               rtol=0, atol=1e-12)


def test_ones_product_bias_sum_matches_one_pass():
    gen = generator_for("bias-ones-product")
    d_head = torch.randn(3, 37, 5, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(bias_reduce.ones_product(d_head), bias_reduce.one_pass(d_head),
                               rtol=0, atol=1e-12)
    ones = torch.ones(3 * 37, dtype=torch.float64)
    assert torch.equal(bias_reduce.ones_product(d_head, ones), bias_reduce.ones_product(d_head))


# A loop as cuobjdump prints it: R90 is loaded and read 4 instructions on in the same trip,
# R97 is read only after the back edge (8 on), and R12 is overwritten before any read (dead).
SASS = """
\t\tFunction : _ZN5blosa4cuda13forward_tiledIffLb1ELi8EEEvNS0_4ArgsIT_T0_EEll
        /*0000*/                   MOV R84, R97 ;
        /*0010*/                   LDG.E R90, desc[UR4][R16.64] ;
        /*0020*/                   LDG.E R97, desc[UR4][R18.64] ;
        /*0030*/               @P2 LDG.E.U8 R12, desc[UR4][R20.64] ;
        /*0040*/                   IMAD.MOV.U32 R12, RZ, RZ, 0x1 ;
        /*0050*/                   FFMA.FTZ R16, R90, R14, R41 ;
        /*0060*/                   MUFU.TANH R16, R16 ;
        /*0070*/                   STS [R3], R16 ;
        /*0080*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0090*/               @P5 BRA 0x0 ;
        /*00a0*/                   EXIT ;
"""
RES_USAGE = """
 Function _ZN5blosa4cuda13forward_tiledIffLb1ELi8EEEvNS0_4ArgsIT_T0_EEll:
  REG:125 STACK:16 SHARED:0 LOCAL:0 CONSTANT[0]:704 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_sass_load_distances_follow_the_loop_around():
    code = sass_loads.parse_functions(SASS)["_ZN5blosa4cuda13forward_tiledIffLb1ELi8EEEvNS0_4ArgsIT_T0_EEll"]
    (loop,) = sass_loads.loops(code)
    assert (loop.size, loop.mufu, loop.barriers) == (10, 1, 1)
    assert [d for _, _, d in loop.loads] == [4, 8, None]
    assert sass_loads.operands("STS [R3], R16") == (set(), {"R3", "R16"})
    assert sass_loads.registers(RES_USAGE) == {"_ZN5blosa4cuda13forward_tiledIffLb1ELi8EEEvNS0_4ArgsIT_T0_EEll": 125}
    table = sass_loads.report(SASS, RES_USAGE, "forward_tiled")
    assert "| 125 | 0x0000 | 10 | 1 | 1 | 4, 8, dead |" in table


def test_loop_blocks_split_at_branches_and_their_targets():
    # A loop with a branch over a block (0x40 -> 0x70), as the row-tile forward's padding test:
    # blocks start at the loop's start, after each branch and at each target inside the loop.
    code = [(0x00, "LDG.E R2, desc[UR4][R10.64]"), (0x10, "MUFU.TANH R3, R3"),
            (0x20, "ISETP.NE.AND P0, PT, R2, RZ, PT"), (0x30, "@!P0 BRA 0x70"),
            (0x40, "MUFU.EX2 R4, R4"), (0x50, "MUFU.EX2 R5, R5"), (0x60, "FADD R6, R4, R5"),
            (0x70, "IADD3 R7, R7, 0x1, RZ"), (0x80, "@P1 BRA 0x0")]
    (loop,) = sass_loads.loops(code)
    assert sass_loads.loop_blocks(code, loop) == [(0x00, 4, 1, 0x70), (0x40, 3, 2, None),
                                                  (0x70, 2, 0, 0x00)]
    table = sass_loads.blocks_report(SASS, RES_USAGE, "forward_tiled")
    assert table.splitlines()[2:] == ["| forward_tiled<float, float, true, 8> | 0x0000 | 0x0000 "
                                      "| 10 | 1 | 0x0000 |"]


def test_whole_kernel_counts():
    table = sass_loads.whole_report(SASS, RES_USAGE, "forward_tiled")
    # 11 instructions: one MUFU, three global loads (LDG.E.U8 included), no global store, no
    # parameter reloaded; a loop, so no count of loads read before the last one.
    assert table.splitlines()[2].endswith("| 125 | 16 | 11 | 1 | 3 | 0 | 0 | - |")  # registers, ...


def test_reads_before_the_last_load():
    code = [(0, "LDG.E R2, desc[UR4][R10.64]"), (16, "LDG.E.U8 R3, desc[UR4][R12.64]"),
            (32, "ISETP.NE.AND P0, PT, R3, RZ, PT"),  # reads R3 with a load still to issue
            (48, "LDG.E R4, desc[UR4][R14.64]"), (64, "LDG.E R5, desc[UR4][R16.64]"),
            (80, "IMAD.MOV.U32 R5, RZ, RZ, 0x1"),  # R5 overwritten unread: no reader
            (96, "FADD R6, R2, R4")]
    assert sass_loads.reads_before_last_load(code) == 1
    assert sass_loads.reads_before_last_load(code[:2] + code[3:]) == 0


def test_constant_reloads_count_each_parameter():
    code = [(0, "LDC R6, c[0x0][0x2b4]"), (16, "@P5 LDC R2, c[0x0][0x2b4]"),
            (32, "LDC.64 R4, c[0x0][0x290]"), (48, "ULDC UR4, c[0x0][0x2b4]"),
            (64, "LDC R1, c[0x0][0x28]")]
    # LDC.64 and the uniform ULDC are not reloads into a thread's register.
    assert sass_loads.constant_reloads(code) == {"c[0x0][0x2b4]": 2, "c[0x0][0x28]": 1}


# A report of gpu_check.sh's ncu step as it came back from an H200 (2026-11-28): the sections
# without the stall metrics, which the check asks for since.
NCU_REPORT = Path(BENCH).parent / "results" / "2026-11-28-h200-gpu-check-56308b3" / "ncu.txt"


def test_ncu_report_gives_each_launch_its_own_figures():
    launches = ncu_stalls.parse(NCU_REPORT.read_text())
    # 15 CUDA launches (bench/gpu_tools/ncu_kernels.py), then 6 Triton ones, in launch order.
    assert len(launches) == 21
    assert [launch.name for launch in launches[:3]] == ["forward_small", "backward_small_recompute",
                                                        "column_sums"]
    assert [launch.name for launch in launches[15:]] == ["fwd_pairs_kernel", "bwd_pairs_kernel", "fwd_rows_kernel",
                                                         "bwd_fused_kernel", "bwd_dkv_sums_kernel",
                                                         "fwd_rows_kernel"]
    # The figures the report prints under bwd_fused_kernel's header, not its neighbours'
    # (its Duration is in ms, the per-pair kernels' in us).
    fused = launches[18]
    assert (fused.grid, fused.block) == ("384, 75, 1", "32, 1, 1")
    assert fused.duration_us() == pytest.approx(1930.0)
    assert launches[15].duration_us() == pytest.approx(22.88)
    assert fused.value("Issue Slots Busy") == pytest.approx(64.50)
    assert fused.value("Achieved Active Warps Per SM") == pytest.approx(12.25)
    assert fused.value("Elapsed Cycles") == 3_821_101
    assert fused.metrics["Memory Throughput"] == ("%", pytest.approx(18.40))  # the first of two
    assert all(not launch.stalls for launch in launches)
    row = ncu_stalls.table(launches).splitlines()[2 + 18]
    assert row == "| 19 | bwd_fused_kernel | 1930.0 | 64.5 | 12.2 of 16 | - |"


def synthetic_ncu_report(gen):
    """An ncu text report of two launches (a C++ kernel with template arguments, a Triton one)
    with random stall figures in the command-line metrics section, and those figures."""
    reasons = ["barrier", "long_scoreboard", "math_pipe_throttle", "not_selected", "short_scoreboard",
               "wait"]
    stalls = [{r: round(float(v), 2) for r, v in zip(reasons, torch.rand(len(reasons), generator=gen) * 9)}
              for _ in range(2)]
    durations = [round(float(v), 2) for v in torch.rand(2, generator=gen) * 900 + 1]
    lines = ["==PROF== Connected to process 1 (/usr/bin/python3)"]
    headers = ["  void blosa::cuda::backward_small<c10::BFloat16, float, 0>(Args<T1, T2>) (3600, 1, 1)x(256, 1, 1), "
               "Context 1, Stream 7, Device 0, CC 9.0",
               "  bwd_fused_kernel (384, 75, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0"]
    for header, duration, stall in zip(headers, durations, stalls):
        lines += [header, "    Section: GPU Speed Of Light Throughput",
                  "    ----------------------- ----------- ------------",
                  "    Metric Name             Metric Unit Metric Value",
                  f"    Duration                         us {duration:12.2f}",
                  "    Elapsed Cycles                cycle    3,821,101",
                  "    OPT   Est. Local Speedup: 75%", "",
                  "    Section: Command line profiler metrics",
                  "    Metric Name                                                      Metric Unit Metric Value"]
        lines += [f"    smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio {v:17.2f}"
                  for r, v in stall.items()]
        lines.append("")
    return "\n".join(lines), durations, stalls


@pytest.mark.parametrize("top", [1, 3])
def test_ncu_stall_reasons_rank_largest_first(top):
    text, durations, stalls = synthetic_ncu_report(generator_for("ncu stalls", top))
    launches = ncu_stalls.parse(text)
    assert [launch.name for launch in launches] == ["backward_small", "bwd_fused_kernel"]
    rows = ncu_stalls.table(launches, top).splitlines()[2:]
    for launch, row, duration, stall in zip(launches, rows, durations, stalls):
        assert launch.stalls == stall
        assert launch.duration_us() == pytest.approx(duration)
        assert launch.value("Elapsed Cycles") == 3_821_101
        expected = sorted(stall.items(), key=lambda kv: -kv[1])[:top]
        assert launch.top_stalls(top) == expected  # two decimals each way: exact
        assert row.endswith(" | " + ", ".join(f"{r} {v:.2f}" for r, v in expected) + " |")


def test_ncu_stalls_says_when_a_report_has_no_launch(tmp_path, capsys):
    empty = tmp_path / "ncu.txt"
    empty.write_text("==ERROR== Failed to profile\n")
    assert ncu_stalls.main([str(empty)]) == 1
    assert "no profiled launches" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        ncu_stalls.main([str(NCU_REPORT), "--top", "0"])
    assert "--top must be at least 1, got 0" in capsys.readouterr().err


FAKE_NCU = """#!/usr/bin/env bash
# Stands in for ncu: logs its arguments; refuses --metrics when REFUSE=1, as an ncu without
# those metrics would; else prints a one-launch report (a stall figure when asked for one).
echo "$*" >> "$NCU_CALLS"
if [[ "$*" == *--metrics* && "$REFUSE" == 1 ]]; then
  echo "==ERROR== Failed to find metric regex:smsp__average_warps_issue_stalled_.*"; exit 1
fi
echo "  some_kernel (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0"
echo "    Duration                         us        22.88"
if [[ "$*" == *--metrics* ]]; then
  echo "    smsp__average_warps_issue_stalled_wait_per_issue_active.ratio        1.25"
fi
"""


@pytest.mark.parametrize("refuse", [False, True])
def test_gpu_check_ncu_step_asks_for_stalls_and_does_without_them(tmp_path, refuse):
    # gpu_check.sh's Nsight Compute step (from `NCU=` to its `fi`), run with a stand-in ncu:
    # both profiles ask for the stall metrics and its table shows them; where ncu refuses
    # them, the CUDA profile runs again without, and so does the Triton one.
    script = (Path(BENCH) / "gpu_check.sh").read_text().splitlines()
    start = next(i for i, line in enumerate(script) if line.startswith("NCU="))
    end = next(i for i in range(start, len(script)) if script[i] == "fi")
    (tmp_path / "bin").mkdir()
    ncu = tmp_path / "bin" / "ncu"
    ncu.write_text(FAKE_NCU)
    ncu.chmod(0o755)
    harness = "\n".join([
        "set -uo pipefail", f"PY={sys.executable}", f"LOG={tmp_path}", "BUDGET=570",
        'step() { echo "== $1"; }', 'timed() { shift 2; "$@"; }', *script[start:end + 1]])
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", REFUSE=str(int(refuse)),
               NCU_CALLS=str(tmp_path / "calls.txt"))
    proc = subprocess.run(["bash", "-c", harness], cwd=Path(BENCH).parents[1], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    asked = ["--metrics regex:smsp__average_warps_issue_stalled_" in call for call in calls]
    kernels = ["--backend triton" in call for call in calls]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 1 |")]
    if refuse:
        assert asked == [True, False, False] and kernels == [False, False, True]
        assert "==ERROR== Failed to find metric" in proc.stdout
        assert rows == ["| 1 | some_kernel | 22.9 | - | - | - |"]
    else:
        assert asked == [True, True] and kernels == [False, True]
        assert rows == ["| 1 | some_kernel | 22.9 | - | - | wait 1.25 |"]


def test_triton_picks_name_each_tuned_shape(monkeypatch):
    import triton

    from blosa_kernels import configs

    class Tuned:  # an autotuner after three keys were tuned
        cache = {(300, 8, 0, True): triton.Config({"BM": 64, "BD": 32}, num_warps=16),
                 (300, 512, 0, False): triton.Config({"BM": 64, "BD": 64}, num_warps=8),
                 (300, 512, 0, True): triton.Config({"BM": 64, "BD": 32}, num_warps=4, maxnreg=168)}

    class TunedForOneD:  # the per-pair forward compiled for d = 300, one key tuned
        cache = {(300, 8, 0, True, 2, 300): triton.Config({"BLOCK": 512}, num_warps=4)}

    monkeypatch.setattr(configs, "TUNED", {"fwd_rows": Tuned()})
    monkeypatch.setattr(configs, "TUNED_STATIC_D", {"fwd_pairs": TunedForOneD()})
    assert gpu_rates.triton_picks() == [
        "- fwd_rows, (300, 8, 0, True): {'BM': 64, 'BD': 32, 'num_warps': 16}",
        "- fwd_rows, (300, 512, 0, False): {'BM': 64, 'BD': 64, 'num_warps': 8}",
        "- fwd_rows, (300, 512, 0, True): {'BM': 64, 'BD': 32, 'num_warps': 4, 'maxnreg': 168}",
        "- fwd_pairs, (300, 8, 0, True, 2, 300): {'BLOCK': 512, 'num_warps': 4}",
    ]


def test_rates_keep_what_was_measured_when_interrupted(monkeypatch, tmp_path, capsys):
    # bench/gpu_tools/gpu_check.sh stops gpu_rates.py with SIGINT when its time is up; the jobs
    # measured by then must still reach the tables and the JSON.
    import json

    calls = []

    def measure(backend, dtype, B, n, d, r, mode, profile_host=False):
        calls.append((backend, mode))
        if len(calls) == 4:
            raise KeyboardInterrupt
        return 2.0, 0, {"kernel": 1.0}

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "fake GPU")
    monkeypatch.setattr(gpu_rates, "sfu_bound", lambda: 2e12)
    monkeypatch.setattr(gpu_rates, "dram_bandwidth", lambda: 4e12)
    monkeypatch.setattr(gpu_rates, "measure", measure)
    out = tmp_path / "rates.json"
    try:
        status = gpu_rates.main(["--out", str(out), "--backends", "cuda", "--cuda-variants", "vec2"])
    except KeyboardInterrupt:  # uncaught, it would stop this whole test session
        pytest.fail("gpu_rates.main let the interrupt through")
    assert status == 0
    saved = json.loads(out.read_text())
    total = len(list(gpu_rates.jobs(["cuda"], ["vec2"])))
    assert len(saved["records"]) == 3 and len(calls) == 4
    assert saved["skipped"] == {"interrupted": f"after 3 of {total} jobs"}
    table = capsys.readouterr().out.split("| backend | dtype |")[1]
    assert table.count("| cuda | float32 |") == 3
    for rec in saved["records"]:  # 1 ms of kernels: the rate against 4e12 B/s moving min_bytes
        seconds = rec["min_bytes"] / 4e12
        assert rec["memory_bound"] == pytest.approx(rec["elements"] / seconds)
        assert rec["fraction_of_memory_bound"] == pytest.approx(seconds / 1e-3)


def test_host_profile_names_where_the_time_goes(monkeypatch):
    # CPU stand-in for a launch: the report gives the time per call and the functions under it.
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    def slow_launch():
        time.sleep(0.002)

    report = gpu_rates.host_profile(lambda: slow_launch(), calls=5)
    per_call = float(report.split("host ", 1)[1].split(" us", 1)[0])
    assert 2000 <= per_call < 20000
    assert "slow_launch" in report and "ncalls" in report
    # Both orders, and the sleep (a builtin) tops the list by own time.
    by_cumulative, by_own = report.split("by cumulative:", 1)[1].split("by tottime:")
    assert "slow_launch" in by_cumulative
    first_row = by_own.split("filename:lineno(function)", 1)[1].strip().splitlines()[0]
    assert "time.sleep" in first_row


def test_host_profile_times_a_function_apart(monkeypatch):
    # The share of a named function (the Triton launches on a GPU), by a plain clock, and the
    # function is restored after.
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    class Launcher:
        @staticmethod
        def launch():
            time.sleep(0.003)

    original = Launcher.launch

    def call():
        Launcher.launch()
        Launcher.launch()
        time.sleep(0.001)

    report = gpu_rates.host_profile(call, calls=4, timed=(Launcher, "launch"))
    share = report.split("; launch: ", 1)[1]
    per_call_us = float(share.split(" us per call", 1)[0])
    assert 6000 <= per_call_us < 60000  # two sleeps of 3 ms, not the 1 ms beside them
    assert "(2 calls of it per call)" in share
    assert Launcher.launch is original


def run_apart(*args: str) -> str:
    """stdout of `python *args` in a process of its own, without TRITON_INTERPRET (these replace
    triton's driver, or import triton as the GPU machines do); fails on a non-zero exit."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


# A forward+backward of the Triton op at r = 8 with bench/gpu_tools/triton_stand_in.py as
# triton's driver.
STAND_IN = f"""
import sys
sys.path.insert(0, {BENCH!r})
import triton_stand_in
triton_stand_in.install()
import torch, blosa
leaves = [torch.randn(2, 16, 3, requires_grad=True) for _ in range(3)]
def step():
    out = blosa.masked_block_attn(*leaves, None, None, 8, "forward", 5.0, backend="triton")
    torch.autograd.grad(out, leaves, torch.ones_like(out))
"""


def test_triton_stand_in_runs_the_launch_path():
    # bench/gpu_tools/triton_stand_in.py lets a machine with no GPU time Triton's launch path:
    # the kernels compile for sm_90 and go through the autotuner and the JIT's launch, down to
    # the C launcher's stand-in, which notes them. In a subprocess: it replaces triton's driver.
    out = run_apart("-c", STAND_IN + 'step()\nprint(",".join(triton_stand_in.launched))')
    assert out.split() == ["fwd_pairs_kernel,bwd_pairs_kernel"], out
    timing = run_apart(os.path.join(BENCH, "host_overhead.py"), "--backend", "triton-stand-in",
                       "--calls", "5")
    assert "forward+backward (autograd)" in timing and "us per call" in timing


STAND_IN_TWICE = STAND_IN + """
from triton.runtime.autotuner import Autotuner
runs = []
run = Autotuner.run
Autotuner.run = lambda self, *args, **kwargs: runs.append(1) or run(self, *args, **kwargs)
for _ in range(2):
    step()
    print(len(runs), ",".join(triton_stand_in.launched), ",".join(map(str, triton_stand_in.warps)))
"""


def test_eager_triton_launches_reuse_the_autotuners_pick():
    # The eager path asks the autotuner once per key, then launches its kernel with the pick
    # itself (blosa_kernels/op.py, _picked): the second call runs no Autotuner.run and launches
    # the same kernels with the warps the autotuner chose (the stand-in ranks fewest first: 2).
    out = run_apart("-c", STAND_IN_TWICE)
    kernels = "fwd_pairs_kernel,bwd_pairs_kernel"
    assert out.split("\n")[:2] == [f"2 {kernels} 2,2", f"2 {kernels},{kernels} 2,2,2,2"], out


# host_overhead.py with the stubbed Triton op, run as a script after `before` (statements);
# what follows it runs too.
HOST_OVERHEAD = """
import runpy, sys
{before}
sys.argv = ["host_overhead.py", "--backend", "triton-stubbed", "--calls", "5", *{flags!r}]
try:
    runpy.run_path({script!r}, run_name="__main__")
except SystemExit as done:
    assert not done.code, done.code
"""
SCRIPT = os.path.join(BENCH, "host_overhead.py")


def test_triton_stubbed_runs_where_the_interpreter_cannot():
    # The stubbed op runs no kernel, so it must not ask for TRITON_INTERPRET, which blosa_kernels
    # refuses with triton < 3.7 and numpy >= 2.4 (the H200 machine's pair: it failed there on
    # 2026-11-27). In a subprocess: it imports triton under those versions.
    old_triton = ('import numpy, triton\n'
                  'numpy.__version__, triton.__version__ = "2.5.2", "3.6.0"  # the GPU machines\' pair')
    out = run_apart("-c", HOST_OVERHEAD.format(before=old_triton, flags=[], script=SCRIPT))
    assert "backend triton-stubbed" in out and "forward+backward (autograd)" in out


COUNT_EAGER_CALLS = f"""
sys.path.insert(0, {BENCH!r})
import host_overhead  # noqa: F401  (puts python/ on the path)
from blosa_kernels import op
calls = []
forward = op._EagerAttn.forward
op._EagerAttn.forward = staticmethod(lambda *args: calls.append(1) or forward(*args))
"""


@pytest.mark.parametrize("flags", [[], ["--via-op"]])
def test_host_overhead_times_the_eager_path_or_the_op(flags):
    # Plain calls of the Triton op take its eager path (blosa_kernels/op.py); --via-op times the
    # torch.library op instead, as torch.compile sees it. In a subprocess, as above.
    script = HOST_OVERHEAD.format(before=COUNT_EAGER_CALLS, flags=flags, script=SCRIPT)
    out = run_apart("-c", script + 'print("eager calls", len(calls))')
    calls = int(out.split("eager calls")[-1])
    assert ("via the op" in out) == bool(flags)
    assert (calls == 0) == bool(flags), out  # the forward+backward's warm-up and timed calls


def test_small_variants_compare_names_what_got_worse():
    head = "| kernel | a | b | c | d | e | f | g | h |\n|---|---|---|---|---|---|---|---|---|\n"
    before = head + "| k1 | 64 | 0 | 1000 | 66 | 30 | 25 | 1 | 15 |\n| k2 | 40 | 0 | 600 | 66 | 22 | 8 | 1 | - |\n"
    after = head + "| k1 | 80 | 0 | 900 | 66 | 30 | 25 | 1 | 0 |\n| k2 | 40 | 0 | 600 | 66 | 22 | 8 | 1 | - |\n"
    lines = small_variants.compare(before, after).splitlines()
    assert lines == ["WORSE k1: registers 64 -> 80, instructions 1000 -> 900, early 15 -> 0",
                     "2 kernels; more registers in 1, stack in 0, loads in 0, reloads in 0, "
                     "early in 0; instructions 1600 -> 1500"]


def test_small_variants_ptx_sums_count_each_kernel_on_its_own():
    # Register names restart in each .entry: %f3, a product in the first kernel, is an add's
    # result in the second, whose add of it is left to nobody's choice.
    ptx = """
.visible .entry _Z3onev(
)
{
	mul.ftz.f32 	%f3, %f1, %f2;
	add.ftz.f32 	%f4, %f3, %f1;
	sub.ftz.f32 	%f5, %f1, %f3;
}
.visible .entry _Z3twov(
)
{
	add.ftz.f32 	%f3, %f1, %f2;
	add.ftz.f32 	%f4, %f3, %f1;
}
"""
    assert small_variants.ptx_sums(ptx).splitlines() == [
        "_Z3onev: 2", "_Z3twov: 0",
        "2 kernels; 1 leave ptxas 2 additions that take an unfused product"]
    assert small_variants.ptx_sums(ptx, "two").splitlines()[-1].startswith("1 kernels; 0 leave")


def test_small_variants_instantiate_what_the_dispatcher_can_pick():
    # with_small_variant (csrc/cuda/dispatch.h): per direction, float accumulation 8 variants
    # of each of the two kernels (widths 1 and 2: persistent, fixed, running max; width 1 also
    # dense and dense with its loads first), double 3 (width 1: dense, fixed, running max); and
    # backward_small: 4 · (3 · (16 + 1) + (6 + 1)) = 232; dispatch_forward's 16-bit dense
    # forwards with their loads first dividing by reciprocal_newton: 4 · 2 more; and the staged
    # kernels (staged_small.cuh) of the three float-accumulating types, the forward dividing
    # and (16-bit) by reciprocal_newton, and the backward: 4 · (3 + 3 + 2) = 32.
    text = small_variants.source()
    assert text.count("template __global__") == 272
    for scalar in ("c10::BFloat16", "c10::Half", "float"):
        assert f"backward_small_staged<{scalar}, float, Direction::kDiag>" in text
    assert "forward_small_staged<c10::Half, float, Direction::kAll, kReciprocalSteps<c10::Half>>" in text
    assert "forward_small_staged<double" not in text and "backward_small_staged<double" not in text
    assert "forward_small<double, double, Direction::kAll, true, 1, false, true, false>" in text
    assert "true, 1, false, true, true>(const Args<double" not in text  # no loads first in double
    for scalar in ("c10::BFloat16", "c10::Half"):
        assert (f"forward_small<{scalar}, float, Direction::kBackward, true, 1, false, true, true, "
                f"kReciprocalSteps<{scalar}>>") in text
    assert "kReciprocalSteps<float>" not in text  # float32 divides

