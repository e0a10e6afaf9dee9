"""``ChoicePolicy``: the one class a decider subclasses, in the form of Inductor's ``InductorChoices``.

Every point where the adapter asks a policy is a method here with a default that has no opinion, and a
short contract: when it is called and what its answer may change. A policy overrides the methods it needs;
the adapter calls every method of every registered policy (``chain.PolicyChain``), never probing for one.
Policies see plain data only (``AutotuneRequest``), so they can be tested without Inductor and survive its
refactors. Every call is guarded by the chain: a policy that raises warns once and counts as no opinion.
"""

from __future__ import annotations

from .request import AutotuneRequest


class ChoicePolicy:
    """A part that narrows autotuning (the results cache, a ranking) or learns from it (the collector).

    Attributes a subclass may set: ``op_names`` (the operations it is asked about; None: every one),
    ``description`` (how the plugin's lines name it; None: its class name), ``says_decisions`` (True when
    it says each decision itself, so the adapter adds no verbose line of its own)."""

    op_names: frozenset | None = None
    description: str | None = None
    says_decisions: bool = False

    def select(self, request: AutotuneRequest) -> list[str] | None:
        """Before benchmarking: the candidate ids to keep (a subset of ``request.candidates``, any order), or
        None for no opinion. The first policy whose answer keeps an existing candidate decides."""
        return None

    def numerical_check(self, request: AutotuneRequest) -> tuple[float, float] | None:
        """(atol, rtol) to check every candidate's output against aten's before benchmarking; None: no check.
        The strictest tolerances asked for apply."""
        return None

    def on_numerical_check(self, request: AutotuneRequest, rejected: list[str], timings: dict[str, float]) -> None:
        """After a check this policy asked for: the ids dropped, and each candidate's time (ms) in the check."""
        return None

    def benchmark_limits(self, request: AutotuneRequest) -> dict | None:
        """``{"duration_ms": int, "iterations": int}`` caps on each candidate's benchmark; None: Inductor's own.
        The strictest limits asked for apply."""
        return None

    def on_timings(self, request: AutotuneRequest, timings: dict[str, float], untimed: list[str]) -> None:
        """After benchmarking: every timed candidate (ms), and the ids that got no time (failed or not run)."""
        return None

    def padding_decision(self, request: AutotuneRequest) -> bool | None:
        """In the pad_mm pass: a recorded decision for this input (op ``pad_mm``/``pad_addmm``/``pad_bmm``,
        ``request.tensors`` the unpadded operands); None lets the pass decide. The first answer decides."""
        return None

    def padding_opinion(self, unpadded: AutotuneRequest, padded: AutotuneRequest) -> bool | None:
        """In the pad_mm pass, nothing recorded: whether to pad an mm/addmm, from the GEMM as it is and as the
        pass would pad it (no candidates yet); None lets the pass benchmark. The first answer decides."""
        return None

    def on_padding_decision(self, request: AutotuneRequest, pad: bool, time_ms: float) -> None:
        """The pass benchmarked padding for this input and decided ``pad`` (``time_ms``: the kept variant's)."""
        return None

    def ranks(self, op_name: str, metadata: dict) -> bool:
        """Whether this policy ranks ``op_name`` on the device ``metadata`` describes (decides, before a
        lowering, whether it may be autotuned at all)."""
        return False

    def cache_key(self) -> str | None:
        """This policy's part of the compiled-graph cache key: what must recompile when it changes; None:
        its class name is enough."""
        return None
