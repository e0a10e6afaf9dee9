"""Shared start of the child processes that compile `x @ self.w` on the CPU path with the results
cache (freezing + packed_linear: the GEMM Inductor autotunes on the CPU) and record which choices Inductor
benchmarked, and the environment they start in."""

import os
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env(**extra) -> dict:
    """This environment without plugin (AH_*) or Inductor (TORCHINDUCTOR_*) variables, but for the vector-ISA
    switch the session sets once it has probed the CPU (tests/conftest.py); the repository on PYTHONPATH, and
    ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k == "TORCHINDUCTOR_VEC_ISA_OK" or not k.startswith(("AH_", "TORCHINDUCTOR_"))}
    env.update(PYTHONPATH=REPO, **extra)
    return env


# A Contract-2 artifact of a CPU operation; {prelude} runs at import, {rank} is rank()'s body, {methods} more
# methods (a support(), say).
ARTIFACT = '''{prelude}
class {name}:
    heuristic_name = "{name}"
    op_name = "{op}"
    device_capa = (0, 0)
    shared_memory = 0
    device_names = ()
    numerical_features = ["in0_size_0"]
    categorical_features = []
    choices = {choices!r}

    def check_precondition(self, metadata):
        {precondition}

    def rank(self, features):
        {rank}
{methods}'''


def cpu_artifact(name: str, op: str, choices: list, rank: str, *, prelude: str = "",
                 precondition: str = "return True", methods: str = "") -> str:
    """The source of a CPU artifact (``ARTIFACT``)."""
    return ARTIFACT.format(prelude=prelude, name=name, op=op, choices=list(choices), rank=rank,
                           precondition=precondition, methods=methods)


# The module every child compiles: x @ w with w a parameter (a constant under freezing).
LINEAR = textwrap.dedent(
    """
    class Linear(torch.nn.Module):
        def __init__(self, k, n):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(k, n))
        def forward(self, x):
            return x @ self.w
    """
)

PRELUDE = textwrap.dedent(
    """
    import json, sys, torch
    import torch._inductor.config as inductor_config
    from torch._inductor import select_algorithm
    from torch._inductor.utils import run_and_get_code
    import ah_plugin.inductor.adapter as adapter
    import ah_plugin.tunable as tunable

    inductor_config.freezing = True
    benchmarked = []   # (op, ids of the choices Inductor timed)
    def saver(timings, name, input_nodes, choices, *args, **kwargs):
        benchmarked.append((name, adapter.caller_ids(list(timings))))
    select_algorithm.add_feedback_saver(saver)

    """
) + LINEAR + textwrap.dedent(
    """

    def compile_linear(m, k, n, tolerance):
        # x @ w of one shape compiled on the CPU path: (matches eager within tolerance, generated source)
        module = Linear(k, n).eval()
        x = torch.randn(m, k)
        with torch.no_grad():
            compiled = torch.compile(module, mode="max-autotune-no-cudagraphs", dynamic=False)
            y, code = run_and_get_code(compiled, x)
            ok = torch.allclose(y, x @ module.w, atol=tolerance, rtol=tolerance)
        return bool(ok), "\\n".join(code)

    torch.manual_seed(0)
    out = {"runs": []}
    """
)
