"""Appends of whole lines: a file the plugin appends to (the results file, the collection log, their side
files) never keeps part of a line.

A write can stop in the middle of a line: the disk fills up, a quota or a file-size limit is reached,
the device fails. ``append`` then cuts the file back to its size before the write, under the caller's
lock, and raises the error, so the caller names it and the file holds only whole lines, as before.

Standard library only (the collector imports this inside ``torch.compile``).
"""

from __future__ import annotations

import os


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte of ``data`` is written (a write may take fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def append(fd: int, data: bytes, sync: bool = False) -> None:
    """Write ``data`` at the end of the file open as ``fd`` (opened with ``O_APPEND``), fsync'd when
    ``sync``. On any failure the file is cut back to its size before the call and the error raised."""
    size = os.fstat(fd).st_size
    try:
        write_all(fd, data)
        if sync:
            os.fsync(fd)
    except BaseException:
        try:
            os.ftruncate(fd, size)
        except OSError:
            pass  # nothing more can be done; the caller reports the first error
        raise


def ends_with_newline(fd: int) -> bool:
    """True when the file is empty or its last byte is a newline."""
    size = os.fstat(fd).st_size
    return size == 0 or os.pread(fd, 1, size - 1) == b"\n"


__all__ = ["write_all", "append", "ends_with_newline"]
