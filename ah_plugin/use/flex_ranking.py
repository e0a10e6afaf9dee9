"""FlexAttention's kernel configs: their features, ids and what fast and quality modes keep, as plain data.

FlexAttention is where autotuning pays most on the H200 (benchmarks/RESULTS.md, "Where autotuning pays"):
max-autotune off runs one default config per kernel, and default max-autotune's search over 4-13 configs
made the decoding kernel 1.4-2.9x faster and the forward kernel up to 12% faster. Inductor asks its choices
handler for those config lists before any code exists (``get_flex_attention_fwd_configs`` and its decoding
and backward twins), so the adapter (``ah_plugin.inductor.flex_choices``) decides there, with this module:

* ``FLEX_OPS``: the three autotuning names;
* ``flex_features(tensors)``: the log's feature columns of one call from its query, key and value (sizes,
  heads, head dims, dtype). A block mask's density is not among them: the mask is a tensor whose values
  Inductor does not see at compile time, and its autotuning times every config on made-up dense masks;
* ``config_id(op, params)``: a config's stable id, the same from Inductor's config objects (before code
  generation) and from a compiled candidate's log info (in the collector's rows);
* ``choose(...)``: the configs kept. Fast mode keeps the ranking's first config alone where the ranking is
  sure of it, else the first and off's default config, timed against each other (never slower than
  off); quality mode keeps the first three and off's. Without a ranking fast mode keeps off's config alone
  (what max-autotune off runs) and quality mode every config (default max-autotune's search). Timed against
  off's config, a kept config replaces it only when faster by the aten margin (``aten_margin``, with off's
  config as the baseline: ``off_config``), as a template replaces aten.

Standard library only.
"""

from __future__ import annotations

FLEX_FORWARD = "flex_attention"
FLEX_DECODING = "flex_decoding"
FLEX_BACKWARD = "flex_attention_backward"
FLEX_OPS = (FLEX_FORWARD, FLEX_DECODING, FLEX_BACKWARD)

NUMERICAL = ["batch", "q_heads", "kv_heads", "q_seq", "kv_seq", "qk_head_dim", "v_head_dim"]
CATEGORICAL = ["dtype"]

# the config keys that tell one kernel's configs apart, in id order (decoding derives its BLOCK_M from the
# query heads per key head, so its configs differ in BLOCK_N, stages and warps only)
CONFIG_KEYS = {
    FLEX_FORWARD: ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps"),
    FLEX_DECODING: ("BLOCK_N", "num_stages", "num_warps"),
    FLEX_BACKWARD: ("BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2", "num_stages", "num_warps"),
}
_PREFIX = {FLEX_FORWARD: "flex", FLEX_DECODING: "flexdecode", FLEX_BACKWARD: "flexbwd"}
QUALITY_TOP_K = 3

# a flex autotuning's context (``AutotuneRequest.context``) beyond its features, for the results cache's key:
CONTEXT_SPARSE_BLOCKS = "flex_sparse_blocks"  # the block mask's (query, key/value) block sizes
CONTEXT_FUNCTIONS = "flex_functions"  # a digest of the score and mask functions and the kernel options
# ... and, not part of the key: {op: the config id max-autotune off runs for that kernel of the call}, noted
# where the configs are decided; the baseline a kept config must beat by the aten margin (``off_config``)
CONTEXT_OFF_CONFIGS = "flex_off_configs"


def is_flex_op(name: str) -> bool:
    return name in FLEX_OPS


def config_id(op: str, params: dict) -> str:
    """``flex_BLOCK-M=128_BLOCK-N=64_numstages=3_numwarps=8`` (forward), ``flexdecode_...``, ``flexbwd_...``.
    KeyError when ``params`` lacks a key of ``CONFIG_KEYS[op]``."""
    parts = []
    for key in CONFIG_KEYS[op]:
        name = key.replace("_", "") if key.startswith("num_") else key.replace("_", "-")
        parts.append(f"{name}={int(params[key])}")
    return "_".join([_PREFIX[op], *parts])


def op_of_id(choice_id: str) -> str | None:
    """The flex op whose config ``choice_id`` names, or None for any other id."""
    head = choice_id.split("_", 1)[0]
    return next((op for op, prefix in _PREFIX.items() if prefix == head), None)


def flex_features(tensors: list[dict]) -> tuple[dict, list, list]:
    """(features, numerical names, categorical names) of one flex call from the descriptions of its query,
    key and value (the first three inputs: ``[B, Hq, Lq, D]``, ``[B, Hkv, Lkv, D]``, ``[B, Hkv, Lkv, Dv]``;
    the decoding kernel's autotuning sees the query grouped per key head, ``[B, Hkv, Hq/Hkv, Lq, D]``, which
    gives the same features). ValueError when they are not such tensors."""
    if not is_flex_call(tensors):
        raise ValueError("a flex attention call needs 4-d (or grouped 5-d) query, 4-d key and value descriptions")
    q, k, v = (list(t["size"]) for t in tensors[:3])
    if len(q) == 5:
        q = [q[0], q[1] * q[2], q[3], q[4]]
    values = {"batch": q[0], "q_heads": q[1], "kv_heads": k[1], "q_seq": q[2], "kv_seq": k[2],
              "qk_head_dim": q[3], "v_head_dim": v[3]}
    features = {name: int(values[name]) for name in NUMERICAL}
    features["dtype"] = str(tensors[0].get("dtype", ""))
    return features, list(NUMERICAL), list(CATEGORICAL)


def off_config(op: str, context: dict) -> str | None:
    """The config id max-autotune off runs for the ``op`` kernel of the call ``context`` describes, or None
    where the configs were not decided by the plugin (collection, an op not in use)."""
    return (context.get(CONTEXT_OFF_CONFIGS) or {}).get(op)


def is_flex_call(tensors: list[dict]) -> bool:
    """Whether ``tensors`` start with a flex call's query (4-d, or 5-d grouped), key and value (4-d)."""
    if len(tensors) < 3:
        return False
    ranks = [len(t.get("size", ())) for t in tensors[:3]]
    return ranks[0] in (4, 5) and ranks[1] == 4 and ranks[2] == 4


def choose(ranked: list[str] | None, offered: list[str], off_id: str | None, *, quality: bool,
           sure: bool = False, top_k: int = QUALITY_TOP_K) -> list[str]:
    """The config ids to keep, best first, from ``offered`` (every config Inductor would try).

    ``ranked``: the ranking's ids, best first (None or empty: no ranking covers this call); ``off_id``: the
    config max-autotune off runs. Never empty when ``offered`` is not."""
    ranked = [cid for cid in (ranked or []) if cid in offered]
    if not ranked:
        if quality or off_id not in offered:
            return list(offered)
        return [off_id]
    keep = ranked[:top_k] if quality else ranked[:1]
    if off_id in offered and (quality or not sure):
        keep.append(off_id)  # timed against off's config: never slower than max-autotune off
    return list(dict.fromkeys(keep))
