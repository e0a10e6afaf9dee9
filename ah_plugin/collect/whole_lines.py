"""The files the plugin writes (the results file, the collection log, the verbose log, their side files):
whole lines only, and only plain files that are the user's to write.

A write can stop in the middle of a line: the disk fills up, a quota or a file-size limit is reached,
the device fails. ``append`` then cuts the file back to its size before the write, under the caller's
lock, and raises the error, so the caller names it and the file holds only whole lines, as before.

Before a file is opened, ``check_plain`` refuses what is not a regular file (a FIFO, which would block the
program on open or swallow the rows, a device, a socket, a folder), following links; ``open_plain`` opens
without blocking and checks the opened file again. ``check_writable`` refuses a file without a write
permission bit for its user (root included: a read-only file is not written), and ``check_replaceable``
also one owned by another user, which a rename into place would take over. Each raises ``RefusedWrite``
naming the path and why. ``make_folder_for`` creates a missing folder and says which.

Standard library only (the collector imports this inside ``torch.compile``).
"""

from __future__ import annotations

import os
import stat

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


class RefusedWrite(OSError):
    """A path the plugin does not write: not a regular file, no write permission, not the user's. The
    message names it and says why."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_plain(path: str) -> os.stat_result | None:
    """The stat of ``path`` (links followed) when it is a regular file, None when nothing is there;
    ``RefusedWrite`` when it is anything else (a FIFO, a device, a socket, a folder)."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(found.st_mode):
        raise RefusedWrite(f"{path} is {_kind(found.st_mode)}, not a regular file: never opened, read or written")
    return found


def _may_write(found: os.stat_result) -> bool:
    """A write permission bit for this user: the owner's bit for its owner, the group's for its group, else
    the others' (root too: a file made read-only is not written)."""
    if found.st_uid == os.geteuid():
        return bool(found.st_mode & stat.S_IWUSR)
    if found.st_gid in (os.getegid(), *os.getgroups()):
        return bool(found.st_mode & stat.S_IWGRP)
    return bool(found.st_mode & stat.S_IWOTH)


def check_writable(path: str) -> os.stat_result | None:
    """``check_plain``, and ``RefusedWrite`` when the file has no write permission for this user."""
    found = check_plain(path)
    if found is not None and not _may_write(found):
        raise RefusedWrite(f"{path} has no write permission (mode {oct(found.st_mode & 0o777)}): read, never "
                           "written or replaced")
    return found


def check_replaceable(path: str) -> os.stat_result | None:
    """``check_writable``, and ``RefusedWrite`` when another user owns the file: renaming a new file into its
    place would take it over (rows are still appended to it)."""
    found = check_writable(path)
    if found is not None and found.st_uid != os.geteuid():
        raise RefusedWrite(f"{path} belongs to uid {found.st_uid}, not to you: appended to, never replaced")
    return found


def open_plain(path: str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a regular file (created when missing, with O_CREAT), never of anything else: checked
    before (``check_writable`` when opened for writing, else ``check_plain``), opened without blocking and
    without becoming a controlling terminal, and checked again on the descriptor."""
    writing = flags & (os.O_WRONLY | os.O_RDWR)
    (check_writable if writing else check_plain)(path)
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0), mode)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise RefusedWrite(f"{path} is {_kind(found.st_mode)}, not a regular file: never read or written")
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_folder_for(path: str) -> str | None:
    """Create the folder ``path`` lies in, and its missing parents, when it is missing: the folder created,
    None when it was there. ``OSError`` when it cannot be (a file in its way, no permission)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(folder):
        return None
    os.makedirs(folder, exist_ok=True)
    return folder


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


__all__ = ["write_all", "append", "ends_with_newline", "RefusedWrite", "check_plain", "check_writable",
           "check_replaceable", "open_plain", "make_folder_for"]
