"""The code Inductor generates for a compiled call, summarized and fingerprinted.

The modules are captured by the adapter (``ah_plugin.inductor.generated_code_capture``); this module reads
them as text. Two processes that pick the same kernels generate the same module up to comments (source-node
maps, the cache path of each kernel, the graph's id): the fingerprint hashes what is left, so a results-cache
hit run can be checked for running exactly the record run's kernels without timing them, and a step-time gap
can be traced to what was generated (``benchmarks/step_ab.py``).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re

_EXTERN = re.compile(r"\bextern_kernels\.(\w+)\(")
_KERNEL_DEF = re.compile(r"^\w+ = async_compile\.\w+\(", re.M)  # a generated kernel (Triton or C++)
# A GEMM template kernel: Inductor names it triton_tem_...; where the plugin's compile-once runs the
# autotuning's benchmark kernel, the wrapper's variable keeps that name and the source the benchmark's.
_TEMPLATE_DEF = re.compile(r"^(?:triton_tem_\w* = async_compile\.triton\(|\w+ = async_compile\.triton\(\s*'triton_tem_)",
                           re.M)
_COMMENT = re.compile(r"^\s*#(?:\s.*)?$", re.M)  # "# ..." and "#"; not C++'s "#pragma", "#include"
_TRAILING_COMMENT = re.compile(r"[ \t]+#[ \t].*$", re.M)  # "x = None  # device(...) 0x7f...": addresses
_BLANK_RUNS = re.compile(r"\n\s*\n+")
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]+")  # "<function f at 0x7f...>" in the messages of generated asserts
DIFF_LINES = 40  # first_difference's cut


def code_summary(codes: list[str]) -> dict:
    """Generated kernels defined, of them Triton templates (a GEMM lowered to a template, not aten), and
    extern calls made (by name) over a call's generated modules."""
    externs: dict[str, int] = {}
    kernels = templates = 0
    for code in codes:
        kernels += len(_KERNEL_DEF.findall(code))
        templates += len(_TEMPLATE_DEF.findall(code))
        for name in _EXTERN.findall(code):
            externs[name] = externs.get(name, 0) + 1
    return {"graphs": len(codes), "kernels": kernels, "templates": templates,
            "extern_calls": dict(sorted(externs.items()))}


def normalized(code: str) -> str:
    """``code`` without comments, blank runs and object addresses: what differs between two processes that
    generated the same kernels (cache paths, source-node maps, the graph's id, tensor addresses) lives in
    comments, and the messages of the generated shape asserts name functions by address."""
    code = _ADDRESS.sub("at 0x", _TRAILING_COMMENT.sub("", _COMMENT.sub("", code)))
    return _BLANK_RUNS.sub("\n", code).strip()


def code_fingerprint(codes: list[str]) -> str | None:
    """A short hash of a call's generated modules, normalized; None when nothing was generated (Dynamo
    reused a graph compiled before)."""
    if not codes:
        return None
    digest = hashlib.sha256()
    for code in codes:
        digest.update(normalized(code).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def first_difference(codes: list[str], other: list[str], lines: int = DIFF_LINES) -> str | None:
    """Where ``other``'s generated modules first differ from ``codes`` once ``normalized``: a unified diff of the
    first differing module, cut at ``lines`` lines; None when they do not differ. Said beside a fingerprint
    that differs, it tells a renamed buffer from another kernel without keeping the modules."""
    for index in range(max(len(codes), len(other))):
        a = normalized(codes[index]).splitlines() if index < len(codes) else []
        b = normalized(other[index]).splitlines() if index < len(other) else []
        if a != b:
            diff = list(difflib.unified_diff(a, b, f"module {index}", f"module {index}", n=1, lineterm=""))
            cut = diff[:lines] + ([f"... {len(diff) - lines} more diff lines"] if len(diff) > lines else [])
            return "\n".join(cut)
    return None


def save_modules(codes: list[str], base: str, stem: str) -> list[str]:
    """Write a call's generated modules as ``base/stem_<i>.py``; returns their paths relative to ``base`` (a
    run folder stays movable). Inductor's harness in each (``get_args``, ``call``) lets another process run
    them: ``side_by_side``."""
    os.makedirs(os.path.join(base, os.path.dirname(stem)), exist_ok=True)
    paths = []
    for i, code in enumerate(codes):
        relative = f"{stem}_{i}.py"
        with open(os.path.join(base, relative), "w", encoding="utf-8") as f:
            f.write(code)
        paths.append(relative)
    return paths
