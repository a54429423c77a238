"""A small rule-based tokenizer for raw text (SICK, SNLI without parses, SQuAD).

It follows the Penn Treebank conventions that GloVe's vocabulary was built with, as far as a
few regular expressions go: punctuation is split off ("dogs." -> "dogs", "."), clitics become
their own tokens ("don't" -> "do", "n't"; "dog's" -> "dog", "'s"), while numbers with
separators ("3.5", "1,000"), hyphenated words ("well-known") and abbreviations written with
periods ("U.S.") stay whole. Case is kept (the vocabulary lowercases lookups).
"""
from __future__ import annotations

import re

_APOSTROPHE = "'\u2019"
_CLITIC = r"(?:s|re|ve|ll|d|m)\b"
_TOKEN = re.compile(rf"""
      \d+(?:[.,:/]\d+)+                        # numbers with separators: 3.5  1,000  10:30  1/2
    | (?:[^\W\d_]\.){{2,}}                     # abbreviations: U.S.  e.g.
    | \w+(?=n[{_APOSTROPHE}]t\b)               # the "do" of "don't" ...
    | n[{_APOSTROPHE}]t\b                      # ... and its "n't"
    | [{_APOSTROPHE}]{_CLITIC}                 # clitics: 's 're 've 'll 'd 'm
    | \w+(?:-\w+|[{_APOSTROPHE}](?!{_CLITIC})\w+)*   # words, hyphenated compounds, o'clock
    | \.{{2,}}|-{{2,}}                         # ellipses, dashes
    | \S                                       # any other symbol on its own
""", re.VERBOSE | re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """Split raw text into tokens (see the module docstring); "" or blank text gives []."""
    return _TOKEN.findall(text)
