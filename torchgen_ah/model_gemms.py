"""``python -m torchgen_ah.model_gemms``: list the GEMMs of real models' steps, with no GPU and no autotuning.

Why: ``torchgen_ah.model_shapes`` compiles a whole model with max-autotune per case, so one case (ViT-base,
a training step) took more than 150 s of GPU time, mostly on compiling everything that is not a GEMM, and
the same layer shapes are autotuned once per layer. This is the cheap first half of the other way: run each
case's step on the ``meta`` device (shapes only, no memory) under a dispatch mode that records every
``aten.mm`` and ``aten.addmm`` with its shape, operand layouts and dtype: the forward's GEMMs and the
backward's (the NT and TN products of a linear layer's gradients). The second half is
``python -m torchgen_ah.mm.gen_data_mm --shapes FILE``, which times each distinct GEMM once, in warm batched
workers, through the plugin's collector (docs/datagen.md, "Real-model shapes").

Output: one CSV per (suite, mode), ``<prefix>_<suite>_<mode>_gemms.csv``, with the columns ``--shapes``
reads (``m,k,n,transpose_left,transpose_right,dtype``) plus ``op`` (mm or addmm), ``count`` (calls over all
cases) and ``cases`` (how many cases called it). Rows are distinct GEMMs, most called first.

    python -m torchgen_ah.model_gemms -o h200 --suites timm,hf --modes train,infer

timm and transformers are needed for their suites (they are on the GPU machine); ``--suites torch`` lists
a small torch-only transformer, for trying the tool anywhere.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections import Counter, defaultdict
from dataclasses import astuple
from typing import NamedTuple

from torchgen_ah.shape_sampler import MMInput

#: torch dtypes the mm dataset covers, by their ``--shapes`` names
_DTYPE_NAMES = {"torch.bfloat16": "bfloat16", "torch.float16": "float16", "torch.float32": "float32"}
COLUMNS = ("m", "k", "n", "transpose_left", "transpose_right", "dtype", "op", "count", "cases")


class Gemm(NamedTuple):
    """One GEMM as the mm dataset keys it (an ``MMInput``: shape, operand layouts, dtype) and its aten op."""

    input: MMInput
    op: str


def column_major(t) -> bool:
    """Whether a 2-D operand is a transposed view of a row-major tensor (unit stride down its rows)."""
    return t.dim() == 2 and t.stride(0) == 1 and t.stride(1) != 1


def gemm_of(op: str, a, b) -> Gemm | None:
    """The Gemm of ``a @ b``, or None when it is not one the mm dataset keeps (empty, other dtypes)."""
    dtype = _DTYPE_NAMES.get(str(a.dtype))
    if dtype is None or a.dim() != 2 or b.dim() != 2:
        return None
    m, k = a.shape
    n = b.shape[1]
    if min(m, k, n) < 1:
        return None
    return Gemm(MMInput(int(m), int(k), int(n), column_major(a), column_major(b), dtype), op)


def recorder():
    """A TorchDispatchMode that counts every mm/addmm it sees (built lazily: torch is imported here)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    operands = {aten.mm.default: ("mm", 0, 1), aten.addmm.default: ("addmm", 1, 2)}

    class GemmRecorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.counts: Counter[Gemm] = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            spec = operands.get(func)
            if spec is not None:
                g = gemm_of(spec[0], args[spec[1]], args[spec[2]])
                if g is not None:
                    self.counts[g] += 1
            return func(*args, **(kwargs or {}))

    return GemmRecorder()


def torch_case_model(torch, spec: dict, device: str):
    """The ``torch`` suite: a 2-layer transformer encoder and a classifier head, from torch alone."""
    d, layers, classes = 256, 2, 10
    with torch.device(device):
        encoder = torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=4 * d, batch_first=True), layers,
            enable_nested_tensor=False)
        model = torch.nn.Sequential(encoder, torch.nn.Flatten(0, 1), torch.nn.Linear(d, classes))
    model = model.to(torch.bfloat16)
    model.train(spec["mode"] == "train")
    inputs = {"input": torch.randn(spec["batch"], spec["seq"], d, device=device, dtype=torch.bfloat16)}

    def loss_fn(out):
        return out.float().square().mean()
    return model, inputs, loss_fn


TORCH_CASES = [{"suite": "torch", "model": "encoder2", "mode": mode, "batch": batch, "seq": seq}
               for mode in ("train", "infer") for batch in (2, 8) for seq in (16, 64)]


def cases_for(suites: tuple[str, ...], modes: tuple[str, ...]) -> list[dict]:
    from torchgen_ah.model_shapes import all_cases

    cases = all_cases(tuple(s for s in suites if s != "torch"), modes)
    if "torch" in suites:
        cases += [c for c in TORCH_CASES if c["mode"] in modes]
    return cases


def case_gemms(spec: dict, device: str = "meta") -> Counter:
    """Run one case's step (training: forward and backward; inference: forward) and count its GEMMs."""
    import torch

    from torchgen_ah.model_shapes import build_case

    if spec["suite"] == "torch":
        model, inputs, loss_fn = torch_case_model(torch, spec, device)
    else:
        model, inputs, loss_fn = build_case(torch, spec, device)
    rec = recorder()
    with rec:
        if spec["mode"] == "train":
            loss_fn(model(**inputs)).backward()
        else:
            with torch.no_grad():
                model(**inputs)
    return rec.counts


def describe(spec: dict) -> str:
    seq = f" seq={spec['seq']}" if spec.get("seq") else ""
    return f"{spec['suite']} {spec['model']} {spec['mode']} batch={spec['batch']}{seq}"


def output_path(prefix: str, suite: str, mode: str) -> str:
    return f"{prefix}_{suite}_{mode}_gemms.csv"


def write_csv(path: str, counts: Counter, cases: Counter) -> None:
    """Distinct GEMMs, most called first (ties in a fixed order), in the columns ``--shapes`` reads."""
    rows = sorted(counts, key=lambda g: (-counts[g], astuple(g.input), g.op))
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for g in rows:
            i = g.input
            w.writerow([i.m, i.k, i.n, int(i.transpose_left), int(i.transpose_right), i.dtype, g.op,
                        counts[g], cases[g]])
    os.replace(tmp, path)


def run(prefix: str, suites: tuple[str, ...], modes: tuple[str, ...], device: str = "meta",
        progress: bool = True, log=print) -> dict[str, dict]:
    """Extract every case; return {output path: {"gemms": distinct, "calls": n, "cases": ok, "failed": [..]}}.

    A case that fails (a model a library version cannot build on meta, say) is reported and skipped; the
    others still write their files.
    """
    cases = cases_for(suites, modes)
    if not cases:
        raise SystemExit(f"no cases for suites {suites} and modes {modes}")
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    in_cases: dict[tuple[str, str], Counter] = defaultdict(Counter)
    failed: dict[tuple[str, str], list[str]] = defaultdict(list)
    ok: Counter = Counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(cases), desc="model GEMMs", unit="case", file=sys.stderr)
    for spec in cases:
        group = (spec["suite"], spec["mode"])
        try:
            found = case_gemms(spec, device)
        except Exception as exc:  # noqa: BLE001 - one case's failure must not lose the others
            failed[group].append(f"{describe(spec)}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            log(f"warning: {describe(spec)} failed and is skipped: {type(exc).__name__}: {exc}")
        else:
            counts[group].update(found)
            in_cases[group].update(found.keys())
            ok[group] += 1
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    out = {}
    for group in sorted(set(counts) | set(failed)):
        path = output_path(prefix, *group)
        if counts[group]:
            write_csv(path, counts[group], in_cases[group])
        out[path] = {"gemms": len(counts[group]), "calls": sum(counts[group].values()), "cases": ok[group],
                     "failed": failed[group]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m torchgen_ah.model_gemms", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", default="ah_models", help="prefix of the CSV files (default: ah_models)")
    p.add_argument("--suites", default="timm,hf", help="timm, hf, torch (a small built-in model), comma-separated")
    p.add_argument("--modes", default="train,infer", help="train, infer or both")
    p.add_argument("--device", default="meta", help="where the steps run (default meta: no memory, no GPU)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    suites = tuple(s.strip() for s in args.suites.split(",") if s.strip())
    modes = tuple(s.strip() for s in args.modes.split(",") if s.strip())
    unknown = [s for s in suites if s not in ("timm", "hf", "torch")] + [m for m in modes if m not in ("train", "infer")]
    if unknown:
        print(f"error: unknown suite or mode {unknown}", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    result = run(args.output, suites, modes, args.device, progress=not args.no_progress,
                 log=lambda msg: print(msg, file=sys.stderr))
    for path, r in result.items():
        print(f"{path}: {r['gemms']} distinct GEMMs, {r['calls']} calls, from {r['cases']} case(s)"
              + (f"; {len(r['failed'])} failed" if r["failed"] else ""))
    return 0 if any(r["cases"] for r in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
