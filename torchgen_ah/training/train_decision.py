"""Generic ranking decision-tree trainer: timing logs -> a tree whose leaves rank every known choice.

Why this shape: a heuristic that prunes autotuning must name, for any input, the few choices worth
benchmarking. A classifier tree is fitted on (input, near-best choice) pairs, so its splits separate
inputs that want different kernels; each node then ranks choices by their *expected regret* over the
training inputs it holds (geomean of time / best time, shrunk towards a pessimistic prior where a choice
was measured on few of them). A leaf's ranking is its own list, then its ancestors' lists, then the root's
(global) list: every choice the trainer knows is ranked, so an input never runs out of measured
candidates (upstream's 2.42x miss was a leaf whose whole list was unmeasured for that input).

Everything is vectorised over an inputs x choices matrix of median times; no per-row Python loops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.tree import DecisionTreeClassifier

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.data.heldout import is_heldout, validation_fold, validation_folds

#: a choice whose time is within this factor of the best counts as correct (label and "near hit")
NEAR_BEST = 1.01
#: log-regret charged to a choice that failed (inf time) for an input
FAILED_LOG_REGRET = math.log(4.0)


# --------------------------------------------------------------------------------------------------
# data: one inputs x choices matrix per dataset


@dataclass
class MedianTimeMatrix:
    """Median time of every (input, choice) of one dataset, as a dense inputs x choices matrix.

    Why a matrix: training and ranker scoring work on whole columns (vectorised over inputs) and align
    several datasets on one choice list. Inputs are sorted by key and choices by name, so the trained
    artifact does not depend on row order. (An evaluation run keeps its own per-input table, with log
    order and default max-autotune's set: ``evaluation.timing_table.EvaluationTimingTable``.)

    times[i, c]: median of the finite positive measurements; inf when the choice was run for the input
    but never produced one (failed, inf or zero timings); nan when it was never run for the input.
    counts[i, c]: the distinct measurements behind it (a timing logged twice, as when Inductor's autotune
    cache answers a later run with an earlier run's times, is one measurement); spreads[i, c]: how far
    they vary, log(max / min) (0 for one).
    """

    name: str
    keys: np.ndarray  # (n_inputs,) str: the log's feature values joined with ","
    features: pd.DataFrame  # (n_inputs, n_feature_columns) raw feature values, log column order
    choices: list[str]
    times: np.ndarray  # (n_inputs, n_choices) float64
    weight: float = 1.0
    counts: np.ndarray | None = None  # (n_inputs, n_choices) distinct measurements behind each median
    spreads: np.ndarray | None = None  # (n_inputs, n_choices) log(max / min) of those measurements

    def subset(self, mask: np.ndarray) -> "MedianTimeMatrix":
        return MedianTimeMatrix(
            self.name,
            self.keys[mask],
            self.features[mask].reset_index(drop=True),
            self.choices,
            self.times[mask],
            self.weight,
            None if self.counts is None else self.counts[mask],
            None if self.spreads is None else self.spreads[mask],
        )

    def aligned_times(self, choices: list[str]) -> np.ndarray:
        """times re-indexed to `choices` (nan where this dataset never ran a choice; columns of choices
        not in `choices` are dropped)."""
        return self._aligned(self.times, choices, np.nan)

    def aligned_counts(self, choices: list[str]) -> np.ndarray:
        """counts re-indexed to `choices` (0 where never measured; one per finite time of a table without
        counts)."""
        counts = self.counts if self.counts is not None else np.isfinite(self.times).astype(np.int64)
        return self._aligned(counts, choices, 0)

    def aligned_spreads(self, choices: list[str]) -> np.ndarray:
        """spreads re-indexed to `choices` (0 where unknown)."""
        spreads = self.spreads if self.spreads is not None else np.zeros(self.times.shape)
        return self._aligned(spreads, choices, 0.0)

    def _aligned(self, values: np.ndarray, choices: list[str], fill) -> np.ndarray:
        out = np.full((len(self.keys), len(choices)), fill, dtype=values.dtype)
        pos = {c: j for j, c in enumerate(choices)}
        src = [i for i, c in enumerate(self.choices) if c in pos]
        dst = np.array([pos[self.choices[i]] for i in src], dtype=np.int64)
        out[:, dst] = values[:, src]
        return out


def _input_codes(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """One int code per distinct combination of `columns` (first-seen order), vectorised."""
    code = np.zeros(len(frame), dtype=np.int64)
    for col in columns:
        cc, uniq = pd.factorize(frame[col], use_na_sentinel=False)
        code, _ = pd.factorize(code * len(uniq) + cc)
    return code


def _first_rows(codes: np.ndarray, n: int) -> np.ndarray:
    """Index of the first row of each code 0..n-1."""
    first = np.full(n, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes), dtype=np.int64))
    return first


def _join_keys(features: pd.DataFrame) -> np.ndarray:
    """The log's input key: feature values joined with "," as the row writes them."""
    cols = [features[c].astype(str) for c in features.columns]
    key = cols[0]
    for c in cols[1:]:
        key = key + "," + c
    return key.to_numpy(dtype=object)


def median_time_matrix(frame: pd.DataFrame, feature_cols: list[str], name: str, weight: float = 1.0,
                       keys: pd.Series | None = None) -> MedianTimeMatrix:
    """Aggregate a log frame (feature columns, "choice", "feedback") to one median per (input, choice).

    Non-finite and non-positive timings are dropped per (input, choice); the input stays (the choice is
    then marked failed, inf). Inputs are ordered by key, choices sorted, so results do not depend on
    row order. `keys` (one per row) overrides the key built from the feature columns in file order.
    """
    file_cols = [c for c in frame.columns if c in set(feature_cols)]
    if keys is None:
        codes = _input_codes(frame, file_cols)
        n_in = int(codes.max()) + 1 if len(codes) else 0
        first = _first_rows(codes, n_in)
        uniq_keys = _join_keys(frame[file_cols].iloc[first])
    else:
        codes, uniq_keys = pd.factorize(np.asarray(keys, dtype=object))
        n_in = len(uniq_keys)
        first = _first_rows(codes, n_in)
    # order inputs by key so the table does not depend on row order
    by_key = np.argsort(np.asarray(uniq_keys, dtype=str), kind="stable")
    rank = np.empty(n_in, dtype=np.int64)
    rank[by_key] = np.arange(n_in)
    in_codes = rank[codes]
    in_keys = np.asarray(uniq_keys, dtype=object)[by_key]
    first = first[by_key]
    ch_codes, ch_names = pd.factorize(np.asarray(frame["choice"], dtype=object), sort=True)
    n_ch = len(ch_names)
    fb = frame["feedback"].to_numpy(dtype=np.float64, na_value=np.nan)
    ok = np.isfinite(fb) & (fb > 0)
    pair = in_codes * n_ch + ch_codes
    times = np.full(n_in * n_ch, np.nan)
    times[pair] = np.inf  # every attempted pair; overwritten where a good timing exists
    counts = np.zeros(n_in * n_ch, dtype=np.int64)
    spreads = np.zeros(n_in * n_ch)
    if ok.any():
        med = pd.Series(fb[ok]).groupby(pair[ok]).agg(["median", "nunique", "min", "max"])
        at = med.index.to_numpy()
        times[at] = med["median"].to_numpy()
        counts[at] = med["nunique"].to_numpy()
        spreads[at] = np.log(med["max"].to_numpy() / med["min"].to_numpy())
    feats = frame[feature_cols].iloc[first].reset_index(drop=True)
    return MedianTimeMatrix(name, in_keys, feats, [str(c) for c in ch_names],
                       times.reshape(n_in, n_ch), weight, counts.reshape(n_in, n_ch), spreads.reshape(n_in, n_ch))


def require_usable(table: MedianTimeMatrix, path: str, rows: int) -> MedianTimeMatrix:
    """``table``, or ValueError naming ``path`` when none of its ``rows`` has a usable time (numpy and
    scikit-learn would otherwise fail later, in their own words, on an empty training set)."""
    if not np.isfinite(table.times).any():
        raise ValueError(f"{path}: no usable row: none of its {rows} row(s) has a finite, positive feedback "
                         "(NaN, negative, zero and infinite times teach nothing)")
    return table


# --------------------------------------------------------------------------------------------------
# features


@dataclass
class FeatureSpec:
    """How a plain dict of log feature columns becomes the tree's float vector.

    derived: (name, expression) pairs; the expression reads ``x["col"]`` and is evaluated on numpy
    float64 arrays here and on Python floats in the generated artifact, with the same operations in the
    same order, so both give bit-identical values. Categorical columns are one-hot encoded against a
    fixed sorted category list (unknown values: all zeros), compared as ``str(value)``.
    """

    numerical: list[str]
    categorical: list[str]
    derived: list[tuple[str, str]] = field(default_factory=list)
    categories: dict[str, list[str]] = field(default_factory=dict)

    def fit(self, frames: list[pd.DataFrame]) -> "FeatureSpec":
        cats = {}
        for col in self.categorical:
            vals = set()
            for f in frames:
                vals.update(f[col].astype(str).unique().tolist())
            cats[col] = sorted(vals)
        return FeatureSpec(self.numerical, self.categorical, self.derived, cats)

    def names(self) -> list[str]:
        out = list(self.numerical) + [n for n, _ in self.derived]
        for col in self.categorical:
            out += [f"{col}={v}" for v in self.categories[col]]
        return out

    def matrix(self, features: pd.DataFrame) -> np.ndarray:
        """(n, n_features) float64 matrix; the tree sees it rounded to float32 (as scikit-learn does)."""
        x = {c: features[c].to_numpy(dtype=np.float64) for c in self.numerical}
        cols = [x[c] for c in self.numerical]
        for _, expr in self.derived:
            cols.append(np.asarray(eval(expr, {"__builtins__": {}}, {"x": x}), dtype=np.float64))
        for col in self.categorical:
            s = features[col].astype(str).to_numpy()
            cols += [(s == v).astype(np.float64) for v in self.categories[col]]
        return np.column_stack(cols) if cols else np.zeros((len(features), 0))


# --------------------------------------------------------------------------------------------------
# the model


@dataclass
class RankingTree:
    """A fitted tree plus, per node, its own ranked choice list and scores."""

    tree: DecisionTreeClassifier
    spec: FeatureSpec
    choices: list[str]
    node_order: list[np.ndarray]  # per node: choice indices measured there, best first
    node_score: list[np.ndarray]  # per node: matching expected speed exp(-E[log regret]) in (0, 1]
    leaf_rankings: dict[int, np.ndarray] = field(default_factory=dict)  # leaf -> full ranking
    params: dict = field(default_factory=dict)
    leaf_support: dict[int, "LeafSupport"] = field(default_factory=dict)  # leaf -> its data against the default

    def support(self, features: dict) -> dict | None:
        """What the generated artifact's ``support`` answers for one input (None: nothing recorded)."""
        found = self.leaf_support.get(int(self.leaves(pd.DataFrame([features]))[0]))
        return None if found is None else found.as_dict(self.choices)

    def leaves(self, features: pd.DataFrame) -> np.ndarray:
        return self.tree.apply(self.spec.matrix(features).astype(np.float32))

    def ranking_of_leaf(self, leaf: int) -> np.ndarray:
        return self.leaf_rankings[int(leaf)]

    def rank(self, features: dict) -> list[tuple[str, float]]:
        """Rank one input given as a plain dict (the same answer the generated artifact gives)."""
        leaf = int(self.leaves(pd.DataFrame([features]))[0])
        order = self.leaf_rankings[leaf]
        own = len(self.node_order[leaf])
        scores = list(self.node_score[leaf]) + [0.0] * (len(order) - own)
        return [(self.choices[c], float(s)) for c, s in zip(order, scores)]


@dataclass
class TrainingSet:
    """Stacked training inputs of every dataset, aligned to one choice list."""

    X: np.ndarray  # (n, n_features) float32
    times: np.ndarray  # (n, n_choices)
    weight: np.ndarray  # (n,)
    counts: np.ndarray | None = None  # (n, n_choices) distinct measurements behind each time
    spreads: np.ndarray | None = None  # (n, n_choices) log(max / min) of those measurements


def stack(tables: list[MedianTimeMatrix], spec: FeatureSpec, choices: list[str]) -> TrainingSet:
    X, T, W, C, S = [], [], [], [], []
    for t in tables:
        times = t.aligned_times(choices)
        keep = np.isfinite(times).any(axis=1)  # an input with no good timing teaches nothing
        X.append(spec.matrix(t.features[keep]).astype(np.float32))
        T.append(times[keep])
        W.append(np.full(int(keep.sum()), t.weight))
        C.append(t.aligned_counts(choices)[keep])
        S.append(t.aligned_spreads(choices)[keep])
    return TrainingSet(np.concatenate(X), np.concatenate(T), np.concatenate(W), np.concatenate(C),
                       np.concatenate(S))


@dataclass(frozen=True)
class LeafSupport:
    """The data behind a leaf's first choice, against the default (aten) choice, on the training inputs
    of the leaf where both were timed: how many inputs, how many distinct timings of the two, how much
    faster the first choice was (``margin``: geomean of default's time / its time) and how far that varies
    (``spread``: exp of the larger of the ratio's standard deviation across the inputs, in logs, and the
    median log range of an input's repeated timings; None below two inputs, where it cannot be told).
    Fast mode keeps a template on a leaf's word only where these back it (``ah_plugin.use.ranking.supported``)."""

    choice: int
    inputs: int
    timings: int
    margin: float
    spread: float | None

    def as_dict(self, choices: list[str]) -> dict:
        return {"choice": choices[self.choice], "inputs": self.inputs, "timings": self.timings,
                "margin": self.margin, "spread": self.spread}


def leaf_support(ts: TrainingSet, rows: np.ndarray, top: int, default: int) -> LeafSupport:
    """``LeafSupport`` of choice ``top`` on the training inputs ``rows`` (indices into ``ts``)."""
    times = ts.times[rows][:, [top, default]]
    both = np.isfinite(times).all(axis=1)
    ratios = np.log(times[both, 1] / times[both, 0])
    counts = ts.counts[rows][both][:, [top, default]] if ts.counts is not None else np.ones((int(both.sum()), 2))
    inputs = int(both.sum())
    margin = float(np.exp(ratios.mean())) if inputs else 1.0
    spread = None
    if inputs >= 2:
        within = ts.spreads[rows][both][:, [top, default]].max(axis=1) if ts.spreads is not None else np.zeros(inputs)
        spread = round(float(np.exp(max(float(ratios.std(ddof=1)), float(np.median(within))))), 4)
    return LeafSupport(int(top), inputs, int(counts.sum()), round(margin, 4), spread)


def log_regret(times: np.ndarray) -> np.ndarray:
    """log(time / best time of the input); inf -> FAILED_LOG_REGRET; nan stays nan (not run)."""
    best = np.nanmin(np.where(np.isfinite(times), times, np.nan), axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.log(times / best)
    return np.where(np.isinf(r), FAILED_LOG_REGRET, r)


def near_best_pairs(times: np.ndarray, near_best: float) -> tuple[np.ndarray, np.ndarray]:
    """(input index, choice index) of every choice within `near_best` of its input's best time."""
    best = np.nanmin(np.where(np.isfinite(times), times, np.nan), axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        near = np.isfinite(times) & (times <= best * near_best)
    return np.nonzero(near)


def fit_ranking_tree(ts: TrainingSet, spec: FeatureSpec, choices: list[str], *, max_depth=5,
                     min_samples_leaf=0.01, criterion="entropy", near_best=NEAR_BEST,
                     prior_weight=1.0, prior_log_regret=math.log(1.5), balance=True,
                     default: str | None = None, greedy_len: int = 40, k: int = 10, hit_bonus=0.0,
                     unmeasured_log_regret: float = math.log(1.1), min_support: int = 1,
                     random_state=0) -> RankingTree:
    """Fit the tree on near-best pairs, then give every node a ranking by shrunk expected regret.

    balance: weight each pair by 1 / (near-best choices of its input), so an input counts once however
    many choices tie for its best time.
    min_support: a choice measured on fewer training inputs than this is left out of every node's list
    (it goes to the end of the ranking, with the never-measured ones): on a small dataset whose inputs
    each time a different sample of a wide space, one lucky timing must not put a config in the top k.
    """
    rows, cols = near_best_pairs(ts.times, near_best)
    w = ts.weight[rows]
    if balance:
        w = w / np.bincount(rows, minlength=len(ts.X))[rows]
    tree = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=min_samples_leaf,
                                  criterion=criterion, random_state=random_state)
    tree.fit(ts.X[rows], cols, sample_weight=w)

    # per-node sums over the training inputs that pass through the node (sparse indicator matmul)
    path = tree.decision_path(ts.X).tocsc().T.tocsr()  # (n_nodes, n_inputs)
    lr = log_regret(ts.times)
    measured = ~np.isnan(lr)
    wm = measured * ts.weight[:, None]
    m_sum = path @ wm  # weighted number of inputs that ran the choice
    r_sum = path @ (np.where(measured, lr, 0.0) * ts.weight[:, None])
    w_sum = path @ ts.weight  # weighted number of inputs in the node
    unmeasured_sum = (w_sum[:, None] - m_sum) * unmeasured_log_regret
    expected = (r_sum + unmeasured_sum + prior_weight * prior_log_regret) / (w_sum[:, None] + prior_weight)

    supported = measured.sum(axis=0) >= min_support  # inputs of the whole training set, unweighted
    is_leaf = tree.tree_.children_left < 0
    leaf_of = tree.apply(ts.X)
    default_lr = lr[:, choices.index(default)] if default in choices else np.full(len(ts.X), np.nan)
    node_order, node_score = [], []
    for node in range(tree.tree_.node_count):
        ran = np.nonzero((m_sum[node] > 0) & supported)[0]
        # stable: sort by expected regret, ties by choice index (choices are sorted names)
        order = ran[np.lexsort((ran, expected[node, ran]))]
        if is_leaf[node] and len(order) > 1:
            rows = np.nonzero(leaf_of == node)[0]
            order, score = _greedy_list(lr[rows], ts.weight[rows], default_lr[rows], order, greedy_len,
                                        near_best, prior_weight, prior_log_regret, unmeasured_log_regret, k,
                                        hit_bonus)
        else:
            score = np.zeros(len(order))
        node_order.append(order)
        node_score.append(score)

    model = RankingTree(tree, spec, list(choices), node_order, node_score,
                        leaf_support={node: leaf_support(ts, np.nonzero(leaf_of == node)[0], int(node_order[node][0]),
                                                         choices.index(default))
                                      for node in np.nonzero(is_leaf)[0] if len(node_order[node])
                                      and default in choices},
                        params=dict(max_depth=max_depth, min_samples_leaf=min_samples_leaf,
                                    criterion=criterion, near_best=near_best, prior_weight=prior_weight,
                                    prior_log_regret=prior_log_regret, balance=balance,
                                    unmeasured_log_regret=unmeasured_log_regret, greedy_len=greedy_len,
                                    # recorded when used, so artifacts trained without it keep their text
                                    **({"min_support": min_support} if min_support != 1 else {})))
    model.leaf_rankings = _leaf_rankings(model)
    return model


def _greedy_list(lr: np.ndarray, w: np.ndarray, default_lr: np.ndarray, by_expected: np.ndarray,
                 greedy_len: int, near_best: float, prior_weight: float, prior_log_regret: float,
                 unmeasured_log_regret: float, k: int, hit_bonus: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A leaf's list: the lowest expected regret first (the top-1 answer), then greedily the choice that
    most lowers the weighted sum of log-regret of the best of the list so far (which always holds the
    default choice), then the rest by expected regret.

    Also returns each choice's marginal share of inputs whose list first gets a near-best choice with
    it (made non-increasing): summed over a prefix, an estimate of how often that prefix holds a
    near-best choice.
    """
    n_choices = lr.shape[1]
    unmeasured = np.where(np.isnan(lr), np.inf, lr)
    measured = ~np.isnan(lr)
    taken = np.zeros(n_choices, dtype=bool)
    picked = []
    # top-1 chain: each input's answer is the first choice of the list it has a time for, so keep
    # picking the lowest expected regret over the inputs not yet served by an earlier pick
    unserved = np.ones(len(lr), dtype=bool)
    while unserved.any() and len(picked) < greedy_len:
        cand = by_expected[~taken[by_expected] & measured[unserved][:, by_expected].any(axis=0)]
        if len(cand) == 0:
            break
        wu = w[unserved]
        m = measured[unserved][:, cand]
        r = (wu[:, None] * np.where(m, lr[unserved][:, cand], unmeasured_log_regret)).sum(axis=0)
        score = (r + prior_weight * prior_log_regret) / (wu.sum() + prior_weight)
        c = cand[int(np.argmin(score))]
        picked.append(c)
        taken[c] = True
        unserved &= ~measured[:, c]
    used = measured[:, picked].sum(axis=1) if picked else np.zeros(len(lr), dtype=np.int64)
    cur = np.where(np.isnan(default_lr), FAILED_LOG_REGRET, default_lr)
    for c in picked:
        cur = np.minimum(cur, unmeasured[:, c])
    candidates = by_expected  # only choices measured in this leaf
    while len(picked) < greedy_len:
        cand = candidates[~taken[candidates]]
        if len(cand) == 0:
            break
        # only inputs with a free slot among their first k measured choices can still gain
        free = used < k
        if not free.any():
            break
        cf = cur[free][:, None]
        lc = unmeasured[free][:, cand]
        gain = (w[free][:, None] * (cf - np.minimum(cf, lc))).sum(axis=0)
        if hit_bonus:
            gain = gain + hit_bonus * (w[free][:, None] * ((lc <= 0.0) & (cf > 0.0))).sum(axis=0)
        j = int(np.argmax(gain))  # first of equals: the lower expected regret
        if gain[j] <= 0:
            break
        c = cand[j]
        picked.append(c)
        taken[c] = True
        cur = np.minimum(cur, unmeasured[:, c])
        used += measured[:, c]
    order = np.concatenate([np.array(picked, dtype=np.int64), by_expected[~taken[by_expected]]])
    # marginal near-best coverage of each position (without the default)
    near = unmeasured[:, order] <= math.log(near_best)
    covered = np.logical_or.accumulate(near, axis=1)
    share = (w[:, None] * covered).sum(axis=0) / w.sum()
    marginal = np.diff(np.concatenate([[0.0], share]))
    return order, np.round(np.minimum.accumulate(marginal), 6)


def _leaf_rankings(model: RankingTree) -> dict[int, np.ndarray]:
    """Leaf list, then each ancestor's list up to the root, then any choice never measured."""
    t = model.tree.tree_
    parent = np.full(t.node_count, -1)
    for node in range(t.node_count):
        for child in (t.children_left[node], t.children_right[node]):
            if child >= 0:
                parent[child] = node
    out = {}
    n_choices = len(model.choices)
    for leaf in np.nonzero(t.children_left < 0)[0]:
        seen = np.zeros(n_choices, dtype=bool)
        parts = []
        node = leaf
        while node >= 0:
            o = model.node_order[node]
            o = o[~seen[o]]
            seen[o] = True
            parts.append(o)
            node = parent[node]
        parts.append(np.nonzero(~seen)[0])
        out[int(leaf)] = np.concatenate(parts).astype(np.int64)
    return out


# --------------------------------------------------------------------------------------------------
# evaluation


@dataclass
class Metrics:
    """Quality of a ranking on one set of inputs (all regrets are time / best time of the input).

    hit: the fastest measured choice is among the top-k measured ones plus the always-included choice.
    near_hit: the best of that list is within NEAR_BEST of the fastest (upstream's "correct").
    wrong_*: regret of the list on the inputs it misses. top1: regret of the first measured choice.
    default_top1: regret of always answering the always-included choice (where it has a time).
    speedup_over_default: geomean of default time / our top-1 time.
    unsure: inputs whose leaf had no measured choice of its own in the top k (ranking came from back-off).
    """

    name: str
    inputs: int
    k: int
    hits: int
    near_hits: int
    regret_gmean: float
    regret_max: float
    wrong_gmean: float
    wrong_max: float
    top1_gmean: float
    top1_max: float
    default_top1_gmean: float
    speedup_over_default: float
    unsure: int

    @property
    def hit_rate(self) -> float:
        return self.hits / self.inputs if self.inputs else float("nan")

    def row(self) -> list[str]:
        return [self.name, str(self.inputs), f"{self.hit_rate:.4f}", f"{self.hits}",
                f"{self.near_hits / max(self.inputs, 1):.4f}", f"{self.regret_gmean:.4f}",
                f"{self.regret_max:.3f}", f"{self.wrong_gmean:.3f}", f"{self.wrong_max:.3f}",
                f"{self.top1_gmean:.4f}", f"{self.top1_max:.3f}", f"{self.default_top1_gmean:.4f}",
                f"{self.speedup_over_default:.4f}", str(self.unsure)]

    HEADER = ["set", "inputs", "top-k hit", "hits", "near hit", "regret gmean", "regret max",
              "wrong gmean", "wrong max", "top-1 gmean", "top-1 max", "default gmean",
              "speedup vs default", "unsure"]


def evaluate_orders(name: str, orders: np.ndarray, times: np.ndarray, k: int, default_idx: int | None,
                    own_len: np.ndarray | None = None, near_best: float = NEAR_BEST) -> Metrics:
    """Score per-input rankings `orders` (n, n_choices of choice indices, best first) against `times`.

    Only choices with a finite time for the input count as measured; the list is the first k measured
    choices of the ranking plus `default_idx`.
    """
    keep = np.isfinite(times).any(axis=1)
    times, orders = times[keep], orders[keep]
    n = len(times)
    if n == 0:
        nan = float("nan")
        return Metrics(name, 0, k, 0, 0, nan, nan, nan, nan, nan, nan, nan, nan, 0)
    best = np.nanmin(np.where(np.isfinite(times), times, np.nan), axis=1)
    ranked = np.take_along_axis(times, orders, axis=1)
    fin = np.isfinite(ranked)
    pos = np.cumsum(fin, axis=1)
    in_top = fin & (pos <= k)
    listed = np.where(in_top, ranked, np.inf).min(axis=1)
    default_t = times[:, default_idx] if default_idx is not None else np.full(n, np.inf)
    default_t = np.where(np.isfinite(default_t), default_t, np.inf)
    listed = np.minimum(listed, default_t)
    regret = listed / best
    first = np.argmax(fin, axis=1)
    # nothing of the ranking measured (only possible for a partial ranking): the default answers
    top1 = np.where(fin.any(axis=1), ranked[np.arange(n), first], default_t) / best
    has_def = np.isfinite(default_t)
    unsure = 0
    if own_len is not None:
        own_len = own_len[keep]
        own_measured = (fin & (np.arange(ranked.shape[1])[None, :] < own_len[:, None]) & in_top).any(axis=1)
        unsure = int((~own_measured).sum())
    wrong = regret[regret > 1.0]
    return Metrics(
        name, n, k, int((regret <= 1.0).sum()), int((regret <= near_best).sum()),
        geomean(regret), float(regret.max()), geomean(wrong), float(wrong.max()) if len(wrong) else 1.0,
        geomean(top1), float(top1.max()), geomean(default_t[has_def] / best[has_def]),
        geomean(default_t[has_def] / (top1 * best)[has_def]), unsure)


def evaluate(model: RankingTree, table: MedianTimeMatrix, k: int, default: str | None,
             name: str | None = None) -> Metrics:
    times = table.aligned_times(model.choices) if table.choices != model.choices else table.times
    leaves = model.leaves(table.features) if len(table.keys) else np.zeros(0, dtype=np.int64)
    n_ch = len(model.choices)
    orders = np.stack([model.leaf_rankings[int(l)] for l in leaves]) if len(leaves) else \
        np.zeros((0, n_ch), dtype=np.int64)
    own_len = np.array([len(model.node_order[int(l)]) for l in leaves], dtype=np.int64)
    default_idx = model.choices.index(default) if default in model.choices else None
    return evaluate_orders(name or table.name, orders, times, k, default_idx, own_len)


# --------------------------------------------------------------------------------------------------
# grid search and the full training run


DEFAULT_GRID = {
    "max_depth": [6, 8],
    "min_samples_leaf": [0.002],
    "criterion": ["entropy", "gini"],
}
#: for our own collections, where each input times default's choices plus a different sample of the
#: wide space, so most configs are timed on a handful of inputs: shallower trees, and a floor on how many
#: training inputs must have timed a choice before it is ranked. Opt-in (``--grid sparse``): the official
#: datasets keep DEFAULT_GRID, so their regenerated artifacts do not change.
SPARSE_GRID = {
    "max_depth": [3, 4, 6],
    "min_samples_leaf": [0.002],
    "criterion": ["entropy", "gini"],
    "min_support": [1, 3, 5, 8],
}
GRIDS = {"default": DEFAULT_GRID, "sparse": SPARSE_GRID}


def grid_points(grid: dict) -> list[dict]:
    points = [{}]
    for name in sorted(grid):
        points = [dict(p, **{name: v}) for p in points for v in grid[name]]
    return points


def validation_score(metrics: list[Metrics]) -> float:
    """Lower is better: top-k miss rate plus mean log top-1 regret, pooled over the inputs.

    The two terms are of the same size on the official data (a few percent each), so the grid point
    must keep both the pruned list and the first answer good.
    """
    n = sum(m.inputs for m in metrics)
    if n == 0:
        return 0.0
    misses = sum(m.inputs - m.hits for m in metrics)
    log_top1 = sum(m.inputs * math.log(m.top1_gmean) for m in metrics if m.inputs)
    return (misses + log_top1) / n


@dataclass
class TrainResult:
    model: RankingTree
    metrics: list[Metrics]  # per split and per dataset
    grid: list[tuple[dict, float]]  # (params, validation score)
    best_params: dict


def trained_choices(tables: list[MedianTimeMatrix], held: list[np.ndarray]) -> list[str]:
    """The choices measured on at least one input that is trained on, sorted. A choice seen only in
    held-out inputs stays out of the artifact: naming it would leak what the held-out inputs ran."""
    names: set[str] = set()
    for table, mask in zip(tables, held):
        measured = ~np.isnan(table.times[~mask])
        names.update(c for c, seen in zip(table.choices, measured.any(axis=0)) if seen)
    return sorted(names)


def train(main: MedianTimeMatrix, extras: list[MedianTimeMatrix], spec: FeatureSpec, *, k: int = 10,
          default: str | None = None, holdout: str = "none", grid: dict | None = None,
          log=print) -> TrainResult:
    """Split by input, grid-search on the validation inputs, refit on train + validation, report.

    holdout "none": every input is used (the shipped artifacts); "sha1mod5": the held-out protocol, held
    out inputs of every file are never trained on and are reported per file; "sha1mod5:B": bucket B held
    out instead (rotations). Validation: 4-fold cross-validation over the four sha1 % 5 buckets that are
    not held out (``heldout.validation_folds``), used only to pick the grid point.
    """
    tables = [main] + list(extras)
    spec = spec.fit([t.features for t in tables])
    held = [is_heldout(t.keys, holdout) for t in tables]
    choices = trained_choices(tables, held)
    folds = [validation_fold(t.keys) for t in tables]
    fold_data = []  # (training set, validation tables) per fold; a fold with no training input is skipped
    for f in validation_folds(holdout):
        train_tabs = [t.subset(~h & (fo != f)) for t, h, fo in zip(tables, held, folds)]
        val_tabs = [t.subset(~h & (fo == f)) for t, h, fo in zip(tables, held, folds)]
        training = stack(train_tabs, spec, choices)
        if len(training.X):
            fold_data.append((training, val_tabs))

    scored, val_metrics = [], []
    for params in grid_points(grid or DEFAULT_GRID):
        ms = []
        for ts_train, val_tabs in fold_data:
            model = fit_ranking_tree(ts_train, spec, choices, default=default, k=k, **params)
            ms += [evaluate(model, t, k, default, f"{t.name} validation") for t in val_tabs]
        score = validation_score(ms)
        scored.append((params, score))
        val_metrics.append(_pool(ms, [t.name for t in tables]))
        log(f"  grid {params}: validation score {score:.5f}")
    best = min(range(len(scored)), key=lambda i: scored[i][1])  # first of equals: grid order is fixed
    best_params = scored[best][0]

    fit_tabs = [t.subset(~h) for t, h in zip(tables, held)]
    model = fit_ranking_tree(stack(fit_tabs, spec, choices), spec, choices, default=default, k=k,
                             **best_params)
    metrics = list(val_metrics[best])  # scored before the refit: inputs the grid fit never saw
    for t, h in zip(tables, held):
        metrics.append(evaluate(model, t.subset(~h), k, default, f"{t.name} train"))
    if holdout != "none":
        metrics += [evaluate(model, t.subset(h), k, default, f"{t.name} held-out")
                    for t, h in zip(tables, held)]
    return TrainResult(model, metrics, scored, best_params)


def _pool(metrics: list[Metrics], names: list[str]) -> list[Metrics]:
    """Pool per-fold validation metrics per dataset (sums, input-weighted geomeans, maxima)."""
    out = []
    for name in names:
        ms = [m for m in metrics if m.name == f"{name} validation" and m.inputs]
        n = sum(m.inputs for m in ms)
        if not n:
            continue

        def gm(attr, ms=ms, n=n):
            return math.exp(sum(m.inputs * math.log(getattr(m, attr)) for m in ms) / n)

        wrong = [m for m in ms if m.inputs > m.hits]
        nw = sum(m.inputs - m.hits for m in wrong)
        out.append(Metrics(
            f"{name} validation", n, ms[0].k, sum(m.hits for m in ms), sum(m.near_hits for m in ms),
            gm("regret_gmean"), max(m.regret_max for m in ms),
            math.exp(sum((m.inputs - m.hits) * math.log(m.wrong_gmean) for m in wrong) / nw) if nw else float("nan"),
            max(m.wrong_max for m in ms), gm("top1_gmean"), max(m.top1_max for m in ms),
            gm("default_top1_gmean"), gm("speedup_over_default"), sum(m.unsure for m in ms)))
    return out


def metrics_markdown(metrics: list[Metrics]) -> str:
    lines = ["| " + " | ".join(Metrics.HEADER) + " |", "|" + " --- |" * len(Metrics.HEADER)]
    lines += ["| " + " | ".join(m.row()) + " |" for m in metrics]
    return "\n".join(lines)
