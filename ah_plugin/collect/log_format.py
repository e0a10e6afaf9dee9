"""The AutoHeuristic log format: one JSON metadata line, one CSV header line, then one row per
(input, choice) measurement.

Standard library only: the collector imports this inside ``torch.compile``, so it must import fast and
never pull in pandas. Readers that want a DataFrame use ``torchgen_ah.ah_log``.

The format is the one torch's built-in collector writes (and the official A100/H100 datasets use), so
files from either writer can be mixed, read and merged.
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager

from ..report import messages
from . import whole_lines

try:  # POSIX advisory locks; absent on Windows, where appends are unlocked.
    import fcntl
except ImportError:  # pragma: no cover - not reached on Linux/macOS
    fcntl = None

CHOICE_COLUMN = "choice"
FEEDBACK_COLUMN = "feedback"

# Upstream writes metadata keys in this order; any extra keys follow, in the caller's order.
METADATA_KEY_ORDER = (
    "shared_memory",
    "device_capa",
    "name",
    "numerical_features",
    "categorical_features",
)
REQUIRED_METADATA_KEYS = ("name", "numerical_features", "categorical_features")


class AHLogError(ValueError):
    """A log that cannot be used at all (bad metadata or header). The message starts with "FILE:LINE: "."""

    def __init__(self, path, lineno: int, reason: str) -> None:
        self.path = os.fspath(path)
        self.lineno = lineno
        self.reason = reason
        super().__init__(f"{self.path}:{lineno}: {reason}")


def _ordered_metadata(metadata: dict) -> dict:
    """Metadata with upstream's key order, JSON-friendly values (tuples as lists)."""
    ordered = {}
    for key in METADATA_KEY_ORDER:
        if key in metadata:
            ordered[key] = metadata[key]
    for key, value in metadata.items():
        if key not in ordered:
            ordered[key] = value
    for key, value in ordered.items():
        if isinstance(value, tuple):
            ordered[key] = list(value)
    return ordered


def format_metadata(metadata: dict) -> str:
    """One JSON line (no newline), keys in upstream order, formatted as upstream's ``json.dumps``."""
    return json.dumps(_ordered_metadata(metadata))


def _metadata_problem(metadata) -> str | None:
    if not isinstance(metadata, dict):
        return "metadata is not a JSON object"
    for key in REQUIRED_METADATA_KEYS:
        if key not in metadata:
            return f"metadata lacks the key {key!r}"
    if not isinstance(metadata["name"], str) or not metadata["name"]:
        return "metadata 'name' must be a non-empty string"
    for key in ("numerical_features", "categorical_features"):
        value = metadata[key]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            return f"metadata {key!r} must be a list of column names"
    names = metadata["numerical_features"] + metadata["categorical_features"]
    if len(set(names)) != len(names):
        return "metadata lists a feature twice"
    if CHOICE_COLUMN in names or FEEDBACK_COLUMN in names:
        return f"metadata must not list {CHOICE_COLUMN!r} or {FEEDBACK_COLUMN!r} as features"
    capa = metadata.get("device_capa")
    if capa is not None and not (
        isinstance(capa, (list, tuple)) and all(isinstance(v, int) for v in capa)
    ):
        return "metadata 'device_capa' must be a list of integers"
    shm = metadata.get("shared_memory")
    if shm is not None and (not isinstance(shm, int) or isinstance(shm, bool)):
        return "metadata 'shared_memory' must be an integer"
    return None


def _not_metadata(text: str, exc: ValueError) -> str:
    """What a first line that is not JSON most likely is, for the one-line error."""
    if text.startswith("PK\x03\x04"):
        return ("a zip archive, not an AutoHeuristic log: unpack it first (`python -m torchgen_ah.get_mm_dataset` "
                "unpacks the official ones into datasets/)")
    if "\ufffd" in text or "\x00" in text:
        return "not text (a binary file?), so not an AutoHeuristic log"
    if "," in text and "{" not in text:
        return ("a CSV line, not the JSON metadata line an AutoHeuristic log starts with (line 1: metadata, "
                "line 2: header)")
    return f"metadata line is not valid JSON ({exc})"


def parse_metadata(line: str, path, lineno: int = 1) -> dict:
    """Parse and check the metadata line. ``device_capa`` comes back as a tuple.

    Raises AHLogError naming ``path`` and ``lineno`` when the line is not usable metadata.
    """
    text = line.strip()
    if not text:
        raise AHLogError(path, lineno, "missing metadata line (expected one JSON object)")
    try:
        metadata = json.loads(text)
    except ValueError as exc:
        raise AHLogError(path, lineno, _not_metadata(text, exc)) from None
    problem = _metadata_problem(metadata)
    if problem:
        raise AHLogError(path, lineno, problem)
    if metadata.get("device_capa") is not None:
        metadata["device_capa"] = tuple(metadata["device_capa"])
    return metadata


def header_columns(metadata: dict, features: dict | None = None) -> list[str]:
    """Columns this module writes: the features, then choice and feedback.

    With ``features`` (a dict holding exactly the metadata's features), its key order is the column
    order: torch's collector interleaves numerical and categorical features in the order it added
    them (``m,k,n,mat1_dtype,...``), and our logs must match its header. Without it: numerical
    features, then categorical ones. Readers take the order from each file's header.
    """
    names = list(metadata["numerical_features"]) + list(metadata["categorical_features"])
    if features is not None and len(features) == len(names) and set(features) == set(names):
        names = list(features)
    return names + [CHOICE_COLUMN, FEEDBACK_COLUMN]


def _field(value, what: str) -> str:
    text = str(value)
    if "," in text or "\n" in text or "\r" in text:
        raise ValueError(f"log field {what} must not contain a comma or newline: {text!r}")
    return text


def format_row(metadata: dict, features: dict, choice: str, feedback: float) -> str:
    """One CSV row (no newline) in ``header_columns`` order, values written as torch's collector does:
    ``str()`` of each feature value (``True``, ``torch.bfloat16``, ``not_float_32``) and the feedback as
    a float's repr (``0.0427``, ``inf``)."""
    fields = []
    for name in header_columns(metadata, features)[:-2]:
        if name not in features:
            raise ValueError(f"feature {name!r} missing from the row's features")
        fields.append(_field(features[name], name))
    if not choice:
        raise ValueError("choice must be a non-empty string")
    fields.append(_field(choice, CHOICE_COLUMN))
    fields.append(repr(float(feedback)))
    return ",".join(fields)


# --- locked appends -------------------------------------------------------------------------------


def write_failure(path, error: OSError, lost: str) -> str:
    """``PATH: cannot write (Type: cause[, at OTHER]); LOST``: a failed write named by its path and cause
    (an OSError's repr carries neither), and what it costs."""
    path = os.fspath(path)
    cause = error.strerror or str(error) or "no reason given"
    other = os.fspath(error.filename) if error.filename is not None else None
    where = f", at {other}" if other and other != path else ""
    return f"{path}: cannot write ({type(error).__name__}: {cause}{where}); {lost}"

_warned_siblings: set[tuple[str, str]] = set()


def sibling_log_path(path, metadata: dict) -> str:
    """Where rows go whose metadata differ from the file's: ``mm.txt`` -> ``mm.<hash8>.txt``."""
    path = os.fspath(path)
    digest = hashlib.sha1(format_metadata(metadata).encode()).hexdigest()[:8]
    root, ext = os.path.splitext(path)
    return f"{root}.{digest}{ext or '.txt'}"


def _read_head(fd: int, limit: int = 1 << 20) -> bytes:
    """The file's first two lines (or as much as exists, up to ``limit`` bytes)."""
    data = b""
    while len(data) < limit and data.count(b"\n") < 2:
        chunk = os.pread(fd, 8192, len(data))
        if not chunk:
            break
        data += chunk
    return data


def _reorder(lines: list[str], ours: list[str], theirs: list[str]) -> list[str]:
    """Rewrite rows formatted in our column order into the file's column order (same columns)."""
    index = [ours.index(name) for name in theirs]
    out = []
    for line in lines:
        fields = line.split(",")
        out.append(",".join(fields[i] for i in index))
    return out


def _existing_layout(fd: int, size: int, path: str, metadata: dict) -> tuple[str, list[str] | None]:
    """Compare an existing file with ``metadata``. Returns ("ok", file_columns) or ("mismatch", None)."""
    head = _read_head(fd).decode("utf-8", errors="replace")
    lines = head.split("\n")
    try:
        existing = parse_metadata(lines[0], path)
    except AHLogError:
        return "mismatch", None
    if _ordered_metadata(existing) != _ordered_metadata(metadata):
        return "mismatch", None
    if len(lines) < 2 or (len(lines) == 2 and size > len(head.encode())):
        return "mismatch", None  # metadata without a complete header line: do not guess
    columns = lines[1].rstrip("\r").split(",")
    if sorted(columns) != sorted(header_columns(metadata)):
        return "mismatch", None
    return "ok", columns


@contextmanager
def atomic_log_file(path, metadata: dict, columns: list[str]):
    """A text file for a whole new log: metadata line and header already written, rows go after.

    It is a temporary file beside ``path`` that replaces ``path`` only when the block ends without an
    error, so a reader never sees half a log and a failed write leaves the old file as it was.
    """
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(format_metadata(metadata) + "\n")
            f.write(",".join(columns) + "\n")
            yield f
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def append_rows(path, metadata: dict, lines: list[str], columns: list[str] | None = None) -> str:
    """Append formatted rows under an exclusive lock; returns the path actually written.

    A new or empty file gets the metadata and header first; a missing folder is created (said once); what
    is not a regular file, or has no write permission, is refused (``whole_lines.RefusedWrite``). An existing file must carry the same
    metadata (and the same columns, in any order: rows are reordered to the file's header). If it
    does not, the rows go to ``sibling_log_path(path, metadata)`` with one warning: a collector never
    raises because another run left a different log behind. Each call is one ``write`` of whole
    lines, so processes sharing a log never interleave. ``columns`` is the order the rows were
    formatted in (``header_columns(metadata, features)``); it defaults to ``header_columns(metadata)``.
    """
    path = os.fspath(path)
    if not lines:
        return path
    if path.endswith(".gz"):  # rows are plain text: appended to a gzip file they would make it unreadable
        plain = path[: -len(".gz")]
        if (path, plain) not in _warned_siblings:
            _warned_siblings.add((path, plain))
            messages.warn(f"{path}: a collector appends plain text and cannot write gzip; writing these rows "
                          f"to {plain} instead")
        path = plain
    ours = list(columns) if columns is not None else header_columns(metadata)
    ext = os.path.splitext(path)[1]
    fallbacks = [sibling_log_path(path, metadata)]
    fallbacks.append(f"{os.path.splitext(fallbacks[0])[0]}.pid{os.getpid()}{ext or '.txt'}")
    while True:
        created = whole_lines.make_folder_for(path)
        if created and (path, created) not in _warned_siblings:
            _warned_siblings.add((path, created))
            messages.warn(f"collect log {path}: its folder {created} did not exist; created it")
        # a regular file only: a FIFO would block or swallow the rows, a device lose them (RefusedWrite)
        fd = whole_lines.open_plain(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size == 0:
                payload = [format_metadata(metadata), ",".join(ours), *lines]
            else:
                status, columns = _existing_layout(fd, size, path, metadata)
                if status != "ok":
                    if not fallbacks:  # pragma: no cover - needs two broken files in a row
                        raise AHLogError(path, 1, "log and its fallbacks all hold other metadata")
                    other = fallbacks.pop(0)
                    if (path, other) not in _warned_siblings:
                        _warned_siblings.add((path, other))
                        messages.warn(f"{path}: existing log has different metadata or columns; "
                                      f"writing these rows to {other} instead")
                    path = other
                    continue
                payload = lines if columns == ours else _reorder(lines, ours, columns)
                if os.pread(fd, 1, size - 1) != b"\n":  # a writer died mid-line: start afresh
                    payload = ["", *payload]
            # one write of whole lines; cut back to the last whole line when it fails part way (a full disk)
            whole_lines.append(fd, ("\n".join(payload) + "\n").encode("utf-8"))
            return path
        finally:
            os.close(fd)  # closing releases the lock
