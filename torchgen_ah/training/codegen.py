"""A fitted RankingTree -> a pure-Python artifact (Contract 2 of docs/ARCHITECTURE.md), plus its DOT.

The artifact imports only the standard library. Its tree is nested if/else on float32-rounded feature
values (scikit-learn compares float32 inputs with float64 thresholds; ``repr`` keeps thresholds exact),
so it routes every input exactly as the in-memory tree does. Output is a pure function of the model and
the arguments: no timestamps, sorted containers, fixed formatting, so the same data and flags give the
same bytes.
"""

from __future__ import annotations

import keyword
import re

from torchgen_ah.training.train_decision import RankingTree

_INDENT = "    "


def heuristic_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an artifact's class name (a Python identifier, not a keyword), with the
    identifier to use instead; None when it can."""
    if name.isidentifier() and not keyword.iskeyword(name):
        return None
    fixed = re.sub(r"\W", "_", name.strip())
    fixed = fixed if fixed and not fixed[0].isdigit() else f"_{fixed}"
    fixed = fixed + "_" if keyword.iskeyword(fixed) else fixed
    return (f"{name!r} is not a Python class name (letters, digits and _, not starting with a digit, not a "
            f"keyword); the artifact is class NAME in _NAME.py: try {fixed!r}")


def heuristic_name(text: str) -> str:
    """``--heuristic-name``'s type: the name, or argparse's error naming what to use instead."""
    import argparse

    problem = heuristic_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _feature_lines(model: RankingTree) -> list[str]:
    """Body of ``_features``: the tree's float vector from a plain dict of log columns."""
    spec = model.spec
    lines = ["x = {"]
    for name in spec.numerical:
        lines.append(f"{_INDENT}{name!r}: float(features[{name!r}]),")
    lines.append("}")
    lines.append("v = [")
    for name in spec.numerical:
        lines.append(f"{_INDENT}x[{name!r}],")
    for name, expr in spec.derived:
        lines.append(f"{_INDENT}{expr},  # {name}")
    lines.append("]")
    for col in spec.categorical:
        lines.append(f"c = str(features[{col!r}])")
        for value in spec.categories[col]:
            lines.append(f"v.append(1.0 if c == {value!r} else 0.0)")
    lines.append("return [_f32(f) for f in v]")
    return lines


def _tree_lines(model: RankingTree) -> list[str]:
    """Body of ``_leaf``: nested if/else returning the leaf's node id."""
    t = model.tree.tree_
    names = model.spec.names()
    lines: list[str] = []

    def walk(node: int, depth: int) -> None:
        pad = _INDENT * depth
        left, right = int(t.children_left[node]), int(t.children_right[node])
        if left < 0:
            lines.append(f"{pad}return {node}")
            return
        f = int(t.feature[node])
        lines.append(f"{pad}if v[{f}] <= {float(t.threshold[node])!r}:  # {names[f]}")
        walk(left, depth + 1)
        lines.append(f"{pad}else:")
        walk(right, depth + 1)

    walk(0, 0)
    return lines


def _ranking_table(model: RankingTree) -> list[str]:
    lines = ["_RANKINGS = {"]
    for leaf in sorted(model.leaf_rankings):
        order = ", ".join(str(int(c)) for c in model.leaf_rankings[leaf])
        lines.append(f"{_INDENT}{leaf}: ({order},),")
    lines.append("}")
    lines.append("_SCORES = {")
    for leaf in sorted(model.leaf_rankings):
        scores = ", ".join(repr(float(s)) for s in model.node_score[leaf])
        lines.append(f"{_INDENT}{leaf}: ({scores}{',' if len(model.node_score[leaf]) == 1 else ''}),")
    lines.append("}")
    return lines


def _support_table(model: RankingTree) -> list[str]:
    """``_SUPPORT``: per leaf, (its first choice, inputs, distinct timings, margin, spread) against the
    default choice (``train_decision.LeafSupport``)."""
    lines = ["# per leaf: its first choice against the default (aten's): the training inputs where both were timed,",
             "# their distinct timings, the margin (geomean of the default's time / the choice's) and the spread",
             '_SUPPORT_KEYS = ("choice", "inputs", "timings", "margin", "spread")', "_SUPPORT = {"]
    for leaf in sorted(model.leaf_support):
        s = model.leaf_support[leaf]
        lines.append(f"{_INDENT}{leaf}: ({s.choice}, {s.inputs}, {s.timings}, {s.margin!r}, {s.spread!r}),")
    lines.append("}")
    return lines


def _block(lines: list[str], depth: int) -> str:
    return "\n".join((_INDENT * depth + ln) if ln else "" for ln in lines)


def generate_artifact(model: RankingTree, heuristic_name: str, metadata: dict, *,
                      device_names: tuple[str, ...] = (), command: str = "",
                      sources: list[str] | None = None) -> str:
    """Python source of the artifact class `heuristic_name`.

    metadata: the training log's metadata ("name", "device_capa", "shared_memory", feature lists, and
        "timing" when its choices were timed by CUDA-graph replay: fast mode trusts such an artifact's templates).
    command: how it was generated (written in the header so a reader can regenerate it).
    ValueError when ``heuristic_name`` is not a Python class name.
    """
    problem = heuristic_name_problem(heuristic_name)
    if problem:
        raise ValueError(problem)
    spec = model.spec
    capa = tuple(int(c) for c in metadata["device_capa"])
    header = [
        "# Generated by torchgen_ah (ah-plugin). Do not edit: regenerate with",
        f"#   {command}" if command else "#   python -m torchgen_ah.mm.train_decision_mm ...",
    ]
    for src in sources or []:
        header.append(f"# trained on: {src}")
    params = ", ".join(f"{k}={v!r}" for k, v in sorted(model.params.items()))
    header.append(f"# parameters: {params}")
    header.append(f"# tree: {model.tree.get_depth()} levels, {model.tree.get_n_leaves()} leaves, "
                  f"{len(model.choices)} choices")
    choices = "\n".join(f"{_INDENT * 2}{c!r}," for c in model.choices)
    # how the training data's candidates were timed; written only for CUDA-graph replay data, so artifacts
    # from per-call data (upstream's, and every log without the mark) stay byte for byte as they were
    timing = f"\n{_INDENT}timing = {metadata['timing']!r}" if metadata.get("timing") else ""
    categories = "\n".join(f"{_INDENT * 2}{col!r}: {tuple(spec.categories[col])!r},"
                           for col in spec.categorical)
    src = f'''{chr(10).join(header)}
"""Learned ranking of {metadata["name"]} kernel choices for one device (pure Python, stdlib only)."""

import struct


def _f32(value):
    """Round to float32, as scikit-learn does with the features before comparing to thresholds."""
    return struct.unpack("f", struct.pack("f", value))[0]


{_block(_ranking_table(model), 0)}
{_block(_support_table(model), 0)}


class {heuristic_name}:
    heuristic_name = {heuristic_name!r}
    op_name = {metadata["name"]!r}
    device_capa = {capa!r}
    shared_memory = {int(metadata["shared_memory"])!r}
    device_names = {tuple(device_names)!r}{timing}
    numerical_features = {list(spec.numerical)!r}
    categorical_features = {list(spec.categorical)!r}
    derived_features = {[n for n, _ in spec.derived]!r}
    categories = {{
{categories}
    }}
    choices = [
{choices}
    ]

    def check_precondition(self, metadata):
        """True when `metadata` describes the device and operation this heuristic was trained for."""
        try:
            if metadata["name"] != self.op_name:
                return False
            if tuple(int(c) for c in metadata["device_capa"]) != self.device_capa:
                return False
            if int(metadata["shared_memory"]) != self.shared_memory:
                return False
        except (KeyError, TypeError, ValueError):
            return False
        if self.device_names and metadata.get("device_name") not in self.device_names:
            return False
        return True

    def _features(self, features):
{_block(_feature_lines(model), 2)}

    def _leaf(self, v):
{_block(_tree_lines(model), 2)}

    def rank(self, features):
        """Every choice, best first, as (choice id, score).

        The leaf's own list comes first, scored with its estimated share of inputs for which that
        choice first brings the list within 1% of the best time (non-increasing); then the back-off
        (ancestor nodes' lists, then every other known choice) with 0.0.
        """
        leaf = self._leaf(self._features(features))
        scores = _SCORES[leaf]
        order = _RANKINGS[leaf]
        n = len(scores)
        return [(self.choices[c], scores[i] if i < n else 0.0) for i, c in enumerate(order)]

    def support(self, features):
        """The training data behind this input's leaf (its first choice against the default), or None."""
        found = _SUPPORT.get(self._leaf(self._features(features)))
        return None if found is None else dict(zip(_SUPPORT_KEYS, (self.choices[found[0]], *found[1:])))
'''
    return src


def generate_dot(model: RankingTree, heuristic_name: str, top: int = 3) -> str:
    """The tree as Graphviz DOT: split nodes show the test, leaves their first `top` choices."""
    t = model.tree.tree_
    names = model.spec.names()
    out = [f"digraph {heuristic_name} {{", '  node [shape=box, fontname="monospace"];']
    for node in range(t.node_count):
        samples = int(t.n_node_samples[node])
        if t.children_left[node] < 0:
            first = [model.choices[int(c)] for c in model.leaf_rankings[node][:top]]
            label = f"leaf {node}\\nsamples={samples}\\n" + "\\n".join(first)
            support = model.leaf_support.get(node)
            if support is not None:
                spread = "unknown" if support.spread is None else f"{support.spread:g}"
                label += (f"\\nsupport: {support.inputs} inputs, {support.timings} timings, "
                          f"margin {support.margin:g}, spread {spread}")
        else:
            label = f"{names[int(t.feature[node])]} <= {float(t.threshold[node])!r}\\nsamples={samples}"
        out.append(f'  n{node} [label="{label}"];')
    for node in range(t.node_count):
        for child, tag in ((t.children_left[node], "yes"), (t.children_right[node], "no")):
            if child >= 0:
                out.append(f'  n{node} -> n{int(child)} [label="{tag}"];')
    out.append("}")
    return "\n".join(out) + "\n"
