"""Config values that every thread reads, not only the one that assigned them.

Inductor's and functorch's config modules keep an assignment (``config.name = value``) per thread: a thread
that assigned nothing reads the entry's default. A training step's backward is compiled lazily in
autograd's device thread, so a setting the plugin or a tool made in the user's thread (the plugin's choices
class before torch 2.15, the evaluation's caches off) did not reach that compile. ``assign`` sets the value
in the calling thread and as the entry's default, and has every thread hash the config afresh (each keeps
its own copy of the values it hashes for a cache key; autograd's device thread lives as long as the
process). Options passed to ``torch.compile`` reach every thread through Inductor's own patching and need
none of this. A value from an ``env_name_default`` variable (e.g. ``TORCHINDUCTOR_FX_GRAPH_CACHE_DEFAULT``)
outranks the default: other threads keep it. Checked on torch 2.13, 2.14 and 2.15.
"""

from __future__ import annotations

import contextvars
import copy

NO_ENTRY = object()  # what ``assign`` returns where this torch keeps no per-entry default
# the config module's per-thread copies of what it hashes and exports (torch.utils._config_module)
_THREAD_CACHES = ("_hash_dirty_var", "_hash_cache_var", "_get_dict_dirty_keys_var", "_get_dict_cache_var")


def entry(module, name: str):
    """The config ``module``'s entry for ``name`` (None where this torch keeps no such entry, or where the
    entry reads another one: an alias)."""
    found = getattr(module, "_config", {}).get(name)
    if not hasattr(found, "default") or getattr(found, "alias", None) is not None:
        return None
    return found


def assign(module, name: str, value) -> object:
    """``module.name = value`` in this thread and for every thread without a value of its own; the entry's
    previous default (``NO_ENTRY`` where there is none: the value then holds in this thread only). The
    default is a copy of a mutable ``value``, so a change to it in one thread stays there."""
    setattr(module, name, value)
    found = entry(module, name)
    if found is None:
        return NO_ENTRY
    previous, found.default = found.default, copy.deepcopy(value)
    _forget_thread_caches(module)
    return previous


def restore_default(module, name: str, previous) -> None:
    """The entry's default back to what ``assign`` returned. A thread that read a mutable default keeps its
    own copy (the config module copies it on the first read), so this reaches the threads that did not."""
    found = entry(module, name)
    if found is not None and previous is not NO_ENTRY:
        found.default = previous
        _forget_thread_caches(module)


def _forget_thread_caches(module) -> None:
    """Every thread hashes ``module`` afresh: its per-thread caches are replaced by new, empty ones (each
    with its old default)."""
    for attribute in _THREAD_CACHES:
        old = getattr(module, attribute, None)
        if not isinstance(old, contextvars.ContextVar):
            continue
        try:
            initial = contextvars.Context().run(old.get)  # its default, as a thread that never set it reads
        except LookupError:
            setattr(module, attribute, contextvars.ContextVar(old.name))
        else:
            setattr(module, attribute, contextvars.ContextVar(old.name, default=initial))
