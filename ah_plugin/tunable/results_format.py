"""The results CSV: validator lines, then `op,params,solution,time_ms` rows.

    Validator,PT_VERSION,2.11.0+cu130
    Validator,AH_PLUGIN_VERSION,0.1.0
    ...
    mm,NN_4096_4096_4096_ld_4096_4096_bfloat16,type=triton_BLOCK-M=128_..._numwarps=8,0.6512
    mm,NT_1024_*_512_ld_512_*_float16,Default,0

Reading never raises on bad content: each bad line is skipped with a `TunableFileWarning` that starts
with `FILE:LINE:`, and a corrupt byte (NUL, invalid UTF-8) rejects its line only. Every line is kept in
`ReadResult.lines` with what it is, so a rewrite (`results_file`) can keep the lines it does not
understand. A validator that differs from this process rejects the whole file (TunableOp's rule),
naming the key and both values.
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, field

from .. import messages
from . import params as P

DEFAULT_SOLUTION = "Default"
PAD, NO_PAD = "pad", "no_pad"  # the solutions of pad_mm / pad_addmm / pad_bmm rows
VALIDATOR = "Validator"


class TunableFileWarning(UserWarning):
    """A results/untuned file line that was skipped, or a whole file that was rejected."""


def warn(message: str) -> None:
    messages.warn(message, TunableFileWarning)


@dataclass
class Entry:
    """One tuned result. `source` is `FILE:LINE` for rows read from a file, `""` for new ones."""

    op: str
    params: str
    solution: str
    time_ms: float
    source: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.op, self.params)

    def row(self) -> list[str]:
        return [self.op, self.params, self.solution, _format_time(self.time_ms)]


def _format_time(value: float) -> str:
    if math.isinf(value):
        return "inf"
    return f"{value:.6g}"


# What a line of a file is (`Line.kind`).
VALIDATOR_LINE = "validator"  # Validator,KEY,VALUE (key in `Line.key`)
ROW_LINE = "row"  # a usable row (its (op, params) in `Line.key`)
KEPT_LINE = "kept"  # text this reader does not use (a comment, another version's op, a bad row): kept as it is
UNREADABLE_LINE = "unreadable"  # not text (a NUL byte, invalid UTF-8): its bytes in `Line.raw`


@dataclass
class Line:
    lineno: int
    kind: str
    text: str = ""
    key: object = None
    raw: bytes = b""


@dataclass
class ReadResult:
    """What a file held: its validators, its usable entries by (op, params), every line (`lines`), and
    whether it was rejected whole."""

    path: str
    validators: dict[str, str]
    entries: dict[tuple[str, str], Entry]
    rejected: bool = False
    missing: bool = False
    lines: list[Line] = field(default_factory=list)

    def unreadable(self) -> list[Line]:
        return [line for line in self.lines if line.kind == UNREADABLE_LINE]


def current_validators() -> dict[str, str]:
    """What must match for a file's timings to still hold in this process."""
    from . import validators

    return validators.current()


def _lines(path: str) -> list[tuple[int, str | None, bytes]]:
    """(line number, text or None when the line is not UTF-8 text, bytes) of every line, warning once
    per bad line: one corrupt byte costs its line, not the file."""
    with open(path, "rb") as handle:
        data = handle.read()
    out = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        if b"\x00" in raw:
            warn(f"{path}:{lineno}: holds a NUL byte (not CSV text); line skipped")
            out.append((lineno, None, raw))
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            warn(f"{path}:{lineno}: not UTF-8 text ({error.reason} at byte {error.start}); line skipped")
            out.append((lineno, None, raw))
            continue
        out.append((lineno, text.removeprefix("\ufeff") if lineno == 1 else text, raw))
    if out and out[-1][2] == b"":
        out.pop()  # the newline that ends the file
    return out


def _cells(line: str) -> list[str] | None:
    try:
        rows = list(csv.reader([line]))
    except csv.Error:
        return None
    return [cell.strip() for cell in rows[0]] if rows else []


def read_results(path: str, expected: dict[str, str] | None) -> ReadResult:
    """Read a results file. `expected` validators (None: accept any) decide whether it is rejected."""
    result = ReadResult(path=path, validators={}, entries={})
    if not os.path.exists(path):
        result.missing = True
        return result
    validator_lines: dict[str, int] = {}
    last_validator_line = 0
    good_rows = 0
    bad_rows = 0
    for lineno, line, raw in _lines(path):
        if line is None:
            result.lines.append(Line(lineno, UNREADABLE_LINE, raw=raw))
            bad_rows += 1
            continue
        if not line.strip():
            continue
        kept = Line(lineno, KEPT_LINE, text=line)
        if line.lstrip().startswith("#"):
            result.lines.append(kept)
            continue
        cells = _cells(line)
        where = f"{path}:{lineno}"
        if cells is None:
            warn(f"{where}: not a CSV line; skipped")
            result.lines.append(kept)
            bad_rows += 1
            continue
        if cells[0] == VALIDATOR:
            if len(cells) < 3 or not cells[1]:
                warn(f"{where}: a validator line is Validator,KEY,VALUE; found {len(cells)} fields; skipped")
                result.lines.append(kept)
                continue
            key, value = cells[1], ",".join(cells[2:])  # an unquoted value may hold commas
            result.lines.append(Line(lineno, VALIDATOR_LINE, text=line, key=key))
            if key in result.validators and result.validators[key] != value:
                warn(f"{where}: validator {key} given twice ({result.validators[key]!r} then {value!r}); first kept")
                continue
            result.validators.setdefault(key, value)
            validator_lines.setdefault(key, lineno)
            last_validator_line = lineno
            continue
        entry = _parse_row(cells, where)
        if entry is None:
            result.lines.append(kept)
            bad_rows += 1
            continue
        good_rows += 1
        key = (entry.op, entry.params)
        result.lines.append(Line(lineno, ROW_LINE, text=line, key=key))
        previous = result.entries.get(key)
        if previous is None:
            result.entries[key] = entry
        elif previous.solution != entry.solution:
            keep = entry if entry.time_ms < previous.time_ms else previous
            drop = previous if keep is entry else entry
            warn(
                f"{where}: {entry.op},{entry.params} is also at {previous.source} with another solution "
                f"({previous.solution!r} vs {entry.solution!r}); keeping the faster one, {keep.solution!r} "
                f"from {keep.source}, dropping {drop.solution!r}"
            )
            result.entries[key] = keep
        elif entry.time_ms < previous.time_ms:
            result.entries[key] = entry
    if good_rows == 0 and not result.validators and bad_rows:
        warn(f"{path}:1: no validator line and no valid row: not a results file; the whole file is ignored")
        result.rejected = True
        result.entries = {}
        return result
    if expected is not None:
        for key, value in result.validators.items():
            mine = expected.get(key)
            if mine is not None and mine != value:
                warn(
                    f"{path}:{validator_lines[key]}: validator {key} is {value!r} in the file but {mine!r} in "
                    f"this process; the whole file is rejected (its timings do not hold here)"
                )
                result.rejected = True
                result.entries = {}
                return result
        absent = [key for key in expected if key not in result.validators]
        if absent:
            where = f"{path}:{last_validator_line + 1 if last_validator_line else 1}"
            listed = ", ".join(f"{key} (this process: {expected[key]!r})" for key in absent)
            warn(f"{where}: missing validator line(s): {listed}; rows kept, the lines are added on write")
    return result


def _parse_row(cells: list[str], where: str) -> Entry | None:
    if len(cells) < 4 or not all(cells[:3]):
        warn(f"{where}: truncated row ({len(cells)} of 4 fields op,params,solution,time_ms); skipped")
        return None
    if len(cells) > 4:
        warn(f"{where}: row has {len(cells)} fields, expected 4 (op,params,solution,time_ms); skipped")
        return None
    op, params, solution, time_text = cells
    try:
        time_ms = float(time_text)
    except ValueError:
        warn(f"{where}: time_ms {time_text!r} is not a number; skipped")
        return None
    if math.isnan(time_ms) or time_ms < 0:
        warn(f"{where}: time_ms {time_text!r} is not a non-negative number; skipped")
        return None
    if op not in P.KNOWN_OPS:
        warn(f"{where}: unknown op {op!r} (known: {', '.join(sorted(P.KNOWN_OPS))}); skipped")
        return None
    try:
        canonical = P.parse_for(op, params).encode()
    except P.ParamsError as error:
        warn(f"{where}: {error}; skipped")
        return None
    return Entry(op=op, params=canonical, solution=solution, time_ms=time_ms, source=where)


def merge(
    base: dict[tuple[str, str], Entry], newer: dict[tuple[str, str], Entry]
) -> dict[tuple[str, str], Entry]:
    """Union; for a key in both, the faster entry (ties: `newer`)."""
    merged = dict(base)
    for key, entry in newer.items():
        old = merged.get(key)
        if old is None or entry.time_ms <= old.time_ms:
            merged[key] = entry
    return merged


def format_results(validators: dict[str, str], entries: dict[tuple[str, str], Entry]) -> str:
    """A whole new file: the validators, then every entry sorted by (op, params)."""
    return format_lines(validators, [], entries)


def format_lines(validators: dict[str, str], lines: list[Line], entries: dict[tuple[str, str], Entry]) -> str:
    """A file rewritten: this process's validators, then the file's other validator lines, then its lines
    in their order with each row replaced by its key's entry (once; a duplicate's slot goes), the lines
    this reader does not use as they were, and last the entries the file did not hold, sorted."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for key, value in validators.items():
        writer.writerow([VALIDATOR, key, value])
    for line in lines:
        if line.kind == VALIDATOR_LINE and line.key not in validators:
            buffer.write(line.text + "\n")
    written: set = set()
    for line in lines:
        if line.kind == KEPT_LINE:
            buffer.write(line.text + "\n")
        elif line.kind == ROW_LINE and line.key in entries and line.key not in written:
            writer.writerow(entries[line.key].row())
            written.add(line.key)
    for key in sorted(entries):
        if key not in written:
            writer.writerow(entries[key].row())
    return buffer.getvalue()


# ----------------------------------------------------------------------------- untuned shapes


def read_untuned(path: str) -> list[tuple[str, str]]:
    """`op,params` lines (a results file's rows are accepted too), deduplicated, in file order."""
    keys: dict[tuple[str, str], None] = {}
    if not os.path.exists(path):
        return []
    for lineno, line, _ in _lines(path):
        if line is None or not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = _cells(line)
        where = f"{path}:{lineno}"
        if not cells or cells[0] == VALIDATOR:
            continue
        if len(cells) < 2:
            warn(f"{where}: an untuned line is op,params; skipped")
            continue
        op, params = cells[0], cells[1]
        if op not in P.KNOWN_OPS:
            warn(f"{where}: unknown op {op!r}; skipped")
            continue
        try:
            parsed = P.parse_for(op, params)
        except P.ParamsError as error:
            warn(f"{where}: {error}; skipped")
            continue
        if parsed.wildcards:
            warn(f"{where}: {params} has wildcards; only concrete shapes can be tuned; skipped")
            continue
        keys[(op, parsed.encode())] = None
    return list(keys)
