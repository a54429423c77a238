"""Errors for bad data files, and the policy for malformed lines (raise, or skip and count)."""
from __future__ import annotations

import os

# Where the message of a missing file sends the user (the CLI has --data-dir; `blosa download`
# fills the cache that resolve_data_dir falls back to).
HOW_TO_GET_DATA = ("point --data-dir or the BLOSA_DATA environment variable at a folder with the "
                   "layout of the shared data (sc/, sst/, sick/, snli_1.0/, squad/)")


class DataError(ValueError):
    """A problem in a data file. str() is 'PATH:LINE: message' (or 'PATH: message' without line,
    or just the message without path). Attributes .path (str or None), .line (1-based int or
    None), .message."""

    def __init__(self, message: str, path: str | os.PathLike | None = None,
                 line: int | None = None):
        self.message = message
        self.path = None if path is None else os.fspath(path)
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"

    def __reduce__(self):
        # Keep path and line through pickling (errors cross DataLoader worker processes).
        return (type(self), (self.message, self.path, self.line))


def missing_file(path: str | os.PathLike, download: str | None = None) -> DataError:
    """The DataError for a data file that is not there, saying how to get the data
    (`download`: the dataset's name for `blosa download`, when it has one)."""
    how = HOW_TO_GET_DATA
    if download:
        how += f", or fetch it with `blosa download {download}`"
    return DataError(f"no such file; {how}", path)


class BadLines:
    """Policy for malformed lines: raise DataError (skip=False, the default) or skip the line
    and record its error in .skipped (skip=True); len() is the number skipped."""

    def __init__(self, skip: bool = False):
        self.skip = skip
        self.skipped: list[DataError] = []

    def report(self, message: str, path: str | os.PathLike | None, line: int | None) -> None:
        """A malformed line (line None: a malformed record without a line, e.g. in JSON):
        raise its DataError, or record it when skipping."""
        error = DataError(message, path, line)
        if not self.skip:
            raise error
        self.skipped.append(error)

    def __len__(self) -> int:
        return len(self.skipped)

    def __repr__(self) -> str:
        return f"BadLines(skip={self.skip}, skipped={len(self.skipped)})"
