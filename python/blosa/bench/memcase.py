"""Measure one encoder case in this process: peak memory of its first step, then its step time.

Run `python -m blosa.bench.memcase NAME B n [--mode train] [--repeats 3] [--backend reference]`;
it prints one JSON line (peak_mib, static_mib, seconds...), or exits with status 3 and
"out of memory" on stderr when the case does not fit under --limit-gib (default: half of the
memory available now). A fresh process for one case, as blosa.memprobe is for one op call;
blosa.bench.measure.measure does the same from Python, forking its children from a server that
has imported torch already instead of paying an `import torch` a case.
"""
from __future__ import annotations

import argparse
import json
import sys

from blosa.bench import procmem
from blosa.bench.cases import MODES
from blosa.nn import ENCODERS
from blosa.ops import BACKENDS

OOM_EXIT_STATUS = 3


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m blosa.bench.memcase",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(ENCODERS))
    parser.add_argument("B", type=_positive_int)
    parser.add_argument("n", type=_positive_int)
    parser.add_argument("--d", type=_positive_int, default=300, help="embedding size (300)")
    parser.add_argument("--hidden", type=_positive_int, help="hidden units (default: the paper's)")
    parser.add_argument("--backend", choices=BACKENDS, default="auto")
    parser.add_argument("--mode", choices=MODES, default="train")
    parser.add_argument("--repeats", type=int, default=0, help="timed steps after the first (0: memory only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit-gib", type=_positive_float,
                        help="cap on this process's memory growth (default: half of MemAvailable)")
    args = parser.parse_args(argv)
    if args.repeats < 0:
        parser.error(f"argument --repeats: must be >= 0, got {args.repeats}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    from blosa.bench.cases import EncoderCase
    from blosa.bench.measure import measure_here

    try:
        case = EncoderCase(args.name, args.B, args.n, d=args.d, hidden=args.hidden, backend=args.backend,
                           seed=args.seed)
    except ValueError as error:
        print(f"python -m blosa.bench.memcase: {error}", file=sys.stderr)
        return 2
    limit = int(args.limit_gib * 2**30) if args.limit_gib else procmem.default_limit_bytes()
    try:
        result = measure_here(case, args.mode, args.repeats, limit)
    except procmem.OutOfMemory as error:
        print(error, file=sys.stderr)
        return OOM_EXIT_STATUS
    print(json.dumps(result.as_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
