"""A large results file answered by searching its bytes, so that a run's cost does not grow with it.

A run of a small program looks up a handful of shapes. Parsing every row of a million-row file to
answer them would cost seconds and hundreds of MB, so a file of `MIN_BYTES` or more is opened here
instead when it is *plain*:

- its first lines are validator lines holding each of this process's validators with its value, and
  no validator line follows a row;
- after them, only ASCII letters, digits and ``_ , . = * + -`` and newlines: no quote, space, tab,
  comment, carriage return or byte that is not ASCII;
- no number written with a leading zero (``NN_064_...``), no addmm row without its bias layout.

In such a file every row's params are exactly as `params.parse_for` writes them, so the rows of a key
are the lines that start with ``OP,PARAMS,``: a lookup searches for them (tens of ms for 100 MB), reads
them with the reader's own rules (`results_format.parse_row`: a bad one is warned about and skipped;
two of one key, ``results_format.faster_of``'s) and remembers the answer. Wildcard rows (a ``*``) are read at open. Any
other file is read whole (`results_format`). Lines a lookup never reaches are not checked: a bad one is
warned about when the file is read whole (a rewrite, `get_results()`), not at start.
"""

from __future__ import annotations

import csv
import hashlib
import re

from . import results_format as R

MIN_BYTES = 4 << 20  # below this, reading the file whole takes well under 0.1 s
MAX_WILDCARD_ROWS = 10_000  # more wildcard rows than this: the file is read whole
_LEADING_ZERO = (re.compile(rb"_0[0-9]"), re.compile(rb",B0[0-9]"))
_NO_BIAS = re.compile(rb"addmm,(?![^,\n]*_bias-)")  # also finds pad_addmm and baddbmm rows


class SearchedFile:
    """The rows of a plain results file, found on demand (see the module docstring)."""

    def __init__(self, path: str, data: bytes, body: int, digest: str, validators: dict[str, str]) -> None:
        self.path = path
        self.data = data
        self.body = body  # offset of the first line after the validator lines (data[body - 1] is a newline)
        self.digest = digest
        self.validators = validators
        self.found: dict[tuple[str, str], R.Entry | None] = {}
        self.wildcards: dict[tuple[str, str], R.Entry] = {}

    def _entry_at(self, start: int, previous: R.Entry | None) -> tuple[R.Entry | None, int]:
        """The row of the line starting at `start` read with the reader's rules (warned and None when bad),
        kept against `previous` of the same key; and where the line ends."""
        end = self.data.find(b"\n", start)
        end = len(self.data) if end == -1 else end
        lineno = self.data.count(b"\n", 0, start) + 1
        entry = R.parse_row(self.data[start:end].decode("ascii").split(","), self.path, lineno, R.warn)
        if entry is not None and previous is not None:
            entry = R.faster_of(previous, entry, R.warn)
        return (entry or previous), end

    def get(self, key: tuple[str, str]) -> R.Entry | None:
        """The row of a concrete (op, params) key, or None."""
        if key in self.found:
            return self.found[key]
        needle = f"\n{key[0]},{key[1]},".encode()
        entry, pos = None, self.data.find(needle, self.body - 1)
        while pos != -1:
            entry, end = self._entry_at(pos + 1, entry)
            pos = self.data.find(needle, end)
        self.found[key] = entry
        return entry

    def _read_wildcards(self) -> bool:
        """Read every row holding a `*`; False when there are too many to call the file large and plain."""
        data, pos, rows = self.data, self.data.find(b"*", self.body), 0
        while pos != -1:
            rows += 1
            if rows > MAX_WILDCARD_ROWS:
                return False
            entry, end = self._entry_at(data.rfind(b"\n", 0, pos) + 1, None)  # a bad row is warned about
            if entry is not None:
                previous = self.wildcards.get(entry.key)
                self.wildcards[entry.key] = entry if previous is None else R.faster_of(previous, entry, R.warn)
            pos = data.find(b"*", end)
        return True


def _header(data: bytes) -> tuple[dict[str, str], int] | None:
    """The validator lines at the top of `data` and the offset after them; None when there are none."""
    validators: dict[str, str] = {}
    body = R.validator_head(data)
    for line in data[:body].split(b"\n")[:-1]:
        try:
            cells = next(csv.reader([line.decode("utf-8").rstrip("\r")]))
        except (UnicodeDecodeError, csv.Error, StopIteration):
            return None
        if len(cells) < 3 or not cells[1].strip():
            return None
        validators.setdefault(cells[1].strip(), ",".join(cell.strip() for cell in cells[2:]))
    return (validators, body) if validators else None


def open_searched(path: str, data: bytes, expected: dict[str, str]) -> SearchedFile | None:
    """A `SearchedFile` of `data` (the bytes of the results file `path`) when it is large and plain, else
    None (then it is read whole)."""
    if len(data) < MIN_BYTES:
        return None
    header = _header(data)
    if header is None:
        return None
    validators, body = header
    if any(validators.get(key) != value for key, value in expected.items()):
        return None  # missing or different: the reader warns, rejects or adds the lines
    if R.plain_after(data) is None:
        return None  # a quote, a space, a comment, a byte that is not ASCII ... after the validator lines
    if data.find(b"\nValidator,", body - 1) != -1:
        return None
    if any(pattern.search(data, body - 1) for pattern in (*_LEADING_ZERO, _NO_BIAS)):
        return None
    searched = SearchedFile(path, data, body, hashlib.sha256(data).hexdigest(), validators)
    return searched if searched._read_wildcards() else None


__all__ = ["SearchedFile", "open_searched", "MIN_BYTES"]
