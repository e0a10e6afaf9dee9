"""Reading and writing AutoHeuristic logs as pandas DataFrames, for any operation name.

Reading is vectorised: line boundaries and field counts come from numpy over the raw bytes, the rows from
pandas' C parser, and validation from column operations, so the three official A100 files (~105 MB) parse
in seconds. A malformed row never stops a read: it is skipped, recorded in ``AHLog.skipped`` with its
1-based line number, and reported in one warning per file. A file whose metadata line or header is
unusable raises ``AHLogError`` naming the file and line. A ``.gz`` file is read through gzip
(``torchgen_ah.data.log_files``).
"""

from __future__ import annotations

import csv
import io
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ah_plugin.collect.log_format import CHOICE_COLUMN, FEEDBACK_COLUMN, AHLogError, atomic_log_file, parse_metadata
from torchgen_ah.data.log_files import read_log_bytes, written_as_text

# frame.attrs key holding the original text of numerical columns whose values do not print back the
# same way (e.g. "1.50", "007"); input_keys uses it so held-out hashes see the file's own text.
FEATURE_TEXT_ATTR = "ah_feature_text"

_WARN_FIRST = 5  # how many skipped lines a warning names before summarising


@dataclass
class AHLog:
    """One parsed log. ``frame`` keeps the file's column order; its index is 0..len-1."""

    path: str
    metadata: dict
    frame: pd.DataFrame
    skipped: list[tuple[int, str]] = field(default_factory=list)


def feature_columns(metadata: dict) -> list[str]:
    """The feature columns: numerical, then categorical (everything but choice and feedback)."""
    return list(metadata["numerical_features"]) + list(metadata["categorical_features"])


def _split_head(buf: bytes, path: str) -> tuple[dict, list[str], int]:
    """Parse metadata and header; returns them and the byte offset where rows start."""
    first = buf.find(b"\n")
    meta_line = buf if first < 0 else buf[:first]
    try:
        meta_text = meta_line.decode("utf-8")
    except UnicodeDecodeError:  # parse_metadata says what the line most likely is (a zip, a binary file)
        parse_metadata(meta_line.decode("utf-8", errors="replace"), path, 1)
        raise AHLogError(path, 1, "metadata line is not UTF-8 text") from None
    metadata = parse_metadata(meta_text, path, 1)
    if first < 0:
        raise AHLogError(path, 2, "missing CSV header line")
    second = buf.find(b"\n", first + 1)
    header_end = len(buf) if second < 0 else second
    header_text = buf[first + 1 : header_end].decode("utf-8", errors="replace").rstrip("\r")
    if not header_text.strip():
        raise AHLogError(path, 2, "missing CSV header line")
    columns = header_text.split(",")
    expected = feature_columns(metadata) + [CHOICE_COLUMN, FEEDBACK_COLUMN]
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    missing = [c for c in expected if c not in columns]
    extra = [c for c in columns if c not in expected]
    if duplicates or missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("not in the metadata " + ", ".join(extra))
        if duplicates:
            parts.append("repeated " + ", ".join(duplicates))
        raise AHLogError(path, 2, "header does not match the metadata: " + "; ".join(parts))
    return metadata, columns, min(header_end + 1, len(buf))


def _line_spans(body: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, end (exclusive, without newline/CR) and comma count of every line in ``body``."""
    data = np.frombuffer(body, dtype=np.uint8)
    ends = np.flatnonzero(data == 10)
    if len(data) and (not len(ends) or ends[-1] != len(data) - 1):
        ends = np.append(ends, len(data))  # last line without a trailing newline
    starts = np.empty_like(ends)
    if len(ends):
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
    commas = np.flatnonzero(data == 44)
    n_commas = np.searchsorted(commas, ends) - np.searchsorted(commas, starts)
    # drop a trailing '\r' (CRLF files) from the visible end
    has_cr = np.zeros(len(ends), dtype=bool)
    nonempty = ends > starts
    has_cr[nonempty] = data[ends[nonempty] - 1] == 13
    return starts, ends - has_cr, n_commas


def _good_bytes(body: bytes, starts: np.ndarray, ends: np.ndarray, keep: np.ndarray) -> bytes:
    """``body`` restricted to the kept lines (each followed by a newline), copying whole runs."""
    if keep.all() and len(body) and body.endswith(b"\n"):
        return body
    idx = np.flatnonzero(keep)
    if not len(idx):
        return b""
    run_breaks = np.flatnonzero(np.diff(idx) != 1)
    run_first = np.concatenate(([idx[0]], idx[run_breaks + 1]))
    run_last = np.concatenate((idx[run_breaks], [idx[-1]]))
    pieces = []
    for a, b in zip(run_first.tolist(), run_last.tolist()):
        pieces.append(body[starts[a] : ends[b]])
        pieces.append(b"\n")
    return b"".join(pieces)


def _parse_number(text: str) -> tuple[float | int | None, bool]:
    """One numeric field: (value or None if not a number, whether ``str(value)`` gives the text back)."""
    try:
        value = int(text)
        return value, str(value) == text
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None, False
    if value != value:  # nan is not a measurement or a size
        return None, False
    return value, repr(value) == text


def _numeric_column(text: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Convert a text column exactly (Python int/float on each distinct value, not on each row).

    Returns (values: int64 if every valid value is an integer else float64, bad-row mask,
    whether every valid value prints back as its text).
    """
    codes, uniques = pd.factorize(text)
    parsed = [_parse_number(u) for u in uniques.tolist()]
    unique_bad = np.fromiter((v is None for v, _ in parsed), dtype=bool, count=len(parsed))
    good_values = [v for v, _ in parsed if v is not None]
    if all(type(v) is int for v in good_values) and all(
        -(2**63) <= v < 2**63 for v in good_values
    ):
        dtype = np.int64
    else:
        dtype = np.float64
    unique_values = np.array([0 if v is None else v for v, _ in parsed], dtype=dtype)
    round_trips = all(ok for v, ok in parsed if v is not None)
    if len(codes) == 0:
        return np.empty(0, dtype=dtype), np.zeros(0, dtype=bool), True
    return unique_values[codes], unique_bad[codes], round_trips


def _float_column(text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Feedback text -> float64 (exact, like Python's float) and a bad-row mask (unparseable or nan)."""
    try:
        values = text.astype(np.float64)
    except (ValueError, TypeError):
        values = np.array([_parse_number(t)[0] for t in text.tolist()], dtype=object)
        values = np.where(values == None, np.nan, values).astype(np.float64)  # noqa: E711
    return values, np.isnan(values)


def read_log(path, warn: bool = True) -> AHLog:
    """Parse one log (plain, or gzip by a ``.gz`` suffix). Raises AHLogError for unusable metadata/header;
    skips malformed rows."""
    path = os.fspath(path)
    buf = read_log_bytes(path)
    metadata, columns, body_start = _split_head(buf, path)
    body = buf[body_start:]
    del buf
    first_row_line = 3
    starts, ends, n_commas = _line_spans(body)
    blank = ends <= starts
    wrong_count = ~blank & (n_commas != len(columns) - 1)
    keep = ~blank & ~wrong_count
    skipped: list[tuple[int, str]] = [
        (int(i) + first_row_line, f"expected {len(columns)} fields, found {int(n_commas[i]) + 1}")
        for i in np.flatnonzero(wrong_count)
    ]
    line_numbers = np.flatnonzero(keep) + first_row_line
    good = _good_bytes(body, starts, ends, keep)
    del body, starts, ends, n_commas

    if good:
        text = pd.read_csv(
            io.BytesIO(good),
            header=None,
            names=columns,
            dtype=object,
            sep=",",
            engine="c",
            quoting=csv.QUOTE_NONE,
            na_filter=False,
            skip_blank_lines=False,
            encoding="utf-8",
            encoding_errors="replace",
        )
    else:
        text = pd.DataFrame({name: np.empty(0, dtype=object) for name in columns})
    del good

    bad = np.zeros(len(text), dtype=bool)
    reasons = np.empty(len(text), dtype=object)
    numeric = {}
    for name in metadata["numerical_features"]:
        values, col_bad, round_trips = _numeric_column(text[name].to_numpy(dtype=object))
        reasons[col_bad & ~bad] = f"numerical feature {name} is not a number"
        bad |= col_bad
        numeric[name] = (values, round_trips)
    feedback, fb_bad = _float_column(text[FEEDBACK_COLUMN].to_numpy(dtype=object))
    reasons[fb_bad & ~bad] = "feedback is not a number"
    bad |= fb_bad
    negative = ~bad & (feedback < 0)
    reasons[negative] = "feedback is negative"
    bad |= negative
    empty_choice = ~bad & (text[CHOICE_COLUMN].to_numpy(dtype=object) == "")
    reasons[empty_choice] = "empty choice"
    bad |= empty_choice
    if bad.any():
        skipped.extend(zip(line_numbers[bad].tolist(), reasons[bad].tolist()))
        skipped.sort()

    keep_rows = ~bad
    frame = {}
    feature_text = {}
    for name in columns:
        if name in numeric:
            values, round_trips = numeric[name]
            values = values[keep_rows]
            if values.dtype == np.float64 and bad.any():
                # an integer column with a bad row: integer again once the bad rows are gone
                values, _, round_trips = _numeric_column(text[name].to_numpy(dtype=object)[keep_rows])
            if not round_trips:
                feature_text[name] = pd.Series(text[name].to_numpy(dtype=object)[keep_rows])
            frame[name] = values
        elif name == FEEDBACK_COLUMN:
            frame[name] = feedback[keep_rows]
        else:
            frame[name] = pd.Series(text[name].to_numpy(dtype=object)[keep_rows], dtype=object)
    del text
    result = pd.DataFrame(frame)
    if feature_text:
        result.attrs[FEATURE_TEXT_ATTR] = feature_text
    if skipped and warn:
        named = ", ".join(f"line {n} ({why})" for n, why in skipped[:_WARN_FIRST])
        more = f" and {len(skipped) - _WARN_FIRST} more" if len(skipped) > _WARN_FIRST else ""
        warnings.warn(
            f"{path}: skipped {len(skipped)} malformed row(s): {named}{more}", stacklevel=2
        )
    return AHLog(path=path, metadata=metadata, frame=result, skipped=skipped)


def _column_text(frame: pd.DataFrame, name: str) -> np.ndarray:
    """A column as the log writes it (object array of str): the original text where ``read_log`` kept
    it, else ``str()`` of each value (repr for floats), formatted once per distinct value."""
    kept = frame.attrs.get(FEATURE_TEXT_ATTR, {}).get(name)
    if kept is not None and len(kept) and frame.index.isin(kept.index).all():
        return kept.reindex(frame.index).to_numpy(dtype=object)
    codes, uniques = pd.factorize(frame[name].to_numpy())
    if len(codes) == 0:
        return np.empty(0, dtype=object)
    printed = np.array(
        [repr(float(u)) if isinstance(u, (float, np.floating)) else str(u) for u in uniques.tolist()],
        dtype=object,
    )
    return printed[codes]


def input_keys(frame: pd.DataFrame, metadata: dict) -> pd.Series:
    """One string per row identifying its input: the feature values joined by "," in the frame's
    (the file's) column order, exactly as they appear in the file text. Rows of one input share a key.

    Built once per distinct input and broadcast, so it costs a groupby, not a string join per row.
    """
    features = set(feature_columns(metadata))
    names = [c for c in frame.columns if c in features]
    if not len(frame):
        return pd.Series([], index=frame.index, dtype=object)
    texts = [_column_text(frame, name) for name in names]
    codes = pd.DataFrame({i: pd.factorize(t)[0] for i, t in enumerate(texts)})
    group = codes.groupby(list(codes.columns), sort=False).ngroup().to_numpy()
    _, first_row = np.unique(group, return_index=True)
    keys = np.array([",".join(t[r] for t in texts) for r in first_row.tolist()], dtype=object)
    return pd.Series(keys[group], index=frame.index, dtype=object)


def write_log(path, metadata: dict, frame: pd.DataFrame) -> None:
    """Write ``frame`` as a log (metadata, header, rows), atomically (temp file + rename); gzip-compressed
    when ``path`` ends in ``.gz``.

    Columns are written in the frame's order (all features, choice and feedback are required; others are
    dropped); numerical text kept by ``read_log`` is written back unchanged, so a read/write round trip
    preserves the file's rows.
    """
    path = os.fspath(path)
    wanted = set(feature_columns(metadata)) | {CHOICE_COLUMN, FEEDBACK_COLUMN}
    missing = sorted(wanted - set(frame.columns))
    if missing:
        raise ValueError(f"{path}: frame lacks the log column(s) {', '.join(missing)}")
    columns = [c for c in frame.columns if c in wanted]
    numerical = set(metadata["numerical_features"])
    out = pd.DataFrame(
        {
            name: _column_text(frame, name) if name in numerical else frame[name].to_numpy()
            for name in columns
        }
    )
    with written_as_text(path) as text_path, atomic_log_file(text_path, metadata, columns) as f:
        out.to_csv(f, header=False, index=False, quoting=csv.QUOTE_NONE, lineterminator="\n")
