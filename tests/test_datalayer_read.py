"""torchgen_ah.data.ah_log on samples of the six official files and on hand-made bad input."""

import hashlib
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ah_plugin.collect.log_format import AHLogError, format_metadata
from torchgen_ah.data.ah_log import feature_columns, input_keys, read_log, write_log

from official_data import OFFICIAL, needs_official

MEMBERS = {
    "a100_mm.zip": ["a100/a100_mm.txt", "a100/a100_hf_train_mm.txt", "a100/a100_timm_train_mm.txt"],
    "h100_mm.zip": ["h100/h100_mm.txt", "h100/h100_hf_train_mm.txt", "h100/h100_timm_train_mm.txt"],
}
SAMPLE_LINES = 4000


def _sample(zip_name, member, dest, n_lines=SAMPLE_LINES):
    """The first n_lines lines of an official file, written to dest (real data, small)."""
    with zipfile.ZipFile(OFFICIAL / zip_name) as archive, archive.open(member) as src:
        lines = [next(src) for _ in range(n_lines)]
    dest.write_bytes(b"".join(lines))
    return lines


@needs_official
@pytest.mark.parametrize("zip_name, member", [(z, m) for z, ms in MEMBERS.items() for m in ms])
def test_official_sample_parses(tmp_path, zip_name, member):
    path = tmp_path / Path(member).name
    raw = _sample(zip_name, member, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log = read_log(path)
    assert not log.skipped
    assert len(log.frame) == SAMPLE_LINES - 2
    capa = (8, 0) if member.startswith("a100") else (9, 0)
    assert log.metadata["name"] == "mm" and log.metadata["device_capa"] == capa
    assert log.frame.columns.tolist() == raw[1].decode().strip().split(",")
    for name in log.metadata["numerical_features"]:
        assert log.frame[name].dtype == np.int64
    assert log.frame["feedback"].dtype == np.float64
    assert (log.frame["feedback"] > 0).all()
    # row 10 of the file, field by field
    fields = raw[9].decode().strip().split(",")
    row = log.frame.iloc[7]
    assert [str(row[c]) for c in log.frame.columns[:-1]] == fields[:-1]
    assert row["feedback"] == float(fields[-1])
    # input keys are the row text minus choice and feedback, so held-out hashes match the file
    keys = input_keys(log.frame, log.metadata)
    assert keys.iloc[7] == ",".join(fields[:-2])
    assert int(hashlib.sha1(keys.iloc[7].encode()).hexdigest(), 16) == int(
        hashlib.sha1(",".join(fields[:-2]).encode()).hexdigest(), 16
    )


@needs_official
def test_write_then_read_round_trips_official_text(tmp_path):
    path = tmp_path / "h100_mm.txt"
    _sample("h100_mm.zip", "h100/h100_mm.txt", path)
    log = read_log(path)
    out = tmp_path / "copy.txt"
    write_log(out, log.metadata, log.frame)
    assert out.read_bytes() == path.read_bytes()
    again = read_log(out)
    assert again.frame.equals(log.frame) and again.metadata == log.metadata


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


META = {"shared_memory": 1, "device_capa": [1, 0], "name": "conv", "numerical_features": ["x", "y"],
        "categorical_features": ["kind"]}
HEADER = "x,kind,y,choice,feedback"


def test_malformed_rows_are_skipped_counted_and_named(tmp_path):
    path = _write(tmp_path / "conv.txt", [
        format_metadata(META), HEADER,
        "1,a,2,c1,0.5",          # 3 ok
        "1,a,2,c1",              # 4 too few fields
        "",                      # 5 blank: ignored, still counted in line numbers
        "one,a,2,c1,0.5",        # 6 non-numeric numerical feature
        "1,a,2,c1,fast",         # 7 non-numeric feedback
        "1,a,2,c1,-0.1",         # 8 negative feedback
        "1,a,2,,0.5",            # 9 empty choice
        "1,a,2,c1,nan",          # 10 nan feedback
        "1,a,2,c2,inf",          # 11 ok: inf is a failed/timed-out measurement
        "1,a,2,c1,0.5,9",        # 12 too many fields
        "nan,a,2,c1,0.5",        # 13 nan feature
        "2,b,3,c3,1e-3",         # 14 ok
    ])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = read_log(path)
    assert [n for n, _ in log.skipped] == [4, 6, 7, 8, 9, 10, 12, 13]
    reasons = dict(log.skipped)
    assert "fields" in reasons[4] and "x" in reasons[6] and "feedback" in reasons[7]
    assert "negative" in reasons[8] and "choice" in reasons[9] and "feedback" in reasons[10]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1
    assert str(path) in messages[0] and "8 malformed" in messages[0] and "line 4" in messages[0]
    assert log.frame["choice"].tolist() == ["c1", "c2", "c3"]
    assert log.frame["x"].dtype == np.int64  # integer again once the bad rows are gone
    assert log.frame["feedback"].tolist() == [0.5, float("inf"), 1e-3]


def test_unusable_metadata_or_header_is_an_error_naming_file_and_line(tmp_path):
    cases = {
        "empty.txt": ([], ":1: "),
        "nojson.txt": (["m,k,choice,feedback", "1,2,c,0.1"], ":1: "),
        "noheader.txt": ([format_metadata(META)], ":2: "),
        "badheader.txt": ([format_metadata(META), "x,kind,z,choice,feedback"], ":2: "),
    }
    for name, (lines, where) in cases.items():
        path = tmp_path / name
        path.write_text("\n".join(lines))
        with pytest.raises(AHLogError) as info:
            read_log(path)
        assert str(info.value).startswith(str(path) + where), str(info.value)
    with pytest.raises(AHLogError, match="missing y; not in the metadata z"):
        read_log(tmp_path / "badheader.txt")


def test_keys_keep_the_file_text_of_numbers(tmp_path):
    meta = dict(META, numerical_features=["x", "y"])
    path = _write(tmp_path / "f.txt", [format_metadata(meta), HEADER,
                                       "007,a,1.50,c1,0.5", "7,a,1.5,c1,0.25", "007,a,1.50,c2,0.5"])
    log = read_log(path)
    assert log.frame["x"].tolist() == [7, 7, 7] and log.frame["y"].tolist() == [1.5] * 3
    keys = input_keys(log.frame, log.metadata).tolist()
    assert keys == ["007,a,1.50", "7,a,1.5", "007,a,1.50"]
    subset = log.frame[log.frame["choice"] == "c2"]
    assert input_keys(subset, log.metadata).tolist() == ["007,a,1.50"]
    out = tmp_path / "out.txt"
    write_log(out, log.metadata, log.frame)
    assert out.read_text() == path.read_text()
    assert feature_columns(meta) == ["x", "y", "kind"]


def test_empty_log_gives_typed_empty_frame(tmp_path):
    log = read_log(_write(tmp_path / "e.txt", [format_metadata(META), HEADER]))
    assert len(log.frame) == 0 and log.frame.columns.tolist() == HEADER.split(",")
    assert log.frame["feedback"].dtype == np.float64 and log.frame["x"].dtype == np.int64
