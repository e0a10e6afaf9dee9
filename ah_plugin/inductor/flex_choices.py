"""The configs a FlexAttention kernel is compiled and timed with, decided before any code exists.

Inductor asks its choices handler for each flex kernel's configs (``PluginChoices.get_flex_*_configs``);
max-autotune off gets one default config, default max-autotune its whole list. Here, for an op named in
the use variable (``TORCHINDUCTOR_AUTOHEURISTIC_USE=flex_attention,flex_decoding``), the list is asked for
as default max-autotune would have it, the artifact for the op ranks it from the call's features
(``flex_ranking``; the query, key and value come from ``patches.flex_lowering``), and ``flex_ranking.choose``
keeps what the mode allows: fast mode the ranking's first config and off's default config (or the first
alone where the ranking is sure), quality mode the first three and off's. With more than one config kept
Inductor times them and keeps the fastest, and the adapter's aten margin (off's config noted as the
baseline, ``flex_lowering.note_off_config``) lets a kept config replace off's only when faster by the margin.
An op named in the collect variable gets default max-autotune's whole list in every mode.
"""

from __future__ import annotations

import functools
import inspect

import torch
from torch._inductor import config as inductor_config

from ..report.verbose_output import verbose
from ..use import artifact_loader, flex_ranking
from ..use.ranking import lone_template_share, supported
from .patches import flex_lowering
from .requests import device_metadata

# Inductor's config objects -> the keys of ``flex_ranking.CONFIG_KEYS``
_FIELDS = {
    flex_ranking.FLEX_FORWARD: {"BLOCK_M": "block_m", "BLOCK_N": "block_n", "num_stages": "num_stages",
                                "num_warps": "num_warps"},
    flex_ranking.FLEX_DECODING: {"BLOCK_N": "block_n", "num_stages": "num_stages", "num_warps": "num_warps"},
    flex_ranking.FLEX_BACKWARD: {"BLOCK_M1": "block_m1", "BLOCK_N1": "block_n1", "BLOCK_M2": "block_m2",
                                 "BLOCK_N2": "block_n2", "num_stages": "num_stages", "num_warps": "num_warps"},
}

stats = {"decided": 0, "kept": 0, "offered": 0, "without_ranking": 0}


def config_params(op: str, config) -> dict:
    """A config object's tunables under the kernel's option names."""
    return {key: getattr(config, attr) for key, attr in _FIELDS[op].items()}


def hook_arguments(hook, args, kwargs) -> tuple:
    """(head_dim, dtype, device_type) of a call of Inductor's flex config hook ``hook`` (a bound method), by its
    own signature: torch 2.14 put ``seq_len`` between the head dim and the dtype of the forward's."""
    bound = _signature(hook).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments["head_dim"], bound.arguments["dtype"], bound.arguments.get("device_type", "cuda")


@functools.lru_cache(maxsize=16)
def _signature_of(function):
    return inspect.signature(function)


def _signature(hook):
    """The hook's signature without ``self`` (cached per function: read once per process)."""
    function = getattr(hook, "__func__", hook)
    parameters = list(_signature_of(function).parameters.values())
    if hasattr(hook, "__self__"):
        parameters = parameters[1:]
    return inspect.Signature(parameters)


def configs(op: str, ask, head_dim: int, dtype, device_type, current, call=None, metadata=None) -> list:
    """The configs for one flex kernel: ``ask()`` is Inductor's own hook, called with the arguments Inductor
    gave (under the ``max_autotune`` this decision asks for).
    ``call``: the query, key and value described (default: the flex call being lowered); ``metadata``: the
    device's (default: the current CUDA device's)."""
    if current is None or not current.active or device_type != "cuda":
        return ask()
    if op in current.collect_ops:
        with inductor_config.patch(max_autotune=True):
            return ask()
    if op not in current.use_ops:
        return ask()
    with inductor_config.patch(max_autotune=True):
        offered = list(ask())
    with inductor_config.patch(max_autotune=False):
        off = ask()[-1]
    ids = [flex_ranking.config_id(op, config_params(op, c)) for c in offered]
    off_id = flex_ranking.config_id(op, config_params(op, off))
    if off_id not in ids:
        offered.append(off)
        ids.append(off_id)
    flex_lowering.note_off_config(op, off_id)  # the baseline of the aten margin when the kept configs are timed
    call = flex_lowering.current_call() if call is None else call
    if metadata is None:
        metadata = device_metadata(torch.device("cuda", torch.cuda.current_device()))
    ranked, sure, why = _ranking(op, call, {"name": op, **metadata}, current)
    keep = flex_ranking.choose(ranked, ids, off_id, quality=current.quality, sure=sure)
    stats["decided"] += 1
    stats["offered"] += len(ids)
    stats["kept"] += len(keep)
    stats["without_ranking"] += ranked is None
    verbose(f"{op} (head dim {head_dim}, {str(dtype).split('.')[-1]}): {why}; keeps "
                     f"{len(keep)} of {len(ids)} configs: {', '.join(keep)}")
    return [offered[ids.index(cid)] for cid in keep]


def _ranking(op: str, call, metadata: dict, current) -> tuple[list[str] | None, bool, str]:
    """(ids best first or None, whether the ranking is sure of its first, the reason in words)."""
    if call is None:
        return None, False, "the call's sizes are unknown (no ranking)"
    features, _, _ = flex_ranking.flex_features(call)
    artifact = artifact_loader.select(op, metadata, _artifact_dirs(current))
    if artifact is None:
        return None, False, f"no artifact ranks {op} on {metadata['device_name']}"
    ranking = artifact.rank(features)
    if not ranking:
        return None, False, f"{artifact.name} makes no decision for this call"
    top, share = ranking[0]
    # sure only where the leaf's training data back the first config (as for GEMMs: enough inputs and timings,
    # a margin over the trainer's default larger than the spread) and its share reaches the confidence
    sure = share >= lone_template_share(current.confidence, cpu=False) and supported(artifact.support(features), top)
    return [cid for cid, _ in ranking], sure, f"{artifact.name} ranks it (first at {share:.2f})"


def _artifact_dirs(current):
    """The folders artifacts are loaded from: the user's (``AH_PLUGIN_ARTIFACT_DIR``) and the package's."""
    return artifact_loader.artifact_dirs(current.artifact_dir)
