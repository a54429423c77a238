"""One reader per file format; each reads bytes, decodes each line as utf-8 falling back to
latin-1, accepts LF and CRLF and a last line without line end, and reports each malformed line
(1-based) to a BadLines policy."""
from blosa.data.readers.labeled import read_generic, read_labeled
from blosa.data.readers.lines import read_lines
from blosa.data.readers.sick import read_sick
from blosa.data.readers.snli import read_snli
from blosa.data.readers.squad import read_squad, split_sentences
from blosa.data.readers.sst import read_sst

__all__ = ["read_generic", "read_labeled", "read_lines", "read_sick", "read_snli", "read_squad",
           "read_sst", "split_sentences"]
