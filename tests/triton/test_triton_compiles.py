"""The kernels (and bench/gpu_tools/sfu_peak.py's loops) compile for a GPU (sm_90) on a machine
without one, and their loops issue their global loads well ahead of their use.

The interpreter does not check what the compiler checks (loop-carried types, constexpr rules,
inline PTX), so this runs blosa_kernels.compile_check in a process without TRITON_INTERPRET. It
writes every autotune config's binary, whose SASS (bench/gpu_tools/sass_loads.py, the cuobjdump that
triton bundles) shows where ptxas put each loop's loads: the per-block kernels loaded each
row one step ahead, and ptxas moved those loads to the end of the step, so every step of the
r = 8 forward and backward waited for its rows (read 2 to 20 instructions after their loads,
bench/HISTORY.md); they now load two steps ahead.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "gpu_tools"))

import sass_loads  # noqa: E402
from blosa_kernels import compile_check, configs  # noqa: E402

# Instructions between a loop's global load and its first reader, at least. Every autotune
# config of every kernel has that with triton 3.8 and with 3.6 (the GPU machines'), and all
# but one have 55 or more: with triton 3.6, fwd_blocks_kernel on 16 warps, where ptxas copies
# the streamed rows at the top of the next step, 30 instructions after their loads. Loaded
# one step ahead, the per-block kernels' rows were first read 2-20 instructions after their
# loads on 4 and 8 warps.
MIN_LOAD_TO_USE = 25


def run_without_interpreter(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module", params=[90])
def cubins(request, tmp_path_factory):
    """The folder of compile_check's binaries for sm_<arch>; compiling is the test."""
    folder = tmp_path_factory.mktemp(f"cubins_sm{request.param}")
    run_without_interpreter("-m", "blosa_kernels.compile_check", "--arch", str(request.param),
                            "--cubin-dir", str(folder))
    return folder


def test_kernels_compile_to_cubin(cubins):
    assert list(cubins.glob("*.cubin"))


KERNELS = ("fwd_blocks_kernel", "fwd_rows_kernel", "bwd_blocks_kernel", "bwd_dq_kernel",
           "bwd_dkv_kernel", "bwd_fused_kernel")


@pytest.mark.parametrize("kernel", KERNELS)
def test_loops_load_ahead(cubins, kernel):
    # One binary per autotune config: kernel-dtype-wWARPS-TILES.cubin.
    binaries = sorted(cubins.glob(f"{kernel}-*-w*-*.cubin"))
    assert binaries, f"no autotune config of {kernel} compiled"
    # The row-tile forward's two-keys-a-step loop (configs.ROWS_EXP2 = "half-poly", binaries
    # named -poly; off by default) on its 4-warp capped shapes (at 168 registers): ptxas moves
    # the next pair's mask byte to a uniform register 8 instructions after loading it, a wait
    # for memory a pair of keys. Allowed there, once a loop; every other load must be ahead.
    checked = 0
    for cubin in binaries:
        sass, _ = sass_loads.dump(str(cubin), kernel)
        for _, code in sass_loads.matching(sass, kernel):
            for loop in sass_loads.loops(code):
                mask_byte_waits = 1 if cubin.name.endswith("-poly.cubin") else 0
                for address, instruction, distance in loop.loads:
                    if not re.search(r"\bLDG\b", instruction) or distance is None:
                        continue
                    checked += 1
                    if (distance < MIN_LOAD_TO_USE and mask_byte_waits
                            and re.search(r"\bLDG\.E\.U8\b", instruction)):
                        mask_byte_waits -= 1
                        continue
                    assert distance >= MIN_LOAD_TO_USE, (
                        f"{cubin.name}: `{instruction}` at {address:#06x} is read {distance} "
                        f"instructions later, in a loop of {loop.size} "
                        f"(python bench/gpu_tools/sass_loads.py --so {cubin.name} --kernels {kernel}; "
                        f"python -m blosa_kernels.compile_check --cubin-dir DIR writes it)")
    assert checked, f"{kernel}: no global load found in a loop"


@pytest.mark.parametrize("stage", ["fwd", "bwd"])
def test_per_pair_kernels_run_at_most_three_fifths_of_the_instructions_per_pair(cubins, stage):
    # At r = 8 the per-block kernels compute all 8 queries at each key step, 56 pairs for the 28
    # that "forward" allows; the per-pair kernels compute the 28, unrolled. By the machine code
    # (triton 3.8 and 3.6; python bench/gpu_tools/sass_loads.py --per-pair DIR prints it): forward 24
    # instructions a pair against at least 44, backward 34-35 against at least 71. Computing
    # every pair (broken on purpose), forward 32-33 and backward 57: it would not pass.
    def rates(kind):
        found = sorted(cubins.glob(f"{stage}_{kind}_kernel-bf16-w*.cubin"))
        assert found, f"no autotune config of {stage}_{kind}_kernel compiled"
        return [sass_loads.per_pair(str(cubin))[0] for cubin in found]

    per_pair, per_block = rates("pairs"), rates("blocks")
    assert max(per_pair) <= 0.6 * min(per_block), (per_pair, per_block)


def binary(cubins, name: str) -> tuple[list, int]:
    """(instructions, registers per thread) of the one kernel in compile_check's binary `name`."""
    kernel = name.split("-")[0]
    sass, res_usage = sass_loads.dump(str(cubins / f"{name}.cubin"), kernel)
    (mangled, code), = sass_loads.matching(sass, kernel)
    return code, sass_loads.registers(res_usage)[mangled]


def config_binary(kernel: str, dtype: str, config, **constexprs) -> str:
    """The name (no .cubin or .ptx) compile_check's --cubin-dir gives autotune `config` of `kernel`
    (constexprs: those that differ in compile_check's process)."""
    return compile_check.config_binary_name(kernel, dtype, config.num_warps,
                                            dict(config.kwargs, **constexprs), config.maxnreg)


def sass_of(cubins, name: str) -> list:
    """The instructions of the one kernel in compile_check's binary `name`."""
    return binary(cubins, name)[0]


@pytest.mark.parametrize("stage", ["fwd", "bwd"])
def test_dense_pair_kernels_drop_the_mask_and_row_tests(cubins, stage):
    # compile_check's bfloat16 cases of each per-pair kernel at r = 8, "forward", with a mask,
    # then DENSE (no mask, whole blocks: the benchmark's calls). Triton 3.8: 648 -> 480
    # instructions forward, 952 -> 736 backward, and no mask byte loaded.
    general, dense = (sass_of(cubins, compile_check.case_binary(
        f"{stage}_pairs_kernel", "bf16", DENSE=is_dense, RCP_STEPS=0, INDEX64=False, D=0))
        for is_dense in (False, True))
    assert len(dense) <= 0.85 * len(general), (len(dense), len(general))

    def mask_bytes(code):
        return sum(bool(re.search(r"\bLDG\.E\.U8\b", text)) for _, text in code)

    assert mask_bytes(general) == 8 and mask_bytes(dense) == 0
    if stage == "fwd":
        # It reads none of its loads before issuing the last: one round trip to memory (the
        # general one reads 5-7 mask bytes and rows as they arrive, so it makes two).
        assert sass_loads.reads_before_last_load(dense) == 0
    else:
        # Every pair counts, so no pair's probability is selected: the FSELs left are two a
        # query (its 1 / sum where it has keys), 14; with a select a pair, 42.
        selects = sass_loads.count_opcode(dense, "FSEL")
        assert selects <= 2 * 8, selects


@pytest.mark.parametrize("stage, steps", [("fwd", 2), ("bwd", 3)])
def test_pair_kernels_compiled_for_one_d_take_row_offsets_as_constants(cubins, stage, steps):
    # configs.PAIRS_STATIC_D: the benchmark's dense bfloat16 r = 8 training step (1 / sum by
    # Newton steps) with d an argument (D = 0) and compiled for d = 300. A runtime d gives each
    # row's access a 64-bit address of its own (an IMAD.WIDE each: 27 forward, 48 backward, and
    # the forward a MOV each); d = 300 leaves one or two, each row an immediate offset off them,
    # and the split of an element's index a multiply, not a division (its MUFU.RCP goes). Triton
    # 3.8: forward 464 -> 376 instructions, backward 736 -> 680 and 64 -> 56 registers. The
    # forward still issues every load before it reads one.
    def kernel(D):
        name = compile_check.case_binary(f"{stage}_pairs_kernel", "bf16", DENSE=True,
                                         RCP_STEPS=steps, INDEX64=False, DIR=0, D=D)
        return binary(cubins, name)

    (runtime, runtime_registers), (static, static_registers) = kernel(0), kernel(300)
    wide = [sass_loads.count_opcode(code, "IMAD.WIDE") for code in (runtime, static)]
    assert wide[0] >= 20 and wide[1] <= 2, wide
    assert len(static) <= 0.95 * len(runtime), (len(static), len(runtime))
    assert sass_loads.count_opcode(static, "MUFU.RCP") == 0
    assert static_registers <= runtime_registers, (static_registers, runtime_registers)
    offsets = [re.search(r"\.64\+(0x[0-9a-f]+)\]", text) for _, text in static
               if re.search(r"\b(LDG|STG)\b", text)]
    # Each row u >= 1 of the element's block at u · 300 · 2 bytes from row 0's address.
    assert {int(m.group(1), 16) for m in offsets if m} == {600 * u for u in range(1, 8)}
    if stage == "fwd":
        assert sass_loads.reads_before_last_load(static) == 0


def config_registers_and_loop(cubins, kernel, dtype, config, **constexprs) -> tuple[int, int]:
    """(registers per thread, key-loop instructions) of compile_check's binary of autotune
    `config` of `kernel` (constexprs: those that differ in compile_check's process)."""
    code, registers = binary(cubins, config_binary(kernel, dtype, config, **constexprs))
    loop, = sass_loads.loops(code)
    return registers, loop.size


def test_capped_forward_configs_fit_twelve_warps(cubins):
    # configs.ROWS_CONFIGS has three shapes of 16 elements a thread with registers capped
    # (ROWS_MAXNREG) after the first shape (4 warps, 64 rows x 32 features), which takes 236
    # registers with triton 3.6 and 200 with 3.8 in compile_check's first case of the kernel
    # (the benchmark's bfloat16 one-block training forward: 8 warps per SM), then 4 warps of
    # 32 x 64 and 2 warps of 16 x 64, the same code a thread. Capped, 12 warps fit in the SM's
    # 65,536 registers, with no spill (compile_check fails on one) and the first shape's key
    # loop within a few instructions.
    cap = configs.ROWS_MAXNREG
    plain_registers, plain_loop = config_registers_and_loop(cubins, "fwd_rows_kernel", "bf16",
                                                            configs.ROWS_CONFIGS[0])
    assert 8 * 32 * plain_registers <= 65536 < 12 * 32 * plain_registers, plain_registers
    capped = [c for c in configs.ROWS_CONFIGS if c.maxnreg]
    assert [(c.num_warps, c.kwargs["BM"], c.kwargs["BD"], c.maxnreg) for c in capped] == [
        (4, 64, 32, cap), (4, 32, 64, cap), (2, 16, 64, cap)]
    assert 12 * 32 * cap <= 65536
    for config in capped:
        assert config.kwargs["BM"] * config.kwargs["BD"] == 16 * 32 * config.num_warps
        assert 12 % config.num_warps == 0
        registers, loop = config_registers_and_loop(cubins, "fwd_rows_kernel", "bf16", config)
        assert registers <= cap and loop <= plain_loop + 8, (config, registers, loop, plain_loop)


def test_forward_shape_of_sixteen_features_fits_twenty_warps(cubins):
    # configs.ROWS_CONFIGS's last shape, 16 rows x 16 features on one warp: at the benchmark's
    # d = 300 its feature tiles compute 304 features where every other shape's compute 320 (a
    # lane past d still computes its tanh and exp2), with 8 elements a thread (8 tanh a key step)
    # and, uncapped, few enough registers for 20 one-warp programs an SM.
    last = configs.ROWS_CONFIGS[-1]
    assert (last.num_warps, last.kwargs["BM"], last.kwargs["BD"], last.maxnreg) == (1, 16, 16, None)
    computed = {c.kwargs["BD"]: -(-300 // c.kwargs["BD"]) * c.kwargs["BD"] for c in configs.ROWS_CONFIGS}
    assert computed.pop(16) == 304 and min(computed.values()) == 320, computed
    code, registers = binary(cubins, config_binary("fwd_rows_kernel", "bf16", last))
    assert 20 * 32 * registers <= 65536, registers
    loop, = sass_loads.loops(code)
    body = code[loop.start:loop.end + 1]
    assert sass_loads.count_opcode(body, "MUFU.TANH") == last.kwargs["BM"] * last.kwargs["BD"] // 32


def test_polynomial_exp2_takes_half_the_row_loops_exp2(cubins):
    # configs.ROWS_EXP2 = "half-poly": the row-tile forward's loop steps two keys and takes the
    # second's exp2 from exp2_poly, so per key it holds the tanh but half the exp2 of the loop
    # without it (each loop holds the exp2 of both its branches: keys every query of the tile
    # attends, and keys at its diagonal), on every autotune config, within the register cap.
    for config in configs.ROWS_CONFIGS:
        loops = {}
        for poly in (False, True):
            name = config_binary("fwd_rows_kernel", "bf16", config, POLY_EXP2=poly)
            code, registers = binary(cubins, name)
            loop, = sass_loads.loops(code)
            body = code[loop.start:loop.end + 1]
            loops[poly] = [sass_loads.count_opcode(body, op) for op in ("MUFU.TANH", "MUFU.EX2")]
            assert registers <= (config.maxnreg or 255), (name, registers)
        (tanh, ex2), (poly_tanh, poly_ex2) = loops[False], loops[True]
        assert (poly_tanh, poly_ex2) == (2 * tanh, ex2), (config, loops)


def test_capped_fused_backward_config_fits_fifteen_warps(cubins):
    # configs.FUSED_CONFIGS ends with its (1 warp, 4 features) shape with registers capped
    # (FUSED_MAXNREG): capped 15 warps fit in the SM's 65,536 registers, with no spill
    # (compile_check fails on one), no more registers than uncapped and a key loop at most 6%
    # longer. Uncapped the shape takes 167 registers with triton 3.8 (12 warps: the cap is what
    # makes 15), and with 3.6 128 since b33140f (the tile's padding queries zeroed before the
    # key loop: 16 warps, the cap moot). On compile_check's first case of the kernel (the
    # benchmark's bfloat16 one-block training step), with the GPU's 64 rows (configs.FUSED_ROWS
    # is 16 in this process, under the interpreter).
    cap = configs.FUSED_MAXNREG
    capped, = [c for c in configs.FUSED_CONFIGS if c.maxnreg]
    plain, = [c for c in configs.FUSED_CONFIGS if not c.maxnreg and c.num_warps == capped.num_warps
              and c.kwargs == capped.kwargs]
    assert (capped.num_warps, capped.kwargs["BD"], capped.maxnreg) == (1, 4, cap)
    plain_registers, plain_loop = config_registers_and_loop(cubins, "bwd_fused_kernel", "bf16",
                                                            plain, BM=64)
    registers, loop = config_registers_and_loop(cubins, "bwd_fused_kernel", "bf16", capped, BM=64)
    assert 15 <= 65536 // (32 * cap), cap
    assert registers <= min(cap, plain_registers) and loop <= 1.06 * plain_loop, (
        registers, plain_registers, loop, plain_loop)


def test_trimmed_fused_loop_takes_fewer_instructions_a_key(cubins):
    # configs.FUSED_STEP = "trimmed" (backward.fused_keys_trimmed) on the autotuner's bfloat16
    # pick (1 warp, 64 x 4, capped), for a call without a mask (the benchmark's, compile_check's
    # first trimmed case): each key's tanh and exp2 as in the plain loop; no barrier (for a key
    # within the tile the plain loop moves its [64] mask through shared memory, with one, under
    # triton 3.8, and compares 64-bit ranges per element under 3.6); a sixth fewer
    # instructions a key, both branches counted (sm_90: 228 -> 185 with triton 3.8, 245 -> 187
    # with 3.6); no spill (compile_check fails on one) within the cap.
    capped, = [c for c in configs.FUSED_CONFIGS if c.maxnreg]

    def fused(**trimmed):
        return binary(cubins, config_binary("bwd_fused_kernel", "bf16", capped, BM=64, **trimmed))

    plain_code, _ = fused()
    code, registers = fused(TRIMMED=True)
    plain, = sass_loads.loops(plain_code)
    trimmed, = sass_loads.loops(code)
    assert trimmed.barriers == 0 and trimmed.mufu == plain.mufu
    assert trimmed.size <= 0.85 * plain.size, (trimmed.size, plain.size)
    assert registers <= capped.maxnreg


def test_trimmed_sums_have_two_tiles_loads_in_flight(cubins):
    # With the trimmed loop, bwd_dkv_sums_kernel adds two query tiles' parts a trip: the loop
    # holds both tiles' loads (d_dep's and d_value's, 8 elements a thread each), and a second
    # loop an odd last tile's, so the kernel has three times the plain one's; registers still
    # within 128, 16 warps an SM at its 4 warps a program. (compile_check's first cases of it:
    # float32 plain, bfloat16 trimmed; the parts it loads are float32 in both.)
    config, = configs.DKV_SUMS_CONFIGS
    loads = {}
    for dtype, trimmed in (("fp32", False), ("bf16", True)):
        name = config_binary("bwd_dkv_sums_kernel", dtype, config, TRIMMED=trimmed)
        code, registers = binary(cubins, name)
        loads[trimmed] = sum(bool(re.search(r"\bLDG\.E\b(?!\.U8)", text)) for _, text in code)
        assert registers <= 128, (name, registers)
    assert loads[True] == 3 * loads[False], loads


@pytest.mark.parametrize("stage", ["fwd", "bwd"])
def test_wide_pair_shapes_move_rows_as_vectors(cubins, stage):
    # configs.PAIRS_WIDE_CONFIGS: the per-pair kernels compiled for d = 300 with 2 or 4 (block,
    # feature) elements a thread, as the JIT compiles the benchmark's dense bfloat16 r = 8 call
    # (compile_check.launch_attrs): each row's load and store moves a thread's elements as one
    # vector of 2 bytes each (LDG.E for 2, LDG.E.64 for 4), none element by element, so the
    # load instructions stay those of one element; and fewer instructions an element than one
    # element a thread (sm_90, triton 3.8: forward 376 -> 332 and 312, backward 680 -> 592).
    # An index the compiler cannot prove consecutive over a thread's elements (d an argument,
    # or `e // d` replaced by a form it cannot follow) loads them one by one: 2 or 4 times the
    # LDG.E.U16.
    def kernel(config):
        code = sass_of(cubins, config_binary(f"{stage}_pairs_kernel", "bf16", config, D=300))
        return code, config.kwargs["BLOCK"] // (32 * config.num_warps)

    def loads(code, width):
        return sum(bool(re.search(rf"\bLDG\.E{width}(?=\s)", text)) for _, text in code)

    one, _ = kernel(configs.PAIRS_CONFIGS[0])
    assert loads(one, ".U16") >= 20
    for config in configs.PAIRS_WIDE_CONFIGS[f"{stage}_pairs"]:
        code, elements = kernel(config)
        width = {2: "", 4: ".64"}[elements]
        assert loads(code, width) == loads(one, ".U16") and loads(code, ".U16") == 0, config
        assert len(code) / elements <= 0.9 * len(one), (config, len(code), len(one))


def test_per_pair_forward_ptx_issues_every_load_before_its_first_tanh(cubins):
    # The wide per-pair forwards' SASS issues some of its row loads after the first MUFU.TANH
    # (bench/HISTORY.md). That is ptxas's schedule, not the source's: the PTX Triton makes
    # (compile_check writes it beside each cubin) issues every global load before its first
    # tanh, at 1, 2 and 4 elements a thread, as many loads as the SASS has (22 with triton 3.8
    # and 3.6). A row loaded after the first tanh in fwd_pairs_kernel's source would fail here.
    for config in [configs.PAIRS_CONFIGS[0], *configs.PAIRS_WIDE_CONFIGS["fwd_pairs"]]:
        stem = config_binary("fwd_pairs_kernel", "bf16", config, D=300)
        ptx = (cubins / f"{stem}.ptx").read_text().splitlines()
        loads = [i for i, line in enumerate(ptx) if re.search(r"\bld\.global\b", line)]
        tanhs = [i for i, line in enumerate(ptx) if "tanh.approx" in line]
        ldg = sum(bool(re.search(r"\bLDG\b", text)) for _, text in sass_of(cubins, stem))
        assert loads and tanhs and len(loads) == ldg, (stem, len(loads), ldg)
        assert loads[-1] < tanhs[0], (stem, f"ld.global on PTX line {loads[-1] + 1}, "
                                            f"first tanh.approx on {tanhs[0] + 1}")


def test_pair_kernels_for_one_d_autotune_over_the_wide_shapes():
    # On a GPU (no interpreter), a per-pair launch compiled for the call's d (D > 0: the op
    # passes static_d) takes the autotuner whose list ends with PAIRS_WIDE_CONFIGS; one with d
    # an argument, or with autotuning off, takes the list without them.
    run_without_interpreter("-c", """
from blosa_kernels import configs
for kind, wide in configs.PAIRS_WIDE_CONFIGS.items():
    plain = configs.CONFIGS[kind][0]
    tuned, meta = configs.kernel_and_meta(kind, 300, 8, static_d=True)
    assert tuned is configs.TUNED_STATIC_D[kind] and meta == {}
    assert [c.all_kwargs() for c in tuned.configs] == [c.all_kwargs() for c in plain + wide]
    assert configs.kernel_and_meta(kind, 300, 8)[0] is configs.TUNED[kind]
    assert [c.all_kwargs() for c in configs.TUNED[kind].configs] == [c.all_kwargs() for c in plain]
    configs.AUTOTUNE = False
    kernel, meta = configs.kernel_and_meta(kind, 300, 8, static_d=True)
    assert kernel is configs.PLAIN[kind] and meta == plain[0].all_kwargs()
    configs.AUTOTUNE = True
""")


def test_per_pair_report_lists_every_config(cubins):
    rows = sass_loads.per_pair_report(str(cubins)).splitlines()[2:]
    names = [row.split(" | ")[0].strip("| ") for row in rows]
    # Four autotune configs of each of the four kernels, the per-pair ones' again for d = 300
    # with their wide shapes.
    wide = sum(map(len, configs.PAIRS_WIDE_CONFIGS.values()))
    assert len(names) == 24 + wide
    assert sum(name.endswith("-d300.cubin") for name in names) == 8 + wide
    assert {name.split("-")[0] for name in names} == {"fwd_blocks_kernel", "bwd_blocks_kernel",
                                                     "fwd_pairs_kernel", "bwd_pairs_kernel"}


def test_sfu_benchmark_loops_compile():
    # bench/gpu_tools/sfu_peak.py runs only on a GPU session; a loop that fails to compile would
    # waste it.
    run_without_interpreter("bench/gpu_tools/sfu_peak.py", "--compile-only", "90")


def test_summed_products_names_each_sum_of_two_plain_products():
    # compile_check fails a kernel whose LLVM IR has one (blosa_kernels/_math.py's docstring):
    # the backend would fuse either product into an FMA, by use counts.
    llir = """
  %3 = fmul float %1, %2, !dbg !7
  %4 = fmul float %1, %0
  %5 = fadd float %3, %4, !dbg !8
  %6 = fadd float %5, %4
  %7 = fsub contract float %4, %3
  %8 = tail call float @llvm.fma.f32(float %1, float %2, float %4)
  %9 = fadd float %8, %3
  %10 = fmul <2 x float> %a, %b
  %11 = fadd <2 x float> %10, %10
"""
    assert compile_check.summed_products(llir) == [
        "%5 = fadd float %3, %4", "%7 = fsub contract float %4, %3",
        "%11 = fadd <2 x float> %10, %10"]


def test_products_left_to_ptxas_names_each_sum_that_takes_an_unfused_product():
    # Without `.rn`, ptxas may fuse a mul into the add that takes it, or not: compile_check
    # fails a kernel whose PTX leaves it one. A product rounded on its own (`mul.rn`), a sum
    # rounded on its own (`add.rn`) and an fma leave it no choice.
    ptx = """
	mul.f32 	%r3, %r1, %r2;
	mul.rn.f32 	%r4, %r1, %r2;
	add.f32 	%r5, %r3, %r0;
	add.f32 	%r6, %r4, %r0;
	add.rn.f32 	%r7, %r3, %r0;
	fma.rn.f32 	%r8, %r1, %r2, %r3;
	sub.ftz.f32 	%r9, %r0, %r3;
	add.f32 	%r10, %r8, %r9;
	mul.f32 	%r3, %r8, 0f3F800000;
	mul.rn.f32 	%r3, %r8, %r8;
	add.f32 	%r11, %r3, %r0;
"""
    assert compile_check.products_left_to_ptxas(ptx) == [
        "add.f32 \t%r5, %r3, %r0", "sub.ftz.f32 \t%r9, %r0, %r3"]
