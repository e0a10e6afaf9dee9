"""A call made once torch has imported Inductor, so that switching the plugin on costs ``import torch``
nothing.

The plugin's hooks live in Inductor (``ah_plugin.inductor`` imports ``torch._inductor``, seconds of
imports), but ``import torch``, which switches the plugin on, does not import Inductor: torch does at the
first ``torch.compile`` (through ``torch._dynamo``), or a program does (``torch._inductor.config``). So
``call_when_imported`` puts a finder at the front of ``sys.meta_path``. While it waits, it wraps the
loader of each ``torch.*`` module imported from outside torch (the outermost imports: ``torch._dynamo``,
``torch._inductor``) and of the plugin's adapter, which imports Inductor itself (so the call never finds the
adapter half imported); when one of those has finished, with everything it imported, and Inductor is loaded
and complete, the finder takes itself out and makes the call. Nothing of Inductor can run before that: a
compile starts only after the import that brought Inductor in has returned. The call runs in the
importing thread; an exception in it is the caller's to contain (it runs inside the user's import). On a
torch where this cannot work (the contract's ``import_hook`` row: no such modules, a loader without
``exec_module``), the call is made at once, and the adapter's report names the row.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading

from . import contract

# torch's modules, and the plugin's adapter, which imports Inductor itself: a call waits for the outermost
WATCHED = ("torch.", "ah_plugin.inductor.")
INDUCTOR = "torch._inductor"
_COMPANIONS = (INDUCTOR, "torch._dynamo")  # imported into each other: both complete before the call

_lock = threading.Lock()
_depth = threading.local()  # per thread: how many wrapped imports are running


def _running() -> int:
    return getattr(_depth, "value", 0)


def _initializing(name: str) -> bool:
    module = sys.modules.get(name)
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def inductor_ready(finished: str = "") -> bool:
    """Inductor imported, and neither it nor Dynamo still in the middle of their imports (``finished``: a
    module whose code has run to its end, still marked as importing until its loader returns)."""
    return INDUCTOR in sys.modules and not any(_initializing(name) for name in _COMPANIONS if name != finished)


class _Watching(importlib.abc.Loader):
    """The loader of an outermost ``torch.*`` import, wrapped: after it, the finder checks Inductor."""

    def __init__(self, loader, finder: "_InductorFinder"):
        self.loader, self.finder = loader, finder

    def __getattr__(self, name):  # get_source, is_package, get_resource_reader ...: the loader's own
        if name in ("loader", "finder"):
            raise AttributeError(name)
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader  # the module keeps its own loader
        _depth.value = _running() + 1
        try:
            self.loader.exec_module(module)
        finally:
            _depth.value -= 1
        if _running() == 0:
            self.finder.check(module.__name__)


class _InductorFinder(importlib.abc.MetaPathFinder):
    def __init__(self, callback):
        self.callback = callback

    def find_spec(self, name, path=None, target=None):
        if not name.startswith(WATCHED) or _running():
            return None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1:] if self in sys.meta_path else ():
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Watching(spec.loader, self)
        return spec

    def check(self, finished: str) -> None:
        if not inductor_ready(finished):
            return
        with _lock:
            if self not in sys.meta_path:
                return  # called already (another thread), or cancelled
            sys.meta_path.remove(self)
        self.callback()


def call_when_imported(callback) -> None:
    """``callback()`` now when Inductor is imported already, else once torch has imported it. A call
    still waiting is replaced."""
    cancel()
    if inductor_ready() or contract.probe(contract.BY_NAME["import_hook"]) is not None:
        callback()
        return
    with _lock:
        sys.meta_path.insert(0, _InductorFinder(callback))


def waiting() -> bool:
    """A call is waiting for Inductor's import."""
    return any(isinstance(finder, _InductorFinder) for finder in sys.meta_path)


def cancel() -> None:
    """The waiting call, if any, is not made."""
    with _lock:
        sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _InductorFinder)]
