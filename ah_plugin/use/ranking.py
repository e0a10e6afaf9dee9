"""The USE policy: rank an autotuning's candidates with a learned artifact and keep only the best few.

For each ``AutotuneRequest`` of an operation in use mode, the artifact chosen by ``artifact_loader``
ranks the choices it knows, and the policy keeps a few of those that exist today:

* **fast mode** (the default, ``AH_PLUGIN_TOP_K=fast``): when the ranking puts aten first (``extern_mm``,
  ``extern__mkl_linear``, ...: ids starting with ``extern_``), aten alone is kept: no template is
  compiled and Inductor benchmarks nothing. The aten choice kept is ``extern_bias_addmm`` wherever
  Inductor offers it (``kept_aten_choice``), never ``extern_addmm`` on a ranking's word. When it puts a
  template first with a share of at least ``AH_PLUGIN_CONFIDENCE`` (0.8 on a CPU; never on a GPU by
  default: held out, the H200 ranking's sure leaves kept templates up to 6.5x slower than cuBLAS on 6 of 92
  GEMMs) and the training data behind the leaf back it (``supported``: enough inputs, each timed more than
  once, and the template faster than aten by more than the timings spread), that template alone is kept
  (compiled once, never benchmarked). Else the top template and aten are kept, and the adapter times both by
  CUDA-graph replay; the template wins only by the aten margin. Where the data do not back it the template
  is still timed against aten by replay on a GPU; ``AH_PLUGIN_TIME_UNBACKED=off`` keeps aten alone there
  instead, trading the template's possible gain for the compile its timing costs. On a CPU a template the
  data do not back is never timed: aten alone is kept, as without an artifact (timing it means compiling
  the C++ template, the compile's main cost). Templates are trusted only from an artifact trained on
  replay-timed data (its ``timing`` attribute) or on a CPU: an artifact trained on per-call GPU timings,
  which favour templates on small GEMMs, gets aten alone, and so does a memory-bound GEMM whose operands
  fit in the GPU's L2, which replay would time from L2 (``l2_residency``; ``AH_PLUGIN_L2_RULE=off`` times
  it).
* **quality mode** (``AH_PLUGIN_TOP_K=quality``): the top ``settings.QUALITY_TOP_K`` (3) of the ranking
  over Inductor's candidates plus its persistent TMA template, and aten, timed by replay with the margin.
* **top k** (``AH_PLUGIN_TOP_K=<k>``): the top k plus aten, never fewer than ``min_choices`` (2).
* **adaptive k** (``AH_PLUGIN_TOP_K=adaptive``): the shortest prefix of the ranking whose leaf
  probability mass reaches a threshold: confident leaves benchmark fewer choices.

An operation with an mm view (addmm, ``features.mm_view``) that has no artifact of its own on the
device borrows the mm artifact that fits: it ranks the mm view of the input, and its ``extern_mm``
stands for today's aten choices (``extern_addmm``, ``extern_bias_addmm``). An addmm artifact that fits
always wins over borrowing.

When it cannot help (no artifact fits, the artifact fails, or it ranks none of today's choices) it
returns None, so Inductor autotunes its default choices, and says so once per operation and reason,
naming the artifact. Artifact code is only ever called through ``LoadedArtifact.rank`` and
``check_precondition`` (``artifact_guard``): an artifact that raises, exits, hangs or returns
nonsense costs its pruning, never the compile. A bad value of ``AH_PLUGIN_TOP_K``,
``AH_PLUGIN_TOP_K_MASS`` or ``AH_PLUGIN_MIN_CHOICES`` switches the policy off (``UseOptions.enabled``),
warned once by ``settings``.

Stale artifacts: choices Inductor offers that the artifact has never seen (``unseen``: a sign it was trained
on another torch) are logged once per (artifact, op) at verbose; they and the choices the artifact ranks
that no autotuning of this process offered (``vanished``: a choice offered for one layer is never listed,
however the other layers' candidates differ) are in ``stale_report()``.

Settings (environment wins over the plugin's API values; explicit constructor arguments win over both):
``AH_PLUGIN_TOP_K`` (``fast``, ``quality``, an int, or ``adaptive``), ``AH_PLUGIN_TOP_K_MASS`` (adaptive
threshold, default 0.9; setting it switches adaptive k on, with ``AH_PLUGIN_TOP_K`` as the cap),
``AH_PLUGIN_MIN_CHOICES`` (default 2), ``AH_PLUGIN_KEEP_ATEN`` (default 1), ``AH_PLUGIN_VERBOSE``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from ah_plugin.use import artifact_loader, flex_ranking, l2_residency
from ah_plugin.report import decision_words, messages
from ah_plugin.collect import features
from ah_plugin.use.choice_ids import PADDED_CHOICE_ID
from ah_plugin.policy import AutotuneRequest, ChoicePolicy
from ah_plugin.replay_timing import METHOD_REPLAY
from ah_plugin.report.verbose_output import say

# bump when the same artifact and settings would keep other choices (2: fast mode's L2 rule; 3: its size floor;
# 4: bias_addmm preferred among aten choices; 5: no shape padding where a template runs either way; 6: quality
# mode keeps its padded candidate; 7: fast mode keeps aten on symbolic sizes where the ranking differs across them;
# 8: a template kept alone, or on a CPU at all, only where the data behind the leaf back it)
RULES_VERSION = 8
# fast mode leaves a GEMM unpadded only where the ranking's first template has at least this share, padded and
# not. On the H200's unaligned GEMMs padding beat the best template on two: 2048x768x1001 (13.1 against 16.8 us),
# whose padded twin ranks cuBLAS first, and 1024x1000x999 (13.9 against 17.3), ranked with no confidence (0)
UNPADDED_TEMPLATE_SHARE = 0.5

log = logging.getLogger(__name__)

DEFAULT_TOP_K = 10
DEFAULT_MASS = 0.9
DEFAULT_MIN_CHOICES = 2
DEFAULT_CONFIDENCE = None  # fast mode: None is the device's default (lone_template_share)
CPU_CONFIDENCE = 0.8
ADAPTIVE = "adaptive"
FAST = "fast"
QUALITY = "quality"
BIAS_ADDMM = "extern_bias_addmm"
# what the data behind a leaf must hold for fast mode to keep its template on the leaf's word (``supported``)
SUPPORT_MIN_INPUTS = 3  # training inputs where the template and aten were both timed
SUPPORT_TIMINGS_PER_INPUT = 4  # distinct timings of the two per input: each timed at least twice on average


def is_aten_choice(choice_id: str) -> bool:
    """Aten (extern) kernels: ``extern_mm``, ``extern_addmm``, ``extern__mkl_linear`` ..."""
    return choice_id.startswith("extern_")


@dataclass(frozen=True)
class UseOptions:
    """How many choices the USE policy keeps."""

    top_k: int = DEFAULT_TOP_K  # fixed k; with adaptive, the most choices kept (besides aten)
    fast: bool = False  # fast mode: one choice when the ranking is sure, else its top template and aten
    quality: bool = False  # quality mode: the top k (settings.QUALITY_TOP_K) of a space with persistent TMA, and aten
    confidence: float | None = DEFAULT_CONFIDENCE  # fast mode: the share a lone template needs (None: by device)
    l2_rule: bool = True  # fast mode: aten alone on memory-bound GEMMs within L2 (l2_residency)
    time_unbacked: bool = True  # fast mode on a GPU: time a template its leaf's data do not back (else aten)
    adaptive: bool = False
    mass: float = DEFAULT_MASS  # adaptive: keep the shortest prefix whose probability mass reaches this
    min_choices: int = DEFAULT_MIN_CHOICES  # never keep fewer (when that many exist); 1 may skip benchmarking
    keep_aten: bool = True  # always keep the aten choice(s) besides the top k
    verbose: bool = False
    enabled: bool = True  # False: a variable above held a bad value; no opinion at all

    def __post_init__(self):
        if self.top_k < 1:
            raise ValueError(f"top_k={self.top_k}: must be >= 1")
        if not 0.0 < self.mass <= 1.0:
            raise ValueError(f"mass={self.mass}: must be in (0, 1]")
        if self.min_choices < 1:
            raise ValueError(f"min_choices={self.min_choices}: must be >= 1")

    def describe(self) -> str:
        """A stable text of what changes the kept choices (for compile-cache keys)."""
        k = f"adaptive:{self.mass}:{self.top_k}" if self.adaptive else str(self.top_k)
        if self.fast:
            k = f"fast:{self.confidence}:l2={int(self.l2_rule)}:unbacked={int(self.time_unbacked)}"
        elif self.quality:
            k = f"quality:{self.top_k}"
        return f"k={k};min={self.min_choices};aten={int(self.keep_aten)};on={int(self.enabled)}"

    @classmethod
    def from_environment(cls, environ=None, **explicit) -> "UseOptions":
        """The plugin's settings (defaults, API values, environment on top; see ``settings``), then
        non-None ``explicit`` values."""
        from ah_plugin.config import settings

        current = settings.current(environ)
        values = {
            "top_k": settings.QUALITY_TOP_K if current.quality else current.top_k,
            "fast": current.fast,
            "quality": current.quality,
            "confidence": current.confidence,
            "l2_rule": current.l2_rule,
            "time_unbacked": current.time_unbacked,
            "adaptive": current.adaptive,
            "mass": current.top_k_mass,
            "min_choices": current.min_choices,
            "keep_aten": current.keep_aten,
            "verbose": current.verbose,
        }
        # a bad ranking variable switches the policy off, unless an explicit argument replaces it
        field_of = settings.RANKING_VARIABLES
        values["enabled"] = not any(explicit.get(field_of[name]) is None for name in current.ranking_off)
        named = explicit.get("top_k")
        if named in settings.NAMED_MODES:
            explicit = {**explicit, **settings.named_mode(named),
                        "top_k": settings.QUALITY_TOP_K if named == QUALITY else None}
        elif explicit.get("top_k") is not None:
            explicit = dict(explicit, fast=False, quality=False)
        if explicit.get("mass") is not None:
            explicit = dict(explicit, adaptive=True, fast=False, quality=False)
        values.update({key: value for key, value in explicit.items() if value is not None})
        return cls(**values)


def choose_fast(ranking: list[tuple[str, float]], candidates: list[str], confidence: float,
                trust_templates: bool, support: dict | None = None, time_unsupported: bool = True) -> list[str]:
    """Fast mode's ids to keep: one aten choice when the ranking puts aten first (or templates are not
    trusted), the top template alone when its share reaches ``confidence`` and ``support`` (the leaf's
    training data, ``LoadedArtifact.support``) backs it, else the top template and aten (timed against each
    other); with ``time_unsupported`` False (a CPU, or ``AH_PLUGIN_TIME_UNBACKED=off``), aten alone where the
    support does not back the template.
    Pure function of its inputs.

    The aten choice kept is ``kept_aten_choice``'s, whatever the ranking says among aten choices."""
    today = set(candidates)
    ranked = [(choice, float(share)) for choice, share in ranking if choice in today]
    aten = kept_aten_choice(candidates)
    if not ranked:
        return [aten] if aten else list(candidates[:1])
    top, share = ranked[0]
    if aten is None:
        return [top]
    if is_aten_choice(top) or not trust_templates:
        return [aten]
    backed = supported(support, top)
    if share >= confidence and backed:
        return [top]
    if not backed and not time_unsupported:
        return [aten]
    return [top, aten]


def supported(support: dict | None, top: str) -> bool:
    """Whether the training data behind the leaf back its first choice ``top`` against aten: it is the
    choice the support describes, both were timed on at least ``SUPPORT_MIN_INPUTS`` inputs, with
    ``SUPPORT_TIMINGS_PER_INPUT`` distinct timings per input on average (each collected more than once),
    and ``top`` was faster than aten by more than the timings spread (``margin > spread``). An artifact
    without support data (trained before it was recorded) backs nothing."""
    if not support or support.get("choice") != top or support.get("spread") is None:
        return False
    inputs = support["inputs"]
    return inputs >= SUPPORT_MIN_INPUTS and support["timings"] >= SUPPORT_TIMINGS_PER_INPUT * inputs and \
        support["margin"] > support["spread"]


def support_words(support: dict | None, top: str) -> str:
    """The data behind the leaf, in a user's words, for the verbose lines."""
    if support is None:
        return "the artifact records no training data per leaf: retrain it"
    if support.get("choice") != top:
        return f"the leaf's data describe {support.get('choice')}, not {top}"
    spread = "unknown" if support["spread"] is None else f"{support['spread']:.2f}"
    return (f"{support['inputs']} input(s) and {support['timings']} timing(s) behind it, {support['margin']:.2f}x "
            f"aten's speed with a spread of {spread}")


def kept_aten_choice(candidates: list[str]) -> str | None:
    """The aten choice fast mode keeps: ``extern_bias_addmm`` where Inductor offers it (an addmm whose bias
    is broadcast over rows), else Inductor's first aten candidate. ``extern_bias_addmm`` hands cuBLASLt the
    1-D bias, as max-autotune off's addmm does; ``extern_addmm`` gets the bias expanded to a 2-D stride-0
    view. Where Inductor's per-call timing chose among aten kernels alone, GPT-2 small and a ViT stepped
    1.26-1.27x slower than off on the H200 (not isolated to the bias; a precaution). Inductor lists the two
    in opposite orders on torch 2.11 and 2.13, so the order is not relied on, and fast mode never trades one
    aten choice for another on a ranking's word."""
    if BIAS_ADDMM in candidates:
        return BIAS_ADDMM
    return next((c for c in candidates if is_aten_choice(c)), None)


def choose(
    ranking: list[tuple[str, float]], candidates: list[str], options: UseOptions, trust_templates: bool = True,
    cpu: bool = False, support: dict | None = None,
) -> list[str]:
    """The ids to keep, best first, from an artifact's ``ranking`` and today's ``candidates`` (``cpu``: the
    request is a CPU's, for fast mode's default confidence, and where a template the data do not back is
    never timed, whatever ``options.time_unbacked`` says; ``support``: the leaf's training data, for fast mode).

    Pure function of its inputs (the policy's core; unit-testable on plain lists).
    """
    if options.fast:
        return choose_fast(ranking, candidates, lone_template_share(options.confidence, cpu), trust_templates,
                           support, time_unsupported=options.time_unbacked and not cpu)
    today = set(candidates)
    enough = max(options.top_k, options.min_choices)  # more ranked choices are never used
    ranked, seen = [], set()
    for choice, probability in ranking:
        if choice in today and choice not in seen:
            seen.add(choice)
            ranked.append((choice, float(probability)))
            if len(ranked) >= enough:
                break
    ranked_ids = [choice for choice, _ in ranked]
    if options.adaptive:
        keep, mass = [], 0.0
        for choice, probability in ranked[: options.top_k]:
            keep.append(choice)
            mass += max(probability, 0.0)
            if mass >= options.mass:
                break
    else:
        keep = ranked_ids[: options.top_k]
    if options.keep_aten:
        keep += [c for c in candidates if is_aten_choice(c) and c not in keep]
    if options.quality:  # offered only in quality mode, and no packaged ranking knows it: always timed
        keep += [c for c in candidates if c == PADDED_CHOICE_ID and c not in keep]
    floor = min(options.min_choices, len(candidates))
    if len(keep) < floor:
        # fill from the ranking, then aten, then Inductor's order (choices the artifact never saw)
        fill = ranked_ids + [c for c in candidates if is_aten_choice(c)] + list(candidates)
        for choice in fill:
            if len(keep) >= floor:
                break
            if choice not in keep:
                keep.append(choice)
    return keep


def lone_template_share(confidence: float | None, cpu: bool) -> float:
    """The ranking share at which fast mode keeps a template alone: ``confidence`` when set (``AH_PLUGIN_CONFIDENCE``;
    never = infinity), else 0.8 on a CPU, whose artifacts come from the user's own program, and never on a
    GPU (held out at 0.8, the packaged H200 recipe kept templates alone that ran 1.3-6.5x cuBLAS's time on 6
    of 92 GEMMs: ``python -m torchgen_ah.evaluation.studies.fast_heldout ... --confidence 0.8``)."""
    if confidence is not None:
        return confidence
    return CPU_CONFIDENCE if cpu else math.inf


def on_cpu(metadata: dict) -> bool:
    """Whether a request's metadata describes a CPU (no device capability)."""
    return tuple(metadata.get("device_capa") or (0, 0)) == (0, 0)


def trusts_templates(artifact, metadata: dict) -> bool:
    """Whether fast mode may keep a template on the artifact's word: its data were timed by CUDA-graph
    replay (the artifact's ``timing`` attribute), or the device is a CPU (no graphs; per-call is how it runs)."""
    if on_cpu(metadata):
        return True
    return getattr(artifact.heuristic, "timing", None) == METHOD_REPLAY


def borrowed_ranking(ranking: list[tuple[str, float]], candidates: list[str]) -> list[tuple[str, float]]:
    """An mm artifact's ranking for the candidates of an op that borrows it (addmm): its ``extern_mm``
    becomes today's aten choices in its place, the first carrying its probability (the artifact
    estimated aten once; adaptive k must not count it twice). Triton ids are the same as mm's."""
    aten = [c for c in candidates if is_aten_choice(c)]
    if not aten or "extern_mm" in aten:
        return ranking
    out = []
    for choice, probability in ranking:
        if choice == "extern_mm":
            out.extend((c, probability if i == 0 else 0.0) for i, c in enumerate(aten))
        else:
            out.append((choice, probability))
    return out


@dataclass
class UseStats:
    """What the policy did in this process (``ah_plugin.status()``, the verbose line at exit)."""

    autotunings: int = 0  # autotunings it answered
    offered: int = 0  # their candidates
    kept: int = 0  # the candidates it kept
    without_ranking: int = 0  # of those answered, how many had no artifact ranking (fast mode: aten kept)
    l2_aten: int = 0  # fast mode: templates not timed on a memory-bound GEMM within L2 (l2_residency)
    unpadded: int = 0  # fast mode: GEMMs left unpadded because a template is ranked first either way
    dynamic_aten: int = 0  # fast mode: symbolic-size GEMMs kept on aten, the ranking differing across sizes
    unbacked: int = 0  # fast mode: a template ranked first that the leaf's training data do not back (``supported``)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class StaleReport:
    """What an artifact and today's Inductor disagree on, for one (artifact, op)."""

    artifact: str
    path: str
    op_name: str
    ranked: set = field(default_factory=set)  # every choice the artifact ranked for this op
    offered: set = field(default_factory=set)  # every candidate of this op's autotunings in this process
    unseen: set = field(default_factory=set)  # offered today, unknown to the artifact

    @property
    def vanished(self) -> set:
        """Ranked by the artifact, offered by no autotuning of this process (so far)."""
        return self.ranked - self.offered

    def as_dict(self) -> dict:
        return {
            "artifact": self.artifact,
            "path": self.path,
            "op_name": self.op_name,
            "vanished": sorted(self.vanished),
            "unseen": sorted(self.unseen),
        }


def _first_today(ranking, candidates) -> str | None:
    """The ranking's first choice among today's candidates."""
    today = set(candidates)
    return next((choice for choice, _ in ranking if choice in today), None)


def artifact_features(artifact, request: AutotuneRequest) -> dict | None:
    """The features ``artifact`` ranks ``request`` by: its own, or the mm view of an addmm that an mm
    artifact ranks (borrowed); None when the input has no such view."""
    if artifact.op_name == request.op_name:
        return request.features
    view = features.mm_view(request.op_name, request.features, request.metadata)
    return None if view is None else view[0]


def quiet_ranking(artifact, request: AutotuneRequest) -> tuple[dict, list] | None:
    """(features, ranking) of ``request`` by ``artifact``, or None where it has no features for it or its
    ranking fails: for the checks that only ask what the ranking would say and record nothing."""
    feats = artifact_features(artifact, request)
    if feats is None:
        return None
    try:
        return feats, artifact.rank(feats)
    except artifact_loader.ArtifactError:
        return None


class RankingPolicy(ChoicePolicy):
    """``ChoicePolicy`` of use mode (see ``ah_plugin.policy``).

    top_k="quality" here sets the ranking's k only; quality mode's search space and GEMM-only max-autotune
    come from the plugin's settings (``ah_plugin.install(top_k="quality")`` or the variable).
    ops: operations to act on (None: every op the plugin hands over). artifact_dir: the user's
    directory (None: ``AH_PLUGIN_ARTIFACT_DIR`` via the settings); package: also the packaged
    artifacts (default). Other arguments: ``UseOptions``
    fields; None means "from the environment / defaults".
    """

    says_decisions = True  # one verbose line per decision, with the reason (the adapter adds none)

    def __init__(
        self,
        ops=None,
        *,
        top_k=None,
        mass=None,
        min_choices=None,
        keep_aten=None,
        verbose=None,
        artifact_dir=None,
        package: bool = True,
        options: UseOptions | None = None,
    ):
        self.ops = None if ops is None else frozenset(ops)
        self.options = options or UseOptions.from_environment(
            top_k=top_k, mass=mass, min_choices=min_choices, keep_aten=keep_aten, verbose=verbose
        )
        self._artifact_dir = artifact_dir
        self._package = package
        self._dirs = None
        self._selected: dict[tuple, artifact_loader.LoadedArtifact | None] = {}
        self._stale: dict[tuple[str, str], StaleReport] = {}
        self._stale_checked: set[tuple] = set()
        self._said: set[tuple] = set()
        self.stats = UseStats()

    @property
    def op_names(self):
        """Ops this policy acts on (the hook asks it only for these); None: all."""
        return self.ops

    def cache_key(self) -> str:
        """Part of the FX-graph cache key: the version of the rules that turn a ranking into kept choices,
        so a kernel compiled under older rules is not reused after an upgrade."""
        return f"rules={RULES_VERSION}"

    # -- ChoicePolicy -------------------------------------------------------------------------------

    def select(self, request: AutotuneRequest) -> list[str] | None:
        if not self.options.enabled or (self.ops is not None and request.op_name not in self.ops):
            return None
        if flex_ranking.is_flex_op(request.op_name):
            return None  # decided before code generation (ah_plugin.inductor.flex_choices): kept as chosen there
        if len(request.candidates) < 2:
            return None  # nothing to choose from (a CPU mm without freezing): no ranking, no fallback said
        keep = self._ranked(request)
        ranked = keep is not None
        if keep is None and self.options.fast:
            off = kept_aten_choice(request.candidates)
            keep = [off] if off else None  # fast mode with nothing to rank by: aten, never a compile of templates
            if keep is not None and self.options.verbose:
                _say_decision(request, keep, "no artifact ranks it (fast mode keeps aten)")
        if keep is not None:
            self.stats.autotunings += 1
            self.stats.offered += len(request.candidates)
            self.stats.kept += len(keep)
            self.stats.without_ranking += not ranked
        return keep

    def _ranked(self, request: AutotuneRequest) -> list[str] | None:
        """The kept ids from the artifact's ranking; None when no artifact can rank this input."""
        artifact = self.artifact_for(request.op_name, request.metadata)
        if artifact is None:
            return None
        borrowed = artifact.op_name != request.op_name  # an mm artifact ranking addmm
        feats = artifact_features(artifact, request)
        if feats is None:
            self._fallback(request.op_name, f"no mm view of this input for {artifact.name}",
                           f"features: {list(request.features)}")
            return None
        try:
            ranking = artifact.rank(feats)
        except artifact_loader.ArtifactError as exc:
            self._fallback(request.op_name, str(exc), f"features: {dict(feats)}",
                           key=f"artifact {artifact.path} failed")
            return None
        if borrowed:
            ranking = borrowed_ranking(ranking, request.candidates)
        self._note_stale(artifact, request, ranking)
        today = set(request.candidates)
        if not any(choice in today for choice, _ in ranking):
            self._fallback(
                request.op_name,
                f"artifact {artifact.name} ranks none of today's choices",
                f"today: {list(request.candidates)}",
            )
            return None
        trusted = trusts_templates(artifact, request.metadata)
        in_l2 = False
        if trusted and self.options.fast and any(is_aten_choice(c) for c in request.candidates) and \
                self._l2_misjudged(feats, request.metadata):
            trusted, in_l2 = False, True  # memory-bound with its operands in L2: replay would time it from L2
            self.stats.l2_aten += 1
        support = self._leaf_support(artifact, feats, ranking, request) if trusted else None
        keep = choose(ranking, request.candidates, self.options, trusted, on_cpu(request.metadata), support)
        top = _first_today(ranking, request.candidates)
        if self.options.fast and trusted and top and not is_aten_choice(top) and not supported(support, top):
            self.stats.unbacked += 1
        varies = self.options.fast and request.variants and not self._holds_over_sizes(artifact, request, keep)
        if varies:
            keep = [kept_aten_choice(request.candidates) or keep[-1]]
            self.stats.dynamic_aten += 1
        if self.options.verbose:
            reason = (f"symbolic sizes, and {artifact.name}'s choice differs across the sizes the graph serves: "
                      "aten alone" if varies else
                      self._reason(keep, ranking, request, artifact, trusted, in_l2, support))
            _say_decision(request, keep, reason)
        return keep

    def _leaf_support(self, artifact, feats: dict, ranking, request: AutotuneRequest, quiet: bool = False):
        """The leaf's training data (``LoadedArtifact.support``) where fast mode reads them (its first choice
        today is a template); None otherwise, for an artifact without them, or when the call fails (said
        once, unless ``quiet``: its templates are then not backed)."""
        top = _first_today(ranking, request.candidates)
        if not self.options.fast or top is None or is_aten_choice(top):
            return None
        try:
            return artifact.support(feats)
        except artifact_loader.ArtifactError as exc:
            if not quiet and ("support", artifact.path) not in self._said:
                self._said.add(("support", artifact.path))
                messages.warn(f"{request.op_name}: {exc}; its templates are kept as for an artifact without "
                              "support data", RuntimeWarning)
            return None

    def _holds_over_sizes(self, artifact, request: AutotuneRequest, keep: list[str]) -> bool:
        """Whether fast mode would keep the same choices at every other size a dynamic-shape graph serves
        (``request.variants``): one kernel runs at all of them, so a template is kept only where the ranking
        puts it first across the range. An artifact that cannot rank a size counts as disagreeing."""
        wanted = set(keep)
        for variant in request.variants:
            ranked = quiet_ranking(artifact, variant)
            if ranked is None:
                return False
            feats, ranking = ranked
            if artifact.op_name != variant.op_name:
                ranking = borrowed_ranking(ranking, variant.candidates)
            trusted = trusts_templates(artifact, variant.metadata) and not (
                any(is_aten_choice(c) for c in variant.candidates) and self._l2_misjudged(feats, variant.metadata))
            support = self._leaf_support(artifact, feats, ranking, variant, quiet=True) if trusted else None
            if set(choose(ranking, variant.candidates, self.options, trusted, on_cpu(variant.metadata),
                          support)) != wanted:
                return False
        return True

    def _reason(self, keep, ranking, request: AutotuneRequest, artifact, trusted: bool, in_l2: bool,
                support: dict | None = None) -> str:
        """Why ``choose`` kept ``keep``, in a user's words (the verbose line's end)."""
        name, options = artifact.name, self.options
        if not options.fast:
            if options.quality:
                return f"quality mode: the top {options.top_k} of {name}'s ranking and aten, timed"
            if options.adaptive:
                return f"adaptive k: {name}'s top choices up to a share of {options.mass:g}, and aten, timed"
            return f"the top {options.top_k} of {name}'s ranking and aten, timed"
        today = set(request.candidates)
        top, share = next(((c, float(s)) for c, s in ranking if c in today), (None, 0.0))
        if in_l2:
            return ("memory-bound with its operands within L2, where replay would time a template from L2 "
                    "(AH_PLUGIN_L2_RULE=off times it)")
        if len(keep) == 1 and is_aten_choice(keep[0]):
            if top is not None and not is_aten_choice(top) and not trusted:
                return f"{name} was trained on per-call timings, which favour templates: aten alone"
            if top is not None and not is_aten_choice(top):
                return (f"{name} ranks {top} first, but its data do not back it ({support_words(support, top)}; "
                        f"backing takes {SUPPORT_MIN_INPUTS} inputs, each timed twice, and a speed-up above the "
                        "spread): aten alone, as without an artifact" +
                        ("" if on_cpu(request.metadata) else " (AH_PLUGIN_TIME_UNBACKED=off)"))
            return f"{name} ranks aten first"
        threshold = lone_template_share(options.confidence, on_cpu(request.metadata))
        if len(keep) == 1:
            return (f"{name} ranks it first with a share of {share:.2f} (at least {threshold:g}), "
                    f"{support_words(support, top)}: nothing to time")
        if math.isinf(threshold):
            return (f"{name} ranks the template first (share {share:.2f}), {support_words(support, top)}; on a GPU "
                    "it is timed against aten")
        if share >= threshold:
            return (f"{name} ranks the template first with a share of {share:.2f}, but the data do not back it "
                    f"alone ({support_words(support, top)}): timed against aten")
        return f"{name} ranks the template first with a share of {share:.2f}, below {threshold:g}: timed against aten"

    def padding_opinion(self, unpadded: AutotuneRequest, padded: AutotuneRequest) -> bool | None:
        """Fast mode's shape-padding decision for a GEMM the pad_mm pass may pad: False (do not pad) when the
        ranking puts a Triton template first, with a share of at least ``UNPADDED_TEMPLATE_SHARE``, both on
        the GEMM as it is and on its padded twin. Padding exists
        to put cuBLAS on its aligned path; a template reads unaligned operands as they are, so padding would
        only add the copies, and the pass's own benchmark (cuBLAS padded against cuBLAS as it is, 1.1x apart
        at the decision's edge) decides differently between runs of one program. None otherwise: the pass
        decides (or a results cache's recorded decision). The ranking's first choice is read whether or not
        Inductor will offer it today (the pass runs before the autotuning)."""
        if not (self.options.enabled and self.options.fast) or \
                (self.ops is not None and unpadded.op_name not in self.ops):
            return None
        if not (self._template_first(unpadded) and self._template_first(padded)):
            return None
        self.stats.unpadded += 1
        if self.options.verbose:
            _say(f"{decision_words.gemm(unpadded)}: not padded (a template ranks first "
                 "padded or not, and reads the operands as they are)")
        return False

    def _template_first(self, request: AutotuneRequest) -> bool:
        """Whether fast mode would time a template on this input: the artifact's first choice is a template
        with a share of at least ``UNPADDED_TEMPLATE_SHARE``, templates are trusted, and the L2 rule does not
        keep aten. Records nothing (no stats, no fallback)."""
        artifact = self.artifact_for(request.op_name, request.metadata)
        if artifact is None:
            return False
        ranked = quiet_ranking(artifact, request)
        if ranked is None:
            return False
        feats, ranking = ranked
        return bool(ranking) and not is_aten_choice(ranking[0][0]) and ranking[0][1] >= UNPADDED_TEMPLATE_SHARE and \
            trusts_templates(artifact, request.metadata) and not self._l2_misjudged(feats, request.metadata)

    def _l2_misjudged(self, feats: dict, metadata: dict) -> bool:
        """The L2 rule is on and replay would time this GEMM from L2 (``l2_residency``)."""
        return self.options.l2_rule and l2_residency.replay_misjudges(feats, l2_residency.l2_bytes_for(metadata))

    def ranks(self, op_name: str, metadata: dict) -> bool:
        """Whether an artifact ranks ``op_name`` on the device of ``metadata`` (``artifact_for``)."""
        return self.artifact_for(op_name, metadata) is not None

    # -- data ---------------------------------------------------------------------------------------

    def artifact_for(self, op_name: str, metadata: dict) -> artifact_loader.LoadedArtifact | None:
        """The artifact used for ``op_name`` on the device in ``metadata`` (cached per device): the op's
        own, else for an op with an mm view (addmm) the mm artifact that fits (borrowed: its ``op_name``
        is then "mm")."""
        key = (
            op_name,
            str(metadata.get("device_capa")),
            metadata.get("shared_memory"),
            metadata.get("device_name"),
        )
        if key in self._selected:
            return self._selected[key]
        if self._dirs is None:
            self._dirs = artifact_loader.artifact_dirs(self._artifact_dir, self._package)
        loaded = artifact_loader.load_artifacts(self._dirs)
        fitting, rejected = artifact_loader.candidates_for(op_name, metadata, loaded)
        view = None if fitting else features.mm_view(op_name, {}, metadata)  # its metadata decides
        if view is not None:
            borrowable, mm_rejected = artifact_loader.candidates_for("mm", view[1], loaded)
            fitting, rejected = borrowable, rejected + mm_rejected
        chosen = fitting[0] if fitting else None
        self._selected[key] = chosen
        device = decision_words.device(metadata)
        if chosen is None:
            details = "; ".join(f"{r.artifact}: {r.reason}" for r in rejected) or (
                f"no artifact for {op_name!r} in {[d for _, d in self._dirs]}"
            )
            self._fallback(op_name, f"no artifact matches {device}", details)
        elif self.options.verbose:
            borrowed = f", an mm artifact (no {op_name} artifact fits)" if chosen.op_name != op_name else ""
            _say(f"{op_name} on {device}: ranked by {chosen.describe()}{borrowed}")
        return chosen

    def stale_report(self) -> list[dict]:
        """Per (artifact, op): choices it ranks that no longer exist, today's choices it never saw."""
        return [self._stale[key].as_dict() for key in sorted(self._stale)]

    # -- internals ----------------------------------------------------------------------------------

    def _note_stale(self, artifact, request: AutotuneRequest, ranking) -> None:
        check_key = (artifact.path, artifact.name, request.op_name, tuple(request.candidates))
        if check_key in self._stale_checked:
            return
        self._stale_checked.add(check_key)
        today = set(request.candidates)
        known = set(artifact.choices) | {choice for choice, _ in ranking}
        key = (artifact.name, request.op_name)
        report = self._stale.get(key)
        if report is None:
            report = self._stale[key] = StaleReport(artifact.name, artifact.path, request.op_name)
        report.ranked.update(choice for choice, _ in ranking)
        report.offered |= today
        new_unseen = (today - known) - report.unseen
        report.unseen |= new_unseen
        # only unseen choices are said as they appear: whether a ranked choice vanished is known only once
        # every layer has been compiled (CPU GEMM candidates differ by shape), so it is left to stale_report().
        # A candidate the ranking never saw (a config a newer torch added) is never kept: it is named, once per
        # artifact and op, never dropped in silence
        if new_unseen and ("stale",) + key not in self._said:
            self._said.add(("stale",) + key)
            messages.warn(
                f"artifact {artifact.name} ({artifact.path}) never saw {len(report.unseen)} of today's "
                f"{request.op_name} candidates {sorted(report.unseen)[:5]}: it never keeps them, so they are not "
                "timed; retrain it on data collected with this torch (ah_plugin.use.ranking.stale_report() lists "
                "them, and the ranked choices no autotuning of this process offered)", RuntimeWarning)

    def _fallback(self, op_name: str, reason: str, details: str, key: str | None = None) -> None:
        """Warn once per (op, ``key`` or ``reason``) that Inductor's default choices are used."""
        key = ("fallback", op_name, key or reason)
        if key in self._said:
            return
        self._said.add(key)
        outcome = "aten alone is kept (fast mode)" if self.options.fast else "Inductor's default choices are used"
        message = f"{op_name}: {reason}; {outcome}"
        if self.options.verbose:
            message += f" ({details})"
        else:
            message += " (set AH_PLUGIN_VERBOSE=1 for details)"
        messages.warn(message, RuntimeWarning)


def _say(message: str) -> None:
    say(log, message)


def _say_decision(request: AutotuneRequest, keep: list[str], reason: str) -> None:
    """The one verbose line of a decision: the GEMM, what was kept, why."""
    _say(f"{decision_words.gemm(request)}: "
         f"{decision_words.kept(keep, request.candidates)}: {reason}")


# One policy per process for the hook (stale reports live in it).
_default_policy: RankingPolicy | None = None


def default_policy(ops=None) -> RankingPolicy:
    """The process-wide USE policy, rebuilt when the ops, the options (top k, ...) or the artifact
    directory in the settings changed (``install``/``enabled`` with other arguments must take effect)."""
    global _default_policy
    from ah_plugin.config import settings

    options = UseOptions.from_environment()
    artifact_dir = settings.current().artifact_dir
    old = _default_policy
    wanted_ops = (None if old is None else old.ops) if ops is None else frozenset(ops)
    if old is None or old.ops != wanted_ops or old.options != options or old._artifact_dir != artifact_dir:
        _default_policy = RankingPolicy(wanted_ops, options=options, artifact_dir=artifact_dir)
    return _default_policy


def stale_report() -> list[dict]:
    """``stale_report()`` of the process-wide policy (empty before any use-mode autotuning)."""
    return [] if _default_policy is None else _default_policy.stale_report()


__all__ = [
    "UseOptions",
    "RankingPolicy",
    "StaleReport",
    "UseStats",
    "choose",
    "choose_fast",
    "supported",
    "trusts_templates",
    "borrowed_ranking",
    "is_aten_choice",
    "default_policy",
    "stale_report",
    "DEFAULT_TOP_K",
    "DEFAULT_MASS",
    "ADAPTIVE",
    "FAST",
    "QUALITY",
]
