"""torchgen_ah.evaluation.studies.pad_decision on the committed H200 files (padding timings, a copy in
tests/data, and the unaligned replay log, the packaged ranking): fast mode's padding opinion scored against
the pad_mm pass's own rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

from torchgen_ah.evaluation.studies import pad_decision

ROOT = Path(__file__).resolve().parents[1]
TIMINGS = ROOT / "tests" / "data" / "family_timings_unaligned.json"
LOG = ROOT / "datasets" / "h200_replay" / "h200_replay_unaligned_mm.txt.gz"


def test_the_opinion_never_ends_slower_than_the_pass_and_wins_where_a_template_beats_padding():
    padding = json.loads(TIMINGS.read_text())["padding"]
    rows = {r["shape"]: r for r in pad_decision.score(padding, str(LOG), "NVIDIA H200", margin=0.02)}
    assert len(rows) >= 10
    assert all(r["fast_us"] <= r["pass_us"] for r in rows.values())
    # the pass pads (cuBLAS 15.4 us as it is, 10.5 padded), the template runs unpadded in 9.1
    assert rows["256x1024x1001"]["pass_pads"] and rows["256x1024x1001"]["opinion"] is False
    assert math.isclose(rows["256x1024x1001"]["fast_us"], rows["256x1024x1001"]["unpadded_us"])
    # cuBLAS is ranked first once padded: the pass decides, and padding wins
    assert rows["2048x768x1001"]["opinion"] is None and rows["2048x768x1001"]["pass_pads"]


def test_timings_padded_to_another_multiple_are_refused_naming_the_file(tmp_path, capsys):
    data = json.loads(TIMINGS.read_text())
    for row in data["padding"]:
        row["pad_to"] = 16
    bad = tmp_path / "timings.json"
    bad.write_text(json.dumps(data))
    assert pad_decision.main(["--timings", str(bad), "--log", str(LOG)]) == 1
    assert f"{bad}: padded to multiples of 16" in capsys.readouterr().err


def test_the_section_is_written(tmp_path):
    results = tmp_path / "RESULTS.md"
    assert pad_decision.main(["--timings", str(TIMINGS), "--log", str(LOG), "--results", str(results)]) == 0
    text = results.read_text()
    assert "<!-- BEGIN pad_decision -->" in text and "| 256x1024x1001 |" in text
