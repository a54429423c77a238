"""Stanford Sentiment Treebank: the official PTB-style trees (sst/train.txt, dev.txt,
test.txt), one tree per line with a sentiment label 0-4 on every node:
`(3 (2 The) (2 Rock) ...)`. The words are kept as in the file (-LRB-, -RRB-, `` '' and \\/)."""
from __future__ import annotations

import os
import re

from blosa.data.errors import BadLines, DataError
from blosa.data.examples import Sentence
from blosa.data.readers.lines import read_lines

# One piece of a tree: "(label" (group 1; blanks after the parenthesis allowed), ")" (group 2),
# or a word (group 3). Blanks are ASCII only: SST has words with U+00A0 inside ("8\xa01\/2").
_PIECE = re.compile(r"\([ \t]*([^ \t()]*)|(\))|([^ \t()]+)")
_LABELS = {str(k): k for k in range(5)}
_BINARY = {0: 0, 1: 0, 3: 1, 4: 1}  # SST-2: negative (0, 1) and positive (3, 4); 2 dropped
# What an open node holds so far.
_EMPTY, _WORD, _CHILDREN = 0, 1, 2


class _TreeError(Exception):
    pass


def parse_tree(text: str) -> tuple[list[str], list[tuple[int, int, int]]]:
    """Parse one tree. Returns (words, nodes): nodes are (start, end, label) with the node's
    words = words[start:end], in post-order (the root last). Raises _TreeError when the text
    is not one well-formed tree whose nodes are `(label word)` or `(label child child ...)`
    with labels 0-4."""
    words: list[str] = []
    nodes: list[tuple[int, int, int]] = []
    stack: list[list] = []  # the open nodes: [label, start, what it holds]
    for label, close, word in _PIECE.findall(text):
        if close:
            if not stack:
                raise _TreeError("')' without its '('")
            label, start, holds = stack.pop()
            if holds == _EMPTY:
                raise _TreeError("a node without words")
            nodes.append((start, len(words), label))
        elif word:
            if not stack:
                raise _TreeError(f"expected '(' to start a tree, got {word!r}" if not nodes
                                 else "text after the end of the tree")
            if stack[-1][2] != _EMPTY:
                raise _TreeError(f"a node holds more than one word, or words and sub-trees "
                                 f"(at {word!r})")
            stack[-1][2] = _WORD
            words.append(word)
        else:
            if label not in _LABELS:
                raise _TreeError(f"expected a label 0-4 after '(', got {label!r}")
            if stack:
                if stack[-1][2] == _WORD:
                    raise _TreeError("a node holds both a word and sub-trees")
                stack[-1][2] = _CHILDREN
            elif nodes:
                raise _TreeError("text after the end of the tree")
            stack.append([_LABELS[label], len(words), _EMPTY])
    if stack:
        raise _TreeError(f"{len(stack)} unclosed '('")
    if not nodes:
        raise _TreeError("no tree")
    return words, nodes


def read_sst(path: str | os.PathLike, bad: BadLines | None = None, classes: int = 5,
             phrases: bool = False, duplicates: bool = False) -> list[Sentence]:
    """Read a file of SST trees.

    classes=5: labels 0-4 as in the file (SST-1); classes=2 (SST-2): label 2 (neutral) dropped,
    0 and 1 -> 0, 3 and 4 -> 1. phrases=False: one example per tree, its whole sentence with the
    root's label (how dev and test are scored); phrases=True: every node of every tree (the
    training set of the paper), each distinct (phrase, label) once, in file order; with
    duplicates=True every node of every tree, in file order (a tree's nodes in post-order), so a
    phrase appears as often as the trees hold it, as in the authors' code. A line that is not a
    well-formed tree is malformed (reported to `bad`); blank lines are skipped. A file without
    examples is a DataError.
    """
    if classes not in (2, 5):
        raise ValueError(f"classes must be 5 (SST-1) or 2 (SST-2), got {classes!r}")
    bad = BadLines() if bad is None else bad
    keep = _BINARY if classes == 2 else {k: k for k in range(5)}
    trees = 0
    sentences: list[Sentence] = []  # whole sentences: a repeated sentence is a repeated item
    distinct: dict[tuple[tuple[str, ...], int], None] = {}  # phrases: an ordered set
    every: list[Sentence] = []  # phrases with duplicates: every kept node
    for lineno, text in read_lines(path):
        if not text.strip():
            continue
        try:
            words, nodes = parse_tree(text)
        except _TreeError as err:
            bad.report(f"not an SST tree: {err}", path, lineno)
            continue
        trees += 1
        words = tuple(words)  # slices of a tuple are tuples: one copy per phrase
        if phrases and duplicates:
            every.extend(Sentence(words[start:end], keep[label])
                         for start, end, label in nodes if label in keep)
        elif phrases:
            for start, end, label in nodes:
                if label in keep:
                    distinct[words[start:end], keep[label]] = None
        elif nodes[-1][2] in keep:
            sentences.append(Sentence(words, keep[nodes[-1][2]]))
    if phrases:
        examples = every if duplicates else [Sentence(*key) for key in distinct]
    else:
        examples = sentences
    if not examples:
        raise DataError("no trees in the file" if not trees else
                        "no examples left after dropping the neutral label (2)", path)
    return examples
