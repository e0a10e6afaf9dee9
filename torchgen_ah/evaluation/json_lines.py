"""Reading the JSON-lines files that benchmarks and evaluation commands write (one JSON object per line):
a bad line is named by file and line, and the keys a reader needs are checked."""

from __future__ import annotations

import json


def read_json_lines(path: str, required: tuple[str, ...], what: str) -> list[dict]:
    """The objects of ``path``, blank lines skipped. ValueError naming the file and line of one that is not
    a JSON object or lacks a key of ``required`` (``what``: what such a line is, for the message)."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line ({exc})") from None
            missing = [key for key in required if key not in row] if isinstance(row, dict) else list(required)
            if missing:
                raise ValueError(f"{path}:{number}: {what} needs {', '.join(repr(k) for k in missing)}")
            rows.append(row)
    return rows
