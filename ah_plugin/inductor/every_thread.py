"""Config values that every thread reads, not only the one that assigned them.

Inductor's and functorch's config modules keep an assignment (``config.name = value``) per thread: a thread
that assigned nothing reads the entry's default. A training step's backward is compiled lazily in
autograd's device thread, so a setting the plugin or a tool made in the user's thread (the plugin's choices
class before torch 2.15, the evaluation's caches off) did not reach that compile. ``assign`` sets the value
in the calling thread and as the entry's default; options passed to ``torch.compile`` reach every thread
through Inductor's own patching and need none of this. Checked on torch 2.13, 2.14 and 2.15 (an entry's
``default``, read wherever the thread has no value of its own).
"""

from __future__ import annotations

NO_ENTRY = object()  # what ``assign`` returns where this torch keeps no per-entry default


def entry(module, name: str):
    """The config ``module``'s entry for ``name`` (None where this torch keeps no such entry)."""
    found = getattr(module, "_config", {}).get(name)
    return found if hasattr(found, "default") else None


def assign(module, name: str, value) -> object:
    """``module.name = value`` in this thread and for every thread without a value of its own; the entry's
    previous default (``NO_ENTRY`` where there is none: the value then holds in this thread only). Another
    thread reads the new default at once; the values it hashes into a cache key, which Inductor keeps per
    thread, follow from that thread's next assignment to the module on (a thread started later: always)."""
    setattr(module, name, value)
    found = entry(module, name)
    if found is None:
        return NO_ENTRY
    previous, found.default = found.default, value
    return previous


def restore_default(module, name: str, previous) -> None:
    """The entry's default back to what ``assign`` returned."""
    found = entry(module, name)
    if found is not None and previous is not NO_ENTRY:
        found.default = previous
