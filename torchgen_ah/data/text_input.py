"""A text file a user named on a command line (a shapes list): its text, or one error naming the file and
the line where it stops being text (a zip or another binary file passed by mistake)."""

from __future__ import annotations


def read_text(path, what: str = "a shapes file", error=ValueError) -> str:
    """The file's UTF-8 text; ``error("FILE:LINE: ...")`` when it is not text."""
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"PK\x03\x04"):  # known from its first bytes; its header's bytes (a timestamp) may hold a newline
        raise error(f"{path}:1: a zip archive, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not UTF-8 text (a binary file?), not {what}") from None
