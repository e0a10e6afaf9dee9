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
naming the key and both values. A file with no validator line and no valid row (a script, a picture,
another tool's CSV given by mistake) is not a results file: it is said once, as a whole, and marked
`foreign`, so that it is never written to.

A million-row file is read in a few seconds: the text is decoded at once, a plain line is split
without the csv module, and a canonical params string is recognised by one regular expression.
"""

from __future__ import annotations

import csv
import gc
import hashlib
import io
import math
import os
import re
import string
from dataclasses import dataclass, field

from ..collect import whole_lines
from ..report import messages
from ..use import aten_margin
from . import params as P

DEFAULT_SOLUTION = "Default"
PAD, NO_PAD = "pad", "no_pad"  # the solutions of pad_mm / pad_addmm / pad_bmm rows
VALIDATOR = "Validator"


class TunableFileWarning(UserWarning):
    """A results/untuned file line that was skipped, or a whole file that was rejected."""


def warn(message: str) -> None:
    messages.warn(message, TunableFileWarning)


@dataclass(slots=True)
class Entry:
    """One tuned result; `origin` and `lineno` say where it was read (`origin` "" for a new winner).
    Slots and no per-row text keep a million rows in a few hundred MB."""

    op: str
    params: str
    solution: str
    time_ms: float
    origin: str = ""
    lineno: int = 0

    @property
    def source(self) -> str:
        """`FILE:LINE` for a row read from a file, `""` for a new one."""
        return f"{self.origin}:{self.lineno}" if self.origin else ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.op, self.params)

    def row(self) -> list[str]:
        return [self.op, self.params, self.solution, _format_time(self.time_ms)]


def _format_time(value: float) -> str:
    if math.isinf(value):
        return "inf"
    return f"{value:.6g}"


# What a line of a file is (`Line.kind`). A usable row is held in `ReadResult.lines` as its (op, params)
# key alone: its text is written anew from the key's entry.
VALIDATOR_LINE = "validator"  # Validator,KEY,VALUE (key in `Line.key`)
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
    """What a file held: its validators, its usable entries by (op, params), every line (`lines`: a
    `Line`, or the key of a usable row), whether it was rejected whole (`rejected`; `foreign` too when it
    is not a results file at all) and the sha256 of its bytes (`digest`)."""

    path: str
    validators: dict[str, str]
    entries: dict[tuple[str, str], Entry]
    rejected: bool = False
    missing: bool = False
    foreign: bool = False
    digest: str = ""
    lines: list = field(default_factory=list)
    unreadable_lines: list[Line] = field(default_factory=list)
    duplicates: int = 0  # rows whose key an earlier row already had
    absent: tuple = ()  # validators of this process the file lacks

    def unreadable(self) -> list[Line]:
        return self.unreadable_lines

    @property
    def untidy(self) -> bool:
        """A rewrite would change more than add rows: lines not text to move aside, duplicate rows to
        drop, validator lines to add."""
        return bool(self.unreadable_lines or self.duplicates or self.absent)


def current_validators() -> dict[str, str]:
    """What must match for a file's timings to still hold in this process."""
    from . import validators

    return validators.current()


def _split_lines(path: str, data: bytes, note) -> tuple[list, dict[int, bytes]]:
    """Every line's text (None where a line is not UTF-8 text: a NUL byte, a bad byte) and the bytes of
    those lines by line number. One corrupt byte costs its line, not the file."""
    text = None
    if b"\x00" not in data:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    if text is not None:  # the usual case: the whole file at once
        lines = text.split("\n")
        if "\r" in text:
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        raws: dict[int, bytes] = {}
    else:
        lines, raws = [], {}
        for lineno, raw in enumerate(data.split(b"\n"), start=1):
            raw = raw[:-1] if raw.endswith(b"\r") else raw
            if b"\x00" in raw:
                note(f"{path}:{lineno}: holds a NUL byte (not CSV text); line skipped")
                lines.append(None)
                raws[lineno] = raw
                continue
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError as error:
                note(f"{path}:{lineno}: not UTF-8 text ({error.reason} at byte {error.start}); line skipped")
                lines.append(None)
                raws[lineno] = raw
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the file
    if lines and lines[0] is not None:
        lines[0] = lines[0].removeprefix("\ufeff")
    return lines, raws


def _cells(line: str) -> list[str] | None:
    try:
        rows = list(csv.reader([line]))
    except csv.Error:
        return None
    return [cell.strip() for cell in rows[0]] if rows else []


# A params string that `params.parse_for` returns unchanged, by op: recognised here without building a
# GemmParams (numbers in ASCII, no leading zero in a size: the only things a parse changes; the bias
# layout exactly where the op has one). Anything else goes through `parse_for`, which says what is wrong.
_SIZE = r"(?:[1-9][0-9]*|0|\*)"
_LD = r"(?:[0-9]+(?:x[0-9]+)?|\*)"
_DIGITS = r"(?:[0-9]+|\*)"
_PLAIN_PARAMS = rf"(?:B{_SIZE}_)?[NTG][NTG]_{_SIZE}_{_SIZE}_{_SIZE}_ld_{_LD}_{_LD}_[a-z][a-z0-9_]*"
_BIAS = rf"_bias-(?:[RCS]|[NT]{_DIGITS}|G{_DIGITS}x{_DIGITS})"
_CANONICAL = {op: re.compile(_PLAIN_PARAMS).fullmatch for op in P.KNOWN_OPS
              if op not in P.BIAS_INDEX and op not in P.FLEX_OPS}
_CANONICAL.update((op, re.compile(P.flex_params.PATTERN).fullmatch) for op in P.FLEX_OPS)
_CANONICAL.update(addmm=re.compile(_PLAIN_PARAMS + _BIAS).fullmatch,
                  pad_addmm=re.compile(_PLAIN_PARAMS + _BIAS).fullmatch,
                  baddbmm=re.compile(_PLAIN_PARAMS + _BIAS + rf"-b{_DIGITS}").fullmatch)


def canonical_params(op: str, text: str) -> str:
    """`text` as `parse_for(op, text).encode()` writes it; raises `params.ParamsError`."""
    if _CANONICAL[op](text):
        return text
    return P.parse_for(op, text).encode()


def faster_of(previous: Entry, entry: Entry, note) -> Entry:
    """Which of two rows of one key in one file is kept: as a merge keeps (``replaces``: the faster, by the aten
    margin between aten and another solution), the earlier on a tie; said when their solutions differ. The
    margin is read only where aten meets another solution (reading the settings costs about 0.1 ms, and a
    file appended to by many processes holds many duplicates of one solution)."""
    aten_meets_other = previous.solution != entry.solution and DEFAULT_SOLUTION in (previous.solution, entry.solution)
    margin = aten_margin_setting() if aten_meets_other else 0.0
    keep = entry if replaces(entry, previous, margin, ties_to_new=False) else previous
    if previous.solution != entry.solution:
        drop = previous if keep is entry else entry
        note(
            f"{entry.source}: {entry.op},{entry.params} is also at {previous.source} with another solution "
            f"({messages.quoted(previous.solution)} vs {messages.quoted(entry.solution)}); keeping "
            f"{messages.quoted(keep.solution)} from {keep.source} ("
            f"{'the faster' if keep.time_ms <= drop.time_ms else 'aten: the other is not faster by the aten margin'}"
            f"), dropping {messages.quoted(drop.solution)}"
        )
    return keep


def read_bytes(path: str) -> bytes | None:
    """The bytes of a file, None when there is none (an unreadable path: OSError; a FIFO, a device, a
    folder: ``whole_lines.RefusedWrite``, never opened: a FIFO would block the program)."""
    if not os.path.exists(path):
        return None
    with os.fdopen(whole_lines.open_plain(path, os.O_RDONLY), "rb") as handle:
        return handle.read()


def read_results(path: str, expected: dict[str, str] | None) -> ReadResult:
    """Read a results file. `expected` validators (None: accept any) decide whether it is rejected."""
    data = read_bytes(path)
    if data is None:
        return ReadResult(path=path, validators={}, entries={}, missing=True)
    return parse_results(path, data, expected)


# What the rows of a file written by this cache are made of; a file whose lines after the validator lines
# hold nothing else needs no line unquoted, stripped or checked for a comment.
PLAIN_BYTES = (string.ascii_letters + string.digits + "_,.=*+-\n").encode()


def validator_head(data: bytes) -> int:
    """The offset after the lines at the top of `data` that start with `Validator,` (0 when none)."""
    pos = 0
    while data.startswith(b"Validator,", pos):
        end = data.find(b"\n", pos)
        if end == -1:
            return pos
        pos = end + 1
    return pos


def plain_after(data: bytes) -> int | None:
    """The number of validator lines at the top of `data` when every line after them is plain (only
    `PLAIN_BYTES`), else None."""
    head = validator_head(data)
    if data.translate(None, PLAIN_BYTES) != data[:head].translate(None, PLAIN_BYTES):
        return None
    return data.count(b"\n", 0, head)


def parse_results(path: str, data: bytes, expected: dict[str, str] | None) -> ReadResult:
    """`read_results` of a file's bytes, `data`. Warnings about lines are given at the end, all of them,
    or, for a file that is not a results file, one about the whole file instead. The garbage collector
    waits meanwhile: a million rows are a million new objects that hold no cycle, and collecting as they
    come doubles the time."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse(path, data, expected)
    finally:
        if collecting:
            gc.enable()


def _parse(path: str, data: bytes, expected: dict[str, str] | None) -> ReadResult:
    result = ReadResult(path=path, validators={}, entries={}, digest=hashlib.sha256(data).hexdigest())
    notes: list[str] = []
    note = notes.append
    texts, raws = _split_lines(path, data, note)
    plain = plain_after(data) if not raws else None
    plain = len(texts) if plain is None else plain  # lines after this one: split as they are
    validator_lines: dict[str, int] = {}
    last_validator_line = 0
    good_rows = bad_rows = 0
    first_bad = None
    lines, entries = result.lines, result.entries
    for lineno, line in enumerate(texts, start=1):
        if line is None:
            unreadable = Line(lineno, UNREADABLE_LINE, raw=raws[lineno])
            lines.append(unreadable)
            result.unreadable_lines.append(unreadable)
            bad_rows += 1
            first_bad = first_bad or lineno
            continue
        if not line:
            continue
        # a plain line: nothing to unquote or strip
        if lineno > plain or ('"' not in line and " " not in line and line.isprintable()):
            if line[0] == "#":
                lines.append(Line(lineno, KEPT_LINE, text=line))
                continue
            cells = line.split(",")
        else:
            if not line.strip():
                continue
            if line.lstrip().startswith("#"):
                lines.append(Line(lineno, KEPT_LINE, text=line))
                continue
            cells = _cells(line)
            if cells is None:
                note(f"{path}:{lineno}: not a CSV line; skipped")
                lines.append(Line(lineno, KEPT_LINE, text=line))
                bad_rows += 1
                first_bad = first_bad or lineno
                continue
        if cells[0] == VALIDATOR:
            where = f"{path}:{lineno}"
            if len(cells) < 3 or not cells[1]:
                note(f"{where}: a validator line is Validator,KEY,VALUE; found {len(cells)} fields; skipped")
                lines.append(Line(lineno, KEPT_LINE, text=line))
                continue
            key, value = cells[1], ",".join(cells[2:])  # an unquoted value may hold commas
            lines.append(Line(lineno, VALIDATOR_LINE, text=line, key=key))
            if key in result.validators and result.validators[key] != value:
                note(f"{where}: validator {key} given twice ({messages.quoted(result.validators[key])} then {messages.quoted(value)}); first kept")
                continue
            result.validators.setdefault(key, value)
            validator_lines.setdefault(key, lineno)
            last_validator_line = lineno
            continue
        entry = None
        if len(cells) == 4 and cells[0] in _CANONICAL and cells[2] and _CANONICAL[cells[0]](cells[1]) \
                and not (cells[2] == DEFAULT_SOLUTION and cells[0] in P.FLEX_OPS):
            try:  # the usual row, read without a call: a time that is a number >= 0 (not NaN)
                time_ms = float(cells[3])
            except ValueError:
                time_ms = -1.0
            if time_ms >= 0:
                entry = Entry(cells[0], cells[1], cells[2], time_ms, path, lineno)
        if entry is None:
            entry = parse_row(cells, path, lineno, note)  # any other line: says what is wrong with it
        if entry is None:
            lines.append(Line(lineno, KEPT_LINE, text=line))
            bad_rows += 1
            first_bad = first_bad or lineno
            continue
        good_rows += 1
        key = (entry.op, entry.params)
        lines.append(key)
        previous = entries.get(key)
        if previous is None:
            entries[key] = entry
        else:
            result.duplicates += 1
            entries[key] = faster_of(previous, entry, note)
    if good_rows == 0 and not result.validators and bad_rows:
        shown = texts[first_bad - 1]
        shown = repr(shown[:60]) if shown is not None else "not text"
        warn(f"{path}:1: not a results file (no validator line and no valid row; line {first_bad}: {shown}); "
             "left as it is: never moved, replaced or written to, and the results of this run stay in memory")
        result.rejected = result.foreign = True
        result.entries = {}
        return result
    for message in notes:
        warn(message)
    if expected is not None:
        for key, value in result.validators.items():
            mine = expected.get(key)
            if mine is not None and mine != value:
                warn(
                    f"{path}:{validator_lines[key]}: validator {key} is {messages.quoted(value)} in the file but {messages.quoted(mine)} in "
                    f"this process; the whole file is rejected (its timings do not hold here)"
                )
                result.rejected = True
                result.entries = {}
                return result
        absent = [key for key in expected if key not in result.validators]
        result.absent = tuple(absent)
        if absent:
            where = f"{path}:{last_validator_line + 1 if last_validator_line else 1}"
            listed = ", ".join(f"{key} (this process: {expected[key]!r})" for key in absent)
            warn(f"{where}: missing validator line(s): {listed}; rows kept, the lines are added on write")
    return result


def parse_row(cells: list[str], path: str, lineno: int, note) -> Entry | None:
    if len(cells) < 4 or not all(cells[:3]):
        note(f"{path}:{lineno}: truncated row ({len(cells)} of 4 fields op,params,solution,time_ms); skipped")
        return None
    if len(cells) > 4:
        note(f"{path}:{lineno}: row has {len(cells)} fields, expected 4 (op,params,solution,time_ms); skipped")
        return None
    op, params, solution, time_text = cells
    try:
        time_ms = float(time_text)
    except ValueError:
        note(f"{path}:{lineno}: time_ms {messages.quoted(time_text)} is not a number; skipped")
        return None
    if time_ms != time_ms or time_ms < 0:  # NaN, or negative
        note(f"{path}:{lineno}: time_ms {messages.quoted(time_text)} is not a non-negative number; skipped")
        return None
    if op not in P.KNOWN_OPS:
        note(f"{path}:{lineno}: unknown op {messages.quoted(op)} (known: {', '.join(sorted(P.KNOWN_OPS))}); skipped")
        return None
    try:
        canonical = canonical_params(op, params)
    except P.ParamsError as error:
        note(f"{path}:{lineno}: {error}; skipped")
        return None
    if op in P.FLEX_OPS and solution == DEFAULT_SOLUTION:
        note(f"{path}:{lineno}: a {op} row names one of its configs; {DEFAULT_SOLUTION} (aten) is no choice for "
             "FlexAttention; skipped")
        return None
    return Entry(op, canonical, solution, time_ms, path, lineno)


def aten_margin_setting() -> float:
    """The plugin's aten margin (``AH_PLUGIN_ATEN_MARGIN``); 0 when the plugin's settings cannot be read (a bad
    unrelated variable must not stop the cache from recording or merging)."""
    try:
        from ah_plugin.config import settings

        return settings.current().aten_margin
    except Exception:
        return 0.0


def merge(
    base: dict[tuple[str, str], Entry], newer: dict[tuple[str, str], Entry], margin: float | None = None
) -> dict[tuple[str, str], Entry]:
    """Union; for a key in both, the faster entry (ties: `newer`), by the aten margin where one names aten
    (``replaces``; ``margin`` None: the plugin's setting)."""
    margin = aten_margin_setting() if margin is None else margin
    merged = dict(base)
    for key, entry in newer.items():
        old = merged.get(key)
        if old is None or replaces(entry, old, margin):
            merged[key] = entry
    return merged


def replaces(new: Entry, old: Entry, margin: float, ties_to_new: bool = True) -> bool:
    """Whether ``new`` takes ``old``'s key in a merge. Two rows of one key come from two runs, each the winner
    its run timed; a kernel's times move by about a percent between runs, so between aten (``DEFAULT_SOLUTION``)
    and another solution the rule of each run's own pick holds (``ah_plugin.use.aten_margin``): the other
    replaces aten only when faster by ``margin``, and aten replaces it unless slower by more. Otherwise the
    faster row (a tie goes to ``new`` when ``ties_to_new``)."""
    if new.solution != old.solution and DEFAULT_SOLUTION in (new.solution, old.solution):
        timings = {new.solution: new.time_ms, old.solution: old.time_ms}
        return aten_margin.winner(timings, margin, {DEFAULT_SOLUTION}) == new.solution
    return new.time_ms <= old.time_ms if ties_to_new else new.time_ms < old.time_ms


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
        if type(line) is Line and line.kind == VALIDATOR_LINE and line.key not in validators:
            buffer.write(line.text + "\n")
    written: set = set()
    for line in lines:
        if type(line) is tuple:  # a row: its key's entry, in the first row's place
            if line in entries and line not in written:
                writer.writerow(entries[line].row())
                written.add(line)
        elif line.kind == KEPT_LINE:
            buffer.write(line.text + "\n")
    for key in sorted(entries):
        if key not in written:
            writer.writerow(entries[key].row())
    return buffer.getvalue()


# ----------------------------------------------------------------------------- untuned shapes


def read_untuned(path: str) -> list[tuple[str, str]]:
    """`op,params` lines (a results file's rows are accepted too), deduplicated, in file order."""
    return untuned_file(path)[0]


def untuned_file(path: str) -> tuple[list[tuple[str, str]], bool]:
    """(`read_untuned`'s keys, whether the file is not an untuned file at all: no usable line, some bad
    ones; said once as a whole instead of line by line)."""
    keys: dict[tuple[str, str], None] = {}
    data = read_bytes(path)
    if data is None:
        return [], False
    notes: list[str] = []
    texts, _ = _split_lines(path, data, notes.append)
    bad = 0
    for lineno, line in enumerate(texts, start=1):
        if line is None:
            bad += 1
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = _cells(line)
        where = f"{path}:{lineno}"
        if cells and cells[0] == VALIDATOR:
            continue
        bad += 1
        if not cells or len(cells) < 2:
            notes.append(f"{where}: an untuned line is op,params; skipped")
            continue
        op, params = cells[0], cells[1]
        if op not in P.KNOWN_OPS:
            notes.append(f"{where}: unknown op {messages.quoted(op)}; skipped")
            continue
        try:
            parsed = P.parse_for(op, params)
        except P.ParamsError as error:
            notes.append(f"{where}: {error}; skipped")
            continue
        bad -= 1
        if op in P.FLEX_OPS:
            notes.append(f"{where}: a {op} call cannot be rebuilt offline (its row does not hold the score and "
                         "mask functions); run the program with tuning on to record it; skipped")
            continue
        if parsed.wildcards:
            notes.append(f"{where}: {params} has wildcards; only concrete shapes can be tuned; skipped")
            continue
        keys[(op, parsed.encode())] = None
    if bad and not keys:
        warn(f"{path}:1: not a file of untuned shapes (no op,params line); left as it is: never written to")
        return [], True
    for message in notes:
        warn(message)
    return list(keys), False
