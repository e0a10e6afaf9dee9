"""Run artifact code so that nothing it does can end or hang the user's program.

An artifact is a Python file from a folder the user named; it is executed at import and called at
every use-mode autotuning. Its code runs here on a daemon thread while the caller waits, with a time
limit:

- every ``BaseException`` it raises (``SystemExit`` from ``sys.exit`` or ``argparse``, an exception of
  its own, even a ``KeyboardInterrupt`` it raises itself) becomes an ``ArtifactError`` that names it.
  A real Ctrl-C is delivered to the main thread, never to this one, so it still stops the program;
- a call that gives no answer within the limit (waiting on input, a lock, the network, a loop) is
  abandoned: the caller gets an ``ArtifactError``, and later calls run on a fresh thread;
- while it runs, ``sys.stdin`` reads as empty (``input()`` raises ``EOFError``) and, at import,
  ``sys.argv`` is just the artifact's path (a script's argument parser never sees the user's
  arguments).

Not contained here (docs/use.md says so): a loop inside C code (it never lets the waiting thread run),
``os._exit``, a crash, signals it sends, reads of file descriptor 0, threads or processes it starts, and
CPU an abandoned loop keeps using. The first three are what a user's file is tried for, in a separate
process, before it runs here (``artifact_trial``); what behaves in that trial and not here remains. An
artifact folder is code.
"""

from __future__ import annotations

import io
import os
import queue
import sys
import threading
import time
from contextlib import contextmanager

IMPORT_TIMEOUT_S = 60.0  # executing one artifact file (a large one takes ~0.2 s without bytecode)
CALL_TIMEOUT_S = 10.0  # one rank() or check_precondition() (microseconds when healthy)


class ArtifactError(Exception):
    """Artifact code failed, exited, hung or answered nonsense; the message names the artifact."""


class ArtifactTimeout(ArtifactError):
    """Artifact code gave no answer in time (it may still be running, abandoned, on its thread)."""


class _Job:
    __slots__ = ("fn", "origin", "value", "error", "done")

    def __init__(self, fn, origin: str | None) -> None:
        self.fn = fn
        self.origin = origin
        self.value = None
        # described on the artifact thread: str() of an artifact's exception is artifact code too
        self.error: str | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as error:  # noqa: B036 - containing everything is this module's job
            try:
                self.error = describe(error, self.origin)
            except BaseException:  # noqa: B036 - its __str__ or __repr__ failed as well
                self.error = "an exception that cannot be described"
        finally:
            self.done.set()


class _Runner:
    """One daemon thread that runs jobs in order (daemon: a hung job never holds up interpreter exit)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="ah_plugin artifact runner", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self.jobs.get().run()


_runner: _Runner | None = None
_call_lock = threading.Lock()  # one job at a time: a hung job is blamed on its own artifact only


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker, a fork server) has no runner thread and may inherit a held
    lock: it starts afresh."""
    global _runner, _call_lock
    _runner = None
    _call_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@contextmanager
def _quiet_inputs(argv0: str | None):
    """``sys.stdin`` empty (and ``sys.argv`` = [argv0] when given) while artifact code runs; restored
    by the caller, so an abandoned job cannot keep them."""
    saved_stdin, saved_argv = sys.stdin, sys.argv
    sys.stdin = io.StringIO("")
    if argv0 is not None:
        sys.argv = [argv0]
    try:
        yield
    finally:
        sys.stdin = saved_stdin
        sys.argv = saved_argv


# The caller waits in slices this long: a Ctrl-C the kernel delivered to the artifact thread sets Python's
# signal flag, which only the main thread acts on, between bytecodes; one long wait would hold it back
# until the time limit.
_WAIT_SLICE_S = 0.05


def _wait(done: threading.Event, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not done.wait(min(_WAIT_SLICE_S, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return False
    return True


def run(fn, what: str, origin: str | None = None, timeout: float | None = None, importing: bool = False):
    """``fn()`` on the artifact thread; its value, or ``ArtifactError("<what> raised ...")``.

    ``what`` names the artifact and the step (``"artifact Mine (user: /x/_Mine.py): rank()"``);
    ``origin`` is its file (an error is located at its innermost line there). ``importing``: the file is
    being executed (``sys.argv`` is then ``[origin]``, and the import time limit applies). Called from the artifact
    thread itself (artifact code calling back into the plugin), ``fn`` runs directly.
    """
    global _runner
    if _runner is not None and threading.current_thread() is _runner.thread:
        return fn()
    if timeout is None:
        timeout = IMPORT_TIMEOUT_S if importing else CALL_TIMEOUT_S
    job = _Job(fn, origin)
    with _call_lock:
        if _runner is None:
            _runner = _Runner()
        with _quiet_inputs(origin if importing else None):
            _runner.jobs.put(job)
            finished = _wait(job.done, timeout)
            if not finished:
                _runner = None  # abandoned with its job; the next call starts a fresh thread
    if not finished:
        raise ArtifactTimeout(f"{what} gave no answer within {timeout:g} s (waiting on input, a lock or a "
                            "loop?); abandoned")
    if job.error is not None:
        raise ArtifactError(f"{what} {job.error}")
    return job.value


def describe(error: BaseException, origin: str | None = None) -> str:
    """``raised Name: message (at file:line)``, the line being the innermost one in ``origin`` (else the
    innermost of all); an ``ArtifactError`` of our own checks (``returned ...``) as it is."""
    if isinstance(error, ArtifactError):
        return str(error)
    if isinstance(error, SyntaxError) and error.filename and (origin is None or error.filename == origin):
        from .artifact_trust import syntax_error  # the artifact's own file is not Python: said as such

        return f"found that it {syntax_error(error)}"
    name = type(error).__name__
    if isinstance(error, SystemExit):
        text = f"raised SystemExit({error.code!r}): the artifact tried to end the program"
    elif isinstance(error, KeyboardInterrupt):
        text = f"raised {name} itself (not a Ctrl-C)"
    else:
        message = str(error)
        text = f"raised {name}: {message}" if message else f"raised {name}"
    where, tb = None, error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith("<") and (where is None or origin is None or filename == origin):
            where = f"{filename}:{tb.tb_lineno}"  # "<frozen importlib...>" frames say nothing
        tb = tb.tb_next
    return f"{text} (at {where})" if where else text


__all__ = ["ArtifactError", "ArtifactTimeout", "run", "describe", "IMPORT_TIMEOUT_S", "CALL_TIMEOUT_S"]
