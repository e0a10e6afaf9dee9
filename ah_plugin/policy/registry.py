"""The policies the Inductor adapter asks, in order, and the guard around every call into them.

No Inductor code lives here: a policy (``ah_plugin.policy.ChoicePolicy``) registers with a position,
and the adapter (``ah_plugin.inductor``) asks ``policies_for(op)`` at each autotuning. Every call into a
policy goes through ``call_policy``, which contains whatever the policy raises (``SystemExit`` from
artifact code included; only a user's ``KeyboardInterrupt`` passes), warns once and lets the
autotuning go on as if that policy had no opinion.

Messages: verbose ones go through ``verbose_output.say`` on this package's logger (``AH_PLUGIN_VERBOSE=1``);
``warn_once`` is for the few user-facing warnings that must be seen even without it, once per process
(``messages.warn``: shown at the user's line).
"""

from __future__ import annotations

import logging
import threading

from ..config import settings
from ..report.messages import warn
from ..report.verbose_output import say

log = logging.getLogger("ah_plugin")

POSITION_CACHE = 0  # exact-shape results cache: a hit keeps one choice
POSITION_HEURISTIC = 100  # learned ranking
POSITION_COLLECTOR = 200  # learns only (select returns None)

FAILED = object()  # what ``call_policy`` returns when the policy raised (already warned)

_policies: list[tuple[int, int, object]] = []  # (position, registration number, policy)
_lock = threading.Lock()
_counter = [0]
_warned: set = set()


def warn_once(key, message: str) -> None:
    """A user-facing warning, once per key per process (errors inside compile must be visible, not noisy)."""
    if key in _warned:
        return
    _warned.add(key)
    warn(message, RuntimeWarning)


def _verbose_enabled() -> bool:
    try:
        return settings.current().verbose
    except Exception:  # a bad unrelated variable must not make messages raise
        return False


def verbose(message: str) -> None:
    """A verbose message (``AH_PLUGIN_VERBOSE=1``) on the plugin's one channel (``verbose_output.say``)."""
    if _verbose_enabled():
        say(log, message)


def policy_name(policy) -> str:
    return type(policy).__qualname__


def policy_words(policy) -> str:
    """The policy as a user knows it: its ``description`` (``the results cache``), else its class name."""
    return getattr(policy, "description", None) or policy_name(policy)


def call_policy(policy, method: str, *args):
    """``policy.<method>(*args)``; ``FAILED`` when it raises (warned once per policy and method).

    Policies run artifact code (generated Python from a folder the user named), so anything short of
    the user's own Ctrl-C is contained here: a ``SystemExit`` from an artifact must not end the program.
    """
    try:
        return getattr(policy, method)(*args)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: B036 - artifact code may raise SystemExit; see the docstring
        # the type and the message, not repr(): an OSError's repr leaves out the path it failed on
        warn_once((method, policy_name(policy)),
                  f"policy {policy_name(policy)}.{method} raised {type(exc).__name__}: {exc}; ignoring it")
        return FAILED


def register_policy(policy, position: int = POSITION_HEURISTIC):
    """Add ``policy``; lower positions are asked first. Registering it again moves it. Returns the policy.
    The adapter asks the registered policies once its hooks are in (``ah_plugin.register_policy`` does both).

    A policy may carry ``op_names`` (or ``ops``): it is then asked only for those ops (None: all)."""
    with _lock:
        _policies[:] = [entry for entry in _policies if entry[2] is not policy]
        _counter[0] += 1
        _policies.append((int(position), _counter[0], policy))
        _policies.sort(key=lambda entry: (entry[0], entry[1]))
    return policy


def unregister_policy(policy) -> bool:
    """Remove ``policy``; True when it was registered."""
    with _lock:
        before = len(_policies)
        _policies[:] = [entry for entry in _policies if entry[2] is not policy]
        return len(_policies) != before


def registered_policies() -> list:
    """Policies in the order they are asked."""
    with _lock:
        return [entry[2] for entry in _policies]


def policies_for(op_name: str) -> list:
    """The registered policies that act on ``op_name``, in order."""
    out = []
    for policy in registered_policies():
        names = getattr(policy, "op_names", None)
        if names is None:
            names = getattr(policy, "ops", None)
        if names is not None and op_name not in names:
            continue
        out.append(policy)
    return out


def policy_key(policy) -> str:
    """The policy's part of the FX-graph cache key: its name, plus its own ``cache_key()`` when it has
    one (the results cache: a new winner or an edited row must recompile, not reuse an old kernel)."""
    if getattr(policy, "cache_key", None) is None:
        return policy_name(policy)
    key = call_policy(policy, "cache_key")
    return f"{policy_name(policy)}[{'?' if key is FAILED else key}]"
