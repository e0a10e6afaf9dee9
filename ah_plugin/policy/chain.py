"""``PolicyChain``: the policies that act on one operation, asked in their order, every call guarded.

"Ask the policies in order; the first answer wins" is written here once, and so is the guard: whatever a
policy raises (``SystemExit`` from artifact code included; only a user's ``KeyboardInterrupt`` passes) warns
once per policy and method, and that policy counts as having no opinion. The adapter builds a chain per
autotuning (``for_op``) and asks it; no Inductor code lives here.
"""

from __future__ import annotations

from ..report import decision_words
from ..report.messages import warn_once
from ..report.verbose_output import verbose
from . import registry
from .base import ChoicePolicy
from .request import AutotuneRequest

_NO_OPINION = object()  # a guarded call whose policy raised (already warned)


def policy_name(policy: ChoicePolicy) -> str:
    return type(policy).__qualname__


def policy_words(policy: ChoicePolicy) -> str:
    """The policy as a user knows it: its ``description`` (``the results cache``), else its class name."""
    return policy.description or policy_name(policy)


def guarded(policy: ChoicePolicy, method: str, ask):
    """``ask(policy)``, or ``_NO_OPINION`` when it raises (warned once per policy and ``method``).

    Policies run artifact code (generated Python from a folder the user named), so anything short of the
    user's own Ctrl-C is contained: a ``SystemExit`` from an artifact must not end the program."""
    try:
        return ask(policy)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: B036 - artifact code may raise SystemExit; see the docstring
        # the type and the message, not repr(): an OSError's repr leaves out the path it failed on
        warn_once((method, policy_name(policy)),
                  f"policy {policy_name(policy)}.{method} raised {type(exc).__name__}: {exc}; ignoring it")
        return _NO_OPINION


class PolicyChain:
    """The policies asked about one operation, in order (``registry.policies_for``)."""

    def __init__(self, policies):
        self.policies = tuple(policies)

    @classmethod
    def for_op(cls, op_name: str) -> "PolicyChain":
        return cls(registry.policies_for(op_name))

    @classmethod
    def registered(cls) -> "PolicyChain":
        return cls(registry.registered_policies())

    def __bool__(self) -> bool:
        return bool(self.policies)

    def _answers(self, method: str, ask):
        """(policy, answer) of each policy with an opinion, in order."""
        for policy in self.policies:
            answer = guarded(policy, method, ask)
            if answer is not None and answer is not _NO_OPINION:
                yield policy, answer

    def _first(self, method: str, ask):
        """The first opinion, or None."""
        for _, answer in self._answers(method, ask):
            return answer
        return None

    def tell(self, method: str, tell) -> None:
        """``tell(policy)`` for every policy (a report: answers are ignored)."""
        for policy in self.policies:
            guarded(policy, method, tell)

    # -- the questions ------------------------------------------------------------------------------

    def select(self, request: AutotuneRequest) -> list[str] | None:
        """The first answer that keeps at least one existing candidate (said at verbose); None: keep all."""
        existing = set(request.candidates)
        for policy, answer in self._answers("select", lambda p: p.select(request)):
            keep = [cid for cid in answer if cid in existing]
            if not keep:
                warn_once(("empty", policy_name(policy)),
                          f"ah_plugin: policy {policy_name(policy)} kept no existing choice; ignoring it")
                continue
            if not policy.says_decisions:  # the learned ranking says its own, with its reason
                verbose(f"{decision_words.gemm(request)}: {policy_words(policy)} "
                        f"{decision_words.kept(keep, request.candidates)}")
            return keep
        return None

    def tolerances(self, request: AutotuneRequest) -> tuple[list, float, float] | None:
        """(the policies asking, atol, rtol) of the numerical check: the strictest asked for; None: none asks."""
        asked = list(self._answers("numerical_check", lambda p: p.numerical_check(request)))
        if not asked:
            return None
        return ([policy for policy, _ in asked], min(float(a[0]) for _, a in asked),
                min(float(a[1]) for _, a in asked))

    def limits(self, request: AutotuneRequest) -> dict | None:
        """The strictest benchmark limits asked for (``duration_ms``, ``iterations``; a value of 0 is no limit);
        None when none asks, ``{}`` when one asks with no limit (the timings must still be its own)."""
        limits: dict | None = None
        for _, answer in self._answers("benchmark_limits", lambda p: p.benchmark_limits(request)):
            limits = {} if limits is None else limits
            for key in ("duration_ms", "iterations"):
                value = answer.get(key)
                if value is not None and int(value) > 0:
                    limits[key] = min(int(value), limits.get(key, int(value)))
        return limits

    def padding_decision(self, request: AutotuneRequest) -> bool | None:
        answer = self._first("padding_decision", lambda p: p.padding_decision(request))
        return None if answer is None else bool(answer)

    def padding_opinion(self, unpadded: AutotuneRequest, padded: AutotuneRequest) -> bool | None:
        answer = self._first("padding_opinion", lambda p: p.padding_opinion(unpadded, padded))
        return None if answer is None else bool(answer)

    def ranks(self, op_name: str, metadata: dict) -> bool:
        """Whether any policy ranks ``op_name`` on this device."""
        return self._first("ranks", lambda p: p.ranks(op_name, metadata) or None) is not None

    def cache_key(self) -> str:
        """Every policy's part of the FX-graph cache key: its name, and its own ``cache_key()`` when it has one
        (the results cache: a new winner or an edited row must recompile, not reuse an old kernel)."""
        parts = []
        for policy in self.policies:
            key = guarded(policy, "cache_key", lambda p: p.cache_key())
            if key is None:
                parts.append(policy_name(policy))
            else:
                parts.append(f"{policy_name(policy)}[{'?' if key is _NO_OPINION else key}]")
        return ",".join(parts)
