"""The `params` column: one GEMM's shape, layout and dtype as a short editable string.

    [B{batch}_]{layout}_{M}_{N}_{K}_ld_{lda}_{ldb}_{dtype}[_tf32][_bias-{bias}]

e.g. `NT_4096_1024_512_ld_512_512_bfloat16`, `B8_NN_128_64_32_ld_32_64_float16`,
`NN_1024_3072_768_ld_768_3072_bfloat16_bias-R`.

- layout: one letter per operand of `C[M,N] = A[M,K] @ B[K,N]` as the kernel sees them:
  `N` row-major (stride of the last dim is 1; ld = stride of the other dim), `T` column-major
  (a transposed view: stride of dim -2 is 1; ld = stride of the last dim), `G` any other strides
  (ld written `S0xS1`).
- dtype: the operands' dtype without `torch.`; `A_dtype x B_dtype` joined with `x` when they differ.
- `_tf32` when fp32 inputs may use TF32 (it changes which kernel wins).
- bias (addmm and baddbmm only, always present for them): the layout of the bias as the kernel reads it,
  broadcast to the output `[M, N]`: `R` a row vector (stride 0 over M: the nn.Linear bias), `C` a
  column vector (stride 0 over N), `S` a scalar, `N<ld>`/`T<ld>` a full row-/column-major matrix, `G<s0>x<s1>`
  any other strides; baddbmm adds `-b<batch stride>` (`-b0`: one bias shared by every batch). A size-1
  dim counts as broadcast. Rows of addmm written before the bias was recorded (no `_bias-`) are read as
  `R`; old baddbmm rows cannot be placed and are skipped with a warning (see `parse_for`).
- Any of B, M, N, K, lda, ldb (and the numbers in bias) may be `*`: a wildcard entry, looked up when no exact entry exists.
  The most specific matching wildcard entry wins (fewest `*`), then the first in the file.

A key only decides which *candidate* to keep; every candidate Inductor offers was built for the actual
shape, so even a wildcard hit on a new size gives a correct result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ah_plugin.report import messages

from . import flex_params

# Inductor's op names for GEMMs, and where A and B sit among the op's inputs.
# packed_linear (CPU, freezing) computes x @ W.t() with W stored as [N, K]: B is input 2 transposed.
# pad_mm / pad_addmm / pad_bmm rows hold Inductor's shape-padding decision for the unpadded operands of an
# mm / addmm / bmm (solution "pad" or "no_pad"), keyed like the op itself.
OPERAND_INDEX = {
    "mm": (0, 1, False),
    "int_mm": (0, 1, False),
    "bmm": (0, 1, False),
    "addmm": (1, 2, False),
    "baddbmm": (1, 2, False),
    "packed_linear": (0, 2, True),
    "pad_mm": (0, 1, False),
    "pad_addmm": (1, 2, False),
    "pad_bmm": (0, 1, False),
}
# FlexAttention's kernels have rows of their own format (``flex_params``): exact calls, never tuned offline
FLEX_OPS = flex_params.FLEX_OPS
KNOWN_OPS = frozenset(OPERAND_INDEX) | FLEX_OPS
PADDING_OPS = frozenset({"pad_mm", "pad_addmm", "pad_bmm"})
# ops whose key carries the bias layout, and where the bias sits
BIAS_INDEX = {"addmm": 0, "baddbmm": 0, "pad_addmm": 0}
LEGACY_BIAS = {"addmm": "R"}  # what a row written before bias layouts were recorded means (None: unknown)
WILDCARD = "*"

_NUM = r"(?:\d+|\*)"
_BIAS_RE = rf"(?:[RCS]|[NT]{_NUM}|G{_NUM}x{_NUM})(?:-b{_NUM})?"

_PARAMS_RE = re.compile(
    r"(?:B(?P<b>\d+|\*)_)?"
    r"(?P<layout>[NTG]{2})_(?P<m>\d+|\*)_(?P<n>\d+|\*)_(?P<k>\d+|\*)"
    r"_ld_(?P<lda>\d+(?:x\d+)?|\*)_(?P<ldb>\d+(?:x\d+)?|\*)"
    r"_(?P<dtype>[a-z][a-z0-9_]*?)(?P<tf32>_tf32)?"
    rf"(?:_bias-(?P<bias>{_BIAS_RE}))?"
)


class ParamsError(ValueError):
    """A params string that does not follow the format above."""


@dataclass(frozen=True)
class GemmParams:
    """One GEMM key. Integer dims; None means wildcard. lda/ldb are strings (`512` or `64x1` for G)."""

    layout: str
    m: int | None
    n: int | None
    k: int | None
    lda: str | None
    ldb: str | None
    dtype: str
    b: int | None = None
    batched: bool = False
    tf32: bool = False
    bias: str | None = None  # the bias layout code (addmm/baddbmm), e.g. "R", "N3072", "R-b0"

    def encode(self) -> str:
        def w(value):
            return WILDCARD if value is None else str(value)

        head = f"B{w(self.b)}_" if self.batched else ""
        tail = "_tf32" if self.tf32 else ""
        if self.bias is not None:
            tail += f"_bias-{self.bias}"
        return (
            f"{head}{self.layout}_{w(self.m)}_{w(self.n)}_{w(self.k)}"
            f"_ld_{w(self.lda)}_{w(self.ldb)}_{self.dtype}{tail}"
        )

    @property
    def wildcards(self) -> int:
        fields = (self.m, self.n, self.k, self.lda, self.ldb) + ((self.b,) if self.batched else ())
        return sum(value is None for value in fields) + (self.bias or "").count(WILDCARD)

    def matches(self, other: "GemmParams") -> bool:
        """True when this (possibly wildcard) key covers the concrete key `other`."""
        if (self.layout, self.dtype, self.batched, self.tf32) != (
            other.layout,
            other.dtype,
            other.batched,
            other.tf32,
        ):
            return False
        if not _bias_matches(self.bias, other.bias):
            return False
        for mine, theirs in (
            (self.m, other.m),
            (self.n, other.n),
            (self.k, other.k),
            (self.lda, other.lda),
            (self.ldb, other.ldb),
            (self.b, other.b),
        ):
            if mine is not None and mine != theirs:
                return False
        return True

    def widen(self, *dims: str) -> "GemmParams":
        """Wildcard the named dims ("m", "n", "k", "b"); a leading dim equal to a widened dim's size
        goes wildcard too (it grows with that dim)."""
        changes: dict[str, object] = {}
        for dim in dims:
            if dim not in ("m", "n", "k", "b"):
                raise ValueError(f"cannot widen {dim!r}: use m, n, k or b")
            size = getattr(self, dim)
            changes[dim] = None
            for ld in ("lda", "ldb"):
                if size is not None and getattr(self, ld) == str(size):
                    changes[ld] = None
        if self.bias is not None and dims:
            changes["bias"] = _widen_bias(self.bias, {str(getattr(self, d)) for d in dims} - {"None"})
        return replace(self, **changes)


def _bias_tokens(code: str) -> list[str]:
    return re.findall(r"\d+|\*|[^\d*]+", code)


def _bias_matches(mine: str | None, theirs: str | None) -> bool:
    """Bias codes match when equal, `*` in `mine` standing for any number."""
    if mine is None or theirs is None:
        return mine == theirs
    a, b = _bias_tokens(mine), _bias_tokens(theirs)
    return len(a) == len(b) and all(x == y or (x == WILDCARD and y.isdigit()) for x, y in zip(a, b))


def _widen_bias(code: str, sizes: set[str]) -> str:
    """Leading dimensions equal to a widened size, and a non-zero batch stride, become `*`."""
    head, sep, batch_stride = code.partition("-b")
    tokens = [WILDCARD if t in sizes else t for t in _bias_tokens(head)]
    if sep and batch_stride != "0":
        batch_stride = WILDCARD
    return "".join(tokens) + sep + batch_stride


def parse(text: str) -> GemmParams:
    """Parse a params string; raises ParamsError saying what is wrong."""
    match = _PARAMS_RE.fullmatch(text.strip())
    if not match:
        raise ParamsError(
            f"params {messages.quoted(text)} is not [B<batch>_]<NN|NT|TN|TT|G.>_<M>_<N>_<K>_ld_<lda>_<ldb>_<dtype>[_tf32]"
            "[_bias-<R|C|S|N<ld>|T<ld>|G<s0>x<s1>>[-b<batch stride>]]"
        )

    def dim(name):
        value = match.group(name)
        return None if value in (None, WILDCARD) else int(value)

    def ld(name):
        value = match.group(name)
        return None if value == WILDCARD else value

    return GemmParams(
        layout=match.group("layout"),
        m=dim("m"),
        n=dim("n"),
        k=dim("k"),
        lda=ld("lda"),
        ldb=ld("ldb"),
        dtype=match.group("dtype"),
        b=dim("b"),
        batched=match.group("b") is not None,
        tf32=match.group("tf32") is not None,
        bias=match.group("bias"),
    )


def parse_for(op: str, text: str) -> "GemmParams | flex_params.FlexParams":
    """Parse the params of an `op` row; the bias layout must be there exactly for addmm/baddbmm. A flex
    op's row is read by ``flex_params.parse``.

    Backward compatibility: addmm rows written before the bias layout was part of the key are read as
    `R` (a row-vector bias, the nn.Linear case and what those rows most often came from). A hit only
    ever keeps a candidate Inductor built for the actual input, so this can cost speed, never
    correctness. Such baddbmm rows have no common case to assume: a ParamsError (the row is skipped).
    """
    if op in FLEX_OPS:
        try:
            return flex_params.parse(text)
        except flex_params.FlexParamsError as error:
            raise ParamsError(str(error)) from None
    key = parse(text)
    if op in BIAS_INDEX:
        if key.bias is None:
            legacy = LEGACY_BIAS.get(op)
            if legacy is None:
                raise ParamsError(
                    f"{op} params {messages.quoted(text)} have no bias layout (_bias-...; written by an older ah_plugin): "
                    "the bias it was tuned for is unknown"
                )
            key = replace(key, bias=legacy)
        if op == "baddbmm" and "-b" not in key.bias:
            raise ParamsError(f"{op} params {messages.quoted(text)}: a baddbmm bias layout ends in -b<batch stride>")
        if op in ("addmm", "pad_addmm") and "-b" in key.bias:
            raise ParamsError(f"{op} params {messages.quoted(text)}: an addmm bias layout has no -b<batch stride>")
    elif key.bias is not None:
        raise ParamsError(f"{op} params {messages.quoted(text)}: only addmm and baddbmm take a bias layout")
    return key


def _dtype_name(value: object) -> str:
    return str(value).replace("torch.", "")


def _operand_layout(stride: tuple[int, int]) -> tuple[str, str]:
    """(letter, ld) for a 2-D operand's (row stride, column stride)."""
    s0, s1 = int(stride[0]), int(stride[1])
    if s1 == 1:
        return "N", str(s0)
    if s0 == 1:
        return "T", str(s1)
    return "G", f"{s0}x{s1}"


def from_dims(
    *,
    m: int,
    n: int,
    k: int,
    a_stride: tuple[int, int],
    b_stride: tuple[int, int],
    a_dtype: object,
    b_dtype: object,
    batch: int | None = None,
    tf32: bool = False,
    bias: str | None = None,
) -> GemmParams:
    """Build the key from the kernel's view: A is [M, K] with `a_stride`, B is [K, N] with `b_stride`;
    `bias` is a code from `bias_code` (addmm/baddbmm)."""
    la, lda = _operand_layout(a_stride)
    lb, ldb = _operand_layout(b_stride)
    a_name, b_name = _dtype_name(a_dtype), _dtype_name(b_dtype)
    dtype = a_name if a_name == b_name else f"{a_name}x{b_name}"
    return GemmParams(
        layout=la + lb,
        m=int(m),
        n=int(n),
        k=int(k),
        lda=lda,
        ldb=ldb,
        dtype=dtype,
        b=None if batch is None else int(batch),
        batched=batch is not None,
        tf32=bool(tf32),
        bias=bias,
    )


def bias_code(size, stride, m: int, n: int, batched: bool = False) -> str:
    """The bias layout code of a bias tensor (any rank up to the output's) broadcast to [(B,) M, N].

    Missing leading dims and dims of size 1 broadcast (stride 0), so a 1-D `[N]` bias and Inductor's
    expanded view of it (strides `(0, 1)`) give the same code, `R`."""
    rank = 3 if batched else 2
    size, stride = list(size), list(stride)
    if len(size) > rank or len(size) != len(stride):
        raise ValueError(f"a bias of size {size} and stride {stride} does not broadcast to rank {rank}")
    size = [1] * (rank - len(size)) + size
    stride = [0] * (rank - len(stride)) + stride
    stride = [0 if dim == 1 else int(st) for dim, st in zip(size, stride)]
    s0, s1 = stride[-2], stride[-1]
    if int(m) == 1:
        s0 = 0
    if int(n) == 1:
        s1 = 0
    if (s0, s1) == (0, 1):
        code = "R"
    elif (s0, s1) == (1, 0):
        code = "C"
    elif (s0, s1) == (0, 0):
        code = "S"
    elif s1 == 1:
        code = f"N{s0}"
    elif s0 == 1:
        code = f"T{s1}"
    else:
        code = f"G{s0}x{s1}"
    return f"{code}-b{stride[0]}" if batched else code


def bias_strides(code: str) -> tuple[int | None, int, int]:
    """(batch stride or None, row stride, column stride) that a concrete bias code stands for."""
    head, sep, batch = code.partition("-b")
    if WILDCARD in code:
        raise ParamsError(f"bias layout {code!r} has wildcards: no concrete strides")
    fixed = {"R": (0, 1), "C": (1, 0), "S": (0, 0)}
    if head in fixed:
        s0, s1 = fixed[head]
    elif head[0] == "N":
        s0, s1 = int(head[1:]), 1
    elif head[0] == "T":
        s0, s1 = 1, int(head[1:])
    else:
        first, second = head[1:].split("x")
        s0, s1 = int(first), int(second)
    return (int(batch) if sep else None), s0, s1


def _tensor(entry: dict) -> tuple[list[int], list[int], object]:
    shape = entry["size"] if "size" in entry else entry["shape"]
    stride = entry["stride"] if "stride" in entry else entry["strides"]
    return list(shape), list(stride), entry["dtype"]


def from_request(op_name: str, features: dict, tensors: list[dict],
                 context: dict | None = None) -> "GemmParams | flex_params.FlexParams | None":
    """The key of one autotuning request (plain data from `AutotuneRequest`), or None when the op is
    not one we know or its inputs cannot be read. Uses the input tensors when present (they carry
    the batch), else the log's feature columns (m, k, n, mat1/mat2 strides and dtypes). A flex op's key
    comes from its features and the request's context (``flex_params.from_request``)."""
    if op_name in FLEX_OPS:
        return flex_params.from_request(features, context or {})
    if op_name not in OPERAND_INDEX:
        return None
    ia, ib, b_transposed = OPERAND_INDEX[op_name]
    tf32 = str(features.get("using_tf32", "")) == "True"
    if tensors and len(tensors) > max(ia, ib):
        try:
            a_shape, a_stride, a_dtype = _tensor(tensors[ia])
            b_shape, b_stride, b_dtype = _tensor(tensors[ib])
        except (KeyError, TypeError):
            a_shape = None
        if a_shape is not None and len(a_shape) >= 2 and len(b_shape) >= 2:
            if b_transposed:
                b_shape = b_shape[:-2] + [b_shape[-1], b_shape[-2]]
                b_stride = b_stride[:-2] + [b_stride[-1], b_stride[-2]]
            batch = a_shape[0] if len(a_shape) == 3 else None
            bias = None
            if op_name in BIAS_INDEX:
                if len(tensors) <= BIAS_INDEX[op_name]:
                    return None
                try:
                    size, stride, _ = _tensor(tensors[BIAS_INDEX[op_name]])
                    bias = bias_code(size, stride, a_shape[-2], b_shape[-1], batch is not None)
                except (KeyError, TypeError, ValueError):
                    return None
            return from_dims(
                m=a_shape[-2],
                k=a_shape[-1],
                n=b_shape[-1],
                a_stride=(a_stride[-2], a_stride[-1]),
                b_stride=(b_stride[-2], b_stride[-1]),
                a_dtype=a_dtype,
                b_dtype=b_dtype,
                batch=batch,
                tf32=tf32,
                bias=bias,
            )
    try:
        bias = None
        if op_name == "addmm":  # the log's addmm columns carry the expanded bias's strides
            bias = bias_code([features["m"], features["n"]],
                             [features["bias_stride_0"], features["bias_stride_1"]], features["m"], features["n"])
        elif op_name in BIAS_INDEX:
            return None  # no bias description: no key (a wrong bias layout could be applied)
        return from_dims(
            m=features["m"],
            n=features["n"],
            k=features["k"],
            a_stride=(features["mat1_stride_0"], features["mat1_stride_1"]),
            b_stride=(features["mat2_stride_0"], features["mat2_stride_1"]),
            a_dtype=features["mat1_dtype"],
            b_dtype=features["mat2_dtype"],
            batch=features.get("b") if op_name in ("bmm", "baddbmm", "pad_bmm") else None,
            tf32=tf32,
            bias=bias,
        )
    except (KeyError, TypeError, ValueError):
        return None
