"""Find generated heuristics (Contract 2 artifacts) and pick the one that fits a device and operation.

Artifacts come from two places: the directory the user names (``AH_PLUGIN_ARTIFACT_DIR``) and the
installed package ``ah_plugin.artifacts`` (from a source tree: ``<repo>/artifacts``). Every ``_*.py``
file there that looks like an artifact (and, in the user's directory, lies where no other user can
write: ``artifact_trust``) is executed once per process, by path, on first use; nothing else runs.
A user's file is first tried in a separate process, once per content (``artifact_trial``), so a loop
inside C code, ``os._exit``, a crash or a huge allocation costs that file only. Artifact code runs
through ``artifact_guard``: whatever it raises (``SystemExit`` included) or however long it blocks, the
user's program goes on. A file that fails (refused, a syntax error, an exception, an exit, no artifact class, a
missing or mistyped attribute) is skipped with one warning naming it, so one broken artifact never
breaks a compile; ``LoadedArtifact.rank``/``check_precondition`` raise ``ArtifactError`` naming the
artifact when a call fails or answers nonsense.

Choosing, for one operation on one device (``select``):

1. only artifacts whose ``op_name`` is the operation, whose ``device_names`` (if not empty) contain the
   device's name, and whose ``check_precondition(metadata)`` is true;
2. the user's directory wins over the package (an explicit choice beats a shipped default);
3. within one source, a device-specific artifact (non-empty ``device_names``) beats a generic one;
4. then by file name, so the choice is deterministic.

A user artifact with the same ``heuristic_name`` as a packaged one hides the packaged one entirely.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import artifact_guard, artifact_trial, artifact_trust
from ..report import messages
from .artifact_guard import ArtifactError

log = logging.getLogger(__name__)

#: where artifacts come from, in order of preference
SOURCE_USER = "user"
SOURCE_PACKAGE = "package"

_REQUIRED_ATTRIBUTES = ("heuristic_name", "op_name", "choices", "rank", "check_precondition")


@dataclass(frozen=True)
class LoadedArtifact:
    """One artifact instance, where it came from, and its Contract-2 attributes read once at load
    (plain ``str``/``tuple`` copies: using them runs no artifact code)."""

    heuristic: object = field(compare=False, repr=False)
    path: str
    source: str  # SOURCE_USER or SOURCE_PACKAGE
    name: str = ""
    op_name: str = ""
    device_names: tuple = ()
    choices: tuple = ()
    has_support: bool = False  # it defines ``support(features)`` (artifacts trained before it was written do not)

    @property
    def device_specific(self) -> bool:
        return bool(self.device_names)

    def describe(self) -> str:
        return f"{self.name} ({self.source}: {self.path})"

    def rank(self, features: dict) -> list[tuple[str, float]]:
        """The artifact's ranking as plain ``(choice id, score)`` pairs; ``ArtifactError`` naming it when
        the call fails, exits, hangs, or returns anything else."""
        return self._call("rank", lambda: _plain_ranking(self.heuristic.rank(dict(features))))

    def support(self, features: dict) -> dict | None:
        """The training data behind the input's leaf (``support(features)``, docs/use.md "Support") as a plain
        dict, None when the artifact records none; ``ArtifactError`` naming it when the call fails or answers
        anything else."""
        if not self.has_support:
            return None
        return self._call("support", lambda: _plain_support(self.heuristic.support(dict(features))))

    def check_precondition(self, metadata: dict) -> bool:
        """``check_precondition(metadata)`` as a plain bool; ``ArtifactError`` naming the artifact."""
        return self._call("check_precondition", lambda: _plain_bool(self.heuristic.check_precondition(dict(metadata))))

    def _call(self, method: str, fn):
        what = f"artifact {self.describe()}: {method}()"
        if self.path in _hung:
            raise ArtifactError(f"{what} is not called: it gave no answer in time before")
        try:
            return artifact_guard.run(fn, what, self.path)
        except artifact_guard.ArtifactTimeout:
            _hung.add(self.path)  # one wait per artifact: a hung one is not called again
            raise


_hung: set[str] = set()  # artifacts (paths) that gave no answer in time


def _plain_bool(answer) -> bool:
    """``check_precondition()``'s answer, a real ``bool``: ``"no"`` (true as a string) or ``None`` is refused,
    never guessed at."""
    if type(answer) is not bool:
        raise ArtifactError(f"returned {repr(answer)[:60]} ({type(answer).__name__}), expected True or False")
    return answer


def _finite_score(value) -> float | None:
    """A score as a finite float (an int too large for a float, NaN and +-inf are no scores), else None."""
    if type(value) not in (int, float):
        return None
    try:
        score = float(value)
    except OverflowError:
        return None
    return score if math.isfinite(score) else None


def _plain_ranking(result) -> list[tuple[str, float]]:
    """``rank()``'s answer checked and copied into plain types (runs on the artifact thread: touching the
    answer's items may run artifact code)."""
    if type(result) not in (list, tuple):
        raise ArtifactError(f"returned {type(result).__name__}, expected a list of (choice id, score) pairs")
    out = []
    for index, item in enumerate(result):
        ok = type(item) in (list, tuple) and len(item) == 2 and type(item[0]) is str
        score = _finite_score(item[1]) if ok else None
        if score is None:
            raise ArtifactError(f"returned a ranking whose entry {index} is {repr(item)[:80]}, expected "
                                "(choice id, score): a str and a finite number")
        out.append((item[0], score))
    return out


def _plain_support(answer) -> dict | None:
    """``support()``'s answer checked and copied: None, or the leaf's first choice, inputs and timings (ints
    >= 0), margin (a finite number > 0) and spread (None or a finite number >= 1)."""
    if answer is None:
        return None
    if type(answer) is not dict:
        raise ArtifactError(f"returned {type(answer).__name__}, expected None or a dict of the leaf's support")
    out = {}
    try:
        out["choice"] = answer["choice"]
        out["inputs"], out["timings"] = answer["inputs"], answer["timings"]
        out["margin"] = _finite_score(answer["margin"])
        spread = answer["spread"]
        out["spread"] = None if spread is None else _finite_score(spread)
    except KeyError as missing:
        raise ArtifactError(f"returned a support without {missing}") from None
    if type(out["choice"]) is not str or any(type(out[k]) is not int or out[k] < 0 for k in ("inputs", "timings")) \
            or out["margin"] is None or out["margin"] <= 0 or (spread is not None and (out["spread"] is None or
                                                                                     out["spread"] < 1)):
        raise ArtifactError(f"returned a support of {repr(answer)[:120]}, expected choice (str), inputs and timings "
                            "(ints >= 0), margin (> 0) and spread (None or >= 1)")
    return out


def _plain_attributes(instance) -> dict:
    """The Contract-2 attributes of a fresh artifact instance, checked, as plain values."""
    values = {}
    for attr, kind in (("heuristic_name", "name"), ("op_name", "op_name")):
        value = getattr(instance, attr)
        if type(value) is not str or not value:
            raise ArtifactError(f"has {attr} = {repr(value)[:60]}, expected a non-empty str")
        values[kind] = value
    for attr in ("choices", "device_names"):
        value = getattr(instance, attr, ())
        value = () if value is None else value
        if type(value) not in (list, tuple) or not all(type(v) is str for v in value):
            raise ArtifactError(f"has {attr} = {repr(value)[:60]}, expected a list of str")
        values[attr] = tuple(value)
    for attr in ("rank", "check_precondition"):
        if not callable(getattr(instance, attr)):
            raise ArtifactError(f"has {attr} that is not callable")
    values["has_support"] = callable(getattr(instance, "support", None))
    return values


@dataclass(frozen=True)
class Rejection:
    """Why an artifact was not chosen (for verbose fallback messages)."""

    artifact: str
    reason: str


def package_artifact_dir() -> str | None:
    """The installed ``ah_plugin.artifacts`` directory, else ``<repo>/artifacts`` next to the package.

    Found without importing the artifacts package (its files are executed by path only).
    """
    try:
        spec = importlib.util.find_spec("ah_plugin.artifacts")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            if os.path.isdir(location):
                return str(location)
    beside = Path(__file__).resolve().parents[2] / "artifacts"
    return str(beside) if beside.is_dir() else None


def artifact_dirs(user_dir: str | None = None, package: bool = True) -> tuple[tuple[str, str], ...]:
    """``(source, directory)`` pairs in order of preference. ``user_dir`` None: read the settings.
    ``package`` False leaves the packaged artifacts out (tests, a user who wants only their own)."""
    if user_dir is None:
        user_dir = _user_dir_from_settings()
    dirs = []
    if user_dir:
        dirs.append((SOURCE_USER, os.path.abspath(os.path.expanduser(user_dir))))
    package_dir = package_artifact_dir() if package else None
    if package_dir and all(os.path.abspath(package_dir) != d for _, d in dirs):
        dirs.append((SOURCE_PACKAGE, os.path.abspath(package_dir)))
    return tuple(dirs)


def _user_dir_from_settings() -> str | None:
    from ah_plugin.config import settings

    return settings.current().artifact_dir


# --------------------------------------------------------------------------------------------------
# loading (once per process and directory set)

_lock = threading.Lock()
_loaded: dict[tuple, tuple[LoadedArtifact, ...]] = {}
_files: dict[tuple[str, str], list] = {}  # (real path, source) -> its artifacts: each file executed once
_warned_files: set[str] = set()


def _warn_file(path: str, message: str) -> None:
    if path in _warned_files:
        return
    _warned_files.add(path)
    messages.warn(f"skipping artifact {path}: {message}", RuntimeWarning)


def artifact_files(directory: str) -> list[str]:
    """The files of ``directory`` that are read as artifacts (``_NAME.py``), sorted; none if unreadable."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [
        os.path.join(directory, name)
        for name in names
        if name.startswith("_") and not name.startswith("__") and name.endswith(".py")
    ]


def _module_name(path: str) -> str:
    digest = hashlib.sha1(path.encode()).hexdigest()[:12]
    return f"ah_plugin._loaded_artifact_{Path(path).stem.strip('_')}_{digest}"


def _refusal(path: str, source: str) -> str | None:
    """Why ``path`` is not executed, or None: a user's file in an unsafe place, not an artifact, or one whose
    trial in a separate process did not end well (``artifact_trial``). The packaged artifacts are as trusted
    as the package's own modules, which Python runs from the same place: neither checked nor tried."""
    problem = artifact_trust.unsafe_file(path) if source == SOURCE_USER else None
    if problem:
        return problem
    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    problem = artifact_trust.not_an_artifact(text, path)
    if problem is None and source == SOURCE_USER:
        problem = artifact_trial.verdict(path, text)
    return problem


def _execute(path: str, name: str) -> list:
    """Run on the artifact thread: execute the file, instantiate its artifact classes. Returns
    ``[(instance, attributes) or (class name, problem)]``."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ArtifactError("is not loadable as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    found = []
    for value in list(vars(module).values()):
        if not isinstance(value, type) or value.__module__ != name or not hasattr(value, "rank"):
            continue
        missing = [attr for attr in _REQUIRED_ATTRIBUTES if not hasattr(value, attr)]
        if missing:
            found.append((value.__name__, f"lacks {', '.join(missing)}"))
            continue
        try:
            instance = value()
            found.append((instance, _plain_attributes(instance)))
        except BaseException as exc:  # noqa: B036 - on the artifact thread, where even an exit is contained
            found.append((value.__name__, artifact_guard.describe(exc, path)))
    return found


def _load_file(path: str, source: str) -> list[LoadedArtifact]:
    """Execute one artifact file (guarded) once per process, however many folder settings name it (a
    relative and an absolute path, the folder alone and with the package's); return instances of the
    Contract-2 classes it defines."""
    key = (os.path.realpath(path), source)
    if key not in _files:
        _files[key] = _execute_file(path, source)
    return _files[key]


def _execute_file(path: str, source: str) -> list[LoadedArtifact]:
    refused = _refusal(path, source)
    if refused:
        _warn_file(path, refused)
        return []
    name = _module_name(path)
    start = time.perf_counter()
    try:
        results = artifact_guard.run(lambda: _execute(path, name), "executing it", path, importing=True)
    except ArtifactError as exc:  # SyntaxError, an exception, an exit, a hang: never the compile's problem
        sys.modules.pop(name, None)
        _warn_file(path, str(exc))
        return []
    log.debug("loaded %s in %.1f ms", path, 1000 * (time.perf_counter() - start))
    found = [LoadedArtifact(item, path, source, **attrs) for item, attrs in results if isinstance(attrs, dict)]
    problems = [f"class {item}: {attrs}" for item, attrs in results if not isinstance(attrs, dict)]
    if problems:
        _warn_file(path, "; ".join(problems))
    elif not found:
        _warn_file(path, "defines no artifact class (Contract 2: heuristic_name, op_name, rank, ...)")
    return found


def _refused_folder(directory: str) -> bool:
    """True (warned once) when the folder itself may not hold code."""
    problem = artifact_trust.unsafe_folder(directory)
    if problem and artifact_files(directory) and directory not in _warned_files:
        _warned_files.add(directory)
        messages.warn(f"skipping every artifact in {directory}: {problem}", RuntimeWarning)
    return bool(problem)


def load_artifacts(dirs: tuple[tuple[str, str], ...] | None = None) -> tuple[LoadedArtifact, ...]:
    """Every loadable artifact of ``dirs`` (default: ``artifact_dirs()``), user ones first.

    Cached per directory set: files are executed at most once per process.
    """
    if dirs is None:
        dirs = artifact_dirs()
    cached = _loaded.get(dirs)
    if cached is not None:
        return cached
    with _lock:
        cached = _loaded.get(dirs)
        if cached is not None:
            return cached
        artifacts: list[LoadedArtifact] = []
        names_seen: set[str] = set()
        for source, directory in dirs:
            from_this_dir = []
            if source == SOURCE_USER and not os.path.isdir(directory) and directory not in _warned_files:
                _warned_files.add(directory)  # a mistyped AH_PLUGIN_ARTIFACT_DIR must not do nothing silently
                messages.warn(f"the artifact folder {directory} is not a folder; only the packaged artifacts are "
                              "used", RuntimeWarning)
            if source == SOURCE_USER and _refused_folder(directory):
                continue
            for path in artifact_files(directory):
                for artifact in _load_file(path, source):
                    if artifact.name not in names_seen:  # else hidden by a user artifact of that name
                        from_this_dir.append(artifact)
            artifacts.extend(from_this_dir)
            names_seen.update(artifact.name for artifact in from_this_dir)
        result = tuple(artifacts)
        _loaded[dirs] = result
        return result


def clear_cache() -> None:
    """Forget loaded artifacts and warnings (tests; a user who rewrote the directory in-process)."""
    with _lock:
        _loaded.clear()
        _files.clear()
        _warned_files.clear()
        _hung.clear()


# --------------------------------------------------------------------------------------------------
# choosing


def _order_key(artifact: LoadedArtifact) -> tuple:
    return (artifact.source != SOURCE_USER, not artifact.device_specific, artifact.path, artifact.name)


def candidates_for(
    op_name: str, metadata: dict, artifacts: tuple[LoadedArtifact, ...]
) -> tuple[list[LoadedArtifact], list[Rejection]]:
    """Artifacts that fit ``op_name`` on the device described by ``metadata``, best first, and why the
    others do not fit (an artifact whose precondition raises is rejected, with a warning)."""
    meta = dict(metadata)
    meta.setdefault("name", op_name)
    device_name = meta.get("device_name")
    fitting, rejected = [], []
    for artifact in artifacts:
        if artifact.op_name != op_name:
            continue
        if artifact.device_specific and device_name not in artifact.device_names:
            rejected.append(Rejection(artifact.describe(), f"for devices {list(artifact.device_names)}"))
            continue
        try:
            fits = artifact.check_precondition(meta)
        except ArtifactError as exc:
            _warn_file(artifact.path, str(exc))
            rejected.append(Rejection(artifact.describe(), str(exc)))
            continue
        if not fits:
            rejected.append(Rejection(artifact.describe(), "precondition false for this device"))
            continue
        fitting.append(artifact)
    fitting.sort(key=_order_key)
    return fitting, rejected


def select(op_name: str, metadata: dict, dirs=None) -> LoadedArtifact | None:
    """The artifact to use for ``op_name`` on this device, or None."""
    fitting, _ = candidates_for(op_name, metadata, load_artifacts(dirs))
    return fitting[0] if fitting else None


__all__ = [
    "ArtifactError",
    "LoadedArtifact",
    "Rejection",
    "SOURCE_USER",
    "SOURCE_PACKAGE",
    "artifact_dirs",
    "package_artifact_dir",
    "load_artifacts",
    "candidates_for",
    "select",
    "clear_cache",
]
