"""Find generated heuristics (Contract 2 artifacts) and pick the one that fits a device and operation.

Artifacts come from two places: the directory the user names (``AH_PLUGIN_ARTIFACT_DIR``) and the
installed package ``ah_plugin.artifacts`` (from a source tree: ``<repo>/artifacts``). Every ``_*.py``
file there is executed once per process, by path, on first use; nothing else runs. A file that fails
(syntax error, an exception, no artifact class, a missing attribute) is skipped with one warning naming
it, so one broken artifact never breaks a compile.

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
import os
import sys
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

#: where artifacts come from, in order of preference
SOURCE_USER = "user"
SOURCE_PACKAGE = "package"

_REQUIRED_ATTRIBUTES = ("heuristic_name", "op_name", "choices", "rank", "check_precondition")


@dataclass(frozen=True)
class LoadedArtifact:
    """One artifact instance and where it came from."""

    heuristic: object = field(compare=False)
    path: str
    source: str  # SOURCE_USER or SOURCE_PACKAGE

    @property
    def name(self) -> str:
        return str(self.heuristic.heuristic_name)

    @property
    def op_name(self) -> str:
        return str(self.heuristic.op_name)

    @property
    def device_names(self) -> tuple:
        return tuple(getattr(self.heuristic, "device_names", ()) or ())

    @property
    def device_specific(self) -> bool:
        return bool(self.device_names)

    @property
    def choices(self) -> list:
        return list(self.heuristic.choices)

    def describe(self) -> str:
        return f"{self.name} ({self.source}: {self.path})"


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
    beside = Path(__file__).resolve().parent.parent / "artifacts"
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
    try:
        from ah_plugin import settings

        return settings.current().artifact_dir
    except Exception:  # a bad unrelated variable must not hide the user's artifacts
        value = os.environ.get("AH_PLUGIN_ARTIFACT_DIR", "").strip()
        return value or None


# --------------------------------------------------------------------------------------------------
# loading (once per process and directory set)

_lock = threading.Lock()
_loaded: dict[tuple, tuple[LoadedArtifact, ...]] = {}
_warned_files: set[str] = set()


def _warn_file(path: str, message: str) -> None:
    if path in _warned_files:
        return
    _warned_files.add(path)
    warnings.warn(f"ah_plugin: skipping artifact {path}: {message}", RuntimeWarning, stacklevel=3)


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


def _load_file(path: str, source: str) -> list[LoadedArtifact]:
    """Execute one artifact file; return instances of the Contract-2 classes it defines."""
    name = _module_name(path)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            _warn_file(path, "not loadable as a Python module")
            return []
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except Exception as exc:  # SyntaxError included: a broken file must not break the compile
        sys.modules.pop(name, None)
        _warn_file(path, f"{type(exc).__name__}: {exc}")
        return []
    found = []
    problems = []
    for value in vars(module).values():
        if not isinstance(value, type) or value.__module__ != name:
            continue
        if not hasattr(value, "rank"):
            continue
        missing = [attr for attr in _REQUIRED_ATTRIBUTES if not hasattr(value, attr)]
        if missing:
            problems.append(f"class {value.__name__} lacks {', '.join(missing)}")
            continue
        try:
            found.append(LoadedArtifact(value(), path, source))
        except Exception as exc:
            problems.append(f"class {value.__name__} raised {type(exc).__name__}: {exc}")
    if problems:
        _warn_file(path, "; ".join(problems))
    elif not found:
        _warn_file(path, "defines no artifact class (Contract 2: heuristic_name, op_name, rank, ...)")
    return found


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
        _warned_files.clear()


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
            fits = bool(artifact.heuristic.check_precondition(meta))
        except Exception as exc:
            _warn_file(artifact.path, f"check_precondition raised {type(exc).__name__}: {exc}")
            rejected.append(Rejection(artifact.describe(), f"check_precondition raised {exc!r}"))
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
