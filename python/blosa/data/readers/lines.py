"""Reading the lines of a real-world text file: bytes, decoded line by line."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

from blosa.data.errors import DataError, missing_file

# Tokens of pre-tokenized files are split on ASCII blanks only: str.split() would also split
# at U+00A0 and U+0085, which occur inside tokens of the real files (SST's "8\xa01\/2", and
# latin-1 bytes 0x85 in SUBJ).
_BLANKS = re.compile(r"[ \t]+")


def split_blanks(text: str) -> list[str]:
    """The tokens of a pre-tokenized text: split at runs of spaces and tabs."""
    return [t for t in _BLANKS.split(text) if t]


def decode(raw: bytes) -> str:
    """One line's bytes as text: utf-8, else latin-1 (which decodes any byte; the real files
    mix both, e.g. SUBJ and TREC hold latin-1 bytes)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def open_data(path: str | os.PathLike, download: str | None = None):
    """Open a data file for reading bytes, or raise a DataError saying how to get the data."""
    path = Path(path)
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise missing_file(path, download) from None
    except IsADirectoryError:
        raise DataError("is a folder, not a data file", path) from None
    except OSError as err:
        raise DataError(f"cannot read: {err.strerror}", path) from None


def read_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield (lineno, text) for each line of the file at `path`: lineno 1-based, text decoded
    per line (see decode) without its line end (LF or CRLF; a last line without line end is
    read too; a utf-8 byte order mark on line 1 is dropped). Streams: the file is never held
    in memory whole (SNLI's training file is 0.5 GB)."""
    with open_data(path) as f:
        for lineno, raw in enumerate(f, 1):
            text = decode(raw.rstrip(b"\r\n"))
            if lineno == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield lineno, text
