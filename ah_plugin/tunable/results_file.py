"""The results file on disk, durable like a journal: nothing recorded is lost to a kill, nothing read is
lost to a rewrite.

- `append_entries`: each new winner is appended when it is recorded, in one `write` of whole lines under
  the file's lock, and fsync'd before the call returns, so a process killed later (SIGKILL, the OOM
  killer, a scheduler's time limit) has lost at most the compile in flight.
- `write_results`: the compaction (at exit and on `write_file()`): under the same lock, merged with what
  is on disk, written to a temporary file, fsync'd and renamed into place, so concurrent writers leave
  a valid file holding every row.
- A rewrite keeps every line it does not understand: comments, rows of ops this version does not know,
  rows it cannot parse stay in place; lines that are not text (a NUL byte, invalid UTF-8) are appended
  to `<file>.unreadable`; a whole file from another torch or device (its validators differ) is moved to
  `<file>.rejected`, or `.rejected.2`, `.3` ... when that exists: no kept file is ever overwritten.
- A row that replaces another (a re-tuned winner for a row whose solution no longer exists, however
  small its time) takes the old row's place instead of competing with it on time.

User files are never replaced: a results file that is a symbolic link is written through it (the lock,
the temporary file and the side files lie beside the file it points to, so the link stays a link and
every name of one file shares one lock); a file that is not a results file is refused (`RefusedFile`),
never moved or written; side files (`.unreadable`, `.rejected`, `.lock`) are never opened through a
link. What is not a regular file (a FIFO, a device), a file without a write permission bit, and, for a
rewrite, a file owned by another user are refused too (`whole_lines.RefusedWrite`). A missing folder is
created, and said. A write that fails part way is cut back to the last whole line (`ah_plugin.collect.whole_lines`).

Cost: an append reads the file's first lines only (its validators), whatever its size.

Reading and the format are in `results_format` (re-exported here).
"""

from __future__ import annotations

import csv
import io
import os
import secrets
import warnings
from contextlib import contextmanager

from ah_plugin.collect import whole_lines

from .results_format import (  # noqa: F401 - the file's API, one import for callers
    DEFAULT_SOLUTION,
    NO_PAD,
    PAD,
    VALIDATOR,
    Entry,
    aten_margin_setting,
    ReadResult,
    TunableFileWarning,
    canonical_params,
    current_validators,
    format_lines,
    format_results,
    merge,
    parse_results,
    read_bytes,
    read_results,
    read_untuned,
    untuned_file,
    warn,
)

REJECTED_SUFFIX = ".rejected"
UNREADABLE_SUFFIX = ".unreadable"
LOCK_SUFFIX = ".lock"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_HEAD_BYTES = 1 << 16  # where an append looks for the validator lines


class RefusedFile(OSError):
    """A file the cache will not write: not a results file, a side file that is a link, a dangling link.
    The message names it and says why."""


def real_path(path: str) -> str:
    """Where writes to ``path`` go: ``path``, or the file a symbolic link at ``path`` points to (so the link
    stays a link). A link to nothing is refused: writing would create a file wherever it points."""
    if not os.path.islink(path):
        return path
    target = os.path.realpath(path)
    if not os.path.exists(target):
        raise RefusedFile(f"{path} is a symbolic link to {target}, which does not exist; not written through")
    return target


def _open_side(path: str, flags: int) -> int:
    """Open a side file (lock, `.unreadable`) of the cache, never through a symbolic link, never anything
    but a regular file."""
    try:
        return whole_lines.open_plain(path, flags | _NOFOLLOW, 0o644)
    except OSError as error:
        if os.path.islink(path):
            raise RefusedFile(f"{path} is a symbolic link; a side file of the results cache is never opened "
                              "through a link (remove it)") from error
        raise


_created_folders: set = set()


def _make_folder(path: str) -> None:
    """The folder of ``path``, created when missing, said once."""
    created = whole_lines.make_folder_for(path)
    if created and created not in _created_folders:
        _created_folders.add(created)
        warn(f"{path}: its folder {created} did not exist; created it")


@contextmanager
def file_lock(path: str):
    """An exclusive lock on `path + '.lock'` (POSIX flock; no locking where flock is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    _make_folder(path)
    fd = _open_side(path + LOCK_SUFFIX, os.O_RDONLY | os.O_CREAT)  # flock needs no write access
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _fsync_directory(path: str) -> None:
    """Make a rename or a new file in `path`'s folder durable (where the platform allows it)."""
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
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
    """Replace ``path`` with ``text`` in one rename, fsync'd; a replaced file keeps its permission bits.
    ``RefusedWrite`` (nothing written) when ``path`` is not a regular file of this user's with a write bit."""
    whole_lines.check_replaceable(path)
    fd, tmp = _create_temp_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            try:
                os.fchmod(handle.fileno(), os.stat(path).st_mode & 0o7777)
            except FileNotFoundError:
                pass
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_directory(path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _quiet_read(path: str, validators: dict[str, str]) -> ReadResult:
    with warnings.catch_warnings():
        # Lines of the file were warned about when it was read at start.
        warnings.simplefilter("ignore", TunableFileWarning)
        return read_results(path, validators)


def keep_aside(path: str) -> str:
    """Move `path` to the first free name of `path.rejected`, `.rejected.2`, ... (never overwriting one).
    ``RefusedWrite`` for a file the cache may not replace (read-only, another user's)."""
    whole_lines.check_replaceable(path)
    for number in range(1, 10_000):
        target = path + REJECTED_SUFFIX + ("" if number == 1 else f".{number}")
        try:
            os.link(path, target)  # fails when target exists: no kept copy is ever replaced
        except FileExistsError:
            continue
        except OSError:  # no hard links here (some network and FAT file systems): check, then rename
            if os.path.lexists(target):
                continue
            os.rename(path, target)
            return target
        os.unlink(path)
        return target
    raise FileExistsError(f"{path}: {REJECTED_SUFFIX} .. {REJECTED_SUFFIX}.9999 all exist")


def _keep_unreadable(path: str, on_disk: ReadResult) -> None:
    """Append the file's lines that are not text to `path.unreadable` (only ever appended to, never
    through a link)."""
    lines = on_disk.unreadable()
    if not lines:
        return
    side = path + UNREADABLE_SUFFIX
    fd = _open_side(side, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        whole_lines.append(fd, b"".join(line.raw + b"\n" for line in lines), sync=True)
    finally:
        os.close(fd)
    numbers = ", ".join(str(line.lineno) for line in lines[:10]) + (" ..." if len(lines) > 10 else "")
    warn(f"{path}: line(s) {numbers} are not text; moved, as they were, to {side}")


def _rewrite(path: str, validators: dict[str, str], on_disk: ReadResult,
             entries: dict[tuple[str, str], Entry], replaced: dict[tuple[str, str], str]) -> int:
    """Under the lock: write `path` anew from what it holds and `entries` (see the module docstring)."""
    if on_disk.foreign:
        raise RefusedFile(f"{path} is not a results file (no validator line and no valid row); never moved, "
                          "replaced or written to")
    lines = on_disk.lines
    disk_entries = on_disk.entries
    if on_disk.rejected and not on_disk.missing and os.path.exists(path):
        kept = keep_aside(path)
        warn(f"{path}:1: written anew for this process; the rejected file was moved to {kept}")
        lines, disk_entries = [], {}
    else:
        _keep_unreadable(path, on_disk)
    disk_entries = {key: entry for key, entry in disk_entries.items()
                    if replaced.get(key) != entry.solution}
    merged = merge(disk_entries, entries)
    atomic_write(path, format_lines(validators, lines, merged))
    return len(merged)


def write_results(path: str, validators: dict[str, str], entries: dict[tuple[str, str], Entry],
                  replaced: dict[tuple[str, str], str] | None = None) -> int:
    """Merge `entries` with what `path` holds now and write it anew, under the lock (the compaction).
    `replaced`: (op, params) -> a solution whose row on disk gives way to the entry, whatever its time.
    Returns the number of rows."""
    path = real_path(path)
    with file_lock(path):
        return _rewrite(path, validators, _quiet_read(path, validators), entries, replaced or {})


def _head_holds(fd: int, validators: dict[str, str]) -> bool:
    """True when the validator lines at the top of the file (its first 64 KiB, whole lines) hold each of
    `validators` with this process's value: the file is then a results file that rows can be appended
    to. False says only that the head cannot tell: the whole file is read then."""
    found: dict[str, str] = {}
    for lineno, raw in enumerate(os.pread(fd, _HEAD_BYTES, 0).split(b"\n")[:-1], start=1):
        line = raw.decode("utf-8", "replace").strip()
        line = line.removeprefix("\ufeff") if lineno == 1 else line
        if not line or line.startswith("#"):
            continue
        cells = next(csv.reader([line]), [])
        if not cells or cells[0].strip() != "Validator":
            break
        if len(cells) >= 3 and cells[1].strip():
            found.setdefault(cells[1].strip(), ",".join(cell.strip() for cell in cells[2:]))
    return all(found.get(key) == value for key, value in validators.items())


def _append(path: str, data: bytes) -> None:
    """Append whole lines to an existing file and fsync them; a line cut short by a crash stays a line."""
    fd = whole_lines.open_plain(path, os.O_RDWR | os.O_APPEND)
    try:
        prefix = b"" if whole_lines.ends_with_newline(fd) else b"\n"
        whole_lines.append(fd, prefix + data, sync=True)
    finally:
        os.close(fd)


def append_entries(path: str, validators: dict[str, str], entries: list[Entry],
                   replaced: dict[tuple[str, str], str] | None = None) -> None:
    """Put `entries` on disk now (the journal): appended in one write under the lock and fsync'd, after
    a look at the file's first lines only. The file is written anew instead (`write_results`) when it is
    new, rejected, its head lacks one of `validators`, or when an entry replaces a row; refused
    (`RefusedFile`) when it is not a results file."""
    path = real_path(path)
    with file_lock(path):
        appendable = False
        if not replaced and os.path.isfile(path):
            fd = whole_lines.open_plain(path, os.O_RDONLY)
            try:
                appendable = _head_holds(fd, validators)
            finally:
                os.close(fd)
        if not appendable:
            _rewrite(path, validators, _quiet_read(path, validators), {e.key: e for e in entries}, replaced or {})
            return
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(entry.row() for entry in entries)
        _append(path, buffer.getvalue().encode("utf-8"))


def append_untuned(path: str, keys: list[tuple[str, str]]) -> None:
    """Append `op,params` lines under the lock, skipping keys already in the file; a file that is not an
    untuned file is refused (`RefusedFile`)."""
    if not keys:
        return
    path = real_path(path)
    with file_lock(path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TunableFileWarning)
            present, foreign = untuned_file(path)
        if foreign:
            raise RefusedFile(f"{path} is not a file of untuned shapes (no op,params line); never written to")
        present = set(present)
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        for key in keys:
            if key not in present:
                writer.writerow(list(key))
                present.add(key)
        if buffer.getvalue():
            os.close(whole_lines.open_plain(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666))
            _append(path, buffer.getvalue().encode("utf-8"))
