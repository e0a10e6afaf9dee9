"""A text file a user named on a command line (a shapes list): its text, or one error naming the file and
the line where it stops being text (a zip or another binary file passed by mistake)."""

from __future__ import annotations


def read_text(path, what: str = "a shapes file", error=ValueError) -> str:
    """The file's UTF-8 text; ``error("FILE:LINE: ...")`` when it is not text."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        kind = "a zip archive" if data.startswith(b"PK\x03\x04") else "not UTF-8 text (a binary file?)"
        raise error(f"{path}:{line}: {kind}, not {what}") from None
