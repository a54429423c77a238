"""One line per kernel launch of an Nsight Compute text report: what held its warps back.

    python bench/gpu_tools/ncu_stalls.py REPORT.txt [--top 4]

bench/gpu_tools/gpu_check.sh writes such a report (ncu.txt): the sections SpeedOfLight,
ComputeWorkloadAnalysis, WarpStateStats, Occupancy and MemoryWorkloadAnalysis of each launch, and
the warp stall reasons (ncu's command-line metrics
smsp__average_warps_issue_stalled_REASON_per_issue_active.ratio: how many warps were in that
state, on average, per instruction issued; together about "Warp Cycles Per Issued Instruction").
This prints, for each launch in report order: the kernel's name (template arguments and
parameters dropped), its duration in µs, issue slots busy (%), warps resident per SM (achieved,
of theoretical), and its `--top` largest stall reasons: e.g. long_scoreboard (waiting on a
global load), short_scoreboard (a special-function result or a shared-memory load),
math_pipe_throttle (a busy unit, such as the special-function one), wait (a fixed-latency
dependency), not_selected (eligible, another warp issued). A report without the stall metrics
(those before 2026-11-29) gives the other columns and "-" for the stalls.
No GPU needed: it only reads text.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field

# A launch's header: `  bwd_fused_kernel (384, 75, 1)x(32, 1, 1), Context 1, Stream 7, ...`,
# or a C++ kernel's `  void forward_small<c10::BFloat16, ...>(Args<T1, T2>) (3600, 1, 1)x(...`.
_LAUNCH = re.compile(r"^  (?:void )?(?P<name>[A-Za-z_][\w:]*).*?\((?P<grid>[\d, ]+)\)x\((?P<block>[\d, ]+)\), "
                     r"Context \d+")
# A metric line of any section: name, unit (often none for ratios), value (commas in thousands).
_METRIC = re.compile(r"^    (?P<name>\S(?:.*?\S)?)\s{2,}(?:(?P<unit>\S+)\s+)?(?P<value>-?[\d,]*\.?\d+)$")
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(?P<reason>\w+?)_per_issue_active\.ratio$")
_MICROSECONDS = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}


@dataclass
class Launch:
    """One profiled launch: its kernel's name, grid and block, and every metric printed for it
    ({name: (unit, value)}; of a name printed twice, such as "Memory Throughput" in % and in
    Gbyte/s, the first), the stall reasons under their short names in `stalls`."""
    name: str
    grid: str
    block: str
    metrics: dict[str, tuple[str, float]] = field(default_factory=dict)
    stalls: dict[str, float] = field(default_factory=dict)

    def value(self, metric: str) -> float | None:
        found = self.metrics.get(metric)
        return None if found is None else found[1]

    def duration_us(self) -> float | None:
        unit, value = self.metrics.get("Duration", ("", None))
        scale = _MICROSECONDS.get(unit)
        return None if value is None or scale is None else value * scale

    def top_stalls(self, top: int) -> list[tuple[str, float]]:
        """The `top` largest stall reasons, largest first (ties by name)."""
        return sorted(self.stalls.items(), key=lambda kv: (-kv[1], kv[0]))[:top]


def parse(text: str) -> list[Launch]:
    """The launches of an ncu text report, in report order."""
    launches: list[Launch] = []
    for line in text.splitlines():
        header = _LAUNCH.match(line)
        if header:
            launches.append(Launch(header["name"].split("::")[-1], header["grid"], header["block"]))
            continue
        metric = _METRIC.match(line)
        if not metric or not launches:
            continue
        name, value = metric["name"], float(metric["value"].replace(",", ""))
        stall = _STALL.match(name)
        if stall:
            launches[-1].stalls[stall["reason"]] = value
        else:
            launches[-1].metrics.setdefault(name, (metric["unit"] or "", value))
    return launches


def _number(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def table(launches: list[Launch], top: int = 4) -> str:
    """A markdown table, one row per launch (see the module docstring)."""
    rows = ["| # | kernel | µs | issue busy % | warps / SM | stalls per issued instruction |",
            "|---|---|---|---|---|---|"]
    for i, launch in enumerate(launches, 1):
        warps = launch.value("Achieved Active Warps Per SM")
        theory = launch.value("Theoretical Active Warps per SM")
        resident = "-" if warps is None else f"{warps:.1f}" + ("" if theory is None else f" of {theory:.0f}")
        stalls = ", ".join(f"{reason} {value:.2f}" for reason, value in launch.top_stalls(top)) or "-"
        rows.append(f"| {i} | {launch.name} | {_number(launch.duration_us(), 1)} | "
                    f"{_number(launch.value('Issue Slots Busy'), 1)} | {resident} | {stalls} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="an ncu text report (bench/gpu_tools/gpu_check.sh's ncu.txt)")
    parser.add_argument("--top", type=int, default=4, help="stall reasons per launch (default 4)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top must be at least 1, got {args.top}")
    with open(args.report, encoding="utf-8", errors="replace") as f:
        launches = parse(f.read())
    if not launches:
        print(f"{args.report}: no profiled launches")
        return 1
    print(table(launches, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
