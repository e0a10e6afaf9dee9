"""``python -m torchgen_ah.model_gemms``: list the GEMMs of real models' steps, with no GPU and no autotuning.

Why: ``torchgen_ah.model_shapes`` compiles a whole model with max-autotune per case, so one case (ViT-base,
a training step) took more than 150 s of GPU time, mostly on compiling everything that is not a GEMM, and
the same layer shapes are autotuned once per layer. This is the cheap first half of the other way: run each
case's step on the ``meta`` device (shapes only, no memory) under a dispatch mode that records every
``aten.mm`` and ``aten.addmm`` with its shape, operand layouts and dtype: the forward's GEMMs and the
backward's (the NT and TN products of a linear layer's gradients). The second half is
``python -m torchgen_ah.mm.gen_data_mm --shapes FILE``, which times each distinct GEMM once, in warm batched
workers, through the plugin's collector (docs/datagen.md, "The cheaper way").

Output: one CSV per (suite, mode), ``<prefix>_<suite>_<mode>_gemms.csv``, with the columns ``--shapes``
reads (``m,k,n,transpose_left,transpose_right,dtype,allow_tf32``) plus ``op`` (the aten ops that called
it: mm, addmm or both), ``count`` (calls over all cases) and ``cases`` (how many cases called it). Rows
are distinct GEMMs, most called first. GEMMs with M or N of 1 are left out: Inductor does not autotune
them (a matrix-vector product).

    python -m torchgen_ah.model_gemms -o h200 --suites timm,hf --modes train,infer

timm and transformers are needed for their suites (they are on the GPU machine); ``--suites torch`` lists
a small torch-only transformer, for trying the tool anywhere.
"""

from __future__ import annotations

import contextlib
import csv
import os
import sys
from collections import Counter, defaultdict
from dataclasses import astuple
from typing import NamedTuple

from tqdm import tqdm

from ah_plugin.report import command_line
from torchgen_ah.datagen.model_shapes import MODES, all_cases, build_case, describe_case
from torchgen_ah.datagen.shape_sampler import MMInput

#: torch dtypes the mm dataset covers, by their ``--shapes`` names
_DTYPE_NAMES = {"torch.bfloat16": "bfloat16", "torch.float16": "float16", "torch.float32": "float32"}
COLUMNS = ("m", "k", "n", "transpose_left", "transpose_right", "dtype", "allow_tf32", "op", "count", "cases")


class Gemm(NamedTuple):
    """One GEMM as the mm dataset keys it (an ``MMInput``: shape, operand layouts, dtype) and its aten op."""

    input: MMInput
    op: str


def column_major(t) -> bool:
    """Whether a 2-D operand is a transposed view of a dense row-major tensor: unit stride down its rows
    and a column stride of at least its row count (a broadcast operand, stride 0, is not)."""
    rows, cols = t.shape
    return t.stride(0) == 1 and cols > 1 and t.stride(1) >= max(rows, 2)


def gemm_of(op: str, a, b) -> Gemm | None:
    """The Gemm of ``a @ b``, or None when it is not one the mm dataset keeps: other dtypes, and M or N
    of 1 (or 0), which Inductor lowers as a matrix-vector product without autotuning."""
    dtype = _DTYPE_NAMES.get(str(a.dtype))
    if dtype is None or a.dim() != 2 or b.dim() != 2:
        return None
    m, k = a.shape
    n = b.shape[1]
    if min(m, n) < 2 or k < 1:
        return None
    return Gemm(MMInput(int(m), int(k), int(n), column_major(a), column_major(b), dtype), op)


def recorder():
    """A TorchDispatchMode that counts every mm/addmm it sees (built lazily: torch is imported here)."""
    import torch  # lazy: listing cases and --help need no torch
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
    """The ``torch`` suite: a 2-layer transformer encoder and a classifier head, from torch alone, with
    ``build_case``'s dtypes (fp32 weights under autocast for training on a real device, bf16 otherwise)."""
    d, layers, classes = 256, 2, 10
    with torch.device(device):
        encoder = torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=4 * d, batch_first=True), layers,
            enable_nested_tensor=False)
        model = torch.nn.Sequential(encoder, torch.nn.Flatten(0, 1), torch.nn.Linear(d, classes))
    train = spec["mode"] == "train"
    dtype = torch.float32 if train and device != "meta" else torch.bfloat16  # as build_case: autocast trains
    model = model.to(dtype)
    model.train(train)
    inputs = {"input": torch.randn(spec["batch"], spec["seq"], d, device=device, dtype=dtype)}

    def loss_fn(out):
        return out.float().square().mean()
    return model, inputs, loss_fn


TORCH_CASES = ([{"suite": "torch", "model": "encoder2", "mode": mode, "batch": batch, "seq": seq}
                for mode in ("train", "infer") for batch in (2, 8) for seq in (16, 64)]
               + [{"suite": "torch", "model": "encoder2", "mode": "decode", "batch": batch, "seq": 1}
                  for batch in (4, 16)])


def cases_for(suites: tuple[str, ...], modes: tuple[str, ...]) -> list[dict]:
    cases = all_cases(tuple(s for s in suites if s != "torch"), modes)
    if "torch" in suites:
        cases += [c for c in TORCH_CASES if c["mode"] in modes]
    return cases


def case_gemms(spec: dict, device: str = "meta") -> Counter:
    """Run one case's step (training: forward and backward; inference: forward) and count its GEMMs.

    Training on a real device runs under bf16 autocast, as ``model_shapes`` does; on meta the weights
    are bf16 instead (autocast does not act on meta tensors).
    """
    import torch  # lazy: listing cases and --help need no torch

    if spec["suite"] == "torch":
        model, inputs, loss_fn = torch_case_model(torch, spec, device)
    else:
        model, inputs, loss_fn = build_case(torch, spec, device)
    train = spec["mode"] == "train"
    autocast = (torch.autocast(torch.device(device).type, dtype=torch.bfloat16) if train and device != "meta"
                else contextlib.nullcontext())
    rec = recorder()
    with rec:
        if train:
            with autocast:
                loss = loss_fn(model(**inputs))
            loss.backward()
        else:
            with torch.no_grad():
                model(**inputs)
    return rec.counts


def case_gemms_first_device(spec: dict, devices: tuple[str, ...]) -> tuple[Counter, str, list[str]]:
    """case_gemms on the first of `devices` where the step runs; (counts, device, why earlier ones failed).
    Raises the last device's error when none works."""
    errors = []
    for i, device in enumerate(devices):
        try:
            return case_gemms(spec, device), device, errors
        except Exception as exc:  # noqa: BLE001 - e.g. a model that cannot run on meta: try the next device
            errors.append(f"{device}: {_one_line(exc)}")
            if i == len(devices) - 1:
                raise


def _one_line(exc: Exception) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def output_path(prefix: str, suite: str, mode: str) -> str:
    return f"{prefix}_{suite}_{mode}_gemms.csv"


def write_csv(path: str, counts: Counter, cases: Counter, ops: dict) -> None:
    """Distinct GEMMs (``MMInput``), most called first (ties in a fixed order), in the columns ``--shapes``
    reads; ``op`` lists the aten ops that called it (one row even when both mm and addmm did)."""
    rows = sorted(counts, key=lambda i: (-counts[i], astuple(i)))
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for i in rows:
            w.writerow([i.m, i.k, i.n, int(i.transpose_left), int(i.transpose_right), i.dtype, int(i.allow_tf32),
                        "+".join(sorted(ops[i])), counts[i], cases[i]])
    os.replace(tmp, path)


def run(prefix: str, suites: tuple[str, ...], modes: tuple[str, ...], devices: tuple[str, ...] = ("meta",),
        progress: bool = True, log=print) -> dict[str, dict]:
    """Extract every case; return {output path: {"gemms": distinct, "calls": n, "cases": ok, "failed": [..],
    "devices": {device: cases}}}.

    Each case runs on the first of `devices` where its step works (a model a library version cannot run
    on meta moves on to the next). A case that fails on all of them is reported and skipped; the others
    still write their files.
    """
    cases = cases_for(suites, modes)
    if not cases:
        raise SystemExit(f"no cases for suites {suites} and modes {modes}")
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    in_cases: dict[tuple[str, str], Counter] = defaultdict(Counter)
    ops: dict[tuple[str, str], dict] = defaultdict(lambda: defaultdict(set))
    used: dict[tuple[str, str], Counter] = defaultdict(Counter)
    failed: dict[tuple[str, str], list[str]] = defaultdict(list)
    bar = None
    if progress:
        bar = tqdm(total=len(cases), desc="model GEMMs", unit="case", file=sys.stderr)
    for spec in cases:
        group = (spec["suite"], spec["mode"])
        try:
            found, device, earlier = case_gemms_first_device(spec, devices)
        except Exception as exc:  # noqa: BLE001 - one case's failure must not lose the others
            failed[group].append(f"{describe_case(spec)}: {_one_line(exc)}")
            log(f"warning: {describe_case(spec)} failed and is skipped: {type(exc).__name__}: {exc}")
        else:
            if earlier:
                log(f"note: {describe_case(spec)} ran on {device} ({'; '.join(earlier)})")
            per_input: Counter = Counter()
            for gemm, n in found.items():
                per_input[gemm.input] += n
                ops[group][gemm.input].add(gemm.op)
            counts[group].update(per_input)
            in_cases[group].update(per_input.keys())
            used[group][device] += 1
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    out = {}
    for group in sorted(set(counts) | set(failed)):
        path = output_path(prefix, *group)
        if counts[group]:
            write_csv(path, counts[group], in_cases[group], ops[group])
        out[path] = {"gemms": len(counts[group]), "calls": sum(counts[group].values()), "cases": sum(used[group].values()),
                     "failed": failed[group], "devices": dict(used[group])}
    return out


def main(argv: list[str] | None = None) -> int:
    p = command_line.parser("python -m torchgen_ah.model_gemms", __doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", default="ah_models", help="prefix of the CSV files (default: ah_models)")
    p.add_argument("--suites", default="timm,hf", help="timm, hf, torch (a small built-in model), comma-separated")
    p.add_argument("--modes", default="train,infer",
                   help="train, infer and/or decode (causal LMs, one token per sequence: M = batch)")
    p.add_argument("--device", default="meta",
                   help="where the steps run, comma-separated in order of preference: a case that fails on one "
                        "runs on the next (default meta: no memory, no GPU; e.g. meta,cuda on the GPU machine)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")
    args = p.parse_args(argv)
    suites = tuple(s.strip() for s in args.suites.split(",") if s.strip())
    modes = tuple(s.strip() for s in args.modes.split(",") if s.strip())
    unknown = [s for s in suites if s not in ("timm", "hf", "torch")] + [m for m in modes if m not in MODES]
    if unknown:
        return command_line.fail("model_gemms", ValueError(
            f"unknown suite or mode {', '.join(unknown)}; suites: timm, hf, torch; modes: {', '.join(MODES)}"), 2)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    devices = tuple(d.strip() for d in args.device.split(",") if d.strip())
    result = run(args.output, suites, modes, devices, progress=not args.no_progress,
                 log=lambda msg: print(msg, file=sys.stderr))
    for path, r in result.items():
        on = ", ".join(f"{n} on {d}" for d, n in sorted(r["devices"].items()))
        print(f"{path}: {r['gemms']} distinct GEMMs, {r['calls']} calls, from {r['cases']} case(s)"
              + (f" ({on})" if on else "") + (f"; {len(r['failed'])} failed" if r["failed"] else ""))
    return 0 if any(r["cases"] for r in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
