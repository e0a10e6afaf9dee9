"""Which files may be executed as artifacts: only ones that look like artifacts, in places no other
user can write to.

An artifact is Python executed with the rights of the user's program, so, as ssh refuses a key file
others could have changed, the loader refuses a file of the user's artifact folder, the folder, or its
``__pycache__`` (Python runs the cached bytecode instead of the source) when another user owns it or can
write to it.
Owner: you or root. Write bits: none for "other"; for the group only when the group is the owner's own
(user private groups, ``umask 002``). A file must also look like an artifact (a class with
``heuristic_name``, ``op_name``, ``rank`` and ``check_precondition``), so a helper script left in the
folder is never run. Both checks read the file and ``stat`` a few paths: no code of the file runs.
"""

from __future__ import annotations

import os
import stat

# what a Contract-2 file holds (plain substring searches: a 400 KB artifact is checked in well under 1 ms)
_ARTIFACT_MARKS = (
    (b"class ", "class"),
    (b"heuristic_name", "heuristic_name"),
    (b"op_name", "op_name"),
    (b"def rank(", "rank()"),
    (b"def check_precondition(", "check_precondition()"),
)


def not_an_artifact(source: bytes, path: str = "<artifact>") -> str | None:
    """Why ``source`` does not look like an artifact (Contract 2), or None when it does. A file that is not
    valid Python is said so first (compiled, never run: a syntax error can hide the marks looked for)."""
    missing = [what for mark, what in _ARTIFACT_MARKS if mark not in source]
    if not missing:
        return None
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        return f"{syntax_error(error)}; not executed"
    except ValueError:  # a NUL byte: not Python source either
        return "is not Python source (it holds a NUL byte); not executed"
    return (f"defines no artifact class (Contract 2: a class with heuristic_name, op_name, rank() and "
            f"check_precondition(); missing: {', '.join(missing)}); not executed")


def syntax_error(error: SyntaxError) -> str:
    """``has a syntax error: MESSAGE (at FILE:LINE)``, the place Python found it, in the artifact."""
    where = f" (at {error.filename}:{error.lineno})" if error.filename and error.lineno else ""
    return f"has a syntax error: {error.msg}{where}"


def _private_group(gid: int, uid: int) -> bool:
    """The group is the owner's own: named like the owner, its primary group, no other member."""
    try:
        import grp
        import pwd

        group, user = grp.getgrgid(gid), pwd.getpwuid(uid)
    except (ImportError, KeyError):
        return False
    return group.gr_name == user.pw_name and user.pw_gid == gid and set(group.gr_mem) <= {user.pw_name}


def _owner_name(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def unsafe(path: str) -> str | None:
    """Why ``path`` (file or folder) must not be trusted with code, or None. A missing path is fine."""
    if not hasattr(os, "geteuid"):  # Windows: no owners and modes to compare
        return None
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path}: cannot be checked ({error.strerror or error}); refused"
    me = os.geteuid()
    if info.st_uid not in (me, 0):
        owners = "root (you)" if me == 0 else f"you ({_owner_name(me)}) or root"
        return (f"{path} is owned by {_owner_name(info.st_uid)}, not by {owners}; refused (an artifact is "
                "code run with your rights)")
    mode = stat.S_IMODE(info.st_mode)
    others = mode & stat.S_IWOTH
    group = mode & stat.S_IWGRP and not _private_group(info.st_gid, info.st_uid)
    if others or group:
        who = "every user" if others else "its group"
        fix = (f"use a folder only you can write to (chmod go-w {path} if it is yours alone)"
               if stat.S_ISDIR(info.st_mode) else f"chmod go-w {path}")
        return (f"{path} is writable by {who} (mode {mode:#o}); refused, as ssh refuses such a key "
                f"(an artifact is code run with your rights): {fix}")
    return None


def unsafe_folder(directory: str) -> str | None:
    """``unsafe`` for an artifact folder and its ``__pycache__``."""
    return unsafe(directory) or unsafe(os.path.join(directory, "__pycache__"))


def unsafe_file(path: str) -> str | None:
    """``unsafe`` for an artifact file, the folder it really lives in (through links) and its bytecode."""
    real = os.path.realpath(path)
    problem = unsafe(path)
    if problem is None and os.path.dirname(real) != os.path.dirname(os.path.abspath(path)):
        problem = unsafe_folder(os.path.dirname(real))
    if problem is None:
        try:
            import importlib.util

            problem = unsafe(importlib.util.cache_from_source(os.path.abspath(path)))
        except (NotImplementedError, ValueError):
            problem = None
    return problem


__all__ = ["not_an_artifact", "unsafe", "unsafe_folder", "unsafe_file"]
