"""The `params` column of a FlexAttention row: one flex kernel's call as a short editable string.

    B{batch}_Hq{q heads}_Hkv{kv heads}_Lq{q length}_Lkv{kv length}_D{qk head dim}_Dv{v head dim}_{dtype}
    _blk{q block}x{kv block}_fn-{digest}

e.g. `B8_Hq32_Hkv8_Lq1_Lkv4096_D128_Dv128_bfloat16_blk128x128_fn-3f9a0c21` for the decoding kernel of a
grouped-query decoder reading a 4096-token cache.

- the sizes are those of the call's query, key and value (the decoding kernel's grouped query counted as
  its heads), as the flex features (`flex_ranking.flex_features`) read them;
- `blk`: the block mask's query and key/value block sizes. A config's blocks must divide them (Inductor
  drops a config that does not), so a winner recorded under one block size is never answered for another;
- `fn`: eight hex digits of a digest of the score and mask functions' code and the kernel options as the
  lowering sees them (flex_attention's defaults filled in: inference and training differ). Two masks at one
  size (causal, a sliding window) prefer different configs, so they are two rows.
  The digest is a key, not a description: a row is written by a run and read by the next one.

A flex row is one exact call: no wildcards (its functions cannot be matched by a pattern), and it cannot
be tuned offline (the row does not hold the functions to rebuild the call); a program run with tuning on
records its winners.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ah_plugin.report import messages
from ah_plugin.use import flex_ranking

FLEX_OPS = frozenset(flex_ranking.FLEX_OPS)

# the request context's keys (filled by the adapter from the flex lowering's arguments)
SPARSE_BLOCKS = flex_ranking.CONTEXT_SPARSE_BLOCKS  # (q block, kv block)
FUNCTIONS = flex_ranking.CONTEXT_FUNCTIONS  # the digest of the score/mask functions and kernel options

_FLEX_RE = re.compile(
    r"B(?P<batch>[1-9][0-9]*)_Hq(?P<q_heads>[1-9][0-9]*)_Hkv(?P<kv_heads>[1-9][0-9]*)"
    r"_Lq(?P<q_seq>[1-9][0-9]*)_Lkv(?P<kv_seq>[1-9][0-9]*)_D(?P<qk_head_dim>[1-9][0-9]*)"
    r"_Dv(?P<v_head_dim>[1-9][0-9]*)_(?P<dtype>[a-z][a-z0-9_]*)"
    r"_blk(?P<q_block>[1-9][0-9]*)x(?P<kv_block>[1-9][0-9]*)_fn-(?P<functions>[0-9a-f]{8})"
)
PATTERN = _FLEX_RE.pattern


class FlexParamsError(ValueError):
    """A flex params string that does not follow the format above."""


@dataclass(frozen=True)
class FlexParams:
    """One flex call's key (every field concrete)."""

    batch: int
    q_heads: int
    kv_heads: int
    q_seq: int
    kv_seq: int
    qk_head_dim: int
    v_head_dim: int
    dtype: str
    q_block: int
    kv_block: int
    functions: str

    wildcards = 0  # a flex key is always exact (what the results file's readers ask of every key)

    def encode(self) -> str:
        return (f"B{self.batch}_Hq{self.q_heads}_Hkv{self.kv_heads}_Lq{self.q_seq}_Lkv{self.kv_seq}"
                f"_D{self.qk_head_dim}_Dv{self.v_head_dim}_{self.dtype}_blk{self.q_block}x{self.kv_block}"
                f"_fn-{self.functions}")

    def matches(self, other: "FlexParams") -> bool:
        return self == other


def parse(text: str) -> FlexParams:
    """Parse a flex params string; FlexParamsError says what is wrong."""
    match = _FLEX_RE.fullmatch(text.strip())
    if match is None:
        hint = " (a flex row is one exact call: no wildcards)" if "*" in text else ""
        raise FlexParamsError(
            f"flex params {messages.quoted(text)} is not B<batch>_Hq<heads>_Hkv<kv heads>_Lq<length>_Lkv<kv length>"
            f"_D<head dim>_Dv<value head dim>_<dtype>_blk<q block>x<kv block>_fn-<8 hex digits>{hint}")
    values = match.groupdict()
    text_fields = ("dtype", "functions")
    return FlexParams(**{name: value if name in text_fields else int(value) for name, value in values.items()})


def from_request(features: dict, context: dict) -> FlexParams | None:
    """The key of one flex autotuning from its feature columns (``flex_ranking.NUMERICAL`` and ``dtype``) and
    the context the adapter gave it; None when either lacks a part (no key: the cache stays out)."""
    blocks, functions = context.get(SPARSE_BLOCKS), context.get(FUNCTIONS)
    if not blocks or not functions:
        return None
    try:
        sizes = {name: int(features[name]) for name in flex_ranking.NUMERICAL}
        q_block, kv_block = (int(b) for b in blocks)
        key = FlexParams(**sizes, dtype=str(features["dtype"]).replace("torch.", ""), q_block=q_block,
                         kv_block=kv_block, functions=str(functions))
    except (KeyError, TypeError, ValueError):
        return None
    try:
        return parse(key.encode())  # only a key that reads back (a digest of 8 hex digits, sizes above 0)
    except FlexParamsError:
        return None
