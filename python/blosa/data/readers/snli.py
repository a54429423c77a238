"""SNLI 1.0 (snli_1.0/snli_1.0_{train,dev,test}.jsonl): one JSON object a line with
gold_label, sentence1, sentence2 and their binary parses."""
from __future__ import annotations

import json
import logging
import os

from blosa.data.errors import BadLines, DataError
from blosa.data.examples import Pair
from blosa.data.readers.lines import read_lines, split_blanks
from blosa.data.tokenize import tokenize

LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}
NO_GOLD = "-"  # pairs whose annotators did not agree: not part of the benchmark

log = logging.getLogger(__name__)


def _tokens(record: dict, key: str) -> tuple[str, ...]:
    """A sentence's tokens: its binary parse without the brackets (the official tokenization),
    else tokenize() of the raw sentence."""
    parse = record.get(f"{key}_binary_parse")
    if isinstance(parse, str):
        tokens = [t for t in split_blanks(parse) if t not in ("(", ")")]
        if tokens:
            return tuple(tokens)
    text = record.get(key)
    return tuple(tokenize(text)) if isinstance(text, str) else ()


def read_snli(path: str | os.PathLike, bad: BadLines | None = None,
              counts: dict[str, int] | None = None) -> list[Pair]:
    """Read an SNLI 1.0 jsonl file. Labels entailment, neutral, contradiction -> 0, 1, 2.

    Pairs with gold_label "-" are dropped (not an error; their number goes to
    counts["no_gold"] when a dict is given, and to the log). A line that is not a JSON object,
    has another gold_label or no tokens for a sentence is malformed (reported to `bad`). Blank
    lines are skipped. A file without examples is a DataError.
    """
    bad = BadLines() if bad is None else bad
    examples = []
    no_gold = 0
    for lineno, text in read_lines(path):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            bad.report(f"not valid JSON: {err.msg} (column {err.colno})", path, lineno)
            continue
        if not isinstance(record, dict):
            bad.report("not a JSON object", path, lineno)
            continue
        gold = record.get("gold_label")
        if gold == NO_GOLD:
            no_gold += 1
            continue
        if gold not in LABELS:
            bad.report(f"gold_label {gold!r} is not one of {', '.join(LABELS)} or "
                       f"{NO_GOLD!r}", path, lineno)
            continue
        first, second = _tokens(record, "sentence1"), _tokens(record, "sentence2")
        if not first or not second:
            bad.report(f"no tokens for {'sentence1' if not first else 'sentence2'}", path,
                       lineno)
            continue
        examples.append(Pair(first, second, LABELS[gold]))
    if counts is not None:
        counts["no_gold"] = counts.get("no_gold", 0) + no_gold
    if no_gold:
        log.info("%s: dropped %d pairs without a gold label (%r)", path, no_gold, NO_GOLD)
    if not examples:
        raise DataError("no examples in the file", path)
    return examples
