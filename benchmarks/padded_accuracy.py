"""Accuracy of quality mode's padded candidate on 2048x768x1001 bf16, against eager cuBLAS and the float64 product.

    TORCHINDUCTOR_AUTOHEURISTIC_USE=mm AH_PLUGIN_TOP_K=quality AH_PLUGIN_PADDED_CHOICE=auto \
        python benchmarks/padded_accuracy.py padded_only|quality

``padded_only`` keeps the padded candidate alone; ``quality`` lets quality mode choose (it keeps the candidate
there on an H200). Per seed: whether the result is allclose to eager's, the elements that are not (compiled,
eager, float64), whether it equals eager cuBLAS on the padded operands, and both errors from the float64
product. Rows of an H200 run: benchmarks/runs/quality_h200/padded_accuracy.txt.
"""
import json, os, sys, torch
import ah_plugin
from ah_plugin.inductor import adapter
from ah_plugin.policy import ChoicePolicy, registry
from ah_plugin.use.choice_ids import PADDED_CHOICE_ID
from ah_plugin.inductor import compile_tools
ah_plugin.require_active_from_environment()
adapter.install()
class PaddedOnly(ChoicePolicy):
    op_names = {"mm"}
    def select(self, request):
        return [c for c in request.candidates if c == PADDED_CHOICE_ID] or None
if sys.argv[1] == "padded_only":
    registry.register_policy(PaddedOnly(), registry.POSITION_CACHE)
m, k, n = 2048, 768, 1001
fn = lambda x, y: x @ y
f = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
for seed in range(4):
    torch.manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    res = f(a, b)
    ref = fn(a, b)
    ref_pad = torch.mm(a, torch.nn.functional.pad(b, (0, 7)))[:, :n]
    ref64 = (a.double() @ b.double())
    tol = 2e-1 + 2e-2 * ref.float().abs()
    bad = (res.float() - ref.float()).abs() > tol
    idx = torch.nonzero(bad)[:5].tolist()
    print("RESULT", json.dumps({"seed": seed, "allclose": bool(torch.allclose(res.float(), ref.float(), rtol=2e-2, atol=2e-1)),
          "n_bad": int(bad.sum()), "bad": [(i, j, res[i, j].item(), ref[i, j].item(), ref64[i, j].item()) for i, j in idx],
          "nan": bool(res.isnan().any()), "equal_ref_pad": bool(torch.equal(res, ref_pad)),
          "err_vs_64": (res.double() - ref64).abs().max().item(), "ref_err_vs_64": (ref.double() - ref64).abs().max().item()}), flush=True)
