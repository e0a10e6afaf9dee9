"""One Triton compile per kept template: the compiled graph loads the kernel its autotuning compiled.

To time a template candidate, Inductor renders it into a benchmark module (kernel ``triton_<template>``,
e.g. ``triton_mm``) and compiles it. When the template wins, the scheduler renders it again into the
compiled graph under a unique name (``triton_tem_fused_mm_0``), and Triton compiled it a second time:
Triton's cache keys a ``@triton.jit`` function by its exact text from the ``def`` line on (the name and
whitespace-only lines included), the line its first decorator starts on, and the compile options. The
graph's text differs from the benchmark module's in the name, in ``inductor_meta["kernel_name"]``, and in
whitespace-only lines, which the wrapper's code buffer empties. Where it differs in nothing else (no
epilogue or prologue fused in, the same metadata), this patch emits the benchmark module's own source for
the kernel (only ``inductor_meta["kernel_name"]`` set to the graph's unique name, which changes no line),
as a string literal that keeps its whitespace-only lines (``\\x20`` escapes), so Triton finds the binary the
autotuning built. The wrapper's variable and the reported kernel name stay unique; the GPU kernel is named
as the benchmark's (``triton_mm``) in a profiler. The kernel run is the one that was benchmarked; where
the texts differ, Inductor emits its own.

Active while the plugin acts on an autotuning (``plans.acting()``) and ``AH_PLUGIN_COMPILE_ONCE`` is on (the
default); only with Inductor's Python wrapper (not the C++ or FX wrapper, not AOT compilation). Only the benchmark modules of candidates the
plugin let Inductor benchmark outside collection are remembered (``remember``, from the preprocessing
hook). Measured on torch 2.11 with an H200; the method and the wrapper's buffers are the same in 2.13, where the
text handling is tested on the CPU build (``TritonScheduling._emit_kernel_to_wrapper(wrapper, kernel,
src_code, kernel_name, subs_name, node_schedule, kernel_path, get_kernel_metadata)``, which it replaces
only where it emits the benchmark's source; the wrapper's ``define_kernel(name, body, metadata)``).
"""

from __future__ import annotations

import ast
import collections
import hashlib
import re

import torch._inductor.config as inductor_config

from ...report.messages import warn_once
from ...report.verbose_output import verbose
from .. import contract, plans

_MAX_REMEMBERED = 512  # benchmark modules remembered at most (oldest dropped): a few per kept GEMM
_KERNEL_NAME = re.compile(r"inductor_meta=\{'kernel_name': '[^'\\]*'")  # the first key Inductor writes
_saved: dict = {}
_pending: collections.OrderedDict = collections.OrderedDict()  # module path -> kernel name, not read yet
_index: collections.OrderedDict = collections.OrderedDict()  # digest of a normal form -> (module path, name)
counts = {"reused": 0, "unmatched": 0}


def normal_form(source: str, name: str) -> str | None:
    """``source`` with what the benchmark module and the graph's kernel may differ in and still run the same
    code made equal: the function's name, ``inductor_meta["kernel_name"]``, whitespace at line ends and in
    blank lines, blank lines around the text. None when it defines no function ``name``."""
    lines = [line.rstrip() for line in source.strip().split("\n")]
    marker = f"def {name}("
    for i, line in enumerate(lines):
        if line.startswith(marker):
            lines[i] = "def _(" + line[len(marker):]
            break
    else:
        return None
    return _KERNEL_NAME.sub("inductor_meta={'kernel_name': ''", "\n".join(lines), count=1)


def _digest(form: str) -> str:
    return hashlib.sha256(form.encode("utf-8")).hexdigest()


def remember(choices) -> None:
    """Note the benchmark modules of the Triton template candidates about to be compiled and timed. Only
    those are asked for their benchmark request: on torch 2.13 a subgraph candidate's (decompose-K, the
    padded candidate) raises when it was made outside Inductor's pipelined autotuning."""
    for choice in choices:
        if not hasattr(choice, "make_kernel_render"):
            continue
        try:
            bmreq = getattr(choice, "bmreq", None)
        except Exception:  # a request that cannot be made here: nothing to reuse for this candidate
            continue
        path, name = getattr(bmreq, "module_path", None), getattr(bmreq, "kernel_name", None)
        if path and name and path not in _pending:
            _pending[path] = name
            if len(_pending) > _MAX_REMEMBERED:
                _pending.popitem(last=False)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except OSError:
        return None


def _read_pending() -> None:
    while _pending:
        path, name = _pending.popitem(last=False)
        text = _read(path)
        form = normal_form(text, name) if text is not None else None
        if form is not None:
            key = _digest(form)
            _index[key] = (path, name)
            _index.move_to_end(key)
            while len(_index) > _MAX_REMEMBERED:
                _index.popitem(last=False)


def benchmarked_source(src_code: str, subs_name: str, kernel_name: str) -> tuple[str, str, str] | None:
    """(source, function name, module path) of the remembered benchmark module whose kernel is the graph's
    kernel ``subs_name`` (``src_code``), with ``inductor_meta["kernel_name"]`` set to ``kernel_name``; None
    where none is, or where its source does not come back unchanged from ``literal``."""
    _read_pending()
    form = normal_form(src_code, subs_name)
    if form is None or _digest(form) not in _index:
        return None
    path, name = _index[_digest(form)]
    text = _read(path)
    if text is None or normal_form(text, name) != form or re.fullmatch(r"\w+", kernel_name) is None:
        return None
    source = _KERNEL_NAME.sub(f"inductor_meta={{'kernel_name': '{kernel_name}'", text, count=1)
    try:  # the wrapper's text must give back exactly this source, or Triton's cache would not find it
        if ast.literal_eval(literal(source)) != source:
            return None
    except (SyntaxError, ValueError):
        return None
    return source, name, path


def literal(source: str) -> str:
    """A triple-quoted Python literal of ``source`` that survives Inductor's code buffers, which empty
    whitespace-only lines: their characters are written as escapes."""
    lines = [line if line.strip() or not line else "".join(f"\\x{ord(c):02x}" for c in line)
             for line in source.split("\n")]
    return "'''" + "\n".join(lines) + "'''"


def install() -> None:
    """Wrap ``TritonScheduling._emit_kernel_to_wrapper``; it acts while the plugin acts on autotunings
    (``plans.acting()``) and ``AH_PLUGIN_COMPILE_ONCE`` is on (``plans.compile_once()``)."""
    if "emit" in _saved:
        return
    try:
        from torch._inductor.codegen import triton as triton_codegen
        from torch._inductor.select_algorithm import TritonTemplateKernel
        from torch._inductor.virtualized import V
    except ImportError:
        return
    original = getattr(triton_codegen.TritonScheduling, "_emit_kernel_to_wrapper", None)
    if original is None:
        return
    _saved["emit"] = (triton_codegen.TritonScheduling, original)

    def _emit_kernel_to_wrapper(self, wrapper, kernel, src_code, kernel_name, subs_name, node_schedule,
                                kernel_path, get_kernel_metadata, *args, **kwargs):
        found = None
        if (type(kernel) is TritonTemplateKernel and not args and not kwargs and plans.acting() and plans.compile_once()
                and _python_wrapper(V.graph)):
            try:
                contract.note("compile_once")
                found = benchmarked_source(src_code, subs_name, kernel_name)
            except Exception as exc:  # never break a compile over this
                warn_once(("compile_once", type(exc)), f"ah_plugin: compile-once skipped ({exc!r})")
            counts["reused" if found else "unmatched"] += 1
        if found is None:
            return original(self, wrapper, kernel, src_code, kernel_name, subs_name, node_schedule,
                            kernel_path, get_kernel_metadata, *args, **kwargs)
        source, name, path = found
        if triton_codegen.async_compile.use_process_pool():
            triton_codegen.async_compile.triton(name, source)  # start now, as Inductor does for its own
        device = V.graph.get_current_device_or_throw().type
        origins, detailed = get_kernel_metadata(node_schedule, wrapper)
        wrapper.define_kernel(kernel_name, f"async_compile.triton({name!r}, {literal(source)}, device_str={device!r})",
                              f"# kernel path: {path} (the autotuning's benchmark module)\n{origins}\n{detailed}")
        verbose(f"{kernel_name}: the compiled graph runs its autotuning's kernel {name} ({path})")

    triton_codegen.TritonScheduling._emit_kernel_to_wrapper = _emit_kernel_to_wrapper


def _python_wrapper(graph) -> bool:
    """The graph is compiled to Inductor's Python wrapper: not C++, not the FX wrapper, not AOT (which look
    kernels up by their function names)."""
    return not (inductor_config.cpp_wrapper or getattr(inductor_config, "fx_wrapper", False)
                or getattr(graph, "cpp_wrapper", True) or getattr(graph, "fx_wrapper", False)
                or getattr(graph, "aot_mode", True))


def uninstall() -> None:
    saved = _saved.pop("emit", None)
    if saved is not None:
        owner, original = saved
        owner._emit_kernel_to_wrapper = original
