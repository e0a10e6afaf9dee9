"""The KV-cache decoding matrix (``studies/kv_matrix.py``) and its decoders (``studies/decoder_styles.py``):
the styles build and decode on the CPU, the roofline counts what a step must read, and the command measures,
writes its points as it goes and reports them (a real CPU compile in a fresh process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from torchgen_ah.evaluation.studies import decoder_styles, kv_decode, kv_matrix


def _tiny(torch, style: str, batch: int = 2, context: int = 32):
    size = decoder_styles.style(style, **kv_matrix.TINY)
    model = kv_decode.build_model(torch, layers=1, **size, batch=batch, context=context, attention="sdpa",
                                  device="cpu", dtype=torch.float32)[0]
    return model, size


def test_each_style_decodes_and_a_mixture_routes_each_token_to_its_top_two_experts():
    torch = pytest.importorskip("torch")
    for style in decoder_styles.STYLES:
        model, size = _tiny(torch, style)
        tokens = torch.randint(0, size["vocab"], (2, 1))
        mask = kv_decode.sdpa_decode_mask(torch, 32, 16, "cpu")
        with torch.no_grad():
            out = model.decode(tokens, torch.tensor([16]), mask)
        assert out.shape == (2, 1, size["vocab"]) and torch.isfinite(out).all(), style
    model, size = _tiny(torch, "moe")
    block = model.blocks[0]
    y = torch.randn(2, 1, size["dim"])
    with torch.no_grad():
        got = block.mixture(y)
        probs = block.router(y).softmax(-1)
        weights, chosen = probs.topk(2, dim=-1)
        expected = torch.zeros_like(y)
        for t in range(2):
            for w, e in zip(weights[t, 0] / weights[t, 0].sum(), chosen[t, 0]):
                h = torch.nn.functional.silu(y[t] @ block.w1[e].t()) * (y[t] @ block.w3[e].t())
                expected[t] += w * (h @ block.w2[e].t())
    assert torch.allclose(got, expected, atol=1e-5)  # the unrouted experts' outputs are weighted by zero
    qwen, _ = _tiny(torch, "qwen2")
    assert qwen.output.weight is qwen.embed.weight and qwen.blocks[0].wq.bias is not None


def test_the_roofline_counts_the_tied_head_once_routed_experts_only_and_the_valid_cache():
    torch = pytest.importorskip("torch")
    model, size = _tiny(torch, "llama")
    weights, kv = decoder_styles.step_bytes(model, size, layers=1, batch=2, position=15)
    everything = sum(p.numel() * p.element_size() for p in model.parameters())
    embedding = model.embed.weight
    assert weights == everything - embedding.numel() * 4 + 2 * embedding.shape[1] * 4  # 2 rows, not the table
    assert kv == 2 * 1 * 2 * size["kv_heads"] * 16 * (size["dim"] // size["heads"]) * 2
    qwen, qsize = _tiny(torch, "qwen2")
    assert decoder_styles.step_bytes(qwen, qsize, layers=1, batch=2, position=15)[0] == sum(
        p.numel() * 4 for p in qwen.parameters())  # the head reads the shared table; counted once
    moe, msize = _tiny(torch, "moe")
    experts = sum(p.numel() * 4 for n, p in moe.named_parameters() if n.split(".")[-1] in ("w1", "w2", "w3"))
    one = decoder_styles.step_bytes(moe, msize, layers=1, batch=1, position=15)[0]
    many = decoder_styles.step_bytes(moe, msize, layers=1, batch=64, position=15)[0]
    assert decoder_styles.expected_experts(8, 2, 1) == 2.0
    assert many - one == pytest.approx(experts * (decoder_styles.expected_experts(8, 2, 64) - 2) / 8, abs=64 * 64 * 4)
    assert decoder_styles.hbm_tbs("NVIDIA H100 80GB HBM3") == 3.35 and decoder_styles.hbm_tbs("Tesla T4") is None
    with pytest.raises(ValueError, match="unknown decoder style 'gemma'; known: llama, qwen2, mistral, moe"):
        decoder_styles.style("gemma")


def test_points_run_context_first_so_a_budget_cut_keeps_every_model_at_the_first_context():
    order = kv_matrix.points(["llama", "moe"], [1, 8], [2048, 512])
    assert order[:4] == [("llama", 1, 2048), ("llama", 8, 2048), ("moe", 1, 2048), ("moe", 8, 2048)]
    assert len(order) == 8 and order[-1] == ("moe", 8, 512)


def test_bad_arguments_and_a_file_that_is_not_a_matrix_are_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        kv_matrix.main(["--batches", "1,x"])
    assert "--batches takes whole numbers separated by commas, got '1,x'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        kv_matrix.main(["--slow-at", "8-2048"])
    assert "--slow-at takes BATCH:CONTEXT pairs or 'all', got '8-2048'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        kv_matrix.main(["--styles", "llama,gemma"])
    assert "unknown styles gemma; known: llama, qwen2, mistral, moe" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"config": {}}))
    assert kv_matrix.main(["--combine", str(other)]) == 2
    assert f"{other}: not a kv_matrix --json file" in capsys.readouterr().err
    assert kv_matrix.main(["--skip-measured", str(tmp_path / "gone.json")]) == 2
    assert "gone.json: not a kv_matrix --json file" in capsys.readouterr().err
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"runs": []}))
    with pytest.raises(SystemExit):
        kv_matrix.main(["--skip-measured", str(earlier), "--json", str(earlier)])
    assert "is also given to --skip-measured: the run would overwrite" in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_compiles_each_point_writes_it_and_reports_every_mode_against_off(tmp_path):
    """A fresh process compiles the tiny mixture and Qwen2 on the CPU (off and off with freezing), timing by
    wall clock in place of CUDA-graph replay; the JSON then feeds --combine, which writes the section."""
    out, results = tmp_path / "m.json", tmp_path / "RESULTS.md"
    run = subprocess.run(
        [sys.executable, "-m", "torchgen_ah.evaluation.studies.kv_matrix", "--device", "cpu", "--tiny",
         "--styles", "moe,qwen2", "--batches", "1,2", "--contexts", "32", "--layers", "1",
         "--modes", "off,off_frozen", "--rounds", "2", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "kv_matrix: [4/4] qwen2 batch 2 context 32" in run.stdout
    runs = json.loads(out.read_text())["runs"]
    assert [(r["config"]["style"], r["config"]["batch"]) for r in runs] == [
        ("moe", 1), ("moe", 2), ("qwen2", 1), ("qwen2", 2)]
    for r in runs:
        assert set(r["results"]) == {"off", "off_frozen"} and r["config"]["prompt"] == 16
        assert r["results"]["off_frozen"]["max_diff"] < 1e-2  # bf16 rounding: freezing changes no result
        assert r["results"]["off"]["tokens_per_s"] == pytest.approx(
            r["config"]["batch"] / r["results"]["off"]["decode_ms"] * 1e3)
    assert kv_matrix.main(["--combine", str(out), "--results", str(results)]) == 0
    text = results.read_text()
    assert "<!-- BEGIN kv_decode_matrix -->" in text and "| model | batch | context |" in text
    assert text.count("| moe | ") == 2 and text.count("| qwen2 | ") == 2
    assert "off_frozen decode" in text and "(4 points)" in text
    # each point's generated code is hashed: the report counts where a mode's equals off's
    assert "Off's very code (the generated code's hash equal to off's): off_frozen at " in text and " of 4" in text
    assert all(len(r["results"][m]["code"]) == 16 for r in runs for m in ("off", "off_frozen"))
    # a second call measures only what the first did not: (moe, 3), not (moe, 2) again
    more = tmp_path / "more.json"
    run = subprocess.run(
        [sys.executable, "-m", "torchgen_ah.evaluation.studies.kv_matrix", "--device", "cpu", "--tiny",
         "--styles", "moe", "--batches", "2,3", "--contexts", "32", "--layers", "1", "--modes", "off",
         "--rounds", "2", "--json", str(more), "--skip-measured", str(out)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "1 of its points were measured before and are left out; 1 to measure" in run.stdout
    assert [r["config"]["batch"] for r in json.loads(more.read_text())["runs"]] == [3]
    assert kv_matrix.main(["--combine", str(out), str(more), "--results", str(results)]) == 0
    assert results.read_text().count("| moe | ") == 3


def _measured(style, batch, context, fast_ms):
    config = {"style": style, "batch": batch, "context": context, "layers": 2, "attention": "sdpa", "rounds": 7,
              "hbm_tbs": 3.35, "modes": ["off", "fast"], "prompt": 512}

    def mode(ms):
        return {"decode_ms": ms, "tokens_per_s": batch / ms * 1e3, "compile_s": {"decode": 2.0, "prefill": 2.0},
                "decode_spread": 0.01, "prefill_ms": 1.0, "roofline_share": 0.5, "max_diff": 0.0}

    return {"config": config, "torch": "2.11", "device": "GPU", "results": {"off": mode(0.2), "fast": mode(fast_ms)}}


def test_the_report_names_failed_points_once_and_a_point_measured_later_is_not_listed_as_missing():
    first = [_measured("llama", 1, 2048, 0.2), {"skipped_points": [["mistral", 32, 2048], ["moe", 1, 2048]]}]
    second = [{"failed_point": ["mistral", 32, 2048], "error": "OutOfMemoryError: CUDA out of memory"},
              _measured("moe", 1, 2048, 0.21), {"skipped_points": [["moe", 8, 2048]]}]
    text = kv_matrix.report(first + second, "cmd", note="Two device calls.")
    assert "Command: `cmd` on GPU (torch 2.11).\n\nTwo device calls.\n" in text
    assert "Failed: mistral b32 c2048 (OutOfMemoryError: CUDA out of memory)." in text
    assert text.endswith("Not measured (the budget ran out): moe b8 c2048.")
    assert "fast decode 1.025x off (range 1.000-1.050)" in text


def test_points_from_two_gpus_read_as_one_table_with_each_gpu_and_its_bandwidth_named():
    h100 = {**_measured("qwen2", 8, 2048, 0.2), "device": "NVIDIA H100 80GB HBM3"}
    h200 = [{**_measured(style, batch, context, 0.2), "device": "NVIDIA H200"}
            for style, batch, context in (("llama", 1, 512), ("moe", 8, 2048), ("llama", 8, 2048))]
    for run, tbs in ((h100, 3.35), *((r, 4.8) for r in h200)):
        run["config"] = {**run["config"], "hbm_tbs": tbs}
    text = kv_matrix.report([h100, *h200], "cmd")
    assert "on NVIDIA H100 80GB HBM3, NVIDIA H200" in text and "at 3.35 TB/s (H100), 4.8 TB/s (H200)" in text
    rows = [line.split(" | ")[:4] for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    # context 2048 first, models in the styles' order, then batch; the GPU beside each point
    assert rows == [["| llama", "8", "2048", "H200"], ["| qwen2", "8", "2048", "H100"], ["| moe", "8", "2048", "H200"],
                    ["| llama", "1", "512", "H200"]]
    assert "| model | batch | context | GPU | off ms/token |" in text
    single = kv_matrix.report(h200, "cmd")
    assert "GPU |" not in single and "at 4.8 TB/s over" in single


def test_a_point_measured_again_keeps_its_first_row_and_names_the_repeat():
    text = kv_matrix.report([_measured("qwen2", 1, 512, 0.2), _measured("qwen2", 1, 512, 0.19)], "cmd")
    assert text.count("| qwen2 | 1 | 512 |") == 1 and "| 1.000 (1.000) |" in text
    assert "Measured again in a later file (the first measurement is the row): qwen2 b1 c512 (fast 0.950)." in text


def test_the_same_point_on_two_gpus_is_two_rows_and_a_repeat_names_its_gpu():
    h100 = {**_measured("qwen2", 1, 512, 0.2), "device": "NVIDIA H100 80GB HBM3"}
    h200 = {**_measured("qwen2", 1, 512, 0.2), "device": "NVIDIA H200"}
    again = {**_measured("qwen2", 1, 512, 0.19), "device": "NVIDIA H200"}
    text = kv_matrix.report([h100, h200, again], "cmd")
    assert text.count("| qwen2 | 1 | 512 |") == 2 and "| qwen2 | 1 | 512 | H100 |" in text
    assert "qwen2 b1 c512 on H200 (fast 0.950)" in text
