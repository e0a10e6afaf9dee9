"""The single-GEMM report of compile_cost: each mode's replay time as the median over its processes, the
judged modes' ratios to min(off, default) and their verdicts, a table whose rows match its header, and
``--combine`` over results files of several runs. Plain result lines, no compiles."""

from __future__ import annotations

import json

from torchgen_ah.evaluation import compile_cost, kernel_times


def _line(mode, shape, ms, proc=0):
    return {"mode": mode, "op": "mm", "shape": shape, "rep": 0, "proc": proc, "seconds": 1.0,
            "replay_ms": ms, "timings": []}


def _well_formed(lines):
    table = [ln for ln in lines if ln.startswith("|")]
    widths = {ln.count("|") for ln in table}
    assert len(widths) == 1, table  # every row as wide as the header


def test_medians_over_processes_ratios_and_verdicts():
    results = [_line("off", "a", 0.010, p) for p in range(3)] + [
        _line("default", "a", 0.012), _line("fast", "a", 0.010),
        _line("quality", "a", 0.0080, 0), _line("quality", "a", 0.0120, 1), _line("quality", "a", 0.0090, 2)]
    [row] = kernel_times.kernel_rows(results)
    assert row["quality"] == 0.009  # the median of its three processes, not the first
    assert row["quality_vs_best"] == 0.009 / 0.010 and row["fast_vs_best"] == 1.0
    lines = kernel_times.kernel_table([row], 3)
    _well_formed(lines)
    text = "\n".join(lines)
    assert "the median over 3 processes" in text
    assert "Fast mode over 1 shapes: geomean 1.000x" in text and "worst <= 1.05x: met)" in text
    assert "Quality mode over 1 shapes: geomean 0.900x" in text and "worst <= 1.01x: met)" in text


def test_a_missing_default_is_not_judged_unless_off_alone_already_misses():
    results = [_line("off", "a", 0.010), _line("fast", "a", 0.0095), _line("quality", "a", 0.012)]
    text = "\n".join(kernel_times.kernel_table(kernel_times.kernel_rows(results), 1))
    assert "| mm a | 10.0 | - |" not in text and "| a | 10.0 | - | 9.5 | 12.0 | 0.950 | 1.200 |" in text
    assert "Fast mode over 1 shapes" in text and "not judged: default max-autotune not measured" in text
    # 1.2x off's time is at least 1.2x min(off, default): a miss whatever default would have done
    assert "worst <= 1.01x: missed)" in text


def test_a_table_without_judged_modes_is_well_formed():
    results = [_line("off", "a", 0.010), _line("default", "a", 0.011), _line("plugin_k10", "a", 0.009)]
    lines = kernel_times.kernel_table(kernel_times.kernel_rows(results), 1)
    _well_formed(lines)
    assert not any("mode over" in ln for ln in lines)


def test_combine_reports_several_runs_and_names_a_missing_file(tmp_path, capsys):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("\n".join(json.dumps(x) for x in (_line("off", "a", 0.010), _line("fast", "a", 0.010))) + "\n")
    second.write_text(json.dumps(_line("default", "a", 0.008)) + "\n")
    out = tmp_path / "out"
    assert compile_cost.main(["--combine", f"{first},{second}", "--out", str(out), "--note", "Rows of runs A and B."]) == 0
    text = (out / "compile_cost.md").read_text()
    assert "\nRows of runs A and B.\n" in text
    assert "| a | 10.0 | 8.0 | 10.0 | 1.250 |" in text  # default from the second run: fast is judged on it
    assert "missed" in text
    assert (out / "compile_cost.csv").read_text().splitlines()[0] == "mode,op,shape,proc,rep,seconds,replay_ms"
    assert compile_cost.main(["--combine", str(tmp_path / "none.jsonl"), "--out", str(out)]) == 2
    assert "none.jsonl: no such results file" in capsys.readouterr().err


def test_the_cache_check_says_whether_the_hit_run_generated_the_record_runs_code():
    """A replay gap between record and hit runs is the kernels only when the generated code differs: the
    table says which, and the 2% bar is judged on replay times where there are any."""
    def line(mode, shape, ms, code, timings=()):
        return dict(_line(mode, shape, ms), code=code, timings=list(timings))

    results = [line("cache_record", "a", 0.0469, "c1", [{"x": 1.0, "y": 2.0}]), line("cache", "a", 0.0503, "c1"),
               line("cache_record", "b", 0.0867, "c2"), line("cache", "b", 0.0863, "c3")]
    rows = kernel_times.cache_rows(results)
    assert [(r["same_code"], r["hit_benchmarked"]) for r in rows] == [(True, 0), (False, 0)]
    lines = kernel_times.cache_lines(rows)
    _well_formed(lines)
    text = "\n".join(lines)
    assert "| a | 46.9 | 50.3 | 1.072 | 0 | yes |" in text and "| b | 86.7 | 86.3 | 0.995 | 0 | no |" in text
    assert "nothing benchmarked; the same generated code on 1 of 2; kernels within 7.2%" in text and "missed" in text
    # off a GPU: no replay, the code comparison alone, the timing bar not judged
    cpu = kernel_times.cache_rows([line("cache_record", "a", None, "c1"), line("cache", "a", None, "c1")])
    text = "\n".join(kernel_times.cache_lines(cpu))
    assert "| a | - | - | - | 0 | yes |" in text and "not judged against the 2% bar" in text
    # a hit run that benchmarked misses the bar, replay times or not
    tuned = kernel_times.cache_rows([line("cache_record", "a", None, "c1"),
                                     line("cache", "a", None, "c1", [{"x": 1.0, "y": 2.0}])])
    assert "something benchmarked; the same generated code on 1 of 1 (bar: 0 benchmarked: missed)" in \
        "\n".join(kernel_times.cache_lines(tuned))
    # a line without a fingerprint (older results files): nothing compared
    assert kernel_times.cache_rows([line("cache_record", "a", 0.01, None), line("cache", "a", 0.01, "c")])[0]["same_code"] is None
