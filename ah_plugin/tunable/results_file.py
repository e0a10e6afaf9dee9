"""The results CSV: validator lines, then `op,params,solution,time_ms` rows.

    Validator,PT_VERSION,2.11.0+cu130
    Validator,AH_PLUGIN_VERSION,0.1.0
    ...
    mm,NN_4096_4096_4096_ld_4096_4096_bfloat16,type=triton_BLOCK-M=128_..._numwarps=8,0.6512
    mm,NT_1024_*_512_ld_512_*_float16,Default,0

Reading never raises on bad content: each bad line is skipped with a `TunableFileWarning` that starts
with `FILE:LINE:`. A validator that differs from this process rejects the whole file (TunableOp's rule),
naming the key and both values. Writing takes a lock, merges with what is on disk, and renames a
temporary file into place, so concurrent writers to one name leave a valid file holding every row.
"""

from __future__ import annotations

import csv
import io
import math
import os
import secrets
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

from . import params as P

DEFAULT_SOLUTION = "Default"
PAD, NO_PAD = "pad", "no_pad"  # the solutions of pad_mm / pad_addmm / pad_bmm rows
VALIDATOR = "Validator"


class TunableFileWarning(UserWarning):
    """A results/untuned file line that was skipped, or a whole file that was rejected."""


def warn(message: str) -> None:
    warnings.warn(message, TunableFileWarning, stacklevel=3)


@dataclass
class Entry:
    """One tuned result. `source` is `FILE:LINE` for rows read from a file, `""` for new ones."""

    op: str
    params: str
    solution: str
    time_ms: float
    source: str = ""

    def row(self) -> list[str]:
        return [self.op, self.params, self.solution, _format_time(self.time_ms)]


def _format_time(value: float) -> str:
    if math.isinf(value):
        return "inf"
    return f"{value:.6g}"


@dataclass
class ReadResult:
    """What a file held: its validators, its usable entries by (op, params), and whether it was rejected."""

    path: str
    validators: dict[str, str]
    entries: dict[tuple[str, str], Entry]
    rejected: bool = False
    missing: bool = False


def current_validators() -> dict[str, str]:
    """What must match for a file's timings to still hold in this process."""
    from . import validators

    return validators.current()


def _lines(path: str) -> list[str] | None:
    """The file's text lines; None (with a warning) when it is not text."""
    with open(path, "rb") as handle:
        data = handle.read()
    if b"\x00" in data:
        warn(f"{path}:1: not a CSV text file (holds NUL bytes); the whole file is ignored")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        warn(f"{path}:{line}: not a UTF-8 CSV text file ({error.reason}); the whole file is ignored")
        return None
    return text.splitlines()


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
    lines = _lines(path)
    if lines is None:
        result.rejected = True
        return result
    validator_lines: dict[str, int] = {}
    last_validator_line = 0
    good_rows = 0
    bad_rows = 0
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = _cells(line)
        where = f"{path}:{lineno}"
        if cells is None:
            warn(f"{where}: not a CSV line; skipped")
            bad_rows += 1
            continue
        if cells[0] == VALIDATOR:
            if len(cells) < 3 or not cells[1]:
                warn(f"{where}: a validator line is Validator,KEY,VALUE; found {len(cells)} fields; skipped")
                continue
            key, value = cells[1], ",".join(cells[2:])  # an unquoted value may hold commas
            if key in result.validators and result.validators[key] != value:
                warn(f"{where}: validator {key} given twice ({result.validators[key]!r} then {value!r}); first kept")
                continue
            result.validators.setdefault(key, value)
            validator_lines.setdefault(key, lineno)
            last_validator_line = lineno
            continue
        entry = _parse_row(cells, where)
        if entry is None:
            bad_rows += 1
            continue
        good_rows += 1
        key = (entry.op, entry.params)
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
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for key, value in validators.items():
        writer.writerow([VALIDATOR, key, value])
    for key in sorted(entries):
        writer.writerow(entries[key].row())
    return buffer.getvalue()


@contextmanager
def file_lock(path: str):
    """An exclusive lock on `path + '.lock'` (POSIX flock; no locking where flock is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _create_temp_beside(path: str) -> tuple[int, str]:
    """A new file next to ``path`` for a rename into place. Created with mode 0o666 so the kernel applies
    the umask, as for any new file (mkstemp's 0o600 would make the cache private to its writer)."""
    directory = os.path.dirname(os.path.abspath(path))
    prefix = os.path.basename(path) + "."
    for _ in range(100):
        tmp = os.path.join(directory, f"{prefix}{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: no free temporary name beside it")


def atomic_write(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename; a replaced file keeps its permission bits."""
    fd, tmp = _create_temp_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            try:
                os.fchmod(handle.fileno(), os.stat(path).st_mode & 0o7777)
            except FileNotFoundError:
                pass
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_results(path: str, validators: dict[str, str], entries: dict[tuple[str, str], Entry]) -> int:
    """Merge `entries` with what `path` holds now and write atomically, under the lock.
    A file on disk with other validators is kept aside as `path + '.rejected'`. Returns the row count."""
    with file_lock(path):
        with warnings.catch_warnings():
            # Lines of the file were already warned about when it was read at start.
            warnings.simplefilter("ignore", TunableFileWarning)
            on_disk = read_results(path, validators)
        if on_disk.rejected and not on_disk.missing and os.path.exists(path):
            os.replace(path, path + ".rejected")
            warn(f"{path}:1: written anew for this process; the rejected file was moved to {path}.rejected")
        merged = merge(on_disk.entries, entries)
        atomic_write(path, format_results(validators, merged))
        return len(merged)


# ----------------------------------------------------------------------------- untuned shapes


def read_untuned(path: str) -> list[tuple[str, str]]:
    """`op,params` lines (a results file's rows are accepted too), deduplicated, in file order."""
    keys: dict[tuple[str, str], None] = {}
    if not os.path.exists(path):
        return []
    lines = _lines(path)
    if lines is None:
        return []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
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


def append_untuned(path: str, keys: list[tuple[str, str]]) -> None:
    """Append `op,params` lines under the lock, skipping keys already in the file."""
    if not keys:
        return
    with file_lock(path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TunableFileWarning)
            present = set(read_untuned(path))
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        for key in keys:
            if key not in present:
                writer.writerow(list(key))
                present.add(key)
        if buffer.getvalue():
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(buffer.getvalue())
