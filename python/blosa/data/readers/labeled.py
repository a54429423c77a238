"""`label sentence` files: TREC, CR, MPQA, SUBJ, stsa.* (one example a line, the label first,
then the pre-tokenized sentence), and `generic` files with any label tokens."""
from __future__ import annotations

import os

from blosa.data.errors import BadLines, DataError
from blosa.data.examples import Sentence
from blosa.data.readers.lines import read_lines, split_blanks


def _records(path) -> list[tuple[int, str, list[str]]]:
    """(lineno, label token, tokens) of each non-blank line; blank lines are skipped."""
    records = []
    for lineno, text in read_lines(path):
        parts = split_blanks(text)
        if parts:
            records.append((lineno, parts[0], parts[1:]))
    return records


def read_labeled(path: str | os.PathLike, bad: BadLines | None = None,
                 num_classes: int | None = None, allow_empty: bool = False) -> list[Sentence]:
    """Read a `label sentence` file whose labels are class indices.

    The label must be an int in [0, num_classes) when num_classes is given, else any int >= 0.
    A line with a bad label, or with no sentence after the label, is malformed (reported to
    `bad`, which raises by default); allow_empty=True keeps label-only lines as examples with
    no tokens instead (the official CR and MPQA files hold a few, counted in their published
    sizes). Blank lines are skipped. A file without examples is a DataError.
    """
    bad = BadLines() if bad is None else bad
    if num_classes is not None and num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    examples = []
    for lineno, label, tokens in _records(path):
        if not label.isascii() or not label.isdigit():
            bad.report(f"label {label!r} is not a class index (a non-negative int)", path,
                       lineno)
            continue
        value = int(label)
        if num_classes is not None and value >= num_classes:
            bad.report(f"label {value} is outside [0, {num_classes})", path, lineno)
            continue
        if not tokens and not allow_empty:
            bad.report(f"no sentence after the label {label!r}", path, lineno)
            continue
        examples.append(Sentence(tuple(tokens), value))
    if not examples:
        raise DataError("no examples in the file", path)
    return examples


def _label_order(label: str):
    # Integer labels sort numerically ("2" before "10"), then every other label as text.
    return (0, int(label), "") if label.isascii() and label.isdigit() else (1, 0, label)


def read_generic(path: str | os.PathLike, bad: BadLines | None = None,
                 label_names: list[str] | tuple[str, ...] | None = None,
                 ) -> tuple[list[Sentence], list[str]]:
    """Read a `label sentence` file whose labels are arbitrary tokens (`generic`).

    label_names None: the classes are the labels found, sorted (integers numerically, before
    any other label, which sort as text); given (e.g. from the training file when reading the
    test file): a label not among them is malformed. A line with no sentence is malformed;
    blank lines are skipped. Returns (examples with label = index in label_names, label_names).
    """
    bad = BadLines() if bad is None else bad
    records = []
    for lineno, label, tokens in _records(path):
        if not tokens:
            bad.report(f"no sentence after the label {label!r}", path, lineno)
            continue
        records.append((lineno, label, tokens))
    if label_names is None:
        names = sorted({label for _, label, _ in records}, key=_label_order)
    else:
        names = list(label_names)
        if len(set(names)) != len(names):
            raise ValueError(f"label_names has duplicates: {names}")
    index = {name: i for i, name in enumerate(names)}
    examples = []
    for lineno, label, tokens in records:
        if label not in index:
            bad.report(f"unknown label {label!r}; the labels are {names}", path, lineno)
            continue
        examples.append(Sentence(tuple(tokens), index[label]))
    if not examples:
        raise DataError("no examples in the file", path)
    return examples, names
