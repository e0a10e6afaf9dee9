"""The registered policies, in the order the adapter asks them.

No Inductor code lives here: a policy (``ah_plugin.policy.ChoicePolicy``) registers with a position, and the
adapter (``ah_plugin.inductor``) asks the chain of ``policies_for(op)`` at each autotuning
(``chain.PolicyChain``, which guards every call).
"""

from __future__ import annotations

import threading

from .base import ChoicePolicy

POSITION_CACHE = 0  # exact-shape results cache: a hit keeps one choice
POSITION_HEURISTIC = 100  # learned ranking
POSITION_COLLECTOR = 200  # learns only (select returns None)

_policies: list[tuple[int, int, ChoicePolicy]] = []  # (position, registration number, policy)
_lock = threading.Lock()
_counter = [0]


def register_policy(policy: ChoicePolicy, position: int = POSITION_HEURISTIC) -> ChoicePolicy:
    """Add ``policy``; lower positions are asked first. Registering it again moves it. Returns the policy.
    The adapter asks the registered policies once its hooks are in (``ah_plugin.register_policy`` does both).
    A policy's ``op_names`` (None: every op) say which ops it is asked about."""
    if not isinstance(policy, ChoicePolicy):
        raise TypeError(f"{type(policy).__qualname__} is not a subclass of ah_plugin.policy.ChoicePolicy")
    with _lock:
        _policies[:] = [entry for entry in _policies if entry[2] is not policy]
        _counter[0] += 1
        _policies.append((int(position), _counter[0], policy))
        _policies.sort(key=lambda entry: (entry[0], entry[1]))
    return policy


def unregister_policy(policy: ChoicePolicy) -> bool:
    """Remove ``policy``; True when it was registered."""
    with _lock:
        before = len(_policies)
        _policies[:] = [entry for entry in _policies if entry[2] is not policy]
        return len(_policies) != before


def registered_policies() -> list[ChoicePolicy]:
    """Policies in the order they are asked."""
    with _lock:
        return [entry[2] for entry in _policies]


def policies_for(op_name: str) -> list[ChoicePolicy]:
    """The registered policies that act on ``op_name``, in order."""
    out = []
    for policy in registered_policies():
        names = policy.op_names
        if names is None or op_name in names:
            out.append(policy)
    return out
