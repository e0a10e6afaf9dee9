"""The COLLECT policy: one AutoHeuristic log row per timed choice of every autotuned input.

Unlike torch's built-in collector, which drops a whole input when one candidate got no timing, a
choice that failed or was not timed is left out of the log and counted (``stats``); the input's other
rows are written. Rows go through ``log_format.append_rows`` (one locked write per autotuning, so
processes sharing a log never interleave; a log holding other metadata makes the rows go to a sibling
file, with a warning). A log that cannot be written (a folder, a read-only place, a full disk) is said
once per path, naming the path, the cause and that those rows are lost (counted in ``rows_lost``); each
later autotuning tries again, so rows are written again once the path can be.

Where rows go: ``TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH`` (``log_path``) when set, as upstream: one file
for every collected op (a ``{op}`` in the path is replaced by the op name, our extension); else
upstream's default ``<inductor cache dir>/autoheuristic/<device name>/<op>.txt``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..report import decision_words, messages
from . import features, log_format
from ..config import settings
from ..policy import AutotuneRequest, ChoicePolicy
from ..report.verbose_output import say

log = logging.getLogger(__name__)


# upstream's default log path, under Inductor's cache folder: given by the adapter when it installs (rows are
# written only from its feedback hook), so that this module imports nothing of it
_default_log_path: list = [None]


def use_default_log_path(path_for) -> None:
    """``path_for(op_name, device_name, device_type)`` gives the log path when none is set."""
    _default_log_path[0] = path_for


@dataclass
class CollectStats:
    """What this process logged: inputs, rows, and choices left out for lack of a timing."""

    inputs: int = 0
    rows: int = 0
    untimed: int = 0
    inputs_without_timings: int = 0
    inputs_mixed_timing: int = 0  # left out: candidates timed by two methods (replay and per call)
    rows_lost: int = 0  # rows that could not be written (their path was named in a warning)
    files: set = field(default_factory=set)


class CollectorPolicy(ChoicePolicy):
    """``ChoicePolicy`` that never narrows (``select`` -> None) and logs ``on_timings``.

    ops: ops to collect (None: ``settings.current().collect`` at each call).
    log_path: file to write (None: ``settings.current().log_path``, then upstream's default).
    """

    def __init__(self, ops=None, log_path: str | None = None):
        self._ops = None if ops is None else frozenset(ops)
        self._log_path = log_path
        self.stats = CollectStats()
        self._failed_paths: set = set()

    @property
    def op_names(self) -> frozenset:
        return self._ops if self._ops is not None else settings.current().collect_ops

    def path_for(self, request: AutotuneRequest) -> str:
        path = self._log_path or settings.current().log_path
        if path:
            return path.replace("{op}", request.op_name)
        if _default_log_path[0] is None:
            raise RuntimeError("no log path: set TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH (the Inductor adapter, which "
                               "knows Inductor's cache folder, is not installed)")
        name = str(request.metadata.get("device_name", "cpu"))
        device_type = "cpu" if tuple(request.metadata.get("device_capa", (0, 0))) == (0, 0) else "cuda"
        return _default_log_path[0](request.op_name, name, device_type)

    def rows_for(self, request: AutotuneRequest, timings: dict[str, float]) -> list[str]:
        """Formatted rows, one per timed choice, in the request's candidate order."""
        meta = features.log_metadata(request.metadata)
        order = [cid for cid in request.candidates if cid in timings]
        listed = set(order)
        order += [cid for cid in timings if cid not in listed]
        return [log_format.format_row(meta, request.features, cid, timings[cid]) for cid in order]

    def on_timings(self, request: AutotuneRequest, timings: dict[str, float], untimed: list[str]) -> None:
        if request.op_name not in self.op_names:
            return
        if request.metadata.get("timing") == "mixed":  # some candidates fell back to per-call timing
            self.stats.inputs_mixed_timing += 1
            return
        self.stats.untimed += len(untimed)
        if not timings:
            self.stats.inputs_without_timings += 1
            return
        rows = self.rows_for(request, timings)
        meta = features.log_metadata(request.metadata)
        columns = log_format.header_columns(meta, request.features)  # torch's collector's column order
        path = self.path_for(request)
        try:
            written = log_format.append_rows(path, meta, rows, columns)
        except OSError as error:
            self.stats.rows_lost += len(rows)
            if path not in self._failed_paths:
                self._failed_paths.add(path)
                messages.warn("collect log " + log_format.write_failure(
                    path, error, f"these {len(rows)} rows ({request.op_name}) are lost, and so are later rows "
                    "while it stays so (counted in ah_plugin.status()['collect_stats'].rows_lost)"),
                    RuntimeWarning)
            return
        self.stats.inputs += 1
        self.stats.rows += len(rows)
        self.stats.files.add(written)
        if settings.current().verbose:
            left_out = f"; {len(untimed)} untimed left out ({', '.join(untimed)})" if untimed else ""
            say(log, f"{decision_words.gemm(request)} on "
                     f"{decision_words.device(request.metadata)}: {len(rows)} choices timed, logged to {written}{left_out}")


_default: CollectorPolicy | None = None


def default_collector() -> CollectorPolicy:
    """The process-wide collector (the switch-on registers this one)."""
    global _default
    if _default is None:
        _default = CollectorPolicy()
    return _default
