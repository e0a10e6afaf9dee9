"""Turn-taking between worker processes that share one device, so that only one of them times at a time.

With ``--workers-per-gpu 2`` two data-generation workers share a GPU: while one benchmarks, the other
compiles its next batch on the CPU (ptxas, code generation). What either measures must not change, so
every phase that runs work on the device (creating operands, the logged repetitions, running a compiled
graph) holds an exclusive ``flock`` on a per-device lock file; compiling does not. The OS releases the lock
when a holder dies, so a killed worker never blocks the other.

The runner puts the lock file's path in ``AH_DATAGEN_DEVICE_LOCK`` for each worker; ``from_environment``
returns None when it is absent (one worker per device: no turn-taking, no cost).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

ENV_DEVICE_LOCK = "AH_DATAGEN_DEVICE_LOCK"


class DeviceLock:
    """An exclusive lock on one file; ``held()`` is a context manager. Not re-entrant (a nested ``held()``
    is a no-op), and it keeps the time it spent waiting and holding for the journal."""

    def __init__(self, path: str, before_release=None) -> None:
        self.path = path
        self.before_release = before_release  # e.g. a device synchronize: nothing queued outlives the turn
        self._fd: int | None = None
        self.waited = 0.0
        self.held_seconds = 0.0
        self.intervals: list[tuple[float, float]] = []  # (acquired, released), wall-clock seconds

    @contextlib.contextmanager
    def held(self):
        if self._fd is not None:  # already ours
            yield self
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        asked = time.monotonic()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        got = time.monotonic()
        acquired = time.time()
        self._fd = fd
        try:
            yield self
        finally:
            if self.before_release is not None:
                try:
                    self.before_release()
                except Exception:  # noqa: BLE001 - the error in flight (if any) is the one to report
                    pass
            self._fd = None
            released = time.time()
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            self.waited += got - asked
            self.held_seconds += time.monotonic() - got
            self.intervals.append((acquired, released))

    @property
    def is_held(self) -> bool:
        return self._fd is not None

    def take_stats(self) -> dict:
        """Seconds waited and held, and the held intervals, since the last call (then reset)."""
        stats = {"lock_wait_seconds": round(self.waited, 3), "lock_held_seconds": round(self.held_seconds, 3),
                 "lock_intervals": [[round(a, 4), round(b, 4)] for a, b in self.intervals]}
        self.waited = self.held_seconds = 0.0
        self.intervals = []
        return stats


def from_environment(environ=None, before_release=None) -> DeviceLock | None:
    """The lock the runner assigned this worker, or None (this worker has its device to itself)."""
    path = (os.environ if environ is None else environ).get(ENV_DEVICE_LOCK, "").strip()
    return DeviceLock(path, before_release) if path else None


def held_or_nothing(lock: DeviceLock | None):
    """``lock.held()``, or a no-op context when there is no lock."""
    return lock.held() if lock is not None else contextlib.nullcontext()
