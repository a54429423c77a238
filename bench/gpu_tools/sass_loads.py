"""How far ahead of their use the CUDA kernels' loops issue their loads, from the SASS.

    python bench/gpu_tools/sass_loads.py [--so python/blosa/_C*.so] [--kernels REGEX] [--whole | --blocks]

No GPU needed: it reads the sm_90 machine code that `make build` compiled (cuobjdump). For
each kernel whose name matches REGEX (default: the float32 tiled kernels, tile 8, fixed pivot),
it prints its registers and, for each loop that does special-function work (MUFU), the loop's
size and, for each load in it, how many instructions later an instruction first reads the
loaded register (following the loop around its back edge; "s:" marks a shared-memory load,
"dead" a load overwritten before any read), and its barriers (BAR.SYNC, each a wait for every
warp of the thread block). A load read a few instructions after it is issued stalls its warp
for the load's whole latency; that is what Nsight Compute showed in the tiled kernels, and what
stream_rows / stream_chunks (csrc/cuda/) avoid. With --whole it prints one line per kernel
instead: registers, stack bytes (spills), and the whole kernel's instructions, MUFU ops,
global loads, global stores (for kernels with no loop, such as the fully unrolled small-block
ones), the most times one kernel parameter is reloaded (LDC) and, for kernels with no loop,
how many loads are read before the last load is issued (reads_before_last_load). Also reads
the cubins that `python -m blosa_kernels.compile_check --cubin-dir DIR` writes
(--so DIR/NAME.cubin); with --per-pair DIR it prints, for the Triton per-block and per-pair
kernels' autotune configs there, the instructions a thread runs per allowed (query, key,
feature) triple at r = 8 (loops counted for their 7 steps). With --blocks it prints, for each
loop with special-function work, its basic blocks (first address, instructions, MUFU ops, where
its branch goes): what one trip runs is the sum along its path.
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

DEFAULT_KERNELS = r"(forward_tiled|forward_staged)IffLb1ELi8E|backward_(query|key|fused)_tiledIffLi8E"
INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
REGISTER = re.compile(r"\bR\d+\b")
BRANCH = re.compile(r"\bBRA\s+(0x[0-9a-f]+)")
LOAD = re.compile(r"\bLD(G|S)\b")


@dataclass
class Loop:
    start: int  # index of the first instruction
    end: int  # index of the back-edge branch
    size: int
    mufu: int
    barriers: int  # BAR.SYNC: each waits for every warp of the thread block
    loads: list  # (address, instruction, distance to first reader or None)


def parse_functions(sass: str) -> dict[str, list[tuple[int, str]]]:
    """{mangled name: [(address, instruction text)]} of `cuobjdump -sass` output."""
    functions, current = {}, None
    for line in sass.splitlines():
        header = re.match(r"\s+Function : (\S+)", line)
        if header:
            current = functions.setdefault(header.group(1), [])
            continue
        m = INSTRUCTION.match(line)
        if m and current is not None:
            current.append((int(m.group(1), 16), m.group(2)))
    return functions


def operands(instruction: str) -> tuple[set[str], set[str]]:
    """(registers written, registers read) of one instruction; stores and branches write none.
    A 64-bit result (LDG.E.64, IMAD.WIDE) counts as its first register only: good enough for
    the 32-bit loads of these kernels."""
    body = re.sub(r"^@!?U?P\w+\s+", "", instruction)  # the guard predicate
    opcode, _, rest = body.partition(" ")
    args = [a for a in rest.split(",")] if rest else []
    if not args:
        return set(), set()
    first = set(REGISTER.findall(args[0]))
    rest_regs = {r for a in args[1:] for r in REGISTER.findall(a)}
    if opcode.startswith(("ST", "BAR", "BRA", "RED", "ATOM")):
        return set(), first | rest_regs
    return first, rest_regs


def steps_to_reader(code: list[tuple[int, str]], at: int, order) -> int | None:
    """How many instructions of `order` (indices into code, in execution order after `at`) are
    walked until one reads the register the instruction at `at` writes; None when none does, or
    one overwrites it first (the value is dead)."""
    written, _ = operands(code[at][1])
    if not written:
        return None
    for steps, i in enumerate(order, 1):
        w, r = operands(code[i][1])
        if written & r:
            return steps
        if written & w:
            return None
    return None


def distance_to_use(code: list[tuple[int, str]], at: int, start: int, end: int) -> int | None:
    """Instructions from the load at index `at` to the first instruction that reads its
    destination register, walking the loop [start, end] around its back edge once."""
    return steps_to_reader(code, at, [*range(at + 1, end + 1), *range(start, at + 1)])


def loops(code: list[tuple[int, str]]) -> list[Loop]:
    """The loops of a function that do special-function work: each backward branch and its
    target."""
    index = {address: i for i, (address, _) in enumerate(code)}
    found = []
    for i, (address, instruction) in enumerate(code):
        m = BRANCH.search(instruction)
        if not m or int(m.group(1), 16) >= address or int(m.group(1), 16) not in index:
            continue
        start = index[int(m.group(1), 16)]
        body = [text for _, text in code[start:i + 1]]
        mufu = sum("MUFU" in text for text in body)
        if not mufu:
            continue
        barriers = sum(bool(re.search(r"\bBAR\.SYNC", text)) for text in body)
        loads = [(code[k][0], code[k][1], distance_to_use(code, k, start, i))
                 for k in range(start, i + 1) if LOAD.search(code[k][1])]
        found.append(Loop(start, i, len(body), mufu, barriers, loads))
    return found


def executed(code: list[tuple[int, str]], trips: int, opcode: str = "") -> int:
    """Instructions one thread runs (those whose text holds `opcode`, e.g. "MUFU"; all by
    default) if each loop of `code` that does special-function work runs `trips` times and every
    other instruction once: an estimate from the SASS alone, for kernels with no other loop (the
    Triton per-block and per-pair kernels; a branch around code a thread skips, such as a 64-bit
    index path, counts as run)."""
    def count(start: int, end: int) -> int:
        return sum(opcode in text for _, text in code[start:end])

    return count(0, len(code)) + sum((trips - 1) * count(loop.start, loop.end + 1)
                                     for loop in loops(code))


# compile_check's first case of the Triton per-block and per-pair kernels: a bfloat16 training
# step at r = 8, direction "forward": 28 allowed pairs per block and feature, and the per-block
# loops take 7 steps (keys in forward, queries in backward).
R8_PAIRS, R8_STEPS = 28, 7


def per_pair(cubin: str) -> tuple[float, float, int]:
    """(instructions, special-function ops, registers) per allowed (query, key, feature) triple
    for one thread of a Triton per-block or per-pair kernel at r = 8 (R8_PAIRS), from a binary
    named as compile_check --cubin-dir names autotune configs (KERNEL-DTYPE-wWARPS-TILES)."""
    name = os.path.basename(cubin)
    kernel = name.split("-")[0]
    sass, res = dump(cubin, kernel)
    (mangled, code), = matching(sass, kernel)
    tile = {k: int(v) for k, v in re.findall(r"-(TILE|BLOCK|BD)(\d+)", name)}
    warps = int(re.search(r"-w(\d+)-", name).group(1))
    # (block, feature) columns of the program: BLOCK (per-pair), or TILE // 8 blocks of 8 rows
    # by BD features (per-block).
    columns = tile.get("BLOCK") or tile["TILE"] // 8 * tile["BD"]
    pairs = R8_PAIRS * columns / (32 * warps)
    return (executed(code, R8_STEPS) / pairs, executed(code, R8_STEPS, "MUFU") / pairs,
            registers(res).get(mangled, 0))


def per_pair_report(folder: str) -> str:
    """per_pair of every autotune config of the per-block and per-pair kernels in a
    `python -m blosa_kernels.compile_check --cubin-dir` folder, as a table."""
    lines = ["| binary | registers | instructions per pair | special-function ops per pair |",
             "|---|---|---|---|"]
    for cubin in sorted(glob.glob(os.path.join(folder, "*_blocks_kernel-bf16-w*.cubin"))
                        + glob.glob(os.path.join(folder, "*_pairs_kernel-bf16-w*.cubin"))):
        instructions, mufu, regs = per_pair(cubin)
        lines.append(f"| {os.path.basename(cubin)} | {regs} | {instructions:.1f} | {mufu:.2f} |")
    return "\n".join(lines)


def usage(res_usage: str, field: str) -> dict[str, int]:
    """{mangled name: value of `field`} from `cuobjdump -res-usage`: REG (registers per thread),
    STACK (bytes of stack per thread, where spilled registers go)."""
    out, name = {}, None
    for line in res_usage.splitlines():
        header = re.search(r"Function (\S+?):?$", line.strip())
        if header:
            name = header.group(1)
        m = re.search(rf"\b{field}:(\d+)", line)
        if m and name:
            out[name] = int(m.group(1))
            name = None
    return out


def registers(res_usage: str) -> dict[str, int]:
    """{mangled name: registers per thread} from `cuobjdump -res-usage`."""
    return usage(res_usage, "REG")


CONSTANT_LOAD = re.compile(r"\bLDC R\d+, (c\[0x0\]\[0x[0-9a-f]+\])")


def constant_reloads(code: list[tuple[int, str]]) -> dict[str, int]:
    """{constant-bank address: times it is loaded into a register (LDC)} of a function's code.
    ptxas reloads a kernel parameter this way instead of keeping it in a register (the small
    kernels' scale, csrc/cuda/small_blocks.cuh SmallScale)."""
    counts: dict[str, int] = {}
    for _, text in code:
        m = CONSTANT_LOAD.search(text)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def count_opcode(code: list[tuple[int, str]], opcode: str) -> int:
    """How many of the function's instructions are `opcode` (any variant: LDG counts LDG.E...)."""
    return sum(bool(re.search(rf"\b{opcode}\b", text)) for _, text in code)


def reads_before_last_load(code: list[tuple[int, str]]) -> int:
    """Global loads whose first reader comes before the function's last global load. In a
    kernel that loads everything up front and then computes (the one-shot small-block kernels,
    which have no loop), each such read stalls the thread while loads are still to be issued,
    so those go out a whole latency later: the kernel makes two round trips instead of one."""
    loads = [k for k, (_, text) in enumerate(code) if re.search(r"\bLDG\b", text)]
    early = 0
    for k in loads:
        steps = steps_to_reader(code, k, range(k + 1, len(code)))
        early += steps is not None and k + steps < loads[-1]
    return early


def longest_load_run(code: list[tuple[int, str]]) -> int:
    """The most global loads issued one after another with no float add between them."""
    longest = run = 0
    for _, text in code:
        if "LDG" in text:
            run += 1
            longest = max(longest, run)
        elif re.search(r"\b[FD]ADD\b", text):
            run = 0
    return longest


def matching(sass: str, pattern: str):
    """(mangled name, code) of each function of `sass` whose name matches `pattern`."""
    return [(name, code) for name, code in parse_functions(sass).items() if re.search(pattern, name)]


def built_extension() -> str | None:
    """The extension `make build` put in this checkout (python/blosa/_C*.so), if any."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return next(iter(sorted(glob.glob(os.path.join(root, "python", "blosa", "_C*.so")))), None)


def find_cuobjdump() -> str:
    home = os.environ.get("CUDA_HOME", "")
    candidates = [os.path.join(home, "bin", "cuobjdump")] if home else []
    candidates.append(shutil.which("cuobjdump") or "")
    try:  # the copy that triton ships
        import triton

        candidates.append(os.path.join(os.path.dirname(triton.__file__),
                                       "backends", "nvidia", "bin", "cuobjdump"))
    except ImportError:
        pass
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise SystemExit("cuobjdump not found: set CUDA_HOME, or install triton (it ships one)")


def readable(mangled: str) -> str:
    """`forward_tiled<float, float, true, 8>` for a mangled kernel name (c++filt), or the
    mangled name where c++filt is missing."""
    try:
        name = subprocess.run(["c++filt", mangled], capture_output=True, text=True).stdout.strip()
    except OSError:
        return mangled
    name = name.replace("(blosa::Direction)", "direction ")  # a cast, not the parameters
    name = re.sub(r"^void |\(.*$", "", name)  # the return type and the parameters
    return name.replace("blosa::cuda::", "").replace("c10::", "") or mangled


def loop_blocks(code: list[tuple[int, str]], loop: Loop) -> list[tuple[int, int, int, int | None]]:
    """The basic blocks of `loop` in code order: (first address, instructions, MUFU ops, the
    address its last instruction branches to, or None). A block starts at the loop's start, at
    each branch target inside the loop and after each branch."""
    body = code[loop.start:loop.end + 1]
    first, last = body[0][0], body[-1][0]
    leaders = {first}
    for i, (address, text) in enumerate(body):
        m = BRANCH.search(text)
        if m:
            target = int(m.group(1), 16)
            if first <= target <= last:
                leaders.add(target)
            if i + 1 < len(body):
                leaders.add(body[i + 1][0])
    blocks, current = [], []
    for address, text in body:
        if address in leaders and current:
            blocks.append(current)
            current = []
        current.append((address, text))
    blocks.append(current)
    found = []
    for block in blocks:
        m = BRANCH.search(block[-1][1])
        found.append((block[0][0], len(block), sum("MUFU" in text for _, text in block),
                      int(m.group(1), 16) if m else None))
    return found


def blocks_report(sass: str, res_usage: str, pattern: str) -> str:
    """loop_blocks of every loop with special-function work of the kernels matching
    `pattern`, as a table."""
    lines = ["| kernel | loop | block | instructions | MUFU | branches to |", "|---|---|---|---|---|---|"]
    for name, code in matching(sass, pattern):
        for loop in loops(code):
            for address, size, mufu, target in loop_blocks(code, loop):
                to = "-" if target is None else f"{target:#06x}"
                lines.append(f"| {readable(name)} | {code[loop.start][0]:#06x} | {address:#06x} | "
                             f"{size} | {mufu} | {to} |")
    return "\n".join(lines)


def report(sass: str, res_usage: str, pattern: str) -> str:
    regs = registers(res_usage)
    lines = ["| kernel | registers | loop | instructions | MUFU | barriers | loads: instructions to first use |",
             "|---|---|---|---|---|---|---|"]
    for name, code in matching(sass, pattern):
        short = readable(name)
        for loop in loops(code):
            uses = ", ".join(("s:" if "LDS" in text else "") + ("dead" if d is None else str(d))
                             for _, text, d in loop.loads) or "none"
            lines.append(f"| {short} | {regs.get(name, '?')} | {code[loop.start][0]:#06x} | "
                         f"{loop.size} | {loop.mufu} | {loop.barriers} | {uses} |")
    return "\n".join(lines)


def whole_report(sass: str, res_usage: str, pattern: str) -> str:
    """One line per kernel matching `pattern`: registers, stack bytes (spills) and whole-kernel
    instruction counts."""
    regs, stack = registers(res_usage), usage(res_usage, "STACK")
    lines = ["| kernel | registers | stack bytes | instructions | MUFU | global loads | global stores "
             "| most reloads of one parameter | loads read before the last load |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, code in matching(sass, pattern):
        counts = " | ".join(str(count_opcode(code, op)) for op in ("MUFU", "LDG", "STG"))
        reloads = max(constant_reloads(code).values(), default=0)
        # Meaningful where the kernel has no loop: a loop reads its loads before the next trip's.
        early = "-" if loops(code) else reads_before_last_load(code)
        lines.append(f"| {readable(name)} | {regs.get(name, '?')} | {stack.get(name, '?')} | "
                     f"{len(code)} | {counts} | {reloads} | {early} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--so", default=None, help="the built extension (default python/blosa/_C*.so)")
    parser.add_argument("--kernels", default=DEFAULT_KERNELS, help="regex on mangled kernel names")
    parser.add_argument("--whole", action="store_true",
                        help="one line per kernel: whole-kernel counts instead of loops")
    parser.add_argument("--blocks", action="store_true",
                        help="the basic blocks of each loop with special-function work")
    parser.add_argument("--per-pair", metavar="DIR",
                        help="instructions per allowed pair of the Triton per-block and per-pair "
                             "kernels at r = 8, from `python -m blosa_kernels.compile_check "
                             "--cubin-dir DIR`")
    args = parser.parse_args(argv)
    if args.per_pair:
        print(per_pair_report(args.per_pair))
        return 0
    so = args.so or built_extension()
    if not so or not os.path.exists(so):
        raise SystemExit("no built extension: run `make build` (with BLOSA_CUDA=1), or pass --so")
    show = whole_report if args.whole else blocks_report if args.blocks else report
    print(show(*dump(so, args.kernels), args.kernels))
    return 0


def dump(so: str, pattern: str) -> tuple[str, str]:
    """(SASS holding the kernels matching `pattern`, `cuobjdump -res-usage` of all) of the build."""
    tool = find_cuobjdump()

    def run(*options: str) -> str:
        return subprocess.run([tool, *options, so], capture_output=True, text=True, check=True).stdout

    res = run("-res-usage")
    names = [name for name in registers(res) if re.search(pattern, name)]
    if not names:
        raise SystemExit(f"{so} holds no kernel matching {pattern!r}: is it built with BLOSA_CUDA=1?")
    # cuobjdump reads the whole binary once per named function: name a few, else dump all.
    sass = run("-sass", "-fun", ",".join(names)) if len(names) <= 8 else run("-sass")
    return sass, res


if __name__ == "__main__":
    sys.exit(main())
