"""The in-process results database: loaded from the results file on first use; each winner put on disk
when it is recorded (`results_file.append_entries`), the file compacted at exit when it needs it.

One `ResultsStore` per process (`store()`); the policy asks it for lookups and hands it winners. A write
that fails is said once per path, naming the path, the cause and what is lost; the cache keeps
answering from memory. A file that is not a results file is never written (said once when read).

Cost independent of the file's size: a large plain file is searched per looked-up shape instead of
parsed whole (`results_search`; read whole after `SEARCHES` shapes, when that is the cheaper way), a
winner is appended after a look at the file's first lines, and the exit-time compaction runs only when
a winner could not be appended or the file read needs a rewrite (lines not text, duplicate rows, a
missing validator line).
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import sys
import threading
from dataclasses import dataclass, field

from ah_plugin.collect import whole_lines
from ah_plugin.collect.log_format import write_failure as _write_failure
from ah_plugin.report.messages import PREFIX

from . import params as P
from . import results_file as F
from . import results_search
from . import settings as S

SEARCHES = 48  # distinct shapes looked up by search before a searched file is read whole


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
    untimed: int = 0  # tuning misses where nothing was timed (one choice left, by the USE ranking): not recorded

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class Verbose:
    """Messages at levels 1-3 to stderr, stdout or a file (AH_TUNABLE_VERBOSE_FILENAME): a regular file, never
    the results or the untuned file (each would become a log), a FIFO or a device (``open_log``)."""

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
                    self._handle = open_log(S.with_ordinal(name))
                except OSError as error:  # a read-only log directory must not disable the cache
                    F.warn(f"{S.with_ordinal(name)}: cannot open the verbose log ({error}); writing to stderr")
                    self._handle = sys.stderr
                self._name = name
            stream = self._handle
        stream.write(f"{PREFIX}results cache: {message}\n")
        stream.flush()


def open_log(path: str):
    """The verbose log, opened to append: refused (``whole_lines.RefusedWrite``) when it is the results file
    or the untuned file, or not a regular file; its folder created when missing (said)."""
    for other, what in ((S.with_ordinal(S.raw_filename()), "the results file"),
                        (S.with_ordinal(S.raw_untuned_filename()), "the untuned file")):
        if os.path.realpath(path) == os.path.realpath(other):
            raise whole_lines.RefusedWrite(f"it is {what} ({other}), which log lines would spoil")
    created = whole_lines.make_folder_for(path)
    if created:
        F.warn(f"{path}: its folder {created} did not exist; created it for the verbose log")
    return os.fdopen(whole_lines.open_plain(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "a", encoding="utf-8")


verbose = Verbose()
log = logging.getLogger(__name__)


@dataclass
class ResultsStore:
    entries: dict[tuple[str, str], F.Entry] = field(default_factory=dict)  # rows read whole, and winners
    searched: results_search.SearchedFile | None = None  # a large file, searched per shape
    wildcards: dict[str, list[tuple[P.GemmParams, F.Entry]]] = field(default_factory=dict)
    loaded_from: str | None = None
    dirty: bool = False
    stats: Stats = field(default_factory=Stats)
    untuned_seen: set = field(default_factory=set)
    excluded: dict[tuple[str, str], set] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    warned: set = field(default_factory=set)
    exact_only: bool = False  # offline tuning: wildcard entries are not looked up
    version: int = 0  # bumped on every change of what a lookup answers (for cache_key)
    journaled: dict = field(default_factory=dict)  # (op, params) -> the entry this process put on disk
    replaced: dict = field(default_factory=dict)  # (op, params) -> solution whose row a new winner replaces
    unsaved: int = 0  # winners recorded but not yet on disk (their write failed)
    untidy: bool = False  # the file read needs a rewrite (lines not text, duplicate rows, missing validators)
    refused: set = field(default_factory=set)  # paths that are not results files: never written
    file_digests: list = field(default_factory=list)  # sha256 of every file read, in order
    changes: dict = field(default_factory=dict)  # (op, params) -> solution recorded here (None: forgotten)
    awaiting: set = field(default_factory=set)  # (op, params) of tuning misses no timing has reached yet
    _digest: tuple = (-1, "")

    # -- loading ------------------------------------------------------------------------------
    def filename(self) -> str:
        return S.with_ordinal(S.raw_filename())

    def ensure_loaded(self) -> None:
        if self.loaded_from is None:
            self.read(self.filename())

    def read(self, path: str) -> bool:
        """Read `path` and merge its rows in (``results_format.merge``: the faster row, by the aten margin
        between aten and another solution).
        Returns False when the file is missing, rejected or not a results file."""
        with self.lock:
            if self.loaded_from is None:
                self.loaded_from = path
                _register_atexit()
            try:
                data = F.read_bytes(path)
            except whole_lines.RefusedWrite as error:  # a FIFO, a device, a folder: never opened
                self.refused.add(path)
                self.warn_once(("read", path), f"the results file {error}; the results of this run stay in memory")
                return False
            except OSError as error:  # unreadable (permissions): warn, start empty
                self.warn_once(("read", path), f"{path}: cannot read the results file ({error}); not used")
                return False
            if data is None:
                verbose(1, f"results file {path}: missing")
                return False
            try:
                whole_lines.check_writable(path)
            except whole_lines.RefusedWrite as error:  # read-only: its rows answer, nothing is written to it
                self.refused.add(path)
                self.warn_once(("read-only", path), f"the results file {error}; the winners of this run stay "
                                                    "in memory")
            validators = F.current_validators()
            if self.searched is None and not self.entries:  # the first file: searched when large and plain
                self.searched = results_search.open_searched(path, data, validators)
                if self.searched is not None:
                    self.file_digests.append(self.searched.digest)
                    self._changed()
                    verbose(1, f"opened {path} ({len(data):,} bytes): searched per shape")
                    return True
            self.materialize()
            result = F.parse_results(path, data, validators)
            if result.foreign:
                self.refused.add(path)
            if result.rejected:
                verbose(1, f"results file {path}: rejected")
                return False
            self.entries = F.merge(result.entries, self.entries)
            self.untidy = self.untidy or result.untidy
            self.file_digests.append(result.digest)
            self._changed()
            verbose(1, f"read {len(result.entries)} results from {path}")
            return True

    def materialize(self) -> None:
        """Read a searched file whole into `entries` (this process's winners stay over its rows)."""
        with self.lock:
            searched, self.searched = self.searched, None
            if searched is None:
                return
            result = F.parse_results(searched.path, searched.data, searched.validators)
            winners, self.entries = self.entries, result.entries
            self.entries.update(winners)
            self.untidy = self.untidy or result.untidy
            self._changed()

    def _changed(self) -> None:
        self.version += 1
        self._index()

    def _index(self) -> None:
        self.wildcards = {}
        rows = dict(self.searched.wildcards) if self.searched is not None else {}
        rows.update((key, entry) for key, entry in self.entries.items() if P.WILDCARD in key[1])
        for (op, text), entry in rows.items():
            self.wildcards.setdefault(op, []).append((P.parse(text), entry))
        for items in self.wildcards.values():
            # most specific first; ties keep file order (entries are in read order)
            items.sort(key=lambda item: item[0].wildcards)

    # -- lookups ------------------------------------------------------------------------------
    def exact(self, key: tuple[str, str]) -> F.Entry | None:
        """The entry of a concrete (op, params): this process's winner, else the file's row."""
        entry = self.entries.get(key)
        if entry is not None or self.searched is None:
            return entry
        if key not in self.searched.found and len(self.searched.found) >= SEARCHES:
            self.materialize()  # many shapes: one read of the whole file costs less than more searches
            return self.entries.get(key)
        return self.searched.get(key)

    def lookup(self, op: str, key: P.GemmParams) -> tuple[F.Entry | None, bool]:
        """(entry, is_wildcard) for the key: the exact entry, else the most specific wildcard one."""
        with self.lock:
            entry = self.exact((op, key.encode()))
        if entry is not None or self.exact_only:
            return entry, False
        for pattern, candidate in self.wildcards.get(op, ()):
            if pattern.matches(key):
                return candidate, True
        return None, False

    def awaiting_timings(self, op: str, params: str) -> None:
        """A tuning miss: counted as untimed until a winner of it is recorded."""
        with self.lock:
            self.awaiting.add((op, params))
            self.stats.untimed = len(self.awaiting)

    def record(self, op: str, params: str, solution: str, time_ms: float) -> None:
        """A new winner: in memory at once, and on disk before this returns (unless automatic writes are
        off, `write_file_on_exit(False)`). A winner for a key whose row holds another solution (gone from
        today's candidates, or rejected by the numerical check) replaces that row on disk."""
        key = (op, params)
        entry = F.Entry(op, params, solution, float(time_ms))
        with self.lock:
            previous = self.exact(key) or self.journaled.get(key)
            if previous is not None and previous.solution != solution:
                self.replaced[key] = previous.solution
            self.entries[key] = entry
            self.changes[key] = solution
            self.awaiting.discard(key)
            self.stats.untimed = len(self.awaiting)
            if P.WILDCARD in params:
                self._index()
            self.version += 1
            self.dirty = True
            self.stats.tuned += 1
            _register_atexit()
            if S.api.write_on_exit:
                self._journal(entry)

    def forget(self, key: tuple[str, str]) -> None:
        """Drop this process's entry of `key` (offline tuning, before tuning it again)."""
        with self.lock:
            self.materialize()
            if self.entries.pop(key, None) is not None:
                self.changes[key] = None
                self._changed()

    def _journal(self, entry: F.Entry) -> None:
        path = self.loaded_from or self.filename()
        if path in self.refused:  # not a results file: said once when read; the winner stays in memory
            self.unsaved += 1
            return
        replaced = {entry.key: self.replaced[entry.key]} if entry.key in self.replaced else None
        try:
            F.append_entries(path, F.current_validators(), [entry], replaced)
        except OSError as error:
            self.unsaved += 1
            self.warn_once(("write", path), _write_failure(path, error, "this winner and later ones are "
                                                           "kept in memory and written at exit if the file "
                                                           "can be written then; else they are lost"))
            return
        self.journaled[entry.key] = entry
        log.debug("journaled %s,%s -> %s in %s", entry.op, entry.params, entry.solution, path)

    def record_untuned(self, op: str, params: str) -> None:
        key = (op, params)
        if key in self.untuned_seen:
            return
        self.untuned_seen.add(key)
        path = S.with_ordinal(S.raw_untuned_filename())
        try:
            F.append_untuned(path, [key])
        except OSError as error:  # a read-only directory: warn, still answer the miss
            self.warn_once(("untuned", path), "cannot record untuned shapes: " + _write_failure(
                path, error, "the missed shapes of this run are not recorded for offline tuning"))
            return
        self.stats.untuned_recorded += 1
        verbose(2, f"untuned {op},{params} -> {path}")

    def digest(self) -> str:
        """A short hash of the files read (their bytes) and of this process's winners: changes when a
        lookup could answer differently, at a cost independent of the files' size."""
        if self._digest[0] != self.version:
            text = "\n".join([*self.file_digests, *(f"{op},{p},{solution}" for (op, p), solution
                                                     in sorted(self.changes.items(), key=lambda kv: kv[0]))])
            self._digest = (self.version, hashlib.sha256(text.encode()).hexdigest()[:16])
        return self._digest[1]

    def warn_once(self, key: object, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            F.warn(message)

    # -- writing ------------------------------------------------------------------------------
    def write(self, path: str | None = None) -> bool:
        """Merge with the file on disk and write it (the compaction). Returns True when written, False
        for a file that is not a results file (never written)."""
        with self.lock:
            target = path or self.loaded_from or self.filename()
            if target in self.refused:
                return False
            if path is not None and path != self.loaded_from:
                self.materialize()  # another file gets every row this process holds
            # rows read from this very file are not asserted again: the file is their authority (another
            # process may have replaced one since; writing the old copy back would undo that)
            own = {key: entry for key, entry in self.entries.items() if entry.origin != target}
            count = F.write_results(target, F.current_validators(), own, self.replaced)
            self.dirty = False
            if target == (self.loaded_from or self.filename()):
                self.unsaved = 0
                self.untidy = False
            verbose(1, f"wrote {count} results to {target}; stats {self.stats.as_dict()}")
            return True

    def needs_compaction(self) -> bool:
        """At exit: True when the file misses a winner of this run (its append failed) or needs a rewrite."""
        return self.dirty and (self.unsaved > 0 or self.untidy)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.searched = None
            self.wildcards.clear()
            self.untidy = False
            self.refused.clear()
            self.file_digests.clear()
            self.changes.clear()
            self.version += 1
            self.loaded_from = None
            self.dirty = False
            self.stats = Stats()
            self.untuned_seen.clear()
            self.excluded.clear()
            self.warned.clear()
            self.exact_only = False
            self.journaled.clear()
            self.replaced.clear()
            self.awaiting.clear()
            self.unsaved = 0


_STORE = ResultsStore()
_ATEXIT = False


def store() -> ResultsStore:
    return _STORE


def _write_at_exit() -> None:
    """The compaction. When it fails, what the journal already holds is safe: only unsaved winners are lost."""
    if not S.api.write_on_exit or not _STORE.needs_compaction():
        return
    path = _STORE.loaded_from or _STORE.filename()
    if path in _STORE.refused:
        return
    try:
        _STORE.write()
    except OSError as error:  # exiting: report, never raise
        lost = (f"{_STORE.unsaved} winner(s) of this run are lost" if _STORE.unsaved
                else "not compacted; every winner of this run is already in it")
        _STORE.warn_once(("write", path), _write_failure(path, error, lost))
    except Exception as error:  # noqa: BLE001 - exiting: report, never raise
        print(f"[ah_tunable] {path}: could not write results ({error!r})", file=sys.stderr)


def _register_atexit() -> None:
    global _ATEXIT
    if not _ATEXIT:
        _ATEXIT = True
        atexit.register(_write_at_exit)
