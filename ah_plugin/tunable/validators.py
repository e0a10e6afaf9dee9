"""The validator lines: what must be the same for a results file's timings to hold in this process.

A file whose value for one of these keys differs is rejected whole (TunableOp's rule). Keys: torch,
plugin, Triton and CUDA/HIP versions; the device's name and capability (on the CPU: the processor and
the vector ISA torch uses); and the Inductor settings that change which GEMM candidates exist.
"""

from __future__ import annotations

import functools
import platform


def _package_version(*names: str) -> str:
    from importlib import metadata

    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "none"


@functools.lru_cache(maxsize=None)
def _static(ordinal: int) -> tuple[tuple[str, str], ...]:
    import torch

    from ah_plugin.version import __version__

    items = [
        ("PT_VERSION", torch.__version__),
        ("AH_PLUGIN_VERSION", __version__),
        ("TRITON_VERSION", _package_version("triton", "pytorch-triton", "pytorch-triton-rocm")),
    ]
    if getattr(torch.version, "hip", None):
        items.append(("HIP_VERSION", str(torch.version.hip)))
    else:
        items.append(("CUDA_VERSION", str(torch.version.cuda or "none")))
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(ordinal)
        items.append(("DEVICE_NAME", torch.cuda.get_device_name(ordinal)))
        items.append(("DEVICE_CAPABILITY", f"{major}.{minor}"))
    else:
        items.append(("DEVICE_NAME", f"cpu {platform.machine()} {platform.processor() or ''}".strip()))
        try:
            capability = torch.backends.cpu.get_cpu_capability()
        except Exception:
            capability = "unknown"
        items.append(("DEVICE_CAPABILITY", str(capability)))
    return tuple(items)


def _inductor_settings() -> list[tuple[str, str]]:
    """User-facing Inductor configuration values that change the GEMM candidates."""
    try:
        from ah_plugin.inductor import compile_tools  # lazy: validators are read only once the cache is used
    except Exception:  # the adapter cannot load: no Inductor settings to compare
        return []
    values = compile_tools.option_values("max_autotune_gemm_backends", "max_autotune_gemm_search_space")
    names = {"max_autotune_gemm_backends": "INDUCTOR_GEMM_BACKENDS",
             "max_autotune_gemm_search_space": "INDUCTOR_GEMM_SEARCH_SPACE"}
    return [(names[name], str(value)) for name, value in values.items() if value is not None]


def current(ordinal: int | None = None) -> dict[str, str]:
    from .settings import device_ordinal

    ordinal = device_ordinal() if ordinal is None else ordinal
    return dict(_static(ordinal)) | dict(_inductor_settings())
