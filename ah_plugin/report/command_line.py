"""What every command line of the project shares: help that names itself as it is run and shows each
option's default, and bad input said in one line.

Used by ``ah_plugin.demo``, ``ah_plugin.tunable.offline``, every ``python -m torchgen_ah...`` command and
``ah-plugin`` (``ah_plugin.report.console``), which runs them all.
Standard library only.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; an option's default is appended to its help unless the help already
    speaks of a default, or the option has none worth saying (off, unset)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text.lower() or action.default in (None, False, argparse.SUPPRESS, [], ""):
            return text
        if not action.option_strings and action.nargs not in ("?", "*"):
            return text  # a required positional has no default
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


_run_as: dict = {}  # documented name -> the name this process was started under (``run_as``)


@contextmanager
def run_as(documented: str, name: str):
    """Inside: the command documented as ``documented`` runs under ``name`` (``ah-plugin merge-data``), and
    its parsers name it so."""
    _run_as[documented] = name
    try:
        yield
    finally:
        _run_as.pop(documented, None)


def parser(prog: str, description: str, **kwargs) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` named as the user runs it (``python -m torchgen_ah.merge_data``, or the
    ``ah-plugin`` name it was started under)."""
    prog = as_run(prog)
    _last_prog[0] = prog
    return argparse.ArgumentParser(prog=prog, description=description, formatter_class=HelpFormatter, **kwargs)


_last_prog: list = [None]  # the prog of the last parser made: the command this process runs


def as_run(prog: str) -> str:
    """``prog`` (``python -m torchgen_ah.merge_data ...``) as the user ran it (``ah-plugin merge-data ...``)."""
    for documented, name in _run_as.items():
        if prog == documented or prog.startswith(documented + " "):
            return name + prog[len(documented):]
    return prog


def error_text(exc: BaseException) -> str:
    """``exc`` as one line: an OSError as ``FILE: reason``; anything else, its lines joined."""
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return f"{exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, KeyError):  # str(KeyError) is only the quoted key
        return f"missing {exc}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines) or type(exc).__name__


def fail(prog: str, exc: BaseException, code: int = 2) -> int:
    """Print ``<command>: error: <one line>`` to stderr, the command named as the user ran it, as argparse
    names it in its own errors (the last parser this process made, else ``prog``); return ``code`` for the
    caller to exit with."""
    print(f"{_last_prog[0] or as_run(prog)}: error: {error_text(exc)}", file=sys.stderr)
    return code
