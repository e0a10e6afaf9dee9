"""The results cache as a `ChoicePolicy` (ah_plugin.policy): first among the policies.

- hit (exact, else the most specific wildcard entry) whose solution is among today's candidates:
  keep exactly that one, so Inductor benchmarks nothing. `Default` means the aten candidate.
- a recorded solution that is not among the candidates (whatever its time, 0 included): a miss, warned
  once per entry; with tuning on the shape is tuned and its winner replaces that row on disk, so it is
  re-tuned once, not on every run.
- miss with tuning on: no opinion (Inductor autotunes, pruned by the heuristic when USE is on; each
  candidate's benchmark bounded by `benchmark_limits`: max tuning duration/iterations), and
  `on_timings` records the fastest candidate that passed the numerical check (with the check on,
  `numerical_check` asks the hook to run the candidates first, and `on_numerical_check` excludes
  those that differ from aten).
- miss with tuning off: the aten candidate (or the heuristic's top-1 when asked), and the shape goes
  to the untuned file when record-untuned is on.
"""

from __future__ import annotations

import math

from ah_plugin.use import aten_margin
from ah_plugin.report import messages
from ah_plugin.policy import AutotuneRequest, ChoicePolicy

from . import params as P
from . import results_file as F
from . import settings as S
from .store import store, verbose


def aten_candidate(candidates: list[str]) -> str | None:
    """The aten (extern) choice among the candidates: `extern_mm`, `extern__mkl_linear`, ..."""
    for cid in candidates:
        if cid.startswith("extern_"):
            return cid
    return None


def heuristic_top1(request: AutotuneRequest) -> str | None:
    """The USE heuristic's best-ranked candidate, or None when no artifact fits or it fails (warned once,
    naming the artifact: artifact code runs guarded, so nothing it does reaches the compile)."""
    from ah_plugin.use import artifact_loader, ranking

    artifact = ranking.default_policy().artifact_for(request.op_name, request.metadata)
    if artifact is None:
        return None
    try:
        ranked = artifact.rank(request.features)
    except artifact_loader.ArtifactError as error:
        store().warn_once(("top1", artifact.path), f"heuristic top-1 unavailable: {error}")
        return None
    today = set(request.candidates)
    return next((cid for cid, _ in ranked if cid in today), None)


def request_key(request: AutotuneRequest) -> "P.GemmParams | P.flex_params.FlexParams | None":
    return P.from_request(request.op_name, request.features, request.tensors, request.context)


class TunableCachePolicy(ChoicePolicy):
    """Stateless front of the process-wide `ResultsStore`."""

    name = "tunable"
    description = "the results cache"  # in the plugin's verbose lines

    def cache_key(self) -> str:
        """What Inductor's FX-graph cache key must include so that a changed results file (an edited
        `Default`, a new winner) or a changed switch recompiles instead of reusing an old kernel."""
        if not S.is_enabled():
            return "tunable=off"
        db = store()
        db.ensure_loaded()
        return f"tunable=on;tuning={int(S.tuning_is_enabled())};top1={int(S.use_heuristic_top1())};results={db.digest()}"

    @staticmethod
    def _lookup(request: AutotuneRequest):
        """(key, entry or None, wildcard) of this autotuning in the loaded results; None when the cache is
        off or the operation has no key."""
        if not S.is_enabled():
            return None
        key = request_key(request)
        if key is None:
            return None
        db = store()
        db.ensure_loaded()
        entry, wildcard = db.lookup(request.op_name, key)
        return key, entry, wildcard

    def select(self, request: AutotuneRequest) -> list[str] | None:
        if len(request.candidates) < 2:
            # nothing to choose: not a hit, a miss or a stale row. A CPU bmm or addmm is asked first with aten
            # alone (its C++ template is added later) and again with every candidate, where its row is looked up
            return None
        found = self._lookup(request)
        if found is None:
            return None
        key, entry, wildcard = found
        db = store()
        if entry is not None:
            chosen = self._resolve(entry, request)
            if chosen is not None:
                db.stats.hits += 1
                db.stats.wildcard_hits += int(wildcard)
                verbose(
                    2,
                    f"hit {request.op_name},{key.encode()} -> {chosen}"
                    + (f" (wildcard {entry.params} at {entry.source or 'memory'})" if wildcard else ""),
                )
                return [chosen]
        db.stats.misses += 1
        if S.tuning_is_enabled():
            verbose(2, f"miss {request.op_name},{key.encode()}: tuning {len(request.candidates)} candidates")
            db.awaiting_timings(request.op_name, key.encode())
            excluded = db.excluded.get((request.op_name, key.encode()))
            if excluded:
                kept = [c for c in request.candidates if c not in excluded]
                return kept or None
            return None
        if S.record_untuned_is_enabled() and request.op_name not in P.FLEX_OPS:  # flex: no offline tuning
            db.record_untuned(request.op_name, key.encode())
        # a flex miss keeps Inductor's configs: the heuristic's first alone would be one config never timed
        top1 = S.use_heuristic_top1() and request.op_name not in P.FLEX_OPS
        chosen = heuristic_top1(request) if top1 else None
        chosen = chosen or aten_candidate(request.candidates)
        verbose(2, f"miss {request.op_name},{key.encode()} with tuning off -> {chosen or 'the candidates as offered'}")
        if chosen is None:
            return None
        db.stats.defaults += 1
        return [chosen]

    def _resolve(self, entry: F.Entry, request: AutotuneRequest) -> str | None:
        if entry.solution == F.DEFAULT_SOLUTION:
            return aten_candidate(request.candidates)
        if entry.solution in request.candidates:
            return entry.solution
        db = store()
        db.stats.stale += 1
        db.warn_once(
            ("stale", entry.op, entry.params, entry.solution),
            f"{entry.source or 'results'}: solution {messages.quoted(entry.solution)} for {entry.op},{entry.params} is not "
            f"among today's {len(request.candidates)} candidates; treated as a miss (with tuning on, the new "
            "winner replaces the row)",
        )
        return None

    def _tuning_miss(self, request: AutotuneRequest) -> P.GemmParams | None:
        """The key when this autotuning misses the cache and is tuned (cache and tuning on); else None."""
        found = self._lookup(request) if S.tuning_is_enabled() else None
        if found is None:
            return None
        key, entry, _ = found
        if entry is not None and (entry.solution == F.DEFAULT_SOLUTION or entry.solution in request.candidates):
            return None  # a hit: the recorded choice is compiled, nothing is compared or timed
        return key

    def numerical_check(self, request: AutotuneRequest) -> tuple[float, float] | None:
        """(atol, rtol) when this autotuning is a miss to be tuned with the numerical check on: the hook
        then runs every candidate once and drops those that differ from aten. None otherwise."""
        check, atol, rtol = S.numerical_check()
        if not check or self._tuning_miss(request) is None:
            return None
        return atol, rtol

    def benchmark_limits(self, request: AutotuneRequest) -> dict[str, int] | None:
        """TunableOp's max tuning duration/iterations, for a miss being tuned only: the hook caps each
        candidate's benchmark with them (docs/tunable.md has the mapping), and keys Inductor's autotune
        cache by them, so the winner recorded is timed under them, never one of Inductor's cached timings
        taken otherwise (a collection run's). None otherwise; a setting of 0 is no limit of its own."""
        key = self._tuning_miss(request)
        if key is None:
            return None
        limits = {"duration_ms": S.max_tuning_duration_ms(), "iterations": S.max_tuning_iterations()}
        if any(limits.values()):
            store().stats.limited += 1
        verbose(3, f"limits {request.op_name},{key.encode()}: {limits} per candidate benchmark (0: no limit)")
        return limits

    def on_numerical_check(self, request: AutotuneRequest, rejected: list[str], timings: dict[str, float]) -> None:
        """The hook dropped `rejected`: they are excluded for this key, so they are never recorded. When
        only one candidate is left Inductor benchmarks nothing, so it is recorded here with its time."""
        key = request_key(request)
        if key is None:
            return
        db = store()
        params = key.encode()
        if rejected:
            db.excluded.setdefault((request.op_name, params), set()).update(rejected)
            db.stats.rejected_candidates += len(rejected)
            verbose(2, f"numerical check {request.op_name},{params}: rejected {sorted(rejected)}")
        survivors = [cid for cid in request.candidates if cid not in set(rejected)]
        if rejected and len(survivors) == 1 and survivors[0] in timings:
            winner = survivors[0]
            db.record(request.op_name, params, winner, timings[winner])
            verbose(2, f"tuned {request.op_name},{params} -> {winner} (the only candidate within tolerance)")

    def padding_decision(self, request: AutotuneRequest) -> bool | None:
        """The recorded shape-padding decision for this input (a ``pad_*`` row), or None."""
        found = self._lookup(request)
        if found is None or found[1] is None or found[1].solution not in (F.PAD, F.NO_PAD):
            return None
        key, entry, _ = found
        store().stats.hits += 1
        verbose(2, f"hit {request.op_name},{key.encode()} -> {entry.solution}")
        return entry.solution == F.PAD

    def on_padding_decision(self, request: AutotuneRequest, pad: bool, time_ms: float) -> None:
        """Inductor benchmarked padding for this input: record the decision (tuning on)."""
        if not S.is_enabled() or not S.tuning_is_enabled():
            return
        key = request_key(request)
        if key is None:
            return
        solution = F.PAD if pad else F.NO_PAD
        store().record(request.op_name, key.encode(), solution, time_ms)
        verbose(2, f"tuned {request.op_name},{key.encode()} -> {solution} ({time_ms:.4g} ms)")

    def on_timings(self, request: AutotuneRequest, timings: dict[str, float], untimed: list[str]) -> None:
        if not S.is_enabled() or not S.tuning_is_enabled():
            return
        key = request_key(request)
        if key is None:
            return
        db = store()
        params = key.encode()
        if len(timings) <= 1 and len(request.candidates) > 1:
            return  # a hit or a Default answer: nothing was compared
        rejected = db.excluded.get((request.op_name, params), set())
        valid = {
            cid: t
            for cid, t in timings.items()
            if cid not in rejected and t is not None and not math.isnan(t) and not math.isinf(t)
        }
        if not valid:
            return
        # the kernel Inductor compiles (the adapter applies the same rule, against the same baseline)
        baseline = aten_margin.baseline(request.op_name, valid, request.context)
        winner = aten_margin.winner(valid, F.aten_margin_setting(), baseline)
        db.record(request.op_name, params, winner, valid[winner])
        # timed by no benchmark of this process: Inductor's autotune cache answered, which it does for such an
        # autotuning only with timings an earlier run took under the same limits (``benchmark_limits``)
        earlier = "" if request.metadata.get("timing") else \
            " (timed under these limits by an earlier run, kept in Inductor's autotune cache)"
        verbose(2, f"tuned {request.op_name},{params} -> {winner} ({valid[winner]:.4g} ms){earlier}")
        verbose(3, f"timings {request.op_name},{params}: {sorted(valid.items(), key=lambda kv: kv[1])}")


POLICY = TunableCachePolicy()
