"""Matrix-multiply inputs for data generation: the upstream shape distribution, made deterministic.

Sample ``i`` of a run is a pure function of ``(seed, i)`` (``sample_mm_input(seed, i)``), so any number of
workers, shards and restarts agree on which input index ``i`` is without talking to each other.

The distribution follows upstream's mm data generator (torchgen's ``_autoheuristic/mm/gen_data_mm.py``):

* each of m, k, n independently: 85% a multiple of 128 in [2^10, 2^17] (a power range [2^p, 2^(p+1)] with
  p uniform in 10..16, then a uniform multiple of 128 inside it), 10% a power of two 2^0..2^17, 4% uniform
  in [1, 131072], 1% uniform between two adjacent powers of two 2^p..2^(p+1), p in 1..16;
* m*k, m*n and k*n below 2^31 elements, and the three matrices within a memory limit (redrawn otherwise);
* dtype uniform among bfloat16, float16, float32; a float32 input uses TF32 or not with equal odds;
* the four transpose combinations with equal odds.

int8 inputs (``torch._int_mm``, Inductor's ``int_mm`` autotuning, e.g. a quantized decoder's projections)
are drawn from the same dimensions, made what the int8 GEMM accepts: m above 16 (17 where drawn smaller),
k and n rounded up to multiples of 8, and the layout of a quantized linear layer (``x @ w.t()``: a
row-major, b column-major). int8 is sampled only when asked for (``dtypes``), never with the float dtypes
by default.

Standard library only, so the runner's parent process never imports torch.
"""

from __future__ import annotations

import csv
import random
from dataclasses import asdict, dataclass

from torchgen_ah.data.text_input import read_text

MAX_DIM = 2**17
NUMEL_LIMIT = 2**31
# Three matrices of at most 2^31 elements each in fp32 need 24 GiB, so the default never binds on a GPU
# with 40 GiB or more. It is a fixed number (not the device's memory) so samples do not depend on the host.
DEFAULT_MEMORY_LIMIT_BYTES = 40 * 2**30

DIM_KINDS = ("mult_128", "pow2", "uniform", "uniform_between_pow2")
DIM_KIND_WEIGHTS = (0.85, 0.10, 0.04, 0.01)

DTYPES = ("bfloat16", "float16", "float32")  # the default: what a plain GEMM (op mm) takes
INT8 = "int8"  # an int8 GEMM (op int_mm), asked for on its own
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, INT8: 1}
INT8_MIN_M = 17  # the int8 GEMM needs more than 16 rows
INT8_MULTIPLE = 8  # and k, n multiples of 8


@dataclass(frozen=True)
class MMInput:
    """One mm input: ``a @ b`` with a of shape (m, k) and b of shape (k, n).

    ``transpose_left``: a is built as a (k, m) tensor and transposed (column-major); likewise
    ``transpose_right`` for b from (n, k). ``allow_tf32`` only matters for float32.
    """

    m: int
    k: int
    n: int
    transpose_left: bool
    transpose_right: bool
    dtype: str
    allow_tf32: bool = False

    def __post_init__(self) -> None:
        for name in ("m", "k", "n"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"MMInput.{name} must be a positive integer, got {value!r}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"MMInput.dtype must be one of {(*DTYPES, INT8)}, got {self.dtype!r}")
        if self.dtype == INT8:
            why = int8_problem(self.m, self.k, self.n, self.transpose_left, self.transpose_right)
            if why:
                raise ValueError(f"an int8 input (torch._int_mm) needs {why}; got {self.describe()}")

    @property
    def op(self) -> str:
        """Inductor's autotuning name for this input's GEMM."""
        return "int_mm" if self.dtype == INT8 else "mm"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "MMInput":
        return cls(
            m=int(data["m"]),
            k=int(data["k"]),
            n=int(data["n"]),
            transpose_left=bool(data["transpose_left"]),
            transpose_right=bool(data["transpose_right"]),
            dtype=str(data["dtype"]),
            allow_tf32=bool(data.get("allow_tf32", False)),
        )

    def describe(self) -> str:
        layout = ("T" if self.transpose_left else "N") + ("T" if self.transpose_right else "N")
        tf32 = "+tf32" if self.dtype == "float32" and self.allow_tf32 else ""
        return f"m={self.m} k={self.k} n={self.n} {layout} {self.dtype}{tf32}"


def int8_problem(m: int, k: int, n: int, transpose_left: bool, transpose_right: bool) -> str | None:
    """What an int8 input breaks of the int8 GEMM's rules (see the module docstring), or None."""
    if m < INT8_MIN_M:
        return f"m of at least {INT8_MIN_M}"
    if k % INT8_MULTIPLE or n % INT8_MULTIPLE:
        return f"k and n multiples of {INT8_MULTIPLE}"
    if transpose_left or not transpose_right:
        return "the layout NT (a row-major, b column-major: x @ w.t())"
    return None


def sample_rng(seed: int, index: int, stream: str = "mm") -> random.Random:
    """The random stream of sample ``index``: seeded by text, so it is the same on every platform and
    Python process (``random.Random`` hashes a str seed with SHA-512)."""
    return random.Random(f"ah-datagen:{stream}:{int(seed)}:{int(index)}")


def draw_dim_kind(rng: random.Random) -> str:
    return rng.choices(DIM_KINDS, weights=DIM_KIND_WEIGHTS)[0]


def draw_dim(rng: random.Random, kind: str) -> int:
    """One dimension of the given kind (see the module docstring)."""
    if kind == "mult_128":
        power = rng.randint(10, 16)
        return 128 * rng.randint(2**power // 128, 2 ** (power + 1) // 128)
    if kind == "pow2":
        return 2 ** rng.randint(0, 17)
    if kind == "uniform":
        return rng.randint(1, MAX_DIM)
    if kind == "uniform_between_pow2":
        power = rng.randint(1, 16)
        return rng.randint(2**power, 2 ** (power + 1))
    raise ValueError(f"unknown dimension kind {kind!r}; expected one of {DIM_KINDS}")


def fits(m: int, k: int, n: int, dtype: str, memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES) -> bool:
    """The upstream constraints: each pairwise product below 2^31, and a, b, out fit the memory limit (an
    int8 GEMM's output is int32)."""
    if m * k >= NUMEL_LIMIT or m * n >= NUMEL_LIMIT or k * n >= NUMEL_LIMIT:
        return False
    out_bytes = 4 if dtype == INT8 else DTYPE_BYTES[dtype]
    return (m * k + k * n) * DTYPE_BYTES[dtype] + m * n * out_bytes <= memory_limit_bytes


def sample_mkn(rng: random.Random, dtype: str, memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES):
    """Draw (m, k, n) until the constraints hold (a fresh draw of all three each time, as upstream)."""
    for _ in range(100_000):
        m, k, n = (draw_dim(rng, draw_dim_kind(rng)) for _ in range(3))
        if fits(m, k, n, dtype, memory_limit_bytes):
            return m, k, n
    raise RuntimeError(f"no (m, k, n) fits {memory_limit_bytes} bytes for {dtype} after 100000 draws")


def sample_mm_input(
    seed: int,
    index: int,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
    dtypes: tuple[str, ...] = DTYPES,
) -> MMInput:
    """Sample ``index`` of the run seeded ``seed``: a pure function of its arguments."""
    rng = sample_rng(seed, index)
    dtype = rng.choice(list(dtypes))
    allow_tf32 = rng.random() < 0.5 if dtype == "float32" else False
    m, k, n = sample_mkn(rng, dtype, memory_limit_bytes)
    transpose_left = rng.random() < 0.5
    transpose_right = rng.random() < 0.5
    if dtype == INT8:
        m, k, n = int8_dims(m, k, n, dtype, memory_limit_bytes)
        transpose_left, transpose_right = False, True
    return MMInput(m, k, n, transpose_left, transpose_right, dtype, allow_tf32)


def int8_dims(m: int, k: int, n: int, dtype: str, memory_limit_bytes: int) -> tuple[int, int, int]:
    """A drawn (m, k, n) made an int8 GEMM's: m at least 17, k and n rounded up to multiples of 8 (a few
    elements more, so the limits are checked again: the larger of k and n shrinks by 8 until they hold)."""
    def rounded(value: int) -> int:
        up = -(-value // INT8_MULTIPLE) * INT8_MULTIPLE
        return up if up <= MAX_DIM else up - INT8_MULTIPLE

    m, k, n = max(m, INT8_MIN_M), rounded(k), rounded(n)
    while not fits(m, k, n, dtype, memory_limit_bytes) and max(k, n) > INT8_MULTIPLE:
        if k >= n:
            k -= INT8_MULTIPLE
        else:
            n -= INT8_MULTIPLE
    return m, k, n


# --- shapes files ---------------------------------------------------------------------------------------

_TRUE = {"1", "true", "t", "yes", "y"}
_FALSE = {"0", "false", "f", "no", "n", ""}
_DTYPE_ALIASES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "torch.bfloat16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "float16": "float16",
    "torch.float16": "float16",
    "fp32": "float32",
    "float": "float32",
    "float32": "float32",
    "torch.float32": "float32",
    "int8": INT8,
    "torch.int8": INT8,
}


def _flag(text: str, where: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"{where}: expected a boolean (true/false/1/0), got {text!r}")


def read_shapes_file(path, dtypes: tuple[str, ...] = DTYPES, tf32_modes=(False, True)) -> list[MMInput]:
    """Inputs listed in a CSV file with a header naming at least ``m,k,n``.

    Optional columns: ``transpose_left``, ``transpose_right``, ``dtype`` (bf16/fp16/fp32/int8 or torch names),
    ``allow_tf32``. A missing column expands the row over its values (both transposes; ``dtypes``;
    ``tf32_modes`` for float32), so a bare ``m,k,n`` list gives every layout and dtype. Lines starting with
    ``#`` and blank lines are ignored. Bad values raise ValueError naming the file and line.
    """
    out: list[MMInput] = []
    text = read_text(path)
    lines = [(i, line) for i, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ValueError(f"{path}:1: shapes file is empty (expected a header with m,k,n)")
    header_lineno, header_line = lines[0]
    header = [h.strip() for h in next(csv.reader([header_line]))]
    for required in ("m", "k", "n"):
        if required not in header:
            raise ValueError(f"{path}:{header_lineno}: header lacks the column {required!r}: {header_line.strip()}")
    for lineno, line in lines[1:]:
        where = f"{path}:{lineno}"
        values = [v.strip() for v in next(csv.reader([line]))]
        if len(values) != len(header):
            raise ValueError(f"{where}: expected {len(header)} fields, got {len(values)}")
        row = dict(zip(header, values))
        try:
            m, k, n = (int(row[name]) for name in ("m", "k", "n"))
        except ValueError:
            raise ValueError(f"{where}: m, k, n must be integers: {line.strip()}") from None
        if "dtype" in row:
            name = _DTYPE_ALIASES.get(row["dtype"].lower())
            if name is None:
                raise ValueError(f"{where}: unknown dtype {row['dtype']!r}")
            row_dtypes = [name]
        else:
            row_dtypes = list(dtypes)
        for dtype in row_dtypes:
            # an int8 GEMM has one layout (NT): a row without layout columns gets that one, not all four
            lefts = [_flag(row["transpose_left"], where)] if "transpose_left" in row else (
                [False] if dtype == INT8 else [False, True])
            rights = [_flag(row["transpose_right"], where)] if "transpose_right" in row else (
                [True] if dtype == INT8 else [False, True])
            if dtype != "float32":
                modes = [False]
            elif "allow_tf32" in row:
                modes = [_flag(row["allow_tf32"], where)]
            else:
                modes = list(tf32_modes)
            for left in lefts:
                for right in rights:
                    for tf32 in modes:
                        try:
                            out.append(MMInput(m, k, n, left, right, dtype, tf32))
                        except ValueError as exc:
                            raise ValueError(f"{where}: {exc}") from None
    return out
