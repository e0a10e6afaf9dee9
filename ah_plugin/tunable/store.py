"""The in-process results database: loaded from the results file on first use, merged and written back.

One `ResultsStore` per process (`store()`); the policy asks it for lookups and hands it winners.
"""

from __future__ import annotations

import atexit
import sys
import threading
from dataclasses import dataclass, field

from . import params as P
from . import results_file as F
from . import settings as S


@dataclass
class Stats:
    """What the cache did in this process (for tests, verbose output and benchmarks)."""

    hits: int = 0
    wildcard_hits: int = 0
    misses: int = 0
    stale: int = 0  # recorded solution not among the candidates
    tuned: int = 0  # winners recorded
    defaults: int = 0  # misses answered with Default / heuristic top-1 (tuning off)
    untuned_recorded: int = 0
    rejected_candidates: int = 0  # dropped by the numerical check
    limited: int = 0  # tuning misses whose candidate benchmarks were given the max duration/iterations

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class Verbose:
    """Messages at levels 1-3 to stderr, stdout or a file (AH_TUNABLE_VERBOSE_FILENAME)."""

    def __init__(self) -> None:
        self._handle = None
        self._name = None

    def __call__(self, level: int, message: str) -> None:
        if S.verbose_level() < level:
            return
        name = S.verbose_filename()
        if name in ("err", "stderr", ""):
            stream = sys.stderr
        elif name in ("out", "stdout"):
            stream = sys.stdout
        else:
            if self._name != name:
                try:
                    self._handle = open(S.with_ordinal(name), "a", encoding="utf-8")
                except OSError as error:  # a read-only log directory must not disable the cache
                    F.warn(f"{S.with_ordinal(name)}: cannot open the verbose log ({error}); writing to stderr")
                    self._handle = sys.stderr
                self._name = name
            stream = self._handle
        stream.write(f"[ah_tunable] {message}\n")
        stream.flush()


verbose = Verbose()


@dataclass
class ResultsStore:
    entries: dict[tuple[str, str], F.Entry] = field(default_factory=dict)
    wildcards: dict[str, list[tuple[P.GemmParams, F.Entry]]] = field(default_factory=dict)
    loaded_from: str | None = None
    dirty: bool = False
    stats: Stats = field(default_factory=Stats)
    untuned_seen: set = field(default_factory=set)
    excluded: dict[tuple[str, str], set] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    warned: set = field(default_factory=set)
    exact_only: bool = False  # offline tuning: wildcard entries are not looked up
    version: int = 0  # bumped on every change of `entries` (for cache_key)
    _digest: tuple = (-1, "")

    # -- loading ------------------------------------------------------------------------------
    def filename(self) -> str:
        return S.with_ordinal(S.raw_filename())

    def ensure_loaded(self) -> None:
        if self.loaded_from is None:
            self.read(self.filename())

    def read(self, path: str) -> bool:
        """Read `path` and merge its rows in (file rows never replace faster in-memory ones).
        Returns False when the file is missing or rejected."""
        with self.lock:
            if self.loaded_from is None:
                self.loaded_from = path
                _register_atexit()
            try:
                result = F.read_results(path, F.current_validators())
            except OSError as error:  # unreadable (permissions, a directory): warn, start empty
                self.warn_once(("read", path), f"{path}: cannot read the results file ({error}); not used")
                return False
            if result.missing or result.rejected:
                verbose(1, f"results file {path}: {'missing' if result.missing else 'rejected'}")
                return False
            self.entries = F.merge(result.entries, self.entries)
            self.version += 1
            self._index()
            verbose(1, f"read {len(result.entries)} results from {path}")
            return True

    def _index(self) -> None:
        self.wildcards = {}
        for (op, text), entry in self.entries.items():
            parsed = P.parse(text)
            if parsed.wildcards:
                self.wildcards.setdefault(op, []).append((parsed, entry))
        for items in self.wildcards.values():
            # most specific first; ties keep file order (entries are in read order)
            items.sort(key=lambda item: item[0].wildcards)

    # -- lookups ------------------------------------------------------------------------------
    def lookup(self, op: str, key: P.GemmParams) -> tuple[F.Entry | None, bool]:
        """(entry, is_wildcard) for the key: the exact entry, else the most specific wildcard one."""
        entry = self.entries.get((op, key.encode()))
        if entry is not None or self.exact_only:
            return entry, False
        for pattern, candidate in self.wildcards.get(op, ()):
            if pattern.matches(key):
                return candidate, True
        return None, False

    def record(self, op: str, params: str, solution: str, time_ms: float) -> None:
        with self.lock:
            self.entries[(op, params)] = F.Entry(op, params, solution, float(time_ms))
            if P.parse(params).wildcards:
                self._index()
            self.version += 1
            self.dirty = True
            self.stats.tuned += 1

    def record_untuned(self, op: str, params: str) -> None:
        key = (op, params)
        if key in self.untuned_seen:
            return
        self.untuned_seen.add(key)
        path = S.with_ordinal(S.raw_untuned_filename())
        try:
            F.append_untuned(path, [key])
        except OSError as error:  # a read-only directory: warn, still answer the miss
            self.warn_once(("untuned", path), f"{path}: cannot record untuned shapes ({error})")
            return
        self.stats.untuned_recorded += 1
        verbose(2, f"untuned {op},{params} -> {path}")

    def digest(self) -> str:
        """A short hash of every (op, params, solution): changes when a lookup could answer differently."""
        if self._digest[0] != self.version:
            import hashlib

            text = "\n".join(f"{op},{p},{e.solution}" for (op, p), e in sorted(self.entries.items()))
            self._digest = (self.version, hashlib.sha256(text.encode()).hexdigest()[:16])
        return self._digest[1]

    def warn_once(self, key: object, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            F.warn(message)

    # -- writing ------------------------------------------------------------------------------
    def write(self, path: str | None = None) -> bool:
        """Merge with the file on disk and write it. Returns True when something was written."""
        with self.lock:
            target = path or self.loaded_from or self.filename()
            count = F.write_results(target, F.current_validators(), self.entries)
            self.dirty = False
            verbose(1, f"wrote {count} results to {target}; stats {self.stats.as_dict()}")
            return True

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.wildcards.clear()
            self.version += 1
            self.loaded_from = None
            self.dirty = False
            self.stats = Stats()
            self.untuned_seen.clear()
            self.excluded.clear()
            self.warned.clear()
            self.exact_only = False


_STORE = ResultsStore()
_ATEXIT = False


def store() -> ResultsStore:
    return _STORE


def _write_at_exit() -> None:
    if not S.api.write_on_exit or not _STORE.dirty:
        return
    try:
        _STORE.write()
    except Exception as error:  # exiting: report, never raise
        print(f"[ah_tunable] could not write results: {error}", file=sys.stderr)


def _register_atexit() -> None:
    global _ATEXIT
    if not _ATEXIT:
        _ATEXIT = True
        atexit.register(_write_at_exit)
