"""Shared start of the child processes that compile `x @ self.w` on the CPU path with the results
cache (freezing + packed_linear: the GEMM Inductor autotunes on the CPU) and record which choices Inductor benchmarked."""

import textwrap

PRELUDE = textwrap.dedent(
    """
    import json, sys, torch
    import torch._inductor.config as inductor_config
    from torch._inductor import select_algorithm
    from torch._inductor.utils import run_and_get_code
    import ah_plugin.inductor as adapter
    import ah_plugin.tunable as tunable

    inductor_config.freezing = True
    benchmarked = []   # (op, ids of the choices Inductor timed)
    def saver(timings, name, input_nodes, choices, *args, **kwargs):
        benchmarked.append((name, adapter.caller_ids(list(timings))))
    select_algorithm.add_feedback_saver(saver)

    class Linear(torch.nn.Module):
        def __init__(self, k, n):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(k, n))
        def forward(self, x):
            return x @ self.w

    torch.manual_seed(0)
    out = {"runs": []}
    """
)
