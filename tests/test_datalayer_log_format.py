"""ah_plugin.collect.log_format: the exact text torch's collector writes, and safe appends from many processes."""

import json
import multiprocessing as mp
import os
import warnings

import pytest
import torch

from ah_plugin.collect.log_format import AHLogError, append_rows, format_metadata, format_row, header_columns, parse_metadata, sibling_log_path
from torchgen_ah.data.ah_log import read_log
from mm_log_meta import MM_LOG_METADATA

MM_META = dict(MM_LOG_METADATA)
FEATURES = {
    "m": 8192, "k": 1024, "n": 256, "mat1_stride_0": 1024, "mat1_stride_1": 1, "mat2_stride_0": 256,
    "mat2_stride_1": 1, "mat1_dtype": torch.bfloat16, "mat2_dtype": torch.bfloat16,
    "mat1_iscontig": True, "mat2_iscontig": False, "using_tf32": "not_float_32",
}


def test_metadata_line_is_upstream_json_in_upstream_key_order():
    shuffled = {"device_name": "NVIDIA H200", **{k: MM_META[k] for k in reversed(list(MM_META))}}
    line = format_metadata(shuffled)
    # byte-for-byte what torch's collector writes (json.dumps of its dict), extra keys after
    upstream = json.dumps({k: (list(v) if isinstance(v, tuple) else v) for k, v in MM_META.items()})
    assert line == upstream[:-1] + ', "device_name": "NVIDIA H200"}'
    parsed = parse_metadata(line, "x.txt")
    assert parsed["device_capa"] == (9, 0)
    assert list(parsed) == [*MM_META, "device_name"]


def test_row_text_matches_torch_collector_formatting():
    row = format_row(MM_META, FEATURES, "extern_mm", 0.04270000010728836)
    assert row == (
        "8192,1024,256,1024,1,256,1,torch.bfloat16,torch.bfloat16,True,False,not_float_32,"
        "extern_mm,0.04270000010728836"
    )
    assert header_columns(MM_META)[-2:] == ["choice", "feedback"]
    assert format_row(MM_META, dict(FEATURES, using_tf32=True), "c", float("inf")).endswith(",True,c,inf")
    with pytest.raises(ValueError, match="comma"):
        format_row(MM_META, FEATURES, "a,b", 1.0)
    with pytest.raises(ValueError, match="mat2_dtype"):
        format_row(MM_META, {k: v for k, v in FEATURES.items() if k != "mat2_dtype"}, "c", 1.0)


@pytest.mark.parametrize(
    "line, reason",
    [
        ("", "missing metadata"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"name": "mm", "numerical_features": ["m"]}', "categorical_features"),
        ('{"name": "mm", "numerical_features": ["m"], "categorical_features": ["m"]}', "twice"),
    ],
)
def test_bad_metadata_names_file_and_line(line, reason):
    with pytest.raises(AHLogError, match=reason) as info:
        parse_metadata(line, "some/dir/mm.txt", 1)
    assert str(info.value).startswith("some/dir/mm.txt:1: ")


def test_append_creates_then_appends_and_reads_back(tmp_path):
    path = tmp_path / "sub" / "mm.txt"
    rows = [format_row(MM_META, dict(FEATURES, m=m), "extern_mm", m / 1000) for m in (1, 2, 3)]
    assert append_rows(path, MM_META, rows[:2]) == str(path)
    assert append_rows(path, MM_META, rows[2:]) == str(path)
    lines = path.read_text().splitlines()
    assert lines[0] == format_metadata(MM_META)
    assert lines[1] == ",".join(header_columns(MM_META))
    assert lines[2:] == rows
    log = read_log(path)
    assert log.frame["m"].tolist() == [1, 2, 3] and not log.skipped


def test_metadata_mismatch_goes_to_sibling_with_one_warning(tmp_path):
    path = tmp_path / "mm.txt"
    append_rows(path, MM_META, [format_row(MM_META, FEATURES, "extern_mm", 1.0)])
    other = dict(MM_META, shared_memory=166912, device_capa=(8, 0))
    row = format_row(other, FEATURES, "extern_mm", 2.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = append_rows(path, other, [row])
        second = append_rows(path, other, [row])
    assert first == second == sibling_log_path(path, other) != str(path)
    assert len([w for w in caught if "different metadata" in str(w.message)]) == 1
    assert read_log(path).metadata["shared_memory"] == 232448
    sibling = read_log(first)
    assert sibling.metadata["device_capa"] == (8, 0) and len(sibling.frame) == 2


def test_append_follows_existing_header_order_and_repairs_torn_line(tmp_path):
    # torch's own collector interleaves numerical and categorical columns (m,k,n,mat1_dtype,...)
    upstream_cols = ["m", "k", "n", "mat1_dtype", "mat2_dtype", "mat1_stride_0", "mat1_stride_1",
                     "mat2_stride_0", "mat2_stride_1", "mat1_iscontig", "mat2_iscontig", "using_tf32",
                     "choice", "feedback"]
    path = tmp_path / "mm.txt"
    path.write_text(format_metadata(MM_META) + "\n" + ",".join(upstream_cols) + "\n8192,1024,25")
    append_rows(path, MM_META, [format_row(MM_META, FEATURES, "extern_mm", 0.5)])
    lines = path.read_text().splitlines()
    assert lines[2] == "8192,1024,25"  # the torn line stays on its own line
    assert lines[3] == ("8192,1024,256,torch.bfloat16,torch.bfloat16,1024,1,256,1,True,False,"
                        "not_float_32,extern_mm,0.5")
    log = read_log(path, warn=False)
    assert [n for n, _ in log.skipped] == [3]
    assert log.frame.iloc[0]["mat1_dtype"] == "torch.bfloat16" and log.frame.iloc[0]["n"] == 256


def _writer(path, worker, barrier, batches, per_batch):
    barrier.wait()
    for b in range(batches):
        lines = [
            format_row(MM_META, dict(FEATURES, m=worker, k=b, n=i), f"choice_{worker}_{b}_{i}", 1.0 + i)
            for i in range(per_batch)
        ]
        append_rows(path, MM_META, lines)


def test_eight_processes_append_every_row_exactly_once(tmp_path):
    path = str(tmp_path / "shared" / "mm.txt")
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(8)
    batches, per_batch = 30, 25
    procs = [ctx.Process(target=_writer, args=(path, w, barrier, batches, per_batch)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    text = open(path).read()
    lines = text.splitlines()
    assert lines[0] == format_metadata(MM_META)
    assert lines.count(lines[1]) == 1  # header written once despite 8 simultaneous first appends
    assert not any(name != "mm.txt" for name in os.listdir(os.path.dirname(path)))
    log = read_log(path)
    assert not log.skipped
    choices = log.frame["choice"].tolist()
    assert len(choices) == 8 * batches * per_batch == len(set(choices))


def test_append_waits_for_the_lock_another_writer_holds(tmp_path):
    import fcntl

    path = str(tmp_path / "mm.txt")
    append_rows(path, MM_META, [format_row(MM_META, FEATURES, "first", 1.0)])
    before = open(path).read()
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    with open(path, "a") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        child = ctx.Process(target=_writer, args=(path, 99, barrier, 1, 3))
        child.start()
        barrier.wait()
        child.join(0.5)
        assert child.is_alive(), "append did not wait for the lock"
        assert open(path).read() == before
        fcntl.flock(holder, fcntl.LOCK_UN)
    child.join(30)
    assert child.exitcode == 0
    assert len(read_log(path).frame) == 4
