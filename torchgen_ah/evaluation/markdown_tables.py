"""Small helpers the evaluation reports share to print numbers as markdown tables."""

from __future__ import annotations

import math


def finite(x) -> float | None:
    """``x`` as a float, or None when it is not finite (a failed or missing timing)."""
    x = float(x)
    return x if math.isfinite(x) else None


def cell(x, fmt: str) -> str:
    """``x`` formatted with ``fmt``; '-' for None."""
    return "-" if x is None else format(x, fmt)


def table(header: list[str], rows: list[list[str]], text_columns: tuple[int, ...] = (0,)) -> list[str]:
    """A markdown table, numbers right-aligned (every column but ``text_columns``)."""
    rule = ["---" if i in text_columns else "---:" for i in range(len(header))]
    return ["| " + " | ".join(r) + " |" for r in (header, rule, *rows)]
