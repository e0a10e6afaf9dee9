"""A child process for tests/test_off_lowering.py: compiles one small model in one mode and prints the
generated code's fingerprint, the plugin's lowering counts and whether the output equals eager.

    python tests/off_code_child.py MODEL MODE      MODEL: cnn, mlp, bmm, grouped, linear; MODE: off, fast, aten_only

``off`` is ``torch.compile`` with no mode; the others are ``mode="max-autotune-no-cudagraphs"``: ``fast``
with the plugin's environment variables set by the parent, ``aten_only`` with Inductor's own switch
(``TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS=ATEN``) and the plugin off. ``FREEZE=1`` compiles with
``freezing`` (the CPU autotunes a GEMM only with a constant weight); ``DYNAMIC=1`` compiles with symbolic
sizes, ``DYNAMIC=0`` with static ones only (unset: torch's automatic dynamic shapes). ``THREAD=1`` compiles
and calls in a new thread, as autograd's device thread compiles a training step's backward. ``DEVICE=cuda``
compiles the GPU's versions of ``cnn`` and ``mlp`` (bf16) with Triton.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import torch


def build(name: str, device: str):
    torch.manual_seed(0)
    if device == "cuda":
        return _build_gpu(name)
    if name == "cnn":  # channels-last, with the 1x1 convolutions max-autotune rewrites as mms
        model = torch.nn.Sequential(
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 1), torch.nn.ReLU(),
            torch.nn.Conv2d(64, 32, 1, bias=False), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
            torch.nn.Linear(32, 10))
        model = model.to(memory_format=torch.channels_last)
        return model.eval(), (torch.randn(4, 16, 14, 14).to(memory_format=torch.channels_last),)
    if name == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 96, bias=False),
                                    torch.nn.GELU(), torch.nn.Linear(96, 32))
        return model.eval(), (torch.randn(24, 64),)
    if name == "bmm":
        class Bmm(torch.nn.Module):
            def forward(self, a, b):
                return torch.bmm(a, b).relu()

        return Bmm(), (torch.randn(4, 32, 48), torch.randn(4, 48, 16))
    if name == "grouped":  # a mixture of experts' expert GEMMs: one grouped mm over four experts' rows
        class Experts(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.randn(4, 32, 48, dtype=torch.bfloat16) / 32 ** 0.5)
                self.register_buffer("offs", torch.tensor([8, 16, 24, 32], dtype=torch.int32))

            def forward(self, x):
                return torch._grouped_mm(x, self.w, offs=self.offs).relu()

        return Experts(), (torch.randn(32, 32, dtype=torch.bfloat16),)  # the op takes bf16 only
    if name == "linear":  # one frozen layer, called at two batch sizes (``DYNAMIC=1``: one symbolic graph)
        model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU())
        return model.eval(), (torch.randn(8, 64), torch.randn(300, 64))
    raise SystemExit(f"unknown model {name!r}")


class _TwoLinears(torch.nn.Module):
    """gelu(x W1 + b1) + x W2: an addmm and an mm of 2048x1024x4096, where the packaged H200 ranking puts
    cuBLAS first (so fast mode keeps aten alone on both)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(1024, 4096)
        self.b = torch.nn.Linear(1024, 4096, bias=False)

    def forward(self, x):
        return torch.nn.functional.gelu(self.a(x)) + self.b(x)


def _build_gpu(name: str):
    """The GPU's versions of the models (bf16): a channels-last CNN block with 1x1 convolutions, and GEMMs
    the H200 ranking keeps on cuBLAS."""
    if name == "cnn":
        model = torch.nn.Sequential(
            torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(64, 256, 1), torch.nn.ReLU(),
            torch.nn.Conv2d(256, 64, 1, bias=False), torch.nn.ReLU())
        model = model.to(device="cuda", dtype=torch.bfloat16, memory_format=torch.channels_last)
        x = torch.randn(32, 64, 56, 56, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        return model.eval(), (x,)
    if name == "mlp":
        model = _TwoLinears().to(device="cuda", dtype=torch.bfloat16)
        return model.eval(), (torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16),)
    raise SystemExit(f"no GPU version of model {name!r}")


def _caught(function) -> str | None:
    """``function()``'s exception as text (None when it returned): a thread's failure for the main thread."""
    try:
        function()
    except BaseException as exc:  # reported by the main thread, which exits with it
        return repr(exc)
    return None


def main() -> None:
    name, mode = sys.argv[1], sys.argv[2]
    import torch._inductor.config as inductor_config

    import ah_plugin
    from ah_plugin.inductor import compile_tools
    from ah_plugin.inductor.generated_code_capture import first_call_with_code
    from torchgen_ah.evaluation.generated_code import code_fingerprint, code_summary

    ah_plugin.require_active_from_environment()
    inductor_config.freezing = os.environ.get("FREEZE") == "1"
    device = os.environ.get("DEVICE", "cpu")
    model, inputs = build(name, device)
    calls = [(x,) for x in inputs] if name == "linear" else [inputs]
    compiled = torch.compile(model, mode=None if mode == "off" else "max-autotune-no-cudagraphs",
                             dynamic={"1": True, "0": False}.get(os.environ.get("DYNAMIC", "")))
    done = {"equal": True, "codes": []}

    def run():
        with torch.no_grad():
            for args in calls:
                out, generated = first_call_with_code(compiled, args)
                done["codes"] += generated
                expected = model(*args)
                tolerance = 1e-4 if device == "cpu" else 3e-2 * float(expected.abs().max())  # bf16 on the GPU
                done["equal"] = done["equal"] and bool(torch.allclose(out.float(), expected.float(), atol=tolerance))

    if os.environ.get("THREAD") == "1":  # compiled in a thread other than the one the plugin was switched on in
        worker = threading.Thread(target=lambda: done.update(error=_caught(run)))
        worker.start()
        worker.join()
        if done.get("error"):
            raise SystemExit(f"the compile in a thread failed: {done['error']}")
    else:
        run()
    equal, codes = done["equal"], done["codes"]
    lowered = sys.modules.get("ah_plugin.inductor.patches.lowerings")
    stats = ah_plugin.status().get("use_stats")
    print(json.dumps({"fingerprint": code_fingerprint(codes), "equal": equal, "graphs": len(codes),
                      "triton_templates": sum(code.count("triton_tem_") for code in codes),
                      "summary": code_summary(codes),
                      "cpp_gemm_template": any("micro_gemm" in code for code in codes),
                      "lowerings": lowered.counts() if lowered is not None else None,
                      "plugin_seconds": {k: v for k, v in compile_tools.phase_seconds().items()
                                         if k.startswith("ah_plugin.")},
                      "use_stats": stats.as_dict() if stats is not None else None}))


if __name__ == "__main__":
    main()
