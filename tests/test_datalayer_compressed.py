"""Compressed logs (torchgen_ah.data.log_files): the committed datasets are .txt.gz, so every reader must give
the same rows as from plain text, merge_data must grow a compressed file in place, a cut-short file must
lose only its torn tail (with a warning), corrupt data must be a clear error, and collection, which
appends plain text, must refuse a .gz output and resume from a decompressed copy."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from ah_plugin.collect.log_format import AHLogError
from torchgen_ah.data.ah_log import read_log, write_log
from torchgen_ah.evaluation.studies import h200_quality as hq
from torchgen_ah.mm.gen_data_mm import BenchmarkRunnerMM

ROOT = Path(__file__).resolve().parents[1]

SOURCE = ROOT / "datasets" / "h200" / "h200_hf_decode_mm.txt.gz"


@pytest.fixture()
def plain(tmp_path) -> Path:
    """The committed decoding-GEMM log, decompressed with the gzip module (not our reader)."""
    if not SOURCE.exists():
        pytest.skip(f"H200 data absent: {SOURCE} not found")
    out = tmp_path / "decode_mm.txt"
    with gzip.open(SOURCE, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _merge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchgen_ah.merge_data", *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_compressed_log_reads_like_the_plain_one(plain):
    a, b = read_log(plain), read_log(SOURCE)
    assert a.metadata == b.metadata and len(a.frame) > 3000 and not b.skipped
    pd.testing.assert_frame_equal(a.frame, b.frame)


def test_write_log_compresses_a_gz_name_reproducibly(plain, tmp_path):
    log = read_log(plain)
    write_log(tmp_path / "a.txt.gz", log.metadata, log.frame)
    write_log(tmp_path / "b.txt.gz", log.metadata, log.frame)
    assert gzip.decompress((tmp_path / "a.txt.gz").read_bytes()) == plain.read_bytes()
    assert (tmp_path / "a.txt.gz").read_bytes() == (tmp_path / "b.txt.gz").read_bytes()  # no timestamp inside
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt.gz", "b.txt.gz", "decode_mm.txt"]  # no temp left


def test_merge_grows_a_compressed_file_in_place(plain, tmp_path):
    lines = plain.read_text().splitlines(keepends=True)
    head, rows = lines[:2], lines[2:]
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    old.write_text("".join(head + rows[:1000]))
    new.write_text("".join(head + rows[1000:]))
    data = tmp_path / "data_mm.txt.gz"
    assert _merge(str(data), str(old)).returncode == 0
    refused = _merge(str(data), str(data), str(new))  # an existing output: replaced only when told to
    assert refused.returncode == 2 and f"{data}: is one of the inputs" in refused.stderr
    assert f"merge_data --force {data} {data} {new}" in refused.stderr
    done = _merge("--force", str(data), str(data), str(new))  # the output is also the first input
    assert done.returncode == 0, done.stderr
    assert f"wrote {data}: {len(rows):,} rows" in done.stdout
    assert gzip.decompress(data.read_bytes()).decode() == plain.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data_mm.txt.gz", "decode_mm.txt", "new.txt", "old.txt"]


def test_a_cut_short_file_keeps_the_whole_rows_before_the_cut(plain, tmp_path):
    """Wherever the cut falls (inside a number too, where a torn row would still parse), the rows read are
    the file's own whole rows, in order; merge_data refuses the file rather than make the loss permanent."""
    whole = tmp_path / "whole_mm.txt.gz"
    assert _merge(str(whole), str(plain)).returncode == 0
    full = read_log(plain).frame
    raw = whole.read_bytes()
    cut = tmp_path / "cut_mm.txt.gz"
    for size in range(len(raw) // 10, len(raw) - 50, len(raw) // 23):
        cut.write_bytes(raw[:size])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            part = read_log(cut)
        assert f"{cut}: compressed data ends early" in " ".join(str(w.message) for w in caught)
        assert 0 < len(part.frame) < len(full) and not part.skipped, size
        pd.testing.assert_frame_equal(part.frame.reset_index(drop=True),
                                      full.iloc[: len(part.frame)].reset_index(drop=True))
    done = _merge(str(tmp_path / "out_mm.txt"), str(cut))
    assert done.returncode == 2 and f"{cut}:" in done.stderr and "ends early" in done.stderr
    assert not (tmp_path / "out_mm.txt").exists()


def test_zero_padding_after_the_data_is_ignored(plain, tmp_path):
    padded = tmp_path / "padded_mm.txt.gz"
    assert _merge(str(padded), str(plain)).returncode == 0
    padded.write_bytes(padded.read_bytes() + bytes(512))
    pd.testing.assert_frame_equal(read_log(padded).frame, read_log(plain).frame)


def test_merge_refuses_the_same_measurements_twice(plain, tmp_path):
    """The trap of growing a file in place: a run that resumed the committed log already holds its rows."""
    lines = plain.read_text().splitlines(keepends=True)
    data = tmp_path / "data_mm.txt.gz"
    old, resumed = tmp_path / "old.txt", tmp_path / "resumed.txt"
    old.write_text("".join(lines[:1002]))
    resumed.write_text("".join(lines))  # the old rows, then the new ones
    assert _merge(str(data), str(old)).returncode == 0
    before = data.read_bytes()
    done = _merge("--force", str(data), str(data), str(resumed))
    assert done.returncode == 2, done.stdout
    assert f"{resumed}: 1,000 row(s) are already in {data} (first: line 3)" in done.stderr
    twice = _merge(str(tmp_path / "x.txt"), str(old), str(old))
    assert twice.returncode == 2 and "listed twice" in twice.stderr
    assert data.read_bytes() == before and not (tmp_path / "x.txt").exists()
    assert _merge("--force", str(data), str(resumed)).returncode == 0  # the resumed run's file alone: the whole log
    assert gzip.decompress(data.read_bytes()).decode() == plain.read_text()


def test_a_collector_pointed_at_a_gz_name_appends_to_the_plain_name(plain, tmp_path):
    from ah_plugin.collect.log_format import append_rows

    log = read_log(plain)
    rows = plain.read_text().splitlines()[2:5]
    with pytest.warns(UserWarning, match="cannot write gzip; writing these rows to"):
        written = append_rows(tmp_path / "c_mm.txt.gz", log.metadata, rows, list(log.frame.columns))
    assert written == str(tmp_path / "c_mm.txt") and not (tmp_path / "c_mm.txt.gz").exists()
    assert len(read_log(written).frame) == 3


def test_corrupt_data_is_an_error_naming_the_file(plain, tmp_path):
    whole = tmp_path / "whole_mm.txt.gz"
    assert _merge(str(whole), str(plain)).returncode == 0
    raw = bytearray(whole.read_bytes())
    middle = len(raw) // 2
    raw[middle: middle + 64] = bytes(64)
    bad = tmp_path / "bad_mm.txt.gz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(AHLogError, match=f"{bad}:1: not readable as gzip data"):
        read_log(bad)
    not_gzip = tmp_path / "plain_named_mm.txt.gz"
    shutil.copy(plain, not_gzip)
    with pytest.raises(AHLogError, match="not readable as gzip data"):
        read_log(not_gzip)
    done = _merge(str(tmp_path / "out.txt"), str(bad))
    assert done.returncode == 2 and f"{bad}:1: not readable as gzip data" in done.stderr
    assert not (tmp_path / "out.txt").exists()


def test_collection_refuses_a_compressed_output(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        BenchmarkRunnerMM().parse_args(["-o", str(tmp_path / "run_mm.txt.gz"), "--device", "cpu"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "appends to a plain-text log" in err and f"python -m torchgen_ah.merge_data {tmp_path}/run_mm.txt.gz" in err


def test_collection_scripts_resume_from_a_decompressed_copy(plain, tmp_path):
    committed = tmp_path / "committed"
    committed.mkdir()
    assert _merge(str(committed / "x_mm.txt.gz"), str(plain)).returncode == 0
    (committed / "x_mm.txt.progress.jsonl").write_text('{"index": 0, "status": "ok"}\n')
    out = tmp_path / "out"
    out.mkdir()
    lib = ROOT / "gpu_jobs" / "resume_lib.sh"
    script = (f". {lib}; resume_copy {committed / 'x_mm.txt'} {out / 'x_mm.txt'}; "
              f"resume_copy {committed / 'x_mm.txt.gz'} {out / 'y_mm.txt'}; "
              f"resume_copy {committed / 'absent_mm.txt'} {out / 'z_mm.txt'}")
    subprocess.run(["bash", "-c", script], check=True)
    assert (out / "x_mm.txt").read_bytes() == plain.read_bytes() == (out / "y_mm.txt").read_bytes()
    assert (out / "x_mm.txt.progress.jsonl").read_text() == '{"index": 0, "status": "ok"}\n'
    assert not (out / "z_mm.txt").exists()
    (out / "x_mm.txt").write_text("resumed in place\n")  # an existing output is never overwritten
    subprocess.run(["bash", "-c", script], check=True)
    assert (out / "x_mm.txt").read_text() == "resumed in place\n"
    # a plain log named explicitly wins over a .gz beside it (e.g. after `gzip -dk` and more collection)
    (committed / "x_mm.txt").write_text("newer plain text\n")
    subprocess.run(["bash", "-c", f". {lib}; resume_copy {committed / 'x_mm.txt'} {out / 'p_mm.txt'}; "
                                  f"resume_copy {committed / 'x_mm.txt.gz'} {out / 'g_mm.txt'}"], check=True)
    assert (out / "p_mm.txt").read_text() == "newer plain text\n"
    assert (out / "g_mm.txt").read_bytes() == plain.read_bytes()


def test_quality_benchmark_finds_compressed_files_and_refuses_both_forms(plain, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    assert _merge(str(data / "h200_mm.txt.gz"), str(plain)).returncode == 0
    assert _merge(str(data / "h200_timm_train_mm.txt.gz"), str(plain)).returncode == 0
    main, real = hq.find_files(str(data))
    assert Path(main).name == "h200_mm.txt.gz" and [Path(p).name for p in real] == ["h200_timm_train_mm.txt.gz"]
    assert hq.extra_name(real[0]) == "train_timm"
    shutil.copy(plain, data / "h200_mm.txt")
    with pytest.raises(SystemExit, match="h200_mm.txt is there both plain and compressed"):
        hq.find_files(str(data))
