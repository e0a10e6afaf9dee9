"""A child process for tests/test_off_lowering.py: compiles one small model in one mode and prints the
generated code's fingerprint, the plugin's lowering counts and whether the output equals eager.

    python tests/off_code_child.py MODEL MODE      MODEL: cnn, mlp, bmm, linear; MODE: off, fast, aten_only

``off`` is ``torch.compile`` with no mode; the others are ``mode="max-autotune-no-cudagraphs"``: ``fast``
with the plugin's environment variables set by the parent, ``aten_only`` with Inductor's own switch
(``TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS=ATEN``) and the plugin off. ``FREEZE=1`` compiles with
``freezing`` (the CPU autotunes a GEMM only with a constant weight); ``DYNAMIC=1`` compiles with symbolic
sizes, ``DYNAMIC=0`` with static ones only (unset: torch's automatic dynamic shapes).
"""

from __future__ import annotations

import json
import os
import sys

import torch


def build(name: str):
    torch.manual_seed(0)
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
    if name == "linear":  # one frozen layer, called at two batch sizes (``DYNAMIC=1``: one symbolic graph)
        model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU())
        return model.eval(), (torch.randn(8, 64), torch.randn(300, 64))
    raise SystemExit(f"unknown model {name!r}")


def main() -> None:
    name, mode = sys.argv[1], sys.argv[2]
    import torch._inductor.config as inductor_config
    from torch._inductor.graph import GraphLowering

    import ah_plugin
    from torchgen_ah.evaluation.generated_code import code_fingerprint, code_summary, first_call_with_code

    ah_plugin.require_active_from_environment()
    inductor_config.freezing = os.environ.get("FREEZE") == "1"
    model, inputs = build(name)
    calls = [(x,) for x in inputs] if name == "linear" else [inputs]
    compiled = torch.compile(model, mode=None if mode == "off" else "max-autotune-no-cudagraphs",
                             dynamic={"1": True, "0": False}.get(os.environ.get("DYNAMIC", "")))
    equal, codes = True, []
    with torch.no_grad():
        for args in calls:
            out, generated = first_call_with_code(GraphLowering, compiled, args)
            codes += generated
            equal = equal and bool(torch.allclose(out, model(*args), atol=1e-4))
    lowered = sys.modules.get("ah_plugin.inductor.patches.lowerings")
    stats = ah_plugin.status().get("use_stats")
    print(json.dumps({"fingerprint": code_fingerprint(codes), "equal": equal, "graphs": len(codes),
                      "summary": code_summary(codes),
                      "cpp_gemm_template": any("micro_gemm" in code for code in codes),
                      "lowerings": lowered.counts() if lowered is not None else None,
                      "use_stats": stats.as_dict() if stats is not None else None}))


if __name__ == "__main__":
    main()
