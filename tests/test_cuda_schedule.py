"""The machine code of the CUDA kernels issues its global loads well ahead of their use.

No GPU needed: this reads the sm_90 SASS of the build (bench/gpu_tools/sass_loads.py, cuobjdump). Nsight
Compute found the tiled kernels waiting on L1 loads for over half their cycles while the
compiler placed each key's loads right before its math (bench/HISTORY.md); stream_rows and
stream_chunks (csrc/cuda/) load rows two rows or one chunk ahead so that the loads' latency
hides behind math. The compiler is free to undo that, and did in four ways (bench/HISTORY.md,
"Loads two rows ahead"); only the machine code shows it, so this checks every loop of every
float32/float16/bfloat16 tiled kernel the build has, and the loop of every persistent
small-block kernel (for_small_blocks), which loads the next block before computing this one.
It also checks that the small kernels meant to keep the scale c·log2 e in a register
(SmallScale) do not reload it from the kernel parameters before every pair, that the
one-shot small kernels of direction "backward" issue their loads as early as "forward"'s do,
and that the dense small-block kernels (no mask, whole blocks) are shorter than the general
ones and need no more registers, which is what they are for, that the dense kernels compiled
to issue their loads first do, that the staged dense kernels move rows only as 16-byte
vectors, that d_bias's column sums have eight rows' loads in flight at once, and that
bench/gpu_tools/small_variants.py, which compiles the small-block kernels alone to judge an edit on all
of them, gets the build's machine code.
Skipped, with the reason, where the build has no CUDA kernels (a CPU-only install); CI builds
them.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from blosa.ops import cuda_kernels_built

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "gpu_tools"))

import sass_loads  # noqa: E402
import small_variants  # noqa: E402

if not cuda_kernels_built():
    pytest.skip("this build of blosa._C has no CUDA kernels (rebuild with BLOSA_CUDA=1)",
                allow_module_level=True)

KERNELS = ("forward_tiled", "forward_staged", "backward_query_tiled", "backward_key_tiled",
           "backward_fused_tiled")
DTYPES = {"float32": "f", "bfloat16": "N3c108BFloat16E", "float16": "N3c104HalfE"}
# One key's math is about 50 instructions at tile 8, 30 at tile 4; one row ahead means at
# least that. The schedules this replaced (fb6aebc) read a row 1 to 21 instructions after its
# load.
MIN_LOAD_TO_USE = 30
# A persistent small-block kernel's loop computes one whole block (500 to 2000 instructions)
# between loading the next block's rows and reading them. A select of the bias on its load
# once made it wait 3 instructions after that load.
PERSISTENT = ("forward_small", "backward_small_recompute")
MIN_PERSISTENT_LOAD_TO_USE = 300


# The one-shot small-block kernels (r <= 8; no loop: they load a block, compute it and exit).
ONE_SHOT = ("forward_small", "backward_small_recompute", "backward_small")
# The dense small-block kernels staged through shared memory (csrc/cuda/staged_small.cuh).
STAGED = ("forward_small_staged", "backward_small_staged")


@pytest.fixture(scope="module")
def dumped():
    """(SASS, `cuobjdump -res-usage` output) of the build's kernels this file checks."""
    so = sass_loads.built_extension()
    assert so, "no built extension under python/blosa"
    names = KERNELS + PERSISTENT + ONE_SHOT + STAGED + ("column_sums",)
    return sass_loads.dump(so, "(" + "|".join(names) + ")I")


@pytest.fixture(scope="module")
def kernels(dumped):
    return sass_loads.parse_functions(dumped[0])


def loop_loads(functions):
    """(kernel, instruction, address, distance to its first reader) of every global load in a
    loop with special-function work."""
    for name, code in functions.items():
        for loop in sass_loads.loops(code):
            for address, instruction, distance in loop.loads:
                if "LDG" in instruction and distance is not None:
                    yield name, instruction, address, distance


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", KERNELS)
def test_loops_load_ahead(kernels, kernel, dtype):
    mangled = re.compile(rf"^_ZN5blosa4cuda\d+{kernel}I{DTYPES[dtype]}")
    functions = {name: code for name, code in kernels.items() if mangled.search(name)}
    assert functions, f"no {kernel} for {dtype} in the build"
    checked = 0
    for name, instruction, address, distance in loop_loads(functions):
        checked += 1
        assert distance >= MIN_LOAD_TO_USE, (
            f"{name}: `{instruction}` at {address:#06x} is read {distance} "
            f"instructions later (python bench/gpu_tools/sass_loads.py --kernels {kernel})")
    assert checked, f"{kernel} ({dtype}): no global load found in a loop"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", PERSISTENT)
def test_persistent_loops_load_the_next_block_ahead(kernels, kernel, dtype):
    # Template arguments <T, float, direction, fixed pivot, V, persistent = true>.
    mangled = re.compile(rf"^_ZN5blosa4cuda\d+{kernel}I{DTYPES[dtype]}fLNS_9DirectionE\dE"
                         r"Lb1ELi\dELb1E")
    functions = {name: code for name, code in kernels.items() if mangled.search(name)}
    assert len(functions) == 8, f"{kernel} ({dtype}): {len(functions)} persistent kernels"
    loads = list(loop_loads(functions))
    # every row of up to four tensors, the mask bytes and the bias, in each kernel
    assert len(loads) >= 8 * 30, f"{kernel} ({dtype}): {len(loads)} loads in loops"
    for name, instruction, address, distance in loads:
        assert distance >= MIN_PERSISTENT_LOAD_TO_USE, (
            f"{name}: `{instruction}` at {address:#06x} is read {distance} instructions later "
            f"(python bench/gpu_tools/sass_loads.py --kernels {kernel})")


# The kernels whose pairs read the scale c·log2 e from a register (SmallScale in
# csrc/cuda/small_blocks.cuh): <T, float, direction, fixed pivot, V, persistent, dense>, at two
# features a thread, the recomputing backward when persistent, and the dense kernels (with no
# branch between their pairs, the compiler keeps the one load of it).
HELD_SCALE = {"forward_small": r"Lb[01]ELi2ELb[01]E|Lb1ELi1ELb0ELb1E",
              "backward_small_recompute": r"Lb[01]ELi2ELb[01]E|Lb1ELi1ELb1E|Lb1ELi1ELb0ELb1E"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", HELD_SCALE)
def test_small_kernels_hold_the_scale_in_a_register(kernels, kernel, dtype):
    prefix = rf"^_ZN5blosa4cuda\d+{kernel}I{DTYPES[dtype]}fLNS_9DirectionE\dE"
    # The scale's address: what the one-shot kernel at one feature a thread (given p.a)
    # reloads most, before nearly every pair.
    plain = [code for name, code in kernels.items()
             if re.search(prefix.replace(r"E\dE", "E0E") + "Lb1ELi1ELb0ELb0E", name)]
    assert len(plain) == 1, f"no one-shot {kernel} at V = 1 ({dtype}) in the build"
    counts = sass_loads.constant_reloads(plain[0])
    scale = max(counts, key=counts.get)
    assert counts[scale] >= 20, f"{kernel} ({dtype}): reloads {counts}: which is the scale?"
    held = {name: code for name, code in kernels.items()
            if re.search(prefix + "(" + HELD_SCALE[kernel] + ")", name)}
    assert len(held) >= 8, f"{kernel} ({dtype}): {len(held)} kernels hold the scale"
    for name, code in held.items():
        reloads = sass_loads.constant_reloads(code).get(scale, 0)
        assert reloads <= 2, (f"{name} reloads the scale {scale} {reloads} times "
                              f"(python bench/gpu_tools/sass_loads.py --whole --kernels {kernel})")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ONE_SHOT)
def test_backward_direction_loads_as_early_as_forward(kernels, kernel, dtype):
    # A one-shot kernel's reads of loaded registers before its last load is issued each stall
    # the thread with loads still to go out (bench/gpu_tools/sass_loads.py reads_before_last_load).
    # Computing a block's queries in order, "backward" (keys after the query) read 22 of its 30
    # loads that early in forward_small (bfloat16, float16; "forward" 7) and 36 of 38 in the
    # recomputing backward ("forward" 0); small_query (csrc/cuda/small_blocks.cuh) takes them
    # last first there, which mirrors "forward". One feature a thread, fixed pivot.
    def early(direction):
        suffix = "EEEv" if kernel == "backward_small" else "ELb1ELi1ELb0ELb0E"
        mangled = re.compile(rf"^_ZN5blosa4cuda\d+{kernel}I{DTYPES[dtype]}fLNS_9DirectionE"
                             rf"{direction}{suffix}")
        (code,) = [code for name, code in kernels.items() if mangled.search(name)]
        return sass_loads.reads_before_last_load(code)

    forward, backward = early(0), early(1)
    assert backward <= forward + 2, (
        f"{kernel} ({dtype}): {backward} loads read before the last load in direction "
        f"'backward', {forward} in 'forward' "
        f"(python bench/gpu_tools/sass_loads.py --whole --kernels {kernel})")


def one_shot_small(kernels, kernel, dtype, direction, dense, loads_first=False, rcp_steps=0):
    """The mangled name of the one-shot forward_small or backward_small_recompute at one feature
    a thread and the fixed pivot: <T, float, direction, true, 1, false, dense, loads_first>, and
    forward_small's Newton steps for 1 / sum (kRcpSteps; 0: it divides)."""
    steps = f"Li{rcp_steps}E" if kernel == "forward_small" else ""
    mangled = re.compile(rf"^_ZN5blosa4cuda\d+{kernel}I{DTYPES[dtype]}fLNS_9DirectionE{direction}"
                         rf"ELb1ELi1ELb0ELb{int(dense)}ELb{int(loads_first)}E{steps}E")
    (name,) = [name for name in kernels if mangled.search(name)]
    return name


def blocks_per_sm(registers: int, threads: int = 256) -> int:
    """Thread blocks of `threads` an sm_90 SM holds at `registers` a thread: 64K registers,
    given out in 8s a thread (256 a warp), and at most 2048 threads."""
    return min(65536 // (-(-registers // 8) * 8 * threads), 2048 // threads)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ("forward_small", "backward_small_recompute"))
def test_dense_kernels_are_shorter_and_no_larger(kernels, dumped, kernel, dtype):
    # The dense small-block kernels (small_dense in csrc/cuda/dispatch.h) know that a block has
    # 8 tokens and no padding, so the compiler drops the tests of both; they exist only for
    # that. On the 2026-11-27 build: 22-33% fewer instructions, 8-21 registers fewer. Their
    # registers must let an SM hold as many thread blocks as the general kernel's (the
    # recomputing backward's, since its pairs take 7 operations: 73-79 against 74-77, 3 each).
    registers = sass_loads.registers(dumped[1])
    for direction in range(4):
        def variant(dense):
            name = one_shot_small(kernels, kernel, dtype, direction, dense)
            return name, len(kernels[name]), registers[name]

        (general, general_size, general_regs), (dense, dense_size, dense_regs) = (
            variant(False), variant(True))
        assert dense_size <= 0.85 * general_size, (
            f"{dense}: {dense_size} instructions, the general kernel {general_size}")
        assert blocks_per_sm(dense_regs) >= blocks_per_sm(general_regs), (
            f"{dense}: {dense_regs} registers, the general kernel {general_regs}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ("forward_small", "backward_small_recompute"))
def test_loads_first_kernels_issue_every_load_first(kernels, dumped, kernel, dtype):
    # The dense kernels with their loads first (KernelOptions::small_loads_first,
    # loads_first_gate in csrc/cuda/small_blocks.cuh) exist to read no load before the last one
    # is issued; the plain dense ones read 14-31 that early on the 2026-11-28 build. In every
    # direction: none, the same loads as the plain kernel (a row the gate left out would come
    # after it; a row the kernel does not read would be loaded for it), no more registers (but
    # float32's forward: at most 40, 6 thread blocks of 256 an SM); the forward at most 5% more
    # code, the backward, which also holds d in a register for its row addresses (small_offset's
    # kHeld), no more than the plain kernel (984 instructions against 1,032 in bfloat16,
    # direction "forward", on the 2026-11-28 build; 920 against 920, and 880 against 920 in
    # direction "backward", since its pairs take 7 operations: recomputed_pair_grad_accumulate).
    registers = sass_loads.registers(dumped[1])
    for direction in range(4):
        def variant(loads_first):
            name = one_shot_small(kernels, kernel, dtype, direction, True, loads_first)
            code = kernels[name]
            return (name, sass_loads.reads_before_last_load(code),
                    sass_loads.count_opcode(code, "LDG"), len(code), registers[name])

        plain, first = variant(False), variant(True)
        name, early, loads, size, regs = first
        where = f"{name} (python bench/gpu_tools/sass_loads.py --whole --kernels {kernel})"
        assert early == 0, f"{where}: {early} loads read before the last one is issued"
        assert loads == plain[2], f"{where}: {loads} global loads, the plain kernel {plain[2]}"
        most = plain[3] if kernel == "backward_small_recompute" else 1.05 * plain[3]
        assert size <= most, f"{where}: {size} instructions, the plain one {plain[3]}"
        allowed = 40 if (kernel, dtype) == ("forward_small", "float32") else plain[4]
        assert regs <= allowed, f"{where}: {regs} registers, the plain kernel {plain[4]}"


@pytest.mark.parametrize("dtype, steps", [("bfloat16", 2), ("float16", 3)])
def test_fma_reciprocal_forward_leaves_the_special_function_unit(kernels, dumped, dtype, steps):
    # The dense forward with its loads first dividing by reciprocal_newton
    # (KernelOptions::small_fma_reciprocal) exists to take one special-function operation a
    # query with keys off that unit (7 in directions "forward" and "backward", 8 in "diag" and
    # "all"), for 2 FMAs a Newton step, with no spill and no more registers than the kernel that
    # divides (32: 8 thread blocks of 256 an SM, its launch bound). On the 2026-11-28 build,
    # bfloat16, direction "forward": 66 -> 59 MUFU, 608 -> 632 instructions.
    registers, stack = sass_loads.registers(dumped[1]), sass_loads.usage(dumped[1], "STACK")
    for direction in range(4):
        divides = one_shot_small(kernels, "forward_small", dtype, direction, True, True)
        newton = one_shot_small(kernels, "forward_small", dtype, direction, True, True, steps)
        queries = 7 if direction < 2 else 8
        mufu = [sass_loads.count_opcode(kernels[name], "MUFU") for name in (divides, newton)]
        assert mufu[1] == mufu[0] - queries, (newton, mufu)
        assert sass_loads.count_opcode(kernels[newton], "MUFU.RCP") == (
            sass_loads.count_opcode(kernels[divides], "MUFU.RCP") - queries)
        size = [len(kernels[name]) for name in (divides, newton)]
        assert size[1] <= size[0] + queries * (2 * steps + 2), (newton, size)
        assert stack[newton] == 0 and registers[newton] <= registers[divides], newton


def staged_small(kernels, kernel, dtype, direction, rcp_steps=0):
    """The mangled name of forward_small_staged<T, float, direction, rcp_steps> or
    backward_small_staged<T, float, direction>."""
    steps = f"Li{rcp_steps}E" if kernel == "forward_small_staged" else ""
    mangled = re.compile(rf"^_ZN5blosa4cuda\d+{kernel}I{DTYPES[dtype]}fLNS_9DirectionE{direction}"
                         rf"E{steps}EEv")
    (name,) = [name for name in kernels if mangled.search(name)]
    return name


@pytest.mark.parametrize("dtype", DTYPES)
def test_staged_small_kernels_move_whole_vectors(kernels, dumped, dtype):
    # The staged dense kernels (KernelOptions::small_staged_forward / small_staged_backward)
    # exist to move each block's rows as 16-byte vectors, whole sectors, instead of one element
    # a thread a row: every copy in is a 128-bit cp.async (LDGSTS), kStagedVectors of them a
    # tensor (one for 16-bit inputs, two for float), 4 tensors in the backward and 3 in the
    # forward, twice (the first block's before the loop, the next one's in it); every store of
    # a row a 128-bit STG, 3 tensors out of the backward and 1 out of the forward; besides them
    # only the bias load and the backward's store of its d_bias sums. The tile stores stay
    # shared (STS: a generic ST would mean the output pointer lost its address space). No
    # spill; the backward within 64 registers where bounded (kStagedBackwardBlocksPerSM:
    # 16-bit inputs, directions "forward" and "backward"; 3 thread blocks of 10 warps an SM at
    # d = 300), and shorter than the one-shot dense kernel with its loads first (bfloat16,
    # "forward": 728 instructions against 920 on the 2026-11-28 build).
    registers, stack = sass_loads.registers(dumped[1]), sass_loads.usage(dumped[1], "STACK")
    vectors = 2 if dtype == "float32" else 1
    for direction in range(4):
        steps = {"bfloat16": (0, 2), "float16": (0, 3), "float32": (0,)}[dtype]
        forwards = [staged_small(kernels, "forward_small_staged", dtype, direction, s)
                    for s in steps]
        backward = staged_small(kernels, "backward_small_staged", dtype, direction)
        for name, tensors_in, tensors_out in [(f, 3, 1) for f in forwards] + [(backward, 4, 3)]:
            code = kernels[name]
            copies = (sass_loads.count_opcode(code, r"LDGSTS\.E\.BYPASS\.128"),
                      sass_loads.count_opcode(code, "LDGSTS"))
            assert copies == (2 * tensors_in * vectors,) * 2, (name, copies)
            assert sass_loads.count_opcode(code, "LDG") == 1, f"{name}: loads besides the bias"
            stores = (sass_loads.count_opcode(code, r"STG\.E\.128"),
                      sass_loads.count_opcode(code, "STG"))
            assert stores == (tensors_out * vectors, tensors_out * vectors + (name == backward)), (
                name, stores)
            assert sass_loads.count_opcode(code, "ST") == 0, f"{name}: generic stores"
            assert sass_loads.count_opcode(code, "STS") > 0, name
            assert stack[name] == 0, f"{name}: {stack[name]} bytes of stack"
        if dtype != "float32" and direction < 2:
            assert registers[backward] <= 64, (backward, registers[backward])
        one_shot = one_shot_small(kernels, "backward_small_recompute", dtype, direction, True,
                                  True)
        assert len(kernels[backward]) < len(kernels[one_shot]), (
            backward, len(kernels[backward]), len(kernels[one_shot]))


def test_column_sums_issue_eight_loads_at_once(kernels, dumped):
    # column_sums (csrc/cuda/column_sums.cuh) is a latency-bound stream of a few loads a thread
    # (8 at r = 8's sizes, 24 in the tall one-pass shape): its loop, unrolled 8 times, must
    # issue 8 rows' loads before adding the first, not load and add one row at a time.
    # (float64's, which double-precision throughput bounds anyway, had 6 of 8 on the 2026-11-27
    # build: not checked.) 7 instantiations of the two-pass shape, 5 of the tall one (the
    # single-launch (in, out) pairs: float sums into each dtype, d_head into its own dtype).
    functions = {name: code for name, code in kernels.items()
                 if re.search(r"column_sumsI(f|N3c10)", name)}
    tall = [name for name in functions if "Li8ELi128E" in name]
    assert (len(functions), len(tall)) == (12, 5), (
        f"{len(functions)} column_sums kernels in the build, {len(tall)} of them tall")
    registers = sass_loads.registers(dumped[1])
    for name, code in functions.items():
        run = sass_loads.longest_load_run(code)
        assert run >= 8, f"{name}: {run} loads at once"
        assert registers[name] <= 40, f"{name}: {registers[name]} registers"


def test_small_variants_compiles_the_builds_machine_code(dumped, tmp_path):
    # bench/gpu_tools/small_variants.py compiles the small-block kernels alone (its figures in
    # bench/HISTORY.md judge edits on all 272 kernels): its machine code must be the build's.
    # bfloat16, direction "forward": 8 variants of the two kernels, backward_small, the
    # forward with reciprocal_newton and the three staged kernels.
    pattern = r"IN3c108BFloat16EfLNS_9DirectionE0E"
    text = small_variants.source(types=(("c10::BFloat16", "float"),), directions=("kForward",))
    cubin = small_variants.compile_all(str(tmp_path), text)
    alone = small_variants.rows(sass_loads.whole_report(*sass_loads.dump(cubin, "."), "."))
    built = small_variants.rows(sass_loads.whole_report(*dumped, pattern))
    assert len(alone) == 21
    assert alone == {kernel: built.get(kernel) for kernel in alone}

