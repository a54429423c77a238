"""SICK (sick/SICK.txt): tab-separated with a header line; one sentence pair a line with its
relatedness score (1-5) and entailment label; the column SemEval_set gives the split. Columns
are found by their header name, so other column orders and extra columns are fine."""
from __future__ import annotations

import math
import os

from blosa.data.errors import BadLines, DataError
from blosa.data.examples import Pair
from blosa.data.readers.lines import read_lines
from blosa.data.tokenize import tokenize

SPLITS = {"TRAIN": "train", "TRIAL": "dev", "TEST": "test"}
# The order of SNLI's labels, so that SICK-E and SNLI share a head's class indices.
ENTAILMENT = {"ENTAILMENT": 0, "NEUTRAL": 1, "CONTRADICTION": 2}
TARGETS = {"relatedness": "relatedness_score", "entailment": "entailment_label"}
SCORE_RANGE = (1.0, 5.0)


def read_sick(path: str | os.PathLike, bad: BadLines | None = None,
              target: str = "relatedness") -> dict[str, list[Pair]]:
    """Read SICK.txt into {"train", "dev", "test"} (SemEval_set TRAIN, TRIAL, TEST).

    target "relatedness": Pair.label is the float score in [1, 5]; "entailment": ENTAILMENT,
    NEUTRAL, CONTRADICTION -> 0, 1, 2. Sentences are raw text, tokenized by tokenize(). A header
    without a needed column is a DataError (line 1); a line with the wrong number of fields, a
    bad score or label, an unknown split or an empty sentence is malformed (reported to `bad`).
    Blank lines are skipped. A file without examples is a DataError; an empty split is not
    (load_dataset checks the splits it needs).
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {sorted(TARGETS)}, got {target!r}")
    bad = BadLines() if bad is None else bad
    needed = ("sentence_A", "sentence_B", TARGETS[target], "SemEval_set")
    splits: dict[str, list[Pair]] = {name: [] for name in SPLITS.values()}
    columns = None
    for lineno, text in read_lines(path):
        if not text.strip():
            continue
        fields = text.split("\t")
        if columns is None:
            header = [f.strip() for f in fields]
            missing = [c for c in needed if c not in header]
            if missing:
                raise DataError(f"the header has no column {', '.join(missing)} (a SICK file "
                                f"needs {', '.join(needed)}; found {', '.join(header)})",
                                path, lineno)
            columns = {c: header.index(c) for c in needed}
            width = len(header)
            continue
        if len(fields) != width:
            bad.report(f"expected {width} tab-separated fields as in the header, got "
                       f"{len(fields)}", path, lineno)
            continue
        first = tokenize(fields[columns["sentence_A"]])
        second = tokenize(fields[columns["sentence_B"]])
        raw_label = fields[columns[TARGETS[target]]].strip()
        split = SPLITS.get(fields[columns["SemEval_set"]].strip())
        if not first or not second:
            bad.report(f"empty sentence_{'A' if not first else 'B'}", path, lineno)
            continue
        if split is None:
            bad.report(f"SemEval_set {fields[columns['SemEval_set']]!r} is not one of "
                       f"{', '.join(SPLITS)}", path, lineno)
            continue
        if target == "relatedness":
            try:
                label = float(raw_label)
            except ValueError:
                label = math.nan
            if not SCORE_RANGE[0] <= label <= SCORE_RANGE[1]:  # also catches nan
                bad.report(f"relatedness_score {raw_label!r} is not a number in "
                           f"[{SCORE_RANGE[0]:g}, {SCORE_RANGE[1]:g}]", path, lineno)
                continue
        else:
            label = ENTAILMENT.get(raw_label)
            if label is None:
                bad.report(f"entailment_label {raw_label!r} is not one of "
                           f"{', '.join(ENTAILMENT)}", path, lineno)
                continue
        splits[split].append(Pair(tuple(first), tuple(second), label))
    if columns is None:
        raise DataError("empty file (no header line)", path)
    if not any(splits.values()):
        raise DataError("no examples in the file", path)
    return splits
