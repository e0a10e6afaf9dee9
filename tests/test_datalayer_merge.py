"""`python -m torchgen_ah.merge_data`, run as a user runs it (a real subprocess)."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ah_plugin.collect.log_format import format_metadata
from torchgen_ah.data.ah_log import read_log

from official_data import OFFICIAL, needs_official

REPO = Path(__file__).resolve().parents[1]


def _merge(*args):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "torchgen_ah.merge_data", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def _sample(zip_name, member, dest, n_lines):
    with zipfile.ZipFile(OFFICIAL / zip_name) as archive, archive.open(member) as src:
        dest.write_bytes(b"".join(next(src) for _ in range(n_lines)))
    return dest


@needs_official
def test_refuses_mismatched_metadata_naming_keys_and_files(tmp_path):
    a100 = _sample("a100_mm.zip", "a100/a100_mm.txt", tmp_path / "a100_mm.txt", 500)
    h100 = _sample("h100_mm.zip", "h100/h100_mm.txt", tmp_path / "h100_mm.txt", 500)
    out = tmp_path / "merged.txt"
    result = _merge(out, a100, h100)
    assert result.returncode == 2
    assert "shared_memory" in result.stderr and "device_capa" in result.stderr
    assert str(a100) in result.stderr and str(h100) in result.stderr
    assert "name" not in result.stderr.split("differs")[1].split("(")[0]  # only differing keys named
    assert not out.exists()


@needs_official
def test_merges_same_device_files_and_reports_counts(tmp_path):
    mm = _sample("h100_mm.zip", "h100/h100_mm.txt", tmp_path / "mm.txt", 1000)
    hf = _sample("h100_mm.zip", "h100/h100_hf_train_mm.txt", tmp_path / "hf.txt", 700)
    # a malformed row in the second file is skipped and named with its line number
    lines = hf.read_text().splitlines()
    lines[9] = lines[9].rsplit(",", 1)[0] + ",not-a-time"
    hf.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out" / "merged.txt"
    result = _merge(out, mm, hf)
    assert result.returncode == 0, result.stderr
    assert "998 rows" in result.stdout and "697 rows, 1 skipped" in result.stdout
    assert "1,695 rows from 2 file(s), 1 skipped" in result.stdout
    assert f"{hf}: skipped 1 malformed row(s): line 10 (feedback is not a number)" in result.stderr
    merged = read_log(out)
    assert len(merged.frame) == 1695 and not merged.skipped
    assert merged.metadata == read_log(mm).metadata


def test_metadata_extra_key_and_missing_file_refused(tmp_path):
    meta = {"shared_memory": 1, "device_capa": [1, 0], "name": "mm", "numerical_features": ["m"],
            "categorical_features": []}
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text(format_metadata(meta) + "\nm,choice,feedback\n1,c,0.5\n")
    b.write_text(format_metadata(dict(meta, device_name="NVIDIA H200")) + "\nm,choice,feedback\n2,c,0.5\n")
    result = _merge(tmp_path / "o.txt", a, b)
    assert result.returncode == 2 and "device_name" in result.stderr and str(b) in result.stderr
    result = _merge(tmp_path / "o.txt", a, tmp_path / "missing.txt")
    assert result.returncode == 2 and "missing.txt" in result.stderr
    c = tmp_path / "c.txt"
    c.write_text("m,choice,feedback\n1,c,0.5\n")
    result = _merge(tmp_path / "o.txt", a, c)
    assert result.returncode == 2 and f"{c}:1:" in result.stderr


def test_rows_two_files_share_are_kept_and_a_copy_is_refused(tmp_path):
    """The same input timed alike in two runs is two measurements; a file's rows twice are not."""
    meta = {"shared_memory": 1, "device_capa": [1, 0], "name": "mm", "numerical_features": ["m"],
            "categorical_features": []}
    head = format_metadata(meta) + "\nm,choice,feedback\n"
    first, second, copy = tmp_path / "run1.txt", tmp_path / "run2.txt", tmp_path / "run1_copy.txt"
    first.write_text(head + "1,a,0.5\n1,b,0.7\n2,a,0.9\n")
    second.write_text(head + "3,a,0.4\n1,a,0.5\n")  # input 1 timed again, the same time to the digit
    copy.write_text(first.read_text())
    out = tmp_path / "all.txt"
    result = _merge(out, first, second)
    assert result.returncode == 0, result.stderr
    assert f"{second}: 1 row(s) also in {first} (first: line 4); both kept" in result.stdout
    assert read_log(out).frame["m"].tolist() == [1, 1, 2, 3, 1]
    refused = _merge(tmp_path / "x.txt", first, second, copy)
    assert refused.returncode == 2 and not (tmp_path / "x.txt").exists()
    assert refused.stderr.strip().splitlines() == [
        f"python -m torchgen_ah.merge_data: error: {copy}: 3 row(s) are already in {first} (first: line 3), every row of it, so the same "
        "measurements would be merged twice. A run that resumed a committed log holds that log's rows: merge the "
        "run's file alone, or merge a run that started a fresh log"]


@pytest.mark.slow
@needs_official
@pytest.mark.parametrize("device, shared", [("a100", 8), ("h100", 51)])
def test_the_three_official_files_of_a_device_merge(tmp_path, device, shared):
    """Upstream's own collections time some inputs in two runs (TIMM rows also in the HF log): kept."""
    names = [f"{device}_mm.txt", f"{device}_hf_train_mm.txt", f"{device}_timm_train_mm.txt"]
    with zipfile.ZipFile(OFFICIAL / f"{device}_mm.zip") as archive:
        archive.extractall(tmp_path, members=[f"{device}/{n}" for n in names])
    paths = [tmp_path / device / n for n in names]
    out = tmp_path / "all.txt"
    result = _merge(out, *paths)
    assert result.returncode == 0, result.stderr
    assert f"{paths[2]}: {shared} row(s) also in {paths[1]}" in result.stdout
    rows = sum(sum(1 for line in p.read_text().splitlines() if line) - 2 for p in paths)
    assert f"wrote {out}: {rows:,} rows from 3 file(s), 0 skipped" in result.stdout
