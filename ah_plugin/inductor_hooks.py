"""The only module that touches ``torch._inductor`` internals.

What it installs (``install_hooks``), and why each piece:

* an ``InductorChoices`` subclass whose ``_finalize_template_configs`` sees every candidate of an
  mm/addmm/bmm as a cheap ``KernelTemplateChoice`` *before* Triton code exists (pre-codegen): pruning
  here saves code generation as well as benchmarking. It is installed through
  ``config.inductor_choices_class`` and chains to the class that was set before (a dynamic subclass of
  it), and its ``uuid()`` carries the plugin's settings, so switching modes changes the FX graph key;
* a choice preprocessing function (post-codegen, ``ChoiceCaller`` list): the path every autotuning
  takes, including the CPU's ``packed_linear``. It does not prune what the pre-codegen hook already
  pruned, but it runs the numerical check when a policy asks for it (optional policy methods
  ``numerical_check(request) -> (atol, rtol) | None`` and ``on_numerical_check(request, rejected,
  timings)``): every candidate is run once on Inductor's benchmark inputs and those whose output
  differs from the aten candidate's are dropped.
  It also bounds each candidate's benchmark when a policy asks for it (optional policy method
  ``benchmark_limits(request) -> {"duration_ms": int, "iterations": int} | None``; the results cache
  asks on a tuning miss): the candidates' ``benchmark`` is wrapped to set the limits for the length of
  that call, and a thin wrapper on Inductor's ``benchmarker`` instance, installed the first time
  limits are asked for, caps its keyword arguments while they are set (see ``_LIMIT_MAPS``);
* a feedback saver: every candidate's time after benchmarking, for ``on_timings``;
* the built-in AutoHeuristic is switched off for the ops the plugin handles (it would prune or log
  the same autotunings otherwise).

Policies (``ah_plugin.policy.ChoicePolicy``) register with ``register_policy`` and see plain
``AutotuneRequest``s only. Every call into a policy or into Inductor data is guarded: an exception
warns once and the autotuning goes on as if the plugin were absent.

This module imports only the standard library and light ``ah_plugin`` modules at import time, so
``register_policy`` is cheap; Inductor is imported by ``install_hooks``.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import sys
import threading
import uuid as _uuid
import warnings

from . import choice_ids, features, settings
from .policy import AutotuneRequest

# --- policy registry ----------------------------------------------------------------------------

POSITION_CACHE = 0  # exact-shape results cache: a hit keeps one choice
POSITION_HEURISTIC = 100  # learned ranking: top-k
POSITION_COLLECTOR = 200  # learns only (select returns None)

_policies: list[tuple[int, int, object]] = []  # (position, registration number, policy)
_registry_lock = threading.Lock()
_counter = [0]


def register_policy(policy, position: int = POSITION_HEURISTIC):
    """Add ``policy`` (a ``ChoicePolicy``); lower positions are asked first. Returns the policy.

    A policy may carry ``op_names`` (or ``ops``), a collection of op names: it is then only called for
    those ops (None: every op).
    Registering the same object twice moves it to the new position. Also switches the hooks on.
    """
    with _registry_lock:
        _policies[:] = [entry for entry in _policies if entry[2] is not policy]
        _counter[0] += 1
        _policies.append((int(position), _counter[0], policy))
        _policies.sort(key=lambda entry: (entry[0], entry[1]))
    try:
        install_hooks()
    except Exception as exc:  # never break the caller (often an import at startup)
        warn_once("install", f"ah_plugin: could not install the Inductor hooks ({exc!r}); plugin inactive")
    return policy


def unregister_policy(policy) -> bool:
    """Remove ``policy``; True when it was registered."""
    with _registry_lock:
        before = len(_policies)
        _policies[:] = [entry for entry in _policies if entry[2] is not policy]
        return len(_policies) != before


def registered_policies() -> list:
    """Policies in the order they are asked."""
    with _registry_lock:
        return [entry[2] for entry in _policies]


def _policies_for(op_name: str) -> list:
    out = []
    for policy in registered_policies():
        names = getattr(policy, "op_names", None)
        if names is None:
            names = getattr(policy, "ops", None)
        if names is not None and op_name not in names:
            continue
        out.append(policy)
    return out


# --- warnings -------------------------------------------------------------------------------------

_warned: set = set()


def warn_once(key, message: str) -> None:
    """Warn once per key per process (errors inside compile must be visible but not noisy)."""
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _current_settings():
    """``settings.current()``, or None (warned once) when a variable holds a bad value: code that
    Inductor calls outside our guarded hooks (the built-in's switches, ``uuid``) must never raise."""
    try:
        return settings.current()
    except Exception as exc:
        warn_once(("settings", str(exc)), f"ah_plugin: {exc}; the plugin leaves Inductor's choices alone")
        return None


def verbose(message: str) -> None:
    current = _current_settings()
    if current is not None and current.verbose:
        print(f"[ah_plugin] {message}", file=sys.stderr)


def _policy_name(policy) -> str:
    return type(policy).__qualname__


_FAILED = object()  # a policy method raised (already warned)


def _call_policy(policy, method: str, *args):
    """``policy.<method>(*args)``; ``_FAILED`` when it raises (warned once per policy and method), so
    no policy can break an autotuning. Inductor goes on as if that policy had no opinion."""
    try:
        return getattr(policy, method)(*args)
    except Exception as exc:
        warn_once((method, _policy_name(policy)),
                  f"ah_plugin: policy {_policy_name(policy)}.{method} raised {exc!r}; ignoring it")
        return _FAILED


def _policy_key(policy) -> str:
    """The policy's part of the FX-graph cache key: its name, plus its own ``cache_key()`` when it has
    one (the results cache: a new winner or an edited row must recompile, not reuse an old kernel)."""
    if getattr(policy, "cache_key", None) is None:
        return _policy_name(policy)
    key = _call_policy(policy, "cache_key")
    return f"{_policy_name(policy)}[{'?' if key is _FAILED else key}]"


# --- install / uninstall ----------------------------------------------------------------------------


class _State:
    installed = False
    saved_functions: dict = {}
    prev_factory = None
    our_factory = None
    callbacks_added = False
    converted_handler = None  # (handler, original class) converted in this thread
    nonce = _uuid.uuid4().hex  # collect mode: every process compiles afresh


def is_installed() -> bool:
    return _State.installed


def install_hooks() -> None:
    """Install the choices handler, preprocessing fn, feedback saver; take over the built-in.

    Idempotent. Which ops the built-in leaves alone is read from the settings at each of its calls.
    """
    import torch._inductor.config as inductor_config
    from torch._inductor import select_algorithm

    if not _State.callbacks_added:
        # Inductor has no "remove one callback" API: these stay registered and do nothing while
        # the plugin is uninstalled.
        select_algorithm.add_preprocessing_fn(_preprocess_choices)
        select_algorithm.add_feedback_saver(_save_feedback)
        _State.callbacks_added = True

    if not _State.installed:
        _take_over_builtin(inductor_config)
        prev = inductor_config.inductor_choices_class
        if not isinstance(prev, _ChoicesFactory):
            _State.prev_factory = prev
            _State.our_factory = _ChoicesFactory(prev)
            inductor_config.inductor_choices_class = _State.our_factory
        _convert_current_handler()
        _State.installed = True


def uninstall_hooks() -> None:
    """Undo ``install_hooks``: built-in functions, choices class and this thread's handler restored."""
    if not _State.installed:
        return
    import torch._inductor.config as inductor_config

    for name, fn in _State.saved_functions.items():
        inductor_config.__dict__[name] = fn
    _State.saved_functions = {}
    if inductor_config.inductor_choices_class is _State.our_factory:
        inductor_config.inductor_choices_class = _State.prev_factory
    _State.our_factory = None
    _State.prev_factory = None
    _remove_benchmark_limiter()
    if _State.converted_handler is not None:
        handler, original = _State.converted_handler
        try:
            handler.__class__ = original
        except TypeError:
            pass
        _State.converted_handler = None
    _State.installed = False


def _take_over_builtin(inductor_config) -> None:
    """Make ``config.collect_autoheuristic``/``use_autoheuristic`` answer False for our ops.

    torch reads these names from the environment on each call and allows no new config entries, so the
    two module functions are wrapped (``run_autoheuristic`` calls them through the module globals).
    """
    for name in ("collect_autoheuristic", "use_autoheuristic"):
        original = inductor_config.__dict__.get(name)
        if original is None or name in _State.saved_functions:
            continue
        _State.saved_functions[name] = original

        def wrapper(op_name, _original=original):
            current = _current_settings() if _State.installed else None
            if current is not None and op_name in current.handled_ops:
                return False
            return _original(op_name)

        wrapper.__name__ = name
        wrapper.__wrapped__ = original
        inductor_config.__dict__[name] = wrapper


def builtin_would_act(op_name: str) -> bool:
    """What torch's built-in AutoHeuristic decides for ``op_name`` now (for tests and docs)."""
    import torch._inductor.config as inductor_config

    return bool(inductor_config.run_autoheuristic(op_name))


# --- the InductorChoices subclass -------------------------------------------------------------------


class _ChoicesFactory:
    """``config.inductor_choices_class`` value: builds the previous handler and adds our override."""

    def __init__(self, prev):
        self.prev = prev

    def __call__(self):
        if self.prev is not None:
            base = self.prev()
        else:
            from torch._inductor.choices import InductorChoices

            base = InductorChoices()
        return _convert(base)

    def uuid(self):
        return self().uuid()

    def __deepcopy__(self, memo):  # torch deep-copies config values when it snapshots them
        return self

    def __reduce__(self):
        # Pickled with the config (save_config): restores a factory; the uuid travels along so that
        # torch versions that hash the pickled config also see the mode change.
        return (_restore_factory, (self.prev, self.uuid()))


def _restore_factory(prev, _uuid_at_pickling=None):
    return _ChoicesFactory(prev)


_subclasses: dict = {}


def _plugin_class(base_cls):
    cls = _subclasses.get(base_cls)
    if cls is None:
        cls = type(f"AHPlugin{base_cls.__name__}", (_PluginChoicesMixin, base_cls), {})
        _subclasses[base_cls] = cls
    return cls


def _convert(handler):
    """Give ``handler`` our override, keeping its state and its own overrides (chained via super)."""
    if isinstance(handler, _PluginChoicesMixin):
        return handler
    handler.__class__ = _plugin_class(type(handler))
    return handler


def _convert_current_handler() -> None:
    """A handler this thread already built would ignore the new config value: convert it in place."""
    from torch._inductor import virtualized

    key = getattr(virtualized._choices, "_key", None)
    handler = getattr(virtualized.threadlocal, key, None) if key else None
    if handler is None or isinstance(handler, _PluginChoicesMixin):
        return
    original = type(handler)
    try:
        _convert(handler)
    except TypeError:
        warn_once("convert", "ah_plugin: current choices handler cannot be extended; pre-codegen hook off")
        return
    _State.converted_handler = (handler, original)


class _PluginChoicesMixin:
    """Pre-codegen hook: widen the search space, ask the policies, prune before code generation."""

    def uuid(self):
        parent = None
        base_uuid = getattr(super(), "uuid", None)
        if base_uuid is not None:
            try:
                parent = base_uuid()
            except NotImplementedError:
                parent = None
        current = _current_settings()
        described = settings.describe(current) if current is not None else "settings=invalid"
        policies = ",".join(_policy_key(p) for p in registered_policies())
        nonce = _State.nonce if current is not None and current.collect else ""
        return f"ah_plugin:{described};policies={policies};{nonce};parent={parent}"

    def _finalize_template_configs(
        self, template_choices, kernel_inputs, templates, op_name, kwarg_overrides=None
    ):
        ktcs = super()._finalize_template_configs(
            template_choices, kernel_inputs, templates, op_name, kwarg_overrides
        )
        if not _State.installed:
            return ktcs
        try:
            return _pre_codegen(self, ktcs, kernel_inputs, templates, op_name, kwarg_overrides)
        except Exception as exc:
            warn_once(("pre", type(exc)), f"ah_plugin: pre-codegen hook failed ({exc!r}); using Inductor's choices")
            return ktcs


# --- Inductor objects -> plain data -----------------------------------------------------------------


def _hints(exprs) -> list[int]:
    from torch._inductor.virtualized import V

    sizevars = V.graph.sizevars
    fn = getattr(sizevars, "optimization_hints", None) or getattr(sizevars, "size_hints")
    return [int(v) for v in fn(exprs)]


def _node_desc(node) -> dict:
    size = _hints(node.get_size())
    layout = node.get_layout()
    stride = _hints(layout.stride)
    try:
        contiguous = bool(layout.is_contiguous())
    except Exception:
        contiguous = features.is_contiguous(size, stride)
    return {"size": size, "stride": stride, "dtype": str(node.get_dtype()), "contiguous": contiguous}


def _template_data_from_ktc(ktc) -> tuple[str, str, dict]:
    from torch._inductor.select_algorithm import ExternKernelChoice, TritonTemplate

    template = ktc.template
    params = dict(ktc.params.to_kwargs()) if ktc.params is not None else {}
    if isinstance(template, ExternKernelChoice):
        return "extern", template.name, {}
    if isinstance(template, TritonTemplate):
        return "triton", template.name, params
    kind = "subgraph" if _is_subgraph(template) else type(template).__name__.lower()
    return kind, template.name, params


def _is_subgraph(template) -> bool:
    try:
        from torch._inductor.codegen.subgraph import SubgraphTemplate
    except ImportError:
        return False
    return isinstance(template, SubgraphTemplate)


def _template_data_from_caller(caller) -> tuple[str, str, dict]:
    """Plain data of a ChoiceCaller that no KernelTemplateChoice produced (CPU C++, cutlass, bind())."""
    from torch._inductor.select_algorithm import ExternKernelCaller

    ktc = (getattr(caller, "annotations", None) or {}).get("ktc")
    if ktc is not None:
        return _template_data_from_ktc(ktc)
    if isinstance(caller, ExternKernelCaller):
        return "extern", caller.choice.name, {}
    template = getattr(caller, "template", None)
    blocking = getattr(template, "register_blocking", None)
    if blocking is not None:  # the CPU C++ GEMM template (micro-GEMM name + register blocking)
        return "cpp", getattr(template, "name", "gemm"), {
            "register_blocking": (blocking.block_m, blocking.block_n, blocking.block_k)
        }
    info = {}
    try:
        info = caller.info_dict()
    except Exception:
        pass
    if "tile_shape" in info:  # a Triton template caller built without a KTC
        import ast

        bm, bk, bn = ast.literal_eval(str(info["tile_shape"]))
        params = {"BLOCK_M": bm, "BLOCK_K": bk, "BLOCK_N": bn,
                  "num_stages": info.get("num_stages"), "num_warps": info.get("num_warps")}
        if "GROUP_M" in info:
            params["GROUP_M"] = info["GROUP_M"]
        return "triton", "mm", params
    try:
        return "other", caller.autoheuristic_id(), {}
    except Exception:
        return "other", f"{type(caller).__name__}_{getattr(caller, 'name', '')}", {}


def ktc_ids(ktcs) -> list[str]:
    """Unique ids of KernelTemplateChoices (pre-codegen)."""
    return choice_ids.unique_ids([choice_ids.choice_id(*_template_data_from_ktc(k)) for k in ktcs])


def caller_ids(callers) -> list[str]:
    """Unique ids of ChoiceCallers (post-codegen); agree with ``ktc_ids`` for KTC-made callers."""
    raw = []
    for caller in callers:
        annotations = getattr(caller, "annotations", None) or {}
        raw.append(annotations.get("ah_plugin_id") or choice_ids.choice_id(*_template_data_from_caller(caller)))
    return choice_ids.unique_ids(raw)


_device_info: dict = {}


def _device_metadata(device) -> dict:
    """device_capa, shared_memory, device_name for a torch.device (CPU convention: (0, 0), 0, "cpu")."""
    key = (device.type, device.index)
    if key in _device_info:
        return _device_info[key]
    info = {"device_capa": (0, 0), "shared_memory": 0, "device_name": device.type}
    if device.type == "cuda":
        import torch

        index = device.index if device.index is not None else torch.cuda.current_device()
        info["device_capa"] = tuple(torch.cuda.get_device_capability(index))
        info["device_name"] = torch.cuda.get_device_name(index)
        try:
            from torch._inductor.utils import get_gpu_shared_memory

            info["shared_memory"] = int(get_gpu_shared_memory())
        except Exception:
            props = torch.cuda.get_device_properties(index)
            info["shared_memory"] = int(getattr(props, "shared_memory_per_block_optin", 0))
    _device_info[key] = info
    return info


def _tf32_enabled() -> bool:
    import torch

    matmul = torch.backends.cuda.matmul
    precision = getattr(matmul, "fp32_precision", None)
    if precision is not None:
        return precision == "tf32"
    return bool(getattr(matmul, "allow_tf32", False))


def build_request(op_name: str, nodes, candidates: list[str], stage: str) -> AutotuneRequest:
    """An AutotuneRequest from Inductor input nodes (plain data from here on)."""
    tensors = [_node_desc(n) for n in nodes]
    feats, num, cat = features.op_features(op_name, tensors, _tf32_enabled())
    device = nodes[0].get_device()
    info = _device_metadata(device)
    meta = features.metadata(op_name, num, cat, info["device_capa"], info["shared_memory"], info["device_name"])
    return AutotuneRequest(
        op_name=op_name,
        features=features.ordered_features(feats, num, cat),
        metadata=meta,
        candidates=list(candidates),
        stage=stage,
        tensors=tensors,
    )


def default_log_path(op_name: str, device_name: str, device_type: str = "cuda") -> str:
    """Upstream's default: ``<inductor cache dir>/autoheuristic/<device>/<op>.txt``."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    ident = device_name.replace(" ", "_") if device_type == "cuda" else "non_cuda_device"
    return os.path.join(cache_dir(), "autoheuristic", ident, f"{op_name}.txt")


# --- asking the policies ----------------------------------------------------------------------------


def _select(request: AutotuneRequest, current) -> list[str] | None:
    """The first policy's answer that keeps at least one existing candidate; None: keep all."""
    if request.op_name in current.collect:
        return None  # collecting: every candidate must be timed
    for policy in _policies_for(request.op_name):
        if getattr(policy, "select", None) is None:
            continue
        answer = _call_policy(policy, "select", request)
        if answer is None or answer is _FAILED:
            continue
        existing = set(request.candidates)
        keep = [cid for cid in answer if cid in existing]
        if not keep:
            warn_once(("empty", _policy_name(policy)),
                      f"ah_plugin: policy {_policy_name(policy)} kept no existing choice; ignoring it")
            continue
        verbose(f"{request.op_name} ({request.stage}): {_policy_name(policy)} keeps "
                f"{len(keep)} of {len(request.candidates)}")
        return keep
    return None


def _pruned(items: list, ids: list[str], request: AutotuneRequest, current) -> list:
    """``items`` (candidates, in the order of their ``ids``) that the policies keep; all when none decides."""
    keep = _select(request, current)
    if keep is None:
        return items
    keep_set = set(keep)
    return [item for item, cid in zip(items, ids) if cid in keep_set]


def _pre_codegen(handler, ktcs, kernel_inputs, templates, op_name, kwarg_overrides):
    if not ktcs:
        return ktcs
    current = settings.current()
    if not (current.active or registered_policies()):
        return ktcs
    nodes = kernel_inputs.nodes()
    if current.search_space == "wide" and op_name in current.handled_ops:
        try:
            ktcs = _widen_search_space(handler, ktcs, kernel_inputs, templates, op_name, kwarg_overrides, current)
        except Exception as exc:  # a torch without the exhaustive list: keep Inductor's space
            warn_once(("space", type(exc)), f"ah_plugin: wider search space unavailable ({exc!r})")
    ids = ktc_ids(ktcs)
    for ktc, cid in zip(ktcs, ids):
        ktc.annotations["ah_plugin_id"] = cid
    if not _policies_for(op_name):
        return ktcs
    return _pruned(ktcs, ids, build_request(op_name, nodes, ids, "pre_codegen"), current)


def _caller_frame_locals() -> dict | None:
    """Locals of the ``AlgorithmSelectorCache.__call__`` that called our preprocessing fn.

    Inductor passes preprocessing functions only the choices; the op name, inputs, layout and input
    generators are arguments of ``__call__``, two frames up.
    """
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            break
        local = frame.f_locals
        if "name" in local and "input_nodes" in local and "choices" in local:
            return local
        frame = frame.f_back
    return None


def _preprocess_choices(choices):
    """Post-codegen hook (every autotuning, including the CPU's): ask the policies, prune, and run
    the numerical check when a policy asks for it."""
    if not _State.installed or not choices:
        return choices
    try:
        current = settings.current()
        local = _caller_frame_locals()
        if local is None:
            return choices
        name, nodes = local["name"], local["input_nodes"]
        if name is None or not nodes:
            return choices
        policies = _policies_for(name)
        if not policies:
            return choices
        ids = caller_ids(choices)
        request = build_request(name, nodes, ids, "post_codegen")
        annotated = [(getattr(c, "annotations", None) or {}).get("ah_plugin_id") for c in choices]
        if not any(annotated):  # else the pre-codegen hook already asked the policies
            keep = _select(request, current)
            if keep is not None:
                keep_set = set(keep)
                pairs = [(c, cid) for c, cid in zip(choices, ids) if cid in keep_set]
                choices, ids = [c for c, _ in pairs], [cid for _, cid in pairs]
                request = build_request(name, nodes, ids, "post_codegen")
    except Exception as exc:
        warn_once(("post", type(exc)), f"ah_plugin: preprocessing hook failed ({exc!r}); using Inductor's choices")
        return choices
    return _numerically_checked(_benchmark_limited(choices, request, policies), ids, request, local, policies)


def _save_feedback(timings, name, input_nodes, choices, profiled_time_fn=None, precompile_times=None):
    """After benchmarking: hand every candidate's time to the policies (failed/untimed listed apart)."""
    if not _State.installed:
        return
    try:
        policies = [p for p in _policies_for(name) if hasattr(p, "on_timings")]
        if not policies or not choices:
            return
        ids = caller_ids(choices)
        request = build_request(name, input_nodes, ids, "feedback")
        timed: dict[str, float] = {}
        untimed: list[str] = []
        for choice, cid in zip(choices, ids):
            value = timings.get(choice)
            try:
                value = float(value) if value is not None else None
            except (TypeError, ValueError):
                value = None
            if value is None or value != value or value in (float("inf"), float("-inf")):
                untimed.append(cid)
            else:
                timed[cid] = value
    except Exception as exc:
        warn_once(("feedback", type(exc)), f"ah_plugin: feedback hook failed ({exc!r}); nothing recorded")
        return
    for policy in policies:
        _call_policy(policy, "on_timings", request, timed, untimed)


# --- numerical check (post-codegen) -------------------------------------------------------------


def _check_tolerances(request: AutotuneRequest, policies) -> tuple[list, float, float] | None:
    """(asking policies, atol, rtol) from the policies' optional ``numerical_check(request)``; the
    strictest tolerances win. None when no policy asks (the usual case: nothing else is done)."""
    asking, atols, rtols = [], [], []
    for policy in policies:
        if getattr(policy, "numerical_check", None) is None:
            continue
        answer = _call_policy(policy, "numerical_check", request)
        if answer is None or answer is _FAILED:
            continue
        asking.append(policy)
        atols.append(float(answer[0]))
        rtols.append(float(answer[1]))
    if not asking:
        return None
    return asking, min(atols), min(rtols)


def _is_extern_caller(caller) -> bool:
    from torch._inductor import select_algorithm

    is_extern = getattr(select_algorithm.AlgorithmSelectorCache, "_is_extern", None)
    if is_extern is not None:
        return bool(is_extern(caller))
    return isinstance(caller, select_algorithm.ExternKernelCaller)


def _run_choices(choices, local) -> list[tuple[object, float]]:
    """Run every choice once on the inputs Inductor would benchmark with (same random tensors for
    all): [(a copy of its output, its time in ms)]. Raises when this torch lacks the pieces."""
    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    get_inputs = getattr(AlgorithmSelectorCache, "get_inputs", None)
    if get_inputs is None or "layout" not in local:
        raise RuntimeError("this torch has no AlgorithmSelectorCache.get_inputs")
    args = get_inputs(choices, local["input_nodes"], local["layout"], local.get("input_gen_fns"))
    results = []
    for choice in choices:
        tensors = args.get_benchmark_tensors(_is_extern_caller(choice))
        inputs, out = tensors.input_tensors, tensors.output_tensor
        out.zero_()
        # benchmark() is the one call every ChoiceCaller (and its pre/post-processing wrapper) runs
        # correctly with; its time is kept for the policies.
        ms = choice.benchmark(*inputs, out=out)
        results.append((out.detach().clone(), float(ms)))
    return results


def _numerically_checked(choices, ids, request: AutotuneRequest, local, policies):
    """Drop the candidates whose output differs from the aten candidate's beyond the tolerances a
    policy asked for (NaN is a difference); the aten candidate is the reference and always kept.
    The dropped ids and every candidate's time go to ``on_numerical_check`` of the asking policies.
    Anything that fails: warned once, every candidate kept."""
    if len(choices) < 2:
        return choices
    try:
        asked = _check_tolerances(request, policies)
        if asked is None:
            return choices
        asking, atol, rtol = asked
        reference = next((i for i, c in enumerate(choices) if _is_extern_caller(c)), None)
        if reference is None:
            warn_once(("check_ref", request.op_name),
                      f"ah_plugin: numerical check for {request.op_name} skipped: no aten candidate to compare with")
            return choices
        import torch

        runs = _run_choices(choices, local)
        expected = runs[reference][0]
        rejected = []
        for index, ((output, _), cid) in enumerate(zip(runs, ids)):
            if index == reference:
                continue
            same = output.shape == expected.shape and bool(
                torch.allclose(output, expected, atol=atol, rtol=rtol, equal_nan=False)
            )
            if not same:
                rejected.append(cid)
        timings = {cid: ms for (_, ms), cid in zip(runs, ids)}
    except Exception as exc:
        warn_once(("check", type(exc)),
                  f"ah_plugin: numerical check failed ({exc!r}); keeping every candidate unchecked")
        return choices
    verbose(f"{request.op_name}: numerical check (atol={atol:g}, rtol={rtol:g}) drops {rejected or 'nothing'}")
    for policy in asking:
        if getattr(policy, "on_numerical_check", None) is not None:
            _call_policy(policy, "on_numerical_check", request, rejected, timings)
    dropped = set(rejected)
    return [c for c, cid in zip(choices, ids) if cid not in dropped]


# --- benchmark limits (post-codegen) -------------------------------------------------------------

# The limits of the candidate being benchmarked now; None (the default) outside a limited benchmark,
# so the benchmarker wrapper passes every other benchmark (other autotunings, Triton's own) unchanged.
_active_limits: contextvars.ContextVar = contextvars.ContextVar("ah_plugin_benchmark_limits", default=None)

# How a limit maps onto a benchmarker method's keyword arguments, tried in order: the first entry whose
# keywords the method accepts wins; each keyword is lowered to min(its value, the limit).
#   InductorBenchmarker.benchmark_gpu (torch's default): timed iterations and the duration (ms) it fits them in;
#   TorchProfilerBenchmarker.benchmark_gpu: ``rep`` counts iterations there;
#   TritonBenchmarker.benchmark_gpu: keywords go on to triton's do_bench, whose ``rep`` is milliseconds;
#   Benchmarker.benchmark_cpu: ``rep`` is the milliseconds of timed runs (no iteration count exists).
_LIMIT_MAPS = {
    "benchmark_gpu": (
        {"benchmark_iters": "iterations", "max_benchmark_duration": "duration_ms"},
        {"rep": "iterations", "max_benchmark_duration": "duration_ms"},
        {"rep@do_bench": "duration_ms"},
    ),
    "benchmark_cpu": ({"rep": "duration_ms"},),
}


class _Limiter:
    benchmarker = None  # the instance wrapped
    originals: dict = {}  # method name -> the bound method replaced
    plans: dict = {}  # method name -> {keyword: (limit name, default value)} or None (no limit possible)


def _benchmark_limits(request: AutotuneRequest, policies) -> dict | None:
    """The strictest limits the policies ask for (optional ``benchmark_limits(request)``); None when none asks."""
    limits: dict = {}
    for policy in policies:
        if getattr(policy, "benchmark_limits", None) is None:
            continue
        answer = _call_policy(policy, "benchmark_limits", request)
        if not answer or answer is _FAILED:
            continue
        for name in ("duration_ms", "iterations"):
            value = answer.get(name)
            if value is not None and int(value) > 0:
                limits[name] = min(int(value), limits.get(name, int(value)))
    return limits or None


def _benchmark_limited(choices, request: AutotuneRequest, policies):
    """Wrap each candidate's ``benchmark`` so that the limits hold while it runs (same list back)."""
    if len(choices) < 2:
        return choices  # nothing is benchmarked
    try:
        limits = _benchmark_limits(request, policies)
        if limits is None:
            return choices
        _install_benchmark_limiter()
        for choice in choices:
            original = getattr(choice.benchmark, "_ah_plugin_unlimited", choice.benchmark)

            def benchmark(*args, _original=original, **kwargs):
                token = _active_limits.set(limits)
                try:
                    return _original(*args, **kwargs)
                finally:
                    _active_limits.reset(token)

            benchmark._ah_plugin_unlimited = original
            choice.benchmark = benchmark
    except Exception as exc:
        warn_once(("limits", type(exc)), f"ah_plugin: benchmark limits not applied ({exc!r})")
        return choices
    verbose(f"{request.op_name}: benchmarks of {len(choices)} candidates limited to {limits}")
    return choices


def _install_benchmark_limiter() -> None:
    """Put the limiting wrapper on Inductor's benchmarker instance (once; inert without limits)."""
    from torch._inductor.runtime import benchmarking

    bench = getattr(benchmarking, "benchmarker", None)
    if bench is None or _Limiter.benchmarker is bench:
        return
    _remove_benchmark_limiter()
    originals = {}
    for name in _LIMIT_MAPS:
        original = getattr(bench, name, None)
        if original is not None:
            originals[name] = original
            bench.__dict__[name] = _limiting_method(name, original)
    _Limiter.benchmarker, _Limiter.originals, _Limiter.plans = bench, originals, {}


def _remove_benchmark_limiter() -> None:
    bench = _Limiter.benchmarker
    if bench is not None:
        for name in _Limiter.originals:
            bench.__dict__.pop(name, None)
    _Limiter.benchmarker, _Limiter.originals, _Limiter.plans = None, {}, {}


def _limit_plan(name: str, original):
    """{keyword: (limit name, default)} for this method's signature; None (noted once) when no map fits."""
    try:
        params = inspect.signature(original).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for mapping in _LIMIT_MAPS[name]:
            plan = {}
            for keyword, limit in mapping.items():
                if keyword.endswith("@do_bench"):  # forwarded through **kwargs to triton's do_bench
                    keyword = keyword.split("@")[0]
                    do_bench = getattr(_Limiter.benchmarker, "triton_do_bench", None) if takes_any else None
                    target = inspect.signature(do_bench).parameters if do_bench is not None else {}
                else:
                    target = params
                if keyword not in target or target[keyword].default is inspect.Parameter.empty:
                    break
                plan[keyword] = (limit, target[keyword].default)
            else:
                return plan
    except Exception as exc:
        verbose(f"benchmark limits: cannot read the signature of {name} ({exc!r})")
    verbose(f"benchmark limits: {type(_Limiter.benchmarker).__name__}.{name} takes none of the known "
            f"keywords; its benchmarks are not limited")
    return None


def _limiting_method(name: str, original):
    def limiting(*args, **kwargs):
        limits = _active_limits.get()
        if limits is None:
            return original(*args, **kwargs)
        if name not in _Limiter.plans:
            _Limiter.plans[name] = _limit_plan(name, original)
        plan = _Limiter.plans[name]
        if plan is None or len(args) > 1:  # extra positional arguments: not a call we know how to cap
            return original(*args, **kwargs)
        for keyword, (limit, default) in plan.items():
            if limit in limits:
                current = kwargs.get(keyword, default)
                kwargs[keyword] = limits[limit] if current is None else min(current, limits[limit])
        return original(*args, **kwargs)

    limiting.__wrapped__ = original
    limiting._ah_plugin_limiter = True
    return limiting


# --- search space (GPU Triton mm) -------------------------------------------------------------------


def _widen_search_space(handler, ktcs, kernel_inputs, templates, op_name, kwarg_overrides, current):
    """Add configs from Inductor's exhaustive mm list that this device can run (see search_space.py).

    Collect mode benchmarks a deterministic sample of them per input; use mode offers all of them to
    the ranking. Only the classic Triton mm template on CUDA; anything else is left as it is.
    """
    if kernel_inputs.device_type != "cuda" or op_name not in ("mm", "addmm", "bmm"):
        return ktcs
    from torch._inductor.select_algorithm import TritonTemplate

    mm_templates = [t for t in templates if isinstance(t, TritonTemplate) and t.name in ("mm", "bmm")]
    if not mm_templates:
        return ktcs
    from . import search_space
    import torch._inductor.config as inductor_config

    template = mm_templates[0]
    overrides = (kwarg_overrides or {}).get(template.uid, {})
    with inductor_config.patch(max_autotune_gemm_search_space="EXHAUSTIVE"):
        extra = list(handler.get_ktc(kernel_inputs, template, op_name, overrides))
    existing = set(ktc_ids(ktcs))
    info = _device_metadata(kernel_inputs.nodes()[0].get_device())
    dtype_size = kernel_inputs.nodes()[0].get_dtype().itemsize
    candidates = []
    for ktc in extra:
        params = ktc.params.to_kwargs()
        cid = choice_ids.choice_id("triton", template.name, params)
        if cid in existing:
            continue
        if not search_space.fits_device(params, dtype_size, info["shared_memory"]):
            continue
        existing.add(cid)
        candidates.append((cid, ktc))
    if op_name in current.collect:
        feats = build_request(op_name, kernel_inputs.nodes(), [], "pre_codegen").features
        picked = search_space.sample(sorted(cid for cid, _ in candidates), current.search_sample, feats)
        picked_set = set(picked)
        candidates = [(cid, ktc) for cid, ktc in candidates if cid in picked_set]
    verbose(f"{op_name}: search space adds {len(candidates)} configs to {len(ktcs)}")
    return list(ktcs) + [ktc for _, ktc in candidates]
