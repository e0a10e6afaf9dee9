"""`python -m torchgen_ah.get_mm_dataset --from DIR`: copy, verify, unpack, skip, refuse."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from torchgen_ah.data.ah_log import read_log
from torchgen_ah.data.official_datasets import DATASETS

from official_data import OFFICIAL, needs_official

REPO = Path(__file__).resolve().parents[1]
pytestmark = needs_official


def _get(*args, cwd=REPO, env=None):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run([sys.executable, "-m", "torchgen_ah.get_mm_dataset", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.fixture(scope="module")
def fetched_h100(tmp_path_factory):
    out = tmp_path_factory.mktemp("datasets")
    result = _get("--from", OFFICIAL, "--out", out, "--only", "h100")
    return out, result


def test_from_dir_verifies_and_unpacks(fetched_h100):
    out, result = fetched_h100
    assert result.returncode == 0, result.stderr
    assert "SHA-256 verified" in result.stdout
    with zipfile.ZipFile(OFFICIAL / "h100_mm.zip") as archive:
        members = [i for i in archive.infolist() if not i.is_dir()]
    for info in members:
        path = out / info.filename
        assert path.is_file() and path.stat().st_size == info.file_size
    assert sorted(p.name for p in (out / "h100").iterdir()) == [
        "h100_hf_train_mm.txt", "h100_mm.txt", "h100_timm_train_mm.txt"]
    assert not (out / "a100").exists()
    assert read_log(out / "h100" / "h100_mm.txt").metadata["shared_memory"] == 232448


def test_second_run_skips_verified_work(fetched_h100):
    out, _ = fetched_h100
    target = out / "h100" / "h100_mm.txt"
    mtime = target.stat().st_mtime_ns
    result = _get("--from", OFFICIAL, "--out", out, "--only", "h100")
    assert result.returncode == 0, result.stderr
    assert "already unpacked" in result.stdout
    assert target.stat().st_mtime_ns == mtime


def test_corrupted_copy_is_refused_naming_file_and_hashes(tmp_path):
    source = tmp_path / "mirror"
    source.mkdir()
    bad = source / "h100_mm.zip"
    shutil.copyfile(OFFICIAL / "h100_mm.zip", bad)
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    out = tmp_path / "datasets"
    result = _get("--from", source, "--out", out, "--only", "h100")
    assert result.returncode == 1
    assert str(bad) in result.stderr and DATASETS["h100"][1] in result.stderr
    assert "got " in result.stderr and "mismatch" in result.stderr
    assert not (out / "h100").exists() and not (out / "h100_mm.zip").exists()
    nowhere = _get("--from", tmp_path / "nowhere", "--out", out, "--only", "a100")
    assert nowhere.returncode == 1 and f"{tmp_path / 'nowhere'}: not a folder (--from)" in nowhere.stderr
    missing = _get("--from", source, "--out", out, "--only", "a100")
    assert missing.returncode == 1 and "a100_mm.zip: not found" in missing.stderr


def test_the_environment_variable_names_the_folder(tmp_path):
    """AH_OFFICIAL_DATA stands for --from (a shared copy, an offline machine); --from wins over it."""
    out = tmp_path / "datasets"
    env = {"AH_OFFICIAL_DATA": str(OFFICIAL)}
    result = _get("--out", out, "--only", "h100", env=env)
    assert result.returncode == 0, result.stderr
    assert f"taking the zips from {OFFICIAL} (AH_OFFICIAL_DATA)" in result.stdout
    assert (out / "h100" / "h100_mm.txt").is_file()
    wrong = _get("--out", out, "--only", "h100", env={"AH_OFFICIAL_DATA": str(tmp_path / "none")})
    assert wrong.returncode == 1
    assert wrong.stderr.strip().splitlines() == [
        f"python -m torchgen_ah.get_mm_dataset: error: {tmp_path / 'none'}: not a folder (AH_OFFICIAL_DATA); it must hold "
        "a100_mm.zip, h100_mm.zip"]
    chosen = _get("--from", OFFICIAL, "--out", out, "--only", "h100", env={"AH_OFFICIAL_DATA": str(tmp_path)})
    assert chosen.returncode == 0 and "already unpacked" in chosen.stdout
