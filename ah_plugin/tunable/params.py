"""The `params` column: one GEMM's shape, layout and dtype as a short editable string.

    [B{batch}_]{layout}_{M}_{N}_{K}_ld_{lda}_{ldb}_{dtype}[_tf32]

e.g. `NT_4096_1024_512_ld_512_512_bfloat16`, `B8_NN_128_64_32_ld_32_64_float16`.

- layout: one letter per operand of `C[M,N] = A[M,K] @ B[K,N]` as the kernel sees them:
  `N` row-major (stride of the last dim is 1; ld = stride of the other dim), `T` column-major
  (a transposed view: stride of dim -2 is 1; ld = stride of the last dim), `G` any other strides
  (ld written `S0xS1`).
- dtype: the operands' dtype without `torch.`; `A_dtype x B_dtype` joined with `x` when they differ.
- `_tf32` when fp32 inputs may use TF32 (it changes which kernel wins).
- Any of B, M, N, K, lda, ldb may be `*`: a wildcard entry, looked up when no exact entry exists.
  The most specific matching wildcard entry wins (fewest `*`), then the first in the file.

A key only decides which *candidate* to keep; every candidate Inductor offers was built for the actual
shape, so even a wildcard hit on a new size gives a correct result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# Inductor's op names for GEMMs, and where A and B sit among the op's inputs.
# packed_linear (CPU, freezing) computes x @ W.t() with W stored as [N, K]: B is input 2 transposed.
OPERAND_INDEX = {
    "mm": (0, 1, False),
    "int_mm": (0, 1, False),
    "bmm": (0, 1, False),
    "addmm": (1, 2, False),
    "baddbmm": (1, 2, False),
    "packed_linear": (0, 2, True),
}
KNOWN_OPS = frozenset(OPERAND_INDEX)
WILDCARD = "*"

_PARAMS_RE = re.compile(
    r"(?:B(?P<b>\d+|\*)_)?"
    r"(?P<layout>[NTG]{2})_(?P<m>\d+|\*)_(?P<n>\d+|\*)_(?P<k>\d+|\*)"
    r"_ld_(?P<lda>\d+(?:x\d+)?|\*)_(?P<ldb>\d+(?:x\d+)?|\*)"
    r"_(?P<dtype>[a-z][a-z0-9_]*?)(?P<tf32>_tf32)?"
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

    def encode(self) -> str:
        def w(value):
            return WILDCARD if value is None else str(value)

        head = f"B{w(self.b)}_" if self.batched else ""
        tail = "_tf32" if self.tf32 else ""
        return (
            f"{head}{self.layout}_{w(self.m)}_{w(self.n)}_{w(self.k)}"
            f"_ld_{w(self.lda)}_{w(self.ldb)}_{self.dtype}{tail}"
        )

    @property
    def wildcards(self) -> int:
        fields = (self.m, self.n, self.k, self.lda, self.ldb) + ((self.b,) if self.batched else ())
        return sum(value is None for value in fields)

    def matches(self, other: "GemmParams") -> bool:
        """True when this (possibly wildcard) key covers the concrete key `other`."""
        if (self.layout, self.dtype, self.batched, self.tf32) != (
            other.layout,
            other.dtype,
            other.batched,
            other.tf32,
        ):
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
        return replace(self, **changes)


def parse(text: str) -> GemmParams:
    """Parse a params string; raises ParamsError saying what is wrong."""
    match = _PARAMS_RE.fullmatch(text.strip())
    if not match:
        raise ParamsError(
            f"params {text!r} is not [B<batch>_]<NN|NT|TN|TT|G.>_<M>_<N>_<K>_ld_<lda>_<ldb>_<dtype>[_tf32]"
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
    )


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
) -> GemmParams:
    """Build the key from the kernel's view: A is [M, K] with `a_stride`, B is [K, N] with `b_stride`."""
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
    )


def _tensor(entry: dict) -> tuple[list[int], list[int], object]:
    shape = entry["size"] if "size" in entry else entry["shape"]
    stride = entry["stride"] if "stride" in entry else entry["strides"]
    return list(shape), list(stride), entry["dtype"]


def from_request(op_name: str, features: dict, tensors: list[dict]) -> GemmParams | None:
    """The key of one autotuning request (plain data from `AutotuneRequest`), or None when the op is
    not a GEMM we know or its inputs cannot be read. Uses the input tensors when present (they carry
    the batch), else the log's feature columns (m, k, n, mat1/mat2 strides and dtypes)."""
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
            )
    try:
        return from_dims(
            m=features["m"],
            n=features["n"],
            k=features["k"],
            a_stride=(features["mat1_stride_0"], features["mat1_stride_1"]),
            b_stride=(features["mat2_stride_0"], features["mat2_stride_1"]),
            a_dtype=features["mat1_dtype"],
            b_dtype=features["mat2_dtype"],
            batch=features.get("b") if op_name in ("bmm", "baddbmm") else None,
            tf32=tf32,
        )
    except (KeyError, TypeError, ValueError):
        return None
