"""The padding and epilogue report (torchgen_ah.evaluation.studies.family_timings) without a GPU: its shape
arguments, the padded sizes, and the report of a finished run's JSON written as a RESULTS section."""

from __future__ import annotations

import json

import pytest

from torchgen_ah.evaluation.studies import family_timings as ft

RUN = {"device": "NVIDIA H200", "torch": "2.11.0",
       "padding": [{"m": 13, "k": 1000, "n": 4099, "pad_to": 16, "cublas_us": 11.4, "padded_runtime_us": 17.4,
                    "padded_weight_once_us": 6.6}],
       "epilogue": [{"m": 64, "k": 2048, "n": 5632, "cublas_unfused_us": 9.6, "triton_fused_us": 8.9}]}


def test_shapes_and_padded_sizes():
    assert ft.parse_shapes("13x1000x4099, 7x4096x1024") == [(13, 1000, 4099), (7, 4096, 1024)]
    for bad in ("13x1000", "0x4x4", "axbxc"):
        with pytest.raises(ValueError, match="expected MxKxN"):
            ft.parse_shapes(bad)
    assert (ft.padded(4099, 16), ft.padded(4096, 16), ft.padded(1, 16)) == (4112, 4096, 16)


def test_report_of_a_finished_run(tmp_path, capsys):
    run = tmp_path / "family_timings.json"
    run.write_text(json.dumps(RUN))
    results = tmp_path / "RESULTS.md"
    assert ft.main(["--from-json", str(run), "--results", str(results)]) == 0
    text = results.read_text()
    assert "<!-- BEGIN family_timings -->" in text and "NVIDIA H200, torch 2.11.0" in text
    # the best padded variant (weight padded once) against cuBLAS as is: 6.6 / 11.4
    assert "| 13x1000x4099 | 11.4 | 17.4 | 6.6 | 0.579 |" in text
    assert "| 64x2048x5632 | 9.6 | 8.9 | 0.927 |" in text
    with pytest.raises(SystemExit):
        ft.main(["--from-json", str(tmp_path / "missing.json")])
    assert "missing.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ft.main([])  # neither a run to report nor a folder to time into
