"""SQuAD v1.1 (squad/train-v1.1.json, dev-v1.1.json) as the sentence-selection task of the
paper's Appendix B: for each question, the passage's sentences and the index of the sentence
that holds the answer."""
from __future__ import annotations

import bisect
import json
import os
import re

from blosa.data.errors import BadLines, DataError
from blosa.data.examples import Passage
from blosa.data.readers.lines import decode, open_data
from blosa.data.tokenize import tokenize

# A sentence ends at ., ! or ? (a run of them, then any closing quotes or brackets), followed
# by white space.
_CLOSERS = "\"')]\u2019\u201d"
_END = re.compile(rf"[.!?]+[{re.escape(_CLOSERS)}]*(?=\s)")
# Words after which a period does not end a sentence (compared lowercased, without the period).
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs mt ft no co inc ltd gen col lt sgt capt gov sen rep rev "
    "fig approx est ca c e.g i.e".split())


def _word_before(text: str, i: int) -> str:
    """The word that ends at text[i] (exclusive), without opening quotes or brackets."""
    j = i
    while j > 0 and not text[j - 1].isspace():
        j -= 1
    return text[j:i].lstrip("\"'([\u2018\u201c")


def _no_end_after(word: str) -> bool:
    """Whether a period after `word` is not a sentence end: an initial, an abbreviation."""
    return len(word) == 1 and word.isalpha() or "." in word or word.lower() in ABBREVIATIONS


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split a passage into sentences; returns their character spans [start, end) in `text`,
    in order, without surrounding white space. A deliberately simple rule, which errs towards
    not splitting:

    a sentence ends after a run of '.', '!' or '?' (with any closing quotes or brackets) that is
    followed by white space, unless the next character is a lowercase letter, or the period
    follows an abbreviation (ABBREVIATIONS), a single letter (an initial: "J. K. Rowling") or a
    word with inner periods ("U.S.", "a.m."). Text without such an end is one sentence.
    """
    spans = []
    start = None
    for i, ch in enumerate(text):
        if not ch.isspace():
            start = i
            break
    if start is None:
        return []
    for m in _END.finditer(text, start):
        after = m.end()
        while after < len(text) and text[after].isspace():
            after += 1
        if after == len(text):
            break  # the last sentence ends with the text
        if text[after].islower():
            continue
        if m.group().rstrip(_CLOSERS) == "." and _no_end_after(_word_before(text, m.start())):
            continue
        spans.append((start, m.end()))
        start = after
    end = len(text.rstrip())
    spans.append((start, end))
    return spans


def read_squad(path: str | os.PathLike, bad: BadLines | None = None) -> list[Passage]:
    """Read a SQuAD v1.1 json file: one Passage per question, with the question's tokens, the
    tokens of the context's sentences (split_sentences, then tokenize()), and the index of the
    sentence that holds the first answer's answer_start (a character offset into the context).

    Invalid JSON or a file without the v1.1 layout ({"data": [{"paragraphs": [...]}]}) is a
    DataError; a paragraph or question that breaks the layout, has no answer, or an answer_start
    outside its context is malformed (reported to `bad`, with its place: JSON has no useful line
    numbers). A file without examples is a DataError.
    """
    bad = BadLines() if bad is None else bad
    with open_data(path) as f:
        raw = f.read()
    try:
        root = json.loads(decode(raw))
    except json.JSONDecodeError as err:
        raise DataError(f"not valid JSON: {err.msg} (column {err.colno})", path,
                        err.lineno) from None
    articles = root.get("data") if isinstance(root, dict) else None
    if not isinstance(articles, list):
        raise DataError('not a SQuAD v1.1 file: no list "data" at the top', path)
    examples = []
    for a, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            bad.report(f'data[{a}] has no list "paragraphs"', path, None)
            continue
        for p, paragraph in enumerate(paragraphs):
            place = f"data[{a}].paragraphs[{p}]"
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            questions = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not isinstance(questions, list):
                bad.report(f'{place} needs a string "context" and a list "qas"', path, None)
                continue
            spans = split_sentences(context)
            if not spans:
                bad.report(f"{place} has an empty context", path, None)
                continue
            starts = [s for s, _ in spans]
            sentences = tuple(tuple(tokenize(context[s:e])) for s, e in spans)
            for q, qa in enumerate(questions):
                where = f"{place}.qas[{q}]"
                if isinstance(qa, dict) and "id" in qa:
                    where += f" (id {qa['id']})"
                question = qa.get("question") if isinstance(qa, dict) else None
                answers = qa.get("answers") if isinstance(qa, dict) else None
                tokens = tuple(tokenize(question)) if isinstance(question, str) else ()
                if not tokens:
                    bad.report(f"{where} has no question text", path, None)
                    continue
                if not isinstance(answers, list) or not answers \
                        or not isinstance(answers[0], dict):
                    bad.report(f"{where} has no answer", path, None)
                    continue
                offset = answers[0].get("answer_start")
                if not isinstance(offset, int) or isinstance(offset, bool) \
                        or not 0 <= offset < len(context):
                    bad.report(f"{where}: answer_start {offset!r} is not a character offset "
                               f"into its context (length {len(context)})", path, None)
                    continue
                # The sentence whose span starts last at or before the offset (an offset in the
                # blanks between two sentences belongs to the earlier one).
                index = max(bisect.bisect_right(starts, offset) - 1, 0)
                examples.append(Passage(tokens, sentences, index))
    if not examples:
        raise DataError("no examples in the file", path)
    return examples
