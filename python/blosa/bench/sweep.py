"""Measure a grid of cases into a CSV, a row as each finishes, skipping rows already there.

A series is one encoder/backend/mode at growing lengths. Along a series, a case that cannot fit
or cannot finish is not tried again at a longer length: after an "oom" the longer cases are
"skipped"; after a "timeout", or where the time extrapolated quadratically from the last case
measured would pass the time limit, they are "skipped" too, unless their memory, extrapolated
the same way, would pass the memory cap: those run, so that the CSV says where memory ran out
(an allocation past the cap fails at once, long before the time limit).
"""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from typing import Callable, Iterable

from blosa.bench.cases import EncoderCase
from blosa.bench.child import CaseFailed, CaseTimeout
from blosa.bench.measure import measure
from blosa.bench.procmem import MIB, OutOfMemory

FIELDS = ("device", "encoder", "backend", "mode", "B", "n", "d", "hidden", "status", "seconds",
          "peak_mib", "static_mib", "repeats", "threads", "note")
KEY_FIELDS = FIELDS[:8]
STATUSES = ("ok", "oom", "timeout", "skipped", "failed")
# Rows a rerun keeps; it decides "skipped" ones again, and tries "failed" ones again.
MEASURED = ("ok", "oom", "timeout")


def row_key(row: dict) -> tuple[str, ...]:
    return tuple(str(row[f]) for f in KEY_FIELDS)


def case_row(case: EncoderCase, mode: str) -> dict:
    """The key fields of a case's row."""
    return dict(device=case.device, encoder=case.name, backend=case.backend, mode=mode, B=case.B,
                n=case.n, d=case.d, hidden=case.hidden_size)


@dataclass
class Point:
    """One case of a series: what to measure and its row once measured (or read back)."""

    case: EncoderCase
    mode: str
    row: dict | None = None


class CsvLog:
    """The rows of one CSV file. Opening keeps the measured rows whose keys are among `planned`
    (a rerun with the same grid resumes; rows of another grid are dropped) unless fresh=True."""

    def __init__(self, path: str, planned: Iterable[Point], fresh: bool = False):
        self.path = path
        wanted = {row_key(case_row(p.case, p.mode)) for p in planned}
        self.rows: dict[tuple[str, ...], dict] = {}
        if not fresh and os.path.exists(path):
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    if row_key(row) in wanted and row.get("status") in MEASURED:
                        self.rows[row_key(row)] = row
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, FIELDS)
            writer.writeheader()
            writer.writerows(self.rows.values())

    def get(self, case: EncoderCase, mode: str) -> dict | None:
        return self.rows.get(row_key(case_row(case, mode)))

    def add(self, row: dict) -> None:
        self.rows[row_key(row)] = {k: row.get(k, "") for k in FIELDS}
        with open(self.path, "a", newline="") as f:  # appended at once: a kill loses one case at most
            csv.DictWriter(f, FIELDS).writerow(self.rows[row_key(row)])


def _skip_reason(case: EncoderCase, last: dict | None, last_ok: dict | None, repeats: int,
                 limit_bytes: int | None, timeout_s: float | None) -> str | None:
    """Why a case need not run, judging by the series' last row and last row measured, or None."""
    if last is None:
        return None
    if last["status"] == "oom" or (last["status"] == "skipped" and "memory" in last["note"]):
        return f"a shorter sequence (n={last['n']}) ran out of memory"
    growth = (case.n / int(last_ok["n"])) ** 2 if last_ok else None  # attention's worst case: ~ n^2
    if growth and limit_bytes is not None:
        predicted_bytes = (float(last_ok["peak_mib"]) + float(last_ok["static_mib"])) * MIB * growth
        if predicted_bytes > limit_bytes:
            return None  # run it: an allocation past the cap fails at once, and the CSV says where
    if last["status"] in ("timeout", "skipped"):
        return f"a shorter sequence (n={last['n']}) was not measured in time"
    if timeout_s is None:
        return None
    predicted_s = float(last_ok["seconds"]) * growth * (1 + max(repeats, 0))
    if predicted_s > timeout_s:
        return f"predicted {predicted_s:.0f} s (> {timeout_s:g} s) from n={last_ok['n']}"
    return None


def measure_point(case: EncoderCase, mode: str, repeats: int, limit_bytes: int | None,
                  timeout_s: float | None, threads: int | None = None) -> dict:
    """A row for one case: status ok (seconds: the median of `repeats` warm steps, or with
    repeats=0 the first step's), oom, timeout, or failed (the child's error in the note: one
    broken case does not end a sweep of many)."""
    row = case_row(case, mode)
    try:
        m = measure(case, mode, repeats, limit_bytes=limit_bytes, timeout_s=timeout_s, threads=threads)
    except OutOfMemory as error:
        return {**row, "status": "oom", "note": str(error)[:200]}
    except CaseTimeout as error:
        return {**row, "status": "timeout", "note": str(error)[:200]}
    except CaseFailed as error:
        return {**row, "status": "failed", "note": " ".join(str(error).split())[-300:]}
    seconds = m.seconds if m.seconds is not None else m.first_seconds
    return {**row, "status": "ok", "seconds": f"{seconds:.6g}", "peak_mib": f"{m.peak_mib:.4g}",
            "static_mib": f"{m.static_mib:.4g}", "repeats": repeats, "threads": m.threads}


def run_sweep(series: list[list[Point]], log: CsvLog, repeats: int, limit_bytes: int | None,
              timeout_s: float | None, threads: int | None = None,
              progress: Callable[[Point, bool], None] = lambda point, done: None) -> None:
    """Measure every point of every series (each in growing n) into `log`, shortest lengths of
    all series first, CPU cases on `threads` threads; points already in the log are read back,
    not measured again.
    progress(point, done) is called before (done=False) and after (done=True) each point."""
    lengths = sorted({p.case.n for s in series for p in s})
    last: dict[int, dict | None] = {i: None for i in range(len(series))}
    last_ok = dict(last)
    for n in lengths:
        for i, points in enumerate(series):
            for point in (p for p in points if p.case.n == n):
                progress(point, False)
                row = log.get(point.case, point.mode)
                if row is None:
                    reason = _skip_reason(point.case, last[i], last_ok[i], repeats, limit_bytes, timeout_s)
                    if reason:
                        row = {**case_row(point.case, point.mode), "status": "skipped", "note": reason}
                    else:
                        row = measure_point(point.case, point.mode, repeats, limit_bytes, timeout_s, threads)
                    log.add(row)
                point.row = log.get(point.case, point.mode)
                last[i] = point.row
                if point.row["status"] == "ok":
                    last_ok[i] = point.row
                progress(point, True)
