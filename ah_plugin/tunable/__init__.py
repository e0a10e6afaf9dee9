"""A TunableOp-style results cache for Inductor's GEMM autotuning (see docs/tunable.md).

Names and meanings follow `torch.cuda.tunable`. Every switch has an `AH_TUNABLE_*` variable; **a set
variable wins over the Python API**, and a bad value of a variable warns once and is ignored, while a
bad argument here raises ValueError (ah_plugin/tunable/settings.py holds the rules and the names).
Importing this package is cheap: the offline tuner and the validators import torch parts lazily.
"""

from __future__ import annotations

from . import settings as _S
from .policy import POLICY, TunableCachePolicy
from .results_file import DEFAULT_SOLUTION, TunableFileWarning
from .store import store as _store

__all__ = [
    "enable",
    "is_enabled",
    "tuning_enable",
    "tuning_is_enabled",
    "record_untuned_enable",
    "record_untuned_is_enabled",
    "set_max_tuning_duration",
    "get_max_tuning_duration",
    "set_max_tuning_iterations",
    "get_max_tuning_iterations",
    "set_filename",
    "get_filename",
    "get_untuned_filename",
    "set_untuned_filename",
    "get_results",
    "get_validators",
    "read_file",
    "write_file",
    "write_file_on_exit",
    "set_numerical_check_tolerances",
    "get_numerical_check_tolerances",
    "use_heuristic_top1",
    "set_verbose",
    "get_stats",
    "tune_gemm_in_file",
    "mgpu_tune_gemm_in_file",
    "policy",
    "TunableCachePolicy",
    "TunableFileWarning",
    "DEFAULT_SOLUTION",
]


def _register_with_hook() -> None:
    """Put the cache first among the plugin's policies (a no-op when the hook cannot load)."""
    try:
        from ah_plugin.inductor import adapter
        from ah_plugin.policy import registry

        if POLICY not in registry.registered_policies():
            adapter.install()
            registry.register_policy(POLICY, registry.POSITION_CACHE)
    except Exception as error:  # never break the caller; the plain-request API keeps working
        from ah_plugin.report import messages

        messages.warn(f"results cache: the Inductor hook is unavailable ({error!r})", RuntimeWarning)


def policy() -> TunableCachePolicy:
    """The process-wide cache policy (what the hook calls first)."""
    return POLICY


def enable(val: bool = True) -> None:
    """The big switch: look results up (and, with tuning on, record new ones)."""
    _S.api.enabled = bool(val)
    if val:
        _register_with_hook()


def is_enabled() -> bool:
    return _S.is_enabled()


def tuning_enable(val: bool = True) -> None:
    """On a miss: autotune and record the winner (on) or answer with Default (off)."""
    _S.api.tuning = bool(val)


def tuning_is_enabled() -> bool:
    return _S.tuning_is_enabled()


def record_untuned_enable(val: bool = True) -> None:
    """With tuning off, append each missed shape to the untuned file for offline tuning."""
    _S.api.record_untuned = bool(val)


def record_untuned_is_enabled() -> bool:
    return _S.record_untuned_is_enabled()


def _at_least_zero(name: str, value) -> int:
    if int(value) < 0:
        raise ValueError(f"{name}={value!r}: expected an integer >= 0 (0: no limit)")
    return int(value)


def set_max_tuning_duration(duration: int) -> None:
    """Tuning a miss: at most this many ms of timed runs per candidate's benchmark (0: no limit).
    docs/tunable.md maps it onto Inductor's benchmarker."""
    _S.api.max_tuning_duration_ms = _at_least_zero("duration", duration)


def get_max_tuning_duration() -> int:
    return _S.max_tuning_duration_ms()


def set_max_tuning_iterations(iterations: int) -> None:
    """Tuning a miss: at most this many timed iterations per candidate, where Inductor's benchmarker
    counts iterations (GPU; the CPU one times for a duration). 0: no limit."""
    _S.api.max_tuning_iterations = _at_least_zero("iterations", iterations)


def get_max_tuning_iterations() -> int:
    return _S.max_tuning_iterations()


def _path(name: str, value) -> str:
    """A file name argument checked as the variables' are (``env_values.parse_path``); ValueError names it."""
    from ah_plugin.config.env_values import BadValue, parse_path

    try:
        return parse_path(value if isinstance(value, str) else str(value))
    except BadValue as bad:
        raise ValueError(f"{name}={value!r}: expected {bad.expected}") from None


def set_filename(filename: str, insert_device_ordinal: bool = False) -> None:
    """Results file. `%d` in the name is the device ordinal; `insert_device_ordinal` puts it before
    the extension (`results.csv` -> `results0.csv`) for one-process-per-GPU runs."""
    filename = _path("filename", filename)
    _S.api.filename = _S.insert_ordinal_placeholder(filename) if insert_device_ordinal else filename


def get_filename() -> str:
    """The results file of this process (device ordinal filled in)."""
    return _S.with_ordinal(_S.raw_filename())


def set_untuned_filename(filename: str, insert_device_ordinal: bool = False) -> None:
    filename = _path("filename", filename)
    _S.api.untuned_filename = _S.insert_ordinal_placeholder(filename) if insert_device_ordinal else filename


def get_untuned_filename() -> str:
    return _S.with_ordinal(_S.raw_untuned_filename())


def get_results() -> tuple[tuple[str, str, str, float], ...]:
    """Every result held in memory: (op, params, solution, time_ms), reading the file first if needed."""
    db = _store()
    db.ensure_loaded()
    db.materialize()
    return tuple((e.op, e.params, e.solution, e.time_ms) for _, e in sorted(db.entries.items()))


def get_validators() -> tuple[tuple[str, str], ...]:
    """This process's validators (KEY, VALUE): a file must match them to be used."""
    from .results_file import current_validators

    return tuple(current_validators().items())


def read_file(filename: str | None = None) -> bool:
    """Read a results file and merge its rows in. False when missing or rejected (warned)."""
    return _store().read(filename or get_filename())


def write_file(filename: str | None = None) -> bool:
    """Write every result now (merged with the file on disk, under a lock, atomically)."""
    return _store().write(filename)


def write_file_on_exit(val: bool) -> None:
    """Automatic writes (default on): each new winner appended to the results file when it is recorded,
    and the file compacted at interpreter exit. Off: nothing is written unless `write_file()` is called."""
    _S.api.write_on_exit = bool(val)


def set_numerical_check_tolerances(enable: bool, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    """A candidate whose output differs from aten's beyond atol/rtol is never chosen or recorded."""
    for name, value in (("atol", atol), ("rtol", rtol)):
        if isinstance(value, bool) or _S.tolerance(value) is None:
            raise ValueError(f"{name}={value!r}: expected a finite number >= 0")
    _S.api.numerical_check = (bool(enable), float(atol), float(rtol))


def get_numerical_check_tolerances() -> tuple[bool, float, float]:
    return _S.numerical_check()


def use_heuristic_top1(val: bool = True) -> None:
    """With tuning off, answer a miss with the heuristic's top-1 instead of Default (aten)."""
    _S.api.use_heuristic_top1 = bool(val)


def set_verbose(level: int, filename: str | None = None) -> None:
    """0 silent (warnings only), 1 file reads/writes and a summary, 2 every hit/miss, 3 timings."""
    if not 0 <= int(level) <= 3:
        raise ValueError(f"level={level!r}: expected 0, 1, 2 or 3")
    if filename is not None:
        filename = _path("filename", filename)
    _S.api.verbose = int(level)
    if filename is not None:
        _S.api.verbose_filename = filename


def get_stats() -> dict[str, int]:
    """Counters of this process: hits, wildcard_hits, misses, stale, tuned, defaults, limited, ..."""
    return _store().stats.as_dict()


def tune_gemm_in_file(filename: str) -> int:
    """Tune every shape of an untuned file in this process; returns the number tuned."""
    from .offline import tune_gemm_in_file as run

    return run(filename)


def mgpu_tune_gemm_in_file(filename_pattern: str, num_gpus: int) -> str:
    """Tune the shapes of all untuned files matching the pattern with one process per GPU (or under
    torchrun, one shard per rank); returns the gathered `..._full0.csv` path."""
    from .offline import mgpu_tune_gemm_in_file as run

    return run(filename_pattern, num_gpus)
