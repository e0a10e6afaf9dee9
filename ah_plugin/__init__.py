"""ah-plugin: learned max-autotune for matrix multiplies in torch.compile.

Switch-on without code: ``TORCHINDUCTOR_AUTOHEURISTIC_COLLECT=mm`` / ``TORCHINDUCTOR_AUTOHEURISTIC_USE=mm``
(the ``torch.backends`` entry point reads them at ``import torch``). Programmatic switch::

    import ah_plugin
    ah_plugin.install(collect=["mm"], log_path="mm.txt")   # or use=["mm"], top_k=5
    ...
    ah_plugin.uninstall()

    with ah_plugin.enabled(use=["mm"]):                    # for a scope
        ...

**Environment variables win over the values given here** (ah_plugin/config/settings.py, docs/plugin.md).
Importing this package is cheap, and so is switching on from the environment: the hooks go into Inductor
when torch first imports it (``on_inductor_import``). ``install`` imports Inductor at once.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from .version import __version__

_OURS: dict = {}  # role -> policy this module registered ("collector", "ranking", "cache")


def _sync_policies() -> None:
    """Register/unregister our own policies to match the effective settings."""
    # lazy imports throughout this module: ``import ah_plugin`` (and so ``import torch``) stays cheap
    from .policy import registry
    from .config import settings

    current = settings.current()
    wanted = {}
    if current.collect:
        from .collect.collector import default_collector

        wanted["collector"] = (default_collector(), registry.POSITION_COLLECTOR)
    if current.use:
        from .use.ranking import default_policy

        wanted["ranking"] = (default_policy(ops=current.use_ops), registry.POSITION_HEURISTIC)
    if current.tunable:
        from . import tunable

        wanted["cache"] = (tunable.policy(), registry.POSITION_CACHE)
    for role, policy in list(_OURS.items()):
        if role not in wanted or wanted[role][0] is not policy:
            registry.unregister_policy(policy)
            del _OURS[role]
    for role, (policy, position) in wanted.items():
        if role not in _OURS:
            registry.register_policy(policy, position)
            _OURS[role] = policy


def register_policy(policy, position: int | None = None):
    """Ask ``policy`` (an ``ah_plugin.policy.ChoicePolicy``) at every autotuning from now on, at ``position``
    (lower first; default: beside the learned ranking), the adapter's hooks put in first. A failure to put
    them in warns and leaves the policy registered but not asked. Returns the policy."""
    from .inductor import adapter
    from .policy import registry
    from .report.messages import warn_once

    try:
        adapter.install()
    except Exception as exc:  # never break the caller (often an import at startup)
        warn_once("install", f"could not install the Inductor hooks ({exc!r}); plugin inactive")
    return registry.register_policy(policy, registry.POSITION_HEURISTIC if position is None else position)


def unregister_policy(policy) -> bool:
    """Stop asking ``policy``; True when it was registered."""
    from .policy import registry

    return registry.unregister_policy(policy)


def activate_from_environment() -> None:
    """What the ``torch.backends`` entry point calls when a plugin variable is set: the settings are read
    now (a bad value warns at ``import torch``), the hooks go in when torch imports Inductor (at once when
    it has), so that switching on imports nothing of Inductor before the first compile."""
    from .config import env_names, settings
    from .inductor import on_import

    env_names.warn_unknown()  # once per process (the entry point asked already)
    if not settings.current().active:  # a bad value warns and switches off only what it governs
        return
    _exit_line_if_verbose()
    on_import.call_when_imported(_install_on_inductor_import)


def _install_from_environment() -> None:
    """The hooks in, and the policies the settings ask for registered."""
    from .config import settings

    if not settings.current().active:
        return
    from .inductor import adapter  # complete: Inductor's first import inside the adapter's is waited out

    adapter.install()
    try:
        _sync_policies()
    except Exception:
        uninstall()
        raise


def _install_on_inductor_import() -> None:
    """``_install_from_environment`` inside torch's import of Inductor: a failure warns, never raises."""
    try:
        _install_from_environment()
    except Exception as exc:
        from .report.messages import warn_once

        warn_once("activate", f"not activated ({exc!r}); torch runs without it")


def _exit_line_if_verbose() -> None:
    """With verbose output on, the one-line summary of what the plugin did is printed at exit."""
    from .report import exit_summary

    exit_summary.register_if_verbose(status)


def require_active_from_environment() -> dict:
    """For tools whose processes must run with the plugin the environment asks for (data collection,
    benchmarks): switch it on here when ``import torch`` did not (the package is on ``PYTHONPATH`` but not
    installed, so torch found no entry point, and its built-in collector would write the log instead), and
    raise if it is still off. Returns ``status()``. Does nothing when no variable asks for the plugin."""
    from .inductor import adapter
    from .config import settings

    if not settings.env_requests_plugin():
        return status()
    if not adapter.is_installed():
        _install_from_environment()
    if not adapter.is_installed():  # pragma: no cover - activation raises first
        raise RuntimeError("ah_plugin: the environment asks for the plugin, but it could not be switched on")
    return status()


def install(
    *,
    collect=None,
    use=None,
    log_path: str | None = None,
    top_k: int | str | None = None,
    top_k_mass: float | None = None,
    min_choices: int | None = None,
    keep_aten: bool | None = None,
    artifact_dir: str | None = None,
    verbose: bool | None = None,
    search_space: str | None = None,
    search_sample: int | None = None,
    timing: str | None = None,
    aten_margin: float | None = None,
    confidence: float | None = None,
    tune_non_gemm: bool | None = None,
    l2_rule: bool | None = None,
    time_unbacked: bool | None = None,
    compile_once: bool | None = None,
    padded_choice: str | None = None,
) -> None:
    """Switch the plugin on for this process.

    collect / use: op names ("mm", "addmm", "bmm", "packed_linear") or a comma-separated string.
    top_k: "fast" (the default), "quality" (docs/quality_mode.md), an integer, or "adaptive" (see
    docs/use.md; ``top_k_mass`` also switches adaptive k on). timing: "replay" (CUDA-graph replay, the
    default) or "per_call" (Inductor's own). confidence: the ranking share at which fast mode keeps a
    template alone, or "never" (default: 0.8 on a CPU, never on a GPU). tune_non_gemm: in fast and quality
    modes, keep ``mode="max-autotune"``'s tuning of non-GEMM kernels (docs/fast_mode.md). l2_rule: False lets
    fast mode time templates on memory-bound GEMMs within L2 too (docs/fast_mode.md). time_unbacked: False makes
    fast mode on a GPU keep aten alone where its artifact's data do not back the ranking's template, as on a
    CPU, instead of timing the template against aten (docs/use.md, "Support"). compile_once: False
    lets a benchmarked template that wins compile a second time under a unique name (docs/fast_mode.md).
    padded_choice: "off" (default), "auto" (on CUDA) or "on" (any device): quality mode times cuBLAS on the
    padded GEMM as one more candidate instead of Inductor's separate padding pass (docs/quality_mode.md).
    The other arguments are the twins of the environment variables (docs/plugin.md); a set variable
    wins over the argument. Calling ``install`` again replaces the previous arguments.
    """
    from .inductor import adapter
    from .config import settings

    settings.set_api_values(
        collect=collect,
        use=use,
        log_path=log_path,
        top_k=top_k,
        top_k_mass=top_k_mass,
        min_choices=min_choices,
        keep_aten=keep_aten,
        artifact_dir=artifact_dir,
        verbose=verbose,
        search_space=search_space,
        search_sample=search_sample,
        timing=timing,
        aten_margin=aten_margin,
        confidence=confidence,
        tune_non_gemm=tune_non_gemm,
        l2_rule=l2_rule,
        time_unbacked=time_unbacked,
        compile_once=compile_once,
        padded_choice=padded_choice,
    )
    adapter.install()
    _sync_policies()
    _exit_line_if_verbose()


def uninstall() -> None:
    """Switch the plugin off: every policy unregistered (the results cache's too: ``tunable.enable()``
    registers it again), hooks removed, built-in AutoHeuristic and choices class restored."""
    from .inductor import on_import
    from .policy import registry
    from .config import settings

    on_import.cancel()
    settings.set_api_values()
    for policy in registry.registered_policies():
        registry.unregister_policy(policy)
    _OURS.clear()
    adapter = sys.modules.get("ah_plugin.inductor.adapter")  # never imported: no hook went in
    if adapter is not None and hasattr(adapter, "uninstall"):
        adapter.uninstall()


@contextmanager
def enabled(**kwargs):
    """``install(**kwargs)`` for the ``with`` block; the previous state is restored afterwards."""
    from .inductor import adapter
    from .config import settings

    previous = settings.api_values()
    was_installed = adapter.is_installed()
    install(**kwargs)
    try:
        yield
    finally:
        if was_installed:
            settings.set_api_values(**previous)
            _sync_policies()
        else:
            uninstall()


def status() -> dict:
    """Whether the plugin is switched on (``installed``: its hooks are in Inductor, or go in when torch
    imports it: ``waiting_for_inductor``), the effective settings, the policies asked (in order), and what
    each of ours did: ``collect_stats`` (inputs and rows logged), ``use_stats`` (choices offered and kept),
    ``cache_stats`` (results-cache hits and misses), ``cpu_gemms_not_autotuned``, ``gemms_without_max_autotune``, ``compile_once`` (template
    kernels of compiled graphs that run the kernel their autotuning compiled, and those that do not),
    ``fused_groups`` (quality mode's fused-group decisions: a template kept fused, or kept apart),
    ``neighbours_untimed`` (a timed template's epilogues and prologues not compiled and timed alone, where no
    template may be timed fused: fast mode),
    ``flex_configs`` (FlexAttention kernels whose configs the use mode decided: how many, configs offered and
    kept, and those decided without a ranking)."""
    from .report import cpu_gemm
    from .inductor import on_import
    from .policy import registry
    from .config import settings

    adapter = sys.modules.get("ah_plugin.inductor.adapter")  # not imported: no hook is in
    waiting = on_import.waiting()
    out = {
        "installed": bool(adapter is not None and adapter.is_installed()) or waiting,
        "waiting_for_inductor": waiting,
        "settings": settings.current(),
        "policies": [type(p).__name__ for p in registry.registered_policies()],
    }
    if "collector" in _OURS:
        out["collect_stats"] = _OURS["collector"].stats
    if "ranking" in _OURS:
        out["use_stats"] = _OURS["ranking"].stats
    if "cache" in _OURS:
        from . import tunable

        out["cache_stats"] = tunable.get_stats()
    out["cpu_gemms_not_autotuned"] = cpu_gemm.counts["not_autotuned"]
    out["gemms_without_max_autotune"] = cpu_gemm.counts["no_max_autotune"]
    once = sys.modules.get("ah_plugin.inductor.patches.compile_once")
    out["compile_once"] = dict(once.counts) if once is not None else {"reused": 0, "unmatched": 0}
    fusion = sys.modules.get("ah_plugin.inductor.patches.fusion_timing")
    out["fused_groups"] = {"fused": 0, "apart": 0, **(dict(fusion.counts) if fusion is not None else {})}
    out["neighbours_untimed"] = fusion.untimed["neighbours"] if fusion is not None else 0
    flex = sys.modules.get("ah_plugin.inductor.flex_choices")
    out["flex_configs"] = dict(flex.stats) if flex is not None else {"decided": 0, "kept": 0, "offered": 0,
                                                                       "without_ranking": 0}
    return out


__all__ = ["__version__", "install", "uninstall", "enabled", "status", "register_policy", "unregister_policy",
           "activate_from_environment", "require_active_from_environment"]
