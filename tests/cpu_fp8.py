"""Whether this torch's CPU fp8 GEMM takes row-wise scales, which the tiny fp8 decoder's projections use."""

NO_CPU_ROWWISE = ("this torch's CPU fp8 GEMM takes one scale per tensor only (row-wise from torch 2.13): "
                  "the fp8 decoder runs on the GPU")


def rowwise_on_cpu(torch) -> bool:
    """torch 2.13 on: True; torch 2.11's CPU ``_scaled_mm`` asserts one scale per tensor."""
    probe = torch.ones(16, 16).to(torch.float8_e4m3fn)
    try:
        torch._scaled_mm(probe, probe.t(), scale_a=torch.ones(16, 1), scale_b=torch.ones(1, 16),
                         out_dtype=torch.bfloat16)
    except RuntimeError:
        return False
    return True
