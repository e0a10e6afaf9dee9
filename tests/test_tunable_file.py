"""The results file layer, params keys and the cache policy on plain requests (no compiles)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import ah_plugin.tunable as tunable
from ah_plugin.policy import AutotuneRequest
from ah_plugin.tunable import params as P
from ah_plugin.tunable import results_file as F
from ah_plugin.tunable import settings as S
from ah_plugin.tunable.store import store

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRITON_A = "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4"
TRITON_B = "type=triton_BLOCK-M=128_BLOCK-K=64_BLOCK-N=128_numstages=3_numwarps=8"


pytestmark = pytest.mark.usefixtures("tunable_api_state")


def validator_lines(**override) -> str:
    values = F.current_validators() | override
    return "".join(f"Validator,{k},{v}\n" for k, v in values.items())


def mm_request(m=64, n=48, k=32, candidates=("extern_mm", TRITON_A, TRITON_B), dtype="torch.float16"):
    tensors = [
        {"size": [m, k], "stride": [k, 1], "dtype": dtype},
        {"size": [k, n], "stride": [1, k], "dtype": dtype},  # B is a transposed view: layout NT
    ]
    return AutotuneRequest(op_name="mm", features={"using_tf32": "not_float_32"}, metadata={},
                           candidates=list(candidates), tensors=tensors)


def messages(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, F.TunableFileWarning)]


# ----------------------------------------------------------------------------- params


def test_params_round_trip_layouts_and_wildcards():
    key = P.from_request("mm", {}, mm_request().tensors)
    assert key.encode() == "NT_64_48_32_ld_32_32_float16"
    # column-major A, general B, batched, tf32, mixed dtypes all survive a round trip
    for text in ("TN_7_9_5_ld_7_9_float32_tf32", "B3_NG_5_6_7_ld_7_12x2_bfloat16", "NN_*_8_4_ld_4_*_float16xint8"):
        assert P.parse(text).encode() == text
    pattern = P.parse("NT_*_48_32_ld_32_32_float16")
    assert pattern.matches(key) and pattern.wildcards == 1
    assert not P.parse("NT_*_49_32_ld_32_32_float16").matches(key)
    assert not P.parse("NN_*_48_32_ld_32_32_float16").matches(key)  # layout is never a wildcard
    # widen() also frees a leading dimension that grows with the widened size (T layout of A)
    assert P.parse("TN_17_8_4_ld_17_8_float32").widen("m").encode() == "TN_*_8_4_ld_*_8_float32"
    # packed_linear: weight stored [N, K] and read transposed; bmm carries the batch
    packed = [{"size": [17, 40], "stride": [40, 1], "dtype": "torch.float32"},
              {"size": [1, 1], "stride": [1, 0], "dtype": "torch.float32"},
              {"size": [24, 40], "stride": [1, 24], "dtype": "torch.float32"}]
    assert P.from_request("packed_linear", {}, packed).encode() == "NN_17_24_40_ld_40_24_float32"
    bmm = [{"size": [4, 8, 16], "stride": [128, 16, 1], "dtype": "torch.bfloat16"},
           {"size": [4, 16, 2], "stride": [32, 2, 1], "dtype": "torch.bfloat16"}]
    assert P.from_request("bmm", {}, bmm).encode() == "B4_NN_8_2_16_ld_16_2_bfloat16"
    with pytest.raises(P.ParamsError, match="not"):
        P.parse("nn_1_2")


# ----------------------------------------------------------------------------- reading


def test_robust_reading_names_file_and_line(tmp_path):
    path = tmp_path / "results0.csv"
    rows = [
        "mm,NT_64_48_32_ld_32_32_float16," + TRITON_A + ",0.5",  # line L+1: kept
        "mm,NT_1_2_3_ld_3_3_float16",  # truncated
        "mm,NT_2_2_3_ld_3_3_float16,extern_mm,fast",  # non-numeric time
        "conv9d,NT_2_2_3_ld_3_3_float16,extern_mm,0.1",  # unknown op
        "mm,NT_64_48_32_ld_32_32_float16," + TRITON_B + ",0.3",  # duplicate, other solution, faster
        "mm,not-a-params,extern_mm,0.1",  # bad params
        'mm,"unterminated',  # truncated CSV quoting
    ]
    path.write_text(validator_lines() + "\n".join(rows) + "\n")
    first = len(F.current_validators()) + 1
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = F.read_results(str(path), F.current_validators())
    text = messages(record)
    assert not result.rejected
    entry = result.entries[("mm", "NT_64_48_32_ld_32_32_float16")]
    assert entry.solution == TRITON_B and entry.time_ms == 0.3 and entry.source == f"{path}:{first + 4}"
    expected = {first + 1: "truncated", first + 2: "not a number", first + 3: "unknown op",
                first + 4: "another solution", first + 5: "params", first + 6: "truncated"}
    for line, word in expected.items():
        assert any(m.startswith(f"ah_plugin: {path}:{line}:") and word in m for m in text), (line, word, text)
    assert len(result.entries) == 1


def test_validator_mismatch_rejects_whole_file_and_missing_one_warns(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text(validator_lines(PT_VERSION="1.0.0") + "mm,NT_64_48_32_ld_32_32_float16,extern_mm,0.1\n")
    with pytest.warns(F.TunableFileWarning) as record:
        result = F.read_results(str(path), F.current_validators())
    assert result.rejected and not result.entries
    (msg,) = messages(record)
    assert msg.startswith(f"ah_plugin: {path}:1:") and "PT_VERSION" in msg and "'1.0.0'" in msg
    assert repr(F.current_validators()["PT_VERSION"]) in msg

    lines = [line for line in validator_lines().splitlines() if "DEVICE_NAME" not in line]
    path.write_text("\n".join(lines) + "\nmm,NT_64_48_32_ld_32_32_float16,extern_mm,0.1\n")
    with pytest.warns(F.TunableFileWarning, match=rf"{re.escape(str(path))}:\d+: missing validator.*DEVICE_NAME"):
        result = F.read_results(str(path), F.current_validators())
    assert not result.rejected and len(result.entries) == 1


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00binary", b"hello world\nthis is prose, not csv\n", b"\xff\xfe\xfa"])
def test_non_csv_file_is_ignored_with_a_warning(tmp_path, content):
    path = tmp_path / "junk.csv"
    path.write_bytes(content)
    with pytest.warns(F.TunableFileWarning, match=rf"^ah_plugin: {re.escape(str(path))}:1:"):
        result = F.read_results(str(path), F.current_validators())
    assert not result.entries


# ----------------------------------------------------------------------------- policy on plain requests


def test_policy_hit_default_stale_wildcard_and_record(tmp_path):
    tunable.enable(True)
    path = tunable.get_filename()
    assert path == str(tmp_path / "results0.csv")
    with open(path, "w") as handle:
        handle.write(validator_lines())
        handle.write(f"mm,NT_64_48_32_ld_32_32_float16,{TRITON_A},0.2\n")
        handle.write("mm,NT_65_48_32_ld_32_32_float16,Default,0\n")
        handle.write("mm,NT_66_48_32_ld_32_32_float16,type=triton_gone,0.1\n")
        handle.write(f"mm,NT_*_48_32_ld_32_32_float16,{TRITON_B},0.3\n")
    policy = tunable.policy()
    assert policy.select(mm_request(m=64)) == [TRITON_A]  # exact hit: exactly one id
    assert policy.select(mm_request(m=65)) == ["extern_mm"]  # Default = aten
    assert policy.select(mm_request(m=1001)) == [TRITON_B]  # wildcard hit
    with pytest.warns(F.TunableFileWarning, match=r"results0.csv:\d+: solution 'type=triton_gone'.*miss"):
        assert policy.select(mm_request(m=66)) is None  # stale -> miss -> tuning on: Inductor autotunes
    with warnings.catch_warnings():
        warnings.simplefilter("error", F.TunableFileWarning)  # warned once only
        assert policy.select(mm_request(m=66)) is None
    # the wildcard's solution missing among candidates -> miss (never a choice that does not exist)
    assert policy.select(mm_request(m=1001, candidates=("extern_mm", TRITON_A))) is None
    stats = tunable.get_stats()
    assert (stats["hits"], stats["wildcard_hits"], stats["stale"]) == (3, 1, 3)

    # tuning on: the fastest finite timing is recorded, written merged with the file's rows
    policy.on_timings(mm_request(m=70), {"extern_mm": 0.5, TRITON_A: 0.25, TRITON_B: float("inf")}, [])
    os.chmod(path, 0o640)
    assert tunable.write_file()
    assert os.stat(path).st_mode & 0o7777 == 0o640  # the replaced file keeps its mode
    rows = {r[1]: r[2] for r in tunable.get_results()}
    assert rows["NT_70_48_32_ld_32_32_float16"] == TRITON_A and rows["NT_65_48_32_ld_32_32_float16"] == "Default"
    store().clear()
    assert tunable.read_file(path)
    assert {r[1]: r[2] for r in tunable.get_results()} == rows


def test_a_rows_merge_keeps_aten_unless_the_other_run_timed_a_template_faster_by_the_margin(tmp_path, monkeypatch):
    """Two runs' winners for one GEMM meet when a results file is written (or read, or gathered): between aten
    (Default) and a template the aten margin decides, as it decided each run's own pick; otherwise the faster."""
    monkeypatch.setenv("AH_PLUGIN_ATEN_MARGIN", "0.02")
    key = ("mm", "NT_64_48_32_ld_32_32_float16")
    path = str(tmp_path / "results0.csv")

    def written(on_disk: tuple, this_run: tuple) -> str:
        with open(path, "w") as handle:
            handle.write(validator_lines() + f"mm,{key[1]},{on_disk[0]},{on_disk[1]}\n")
        F.write_results(path, F.current_validators(), {key: F.Entry("mm", key[1], *this_run)})
        return F.read_results(path, F.current_validators()).entries[key].solution

    assert written(("Default", 0.0100), (TRITON_A, 0.0099)) == "Default"  # 1% faster: within the margin
    assert written(("Default", 0.0100), (TRITON_A, 0.0097)) == TRITON_A  # 3% faster: past it
    assert written((TRITON_A, 0.0099), ("Default", 0.0100)) == "Default"  # aten back within the margin
    assert written((TRITON_A, 0.0097), ("Default", 0.0100)) == TRITON_A
    assert written((TRITON_A, 0.0099), (TRITON_B, 0.0098)) == TRITON_B  # two templates: the faster
    # two rows of the key in one file (two runs appended): the same rule, both lines named
    with open(path, "w") as handle:
        handle.write(validator_lines() + f"mm,{key[1]},Default,0.0100\nmm,{key[1]},{TRITON_A},0.0099\n")
    kept = r"results0.csv:\d+: .*keeping 'Default' from .*results0.csv:\d+ \(aten: the other is not faster by"
    with pytest.warns(F.TunableFileWarning, match=kept):
        assert F.read_results(path, F.current_validators()).entries[key].solution == "Default"
    monkeypatch.setenv("AH_PLUGIN_ATEN_MARGIN", "0")
    assert written(("Default", 0.0100), (TRITON_A, 0.0099)) == TRITON_A  # no margin: the faster


def test_tuning_off_answers_default_and_records_untuned(tmp_path, monkeypatch):
    tunable.enable(True)
    tunable.tuning_enable(True)
    monkeypatch.setenv(S.TUNING, "0")  # env wins over the API
    monkeypatch.setenv(S.RECORD_UNTUNED, "1")
    assert not tunable.tuning_is_enabled() and tunable.record_untuned_is_enabled()
    policy = tunable.policy()
    assert policy.select(mm_request(m=9)) == ["extern_mm"]
    assert policy.select(mm_request(m=9)) == ["extern_mm"]
    policy.on_timings(mm_request(m=9), {"extern_mm": 0.5, TRITON_A: 0.1}, [])  # tuning off: nothing recorded
    assert tunable.get_results() == ()
    assert F.read_untuned(tunable.get_untuned_filename()) == [("mm", "NT_9_48_32_ld_32_32_float16")]
    monkeypatch.setenv(S.ENABLED, "0")
    assert policy.select(mm_request(m=9)) is None  # off: no opinion at all


def test_api_names_and_env_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv(S.FILENAME)
    tunable.set_filename(str(tmp_path / "mine.csv"), insert_device_ordinal=True)
    assert tunable.get_filename() == str(tmp_path / "mine0.csv")
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert tunable.get_filename() == str(tmp_path / "mine3.csv")
    monkeypatch.setenv(S.FILENAME, "env.csv")
    assert tunable.get_filename() == "env.csv"
    tunable.set_numerical_check_tolerances(True, 1e-2, 1e-3)
    assert tunable.get_numerical_check_tolerances() == (True, 1e-2, 1e-3)
    monkeypatch.setenv(S.NUMERICAL_CHECK, "0.5_0.25")
    assert tunable.get_numerical_check_tolerances() == (True, 0.5, 0.25)
    tunable.set_max_tuning_iterations(7)
    tunable.set_max_tuning_duration(11)
    assert (tunable.get_max_tuning_iterations(), tunable.get_max_tuning_duration()) == (7, 11)
    monkeypatch.setenv(S.MAX_TUNING_ITERATIONS, "nope")
    with pytest.warns(S.TunableSettingsWarning, match="AH_TUNABLE_MAX_TUNING_ITERATIONS"):
        assert tunable.get_max_tuning_iterations() == 7
    assert dict(tunable.get_validators())["PT_VERSION"]


# ----------------------------------------------------------------------------- concurrent writers

# Real processes on the file layer only (no torch import: validators are fixed for the test).
WRITER = textwrap.dedent(
    """
    import os, sys
    from ah_plugin.tunable import results_file as F
    from ah_plugin.tunable import settings as S
    i = int(sys.argv[1])
    path = S.with_ordinal(S.raw_filename())
    validators = {"PT_VERSION": "test", "DEVICE_NAME": "cpu"}
    mine = {}
    for j in range(40):   # rows written in several rounds, interleaving with the other writers
        params = f"NN_{1000 * i + j}_8_8_ld_8_8_float16"
        mine[("mm", params)] = F.Entry("mm", params, "extern_mm", 0.001 * j)
        if j % 10 == 9:
            F.write_results(path, validators, mine)
    """
)


@pytest.mark.parametrize("ordinals", [False, True])
def test_eight_processes_write_one_file_name(tmp_path, ordinals):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AH_TUNABLE_")}
    env["PYTHONPATH"] = REPO
    env[S.FILENAME] = str(tmp_path / ("res%d.csv" if ordinals else "res.csv"))
    procs = []
    for i in range(8):
        penv = dict(env, LOCAL_RANK=str(i % 2))  # with ordinals: two files, four writers each
        procs.append(subprocess.Popen([sys.executable, "-c", WRITER, str(i)], env=penv, stderr=subprocess.PIPE))
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    files = [tmp_path / "res0.csv", tmp_path / "res1.csv"] if ordinals else [tmp_path / "res.csv"]
    umask = os.umask(0)
    os.umask(umask)
    # a new file gets the mode any new file gets (not the temp file's private 0o600)
    assert all(path.stat().st_mode & 0o7777 == 0o666 & ~umask for path in files)
    seen = set()
    for path in files:
        with warnings.catch_warnings():
            warnings.simplefilter("error", F.TunableFileWarning)  # every line valid
            result = F.read_results(str(path), {"PT_VERSION": "test", "DEVICE_NAME": "cpu"})
        assert not result.rejected and result.validators == {"PT_VERSION": "test", "DEVICE_NAME": "cpu"}
        seen |= {int(params.split("_")[1]) for _, params in result.entries}
    assert seen == {1000 * i + j for i in range(8) for j in range(40)}
    assert not list(tmp_path.glob("*.tmp"))


def test_unwritable_or_unreadable_paths_warn_and_keep_the_cache_working(tmp_path, monkeypatch):
    """A results/untuned/verbose path that cannot be used (a directory, a parent that is a file: the
    same OSError a read-only directory gives, also when running as root) warns; select still answers."""
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    tunable.enable(True)
    policy = tunable.policy()
    # results path is a directory: warned, the cache starts empty (a miss), nothing raises
    (tmp_path / "results0.csv").mkdir()
    with pytest.warns(F.TunableFileWarning, match="results0.csv is a folder, not a regular file: never opened, "
                                                  "read or written; the results of this run stay in memory"):
        assert policy.select(mm_request(m=8)) is None
    # tuning off + record untuned into an impossible path: the miss is still answered with aten
    store().clear()
    monkeypatch.setenv(S.FILENAME, str(tmp_path / "ok%d.csv"))
    monkeypatch.setenv(S.TUNING, "0")
    monkeypatch.setenv(S.RECORD_UNTUNED, "1")
    monkeypatch.setenv(S.UNTUNED_FILENAME, str(blocker / "untuned%d.csv"))
    with pytest.warns(F.TunableFileWarning, match="cannot record untuned shapes"):
        assert policy.select(mm_request(m=9)) == ["extern_mm"]
    # a verbose log that cannot be opened falls back to stderr; hits still hit
    with open(tmp_path / "ok0.csv", "w") as handle:
        handle.write(validator_lines() + f"mm,NT_64_48_32_ld_32_32_float16,{TRITON_A},0.2\n")
    store().clear()
    monkeypatch.setenv(S.VERBOSE, "2")
    monkeypatch.setenv(S.VERBOSE_FILENAME, str(blocker / "verbose.log"))
    with pytest.warns(F.TunableFileWarning, match="cannot open the verbose log"):
        assert policy.select(mm_request(m=64)) == [TRITON_A]
    assert policy.select(mm_request(m=64)) == [TRITON_A]


# ----------------------------------------------------------------------------- reading fast, searching large files


def _params_corpus() -> list[tuple[str, str]]:
    """(op, params) pairs a hand-edited or older file may hold: canonical ones and every way of not being so."""
    sizes = ["64", "0", "064", "*", "\u0664", "1_0"]
    lds = ["64", "064", "64x1", "*", "0x1x2"]
    biases = ["", "_bias-R", "_bias-C", "_bias-N64", "_bias-T064", "_bias-G1x0", "_bias-R-b0", "_bias-N*-b*",
              "_bias-X"]
    out = []
    for op in sorted(P.KNOWN_OPS):
        for i, (m, ld, bias) in enumerate((m, ld, bias) for m in sizes for ld in lds for bias in biases):
            batch = ("B4_", "B04_", "")[i % 3]
            tail = ("_float16", "_float32_tf32", "_bfloat16xfloat16", "_Float16")[i % 4]
            out.append((op, f"{batch}{'NTG'[i % 3]}{'NTG'[i // 3 % 3]}_{m}_48_32_ld_{ld}_32{tail}{bias}"))
            out.append((op, f" {out[-1][1]} "))
    return out


def test_the_fast_params_check_agrees_with_the_parser():
    """The regular expression that spares a parse accepts exactly what `parse_for` writes back unchanged:
    for every other string the parser decides (and says what is wrong)."""
    checked = 0
    for op, text in _params_corpus():
        try:
            expected = P.parse_for(op, text).encode()
        except P.ParamsError:
            expected = None
        try:
            got = F.canonical_params(op, text)
        except P.ParamsError:
            got = None
        assert got == expected, (op, text)
        checked += expected == text
    assert checked > 100  # the fast path was taken, many times


def _searched_and_whole(tmp_path, monkeypatch, text: str, keys) -> tuple:
    """The store's answers for `keys` with the file searched, then read whole (warnings recorded)."""
    from ah_plugin.tunable import results_search

    path = tmp_path / "results0.csv"
    path.write_text(text)
    answers = []
    for min_bytes in (0, 1 << 40):
        monkeypatch.setattr(results_search, "MIN_BYTES", min_bytes)
        store().clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            store().ensure_loaded()
            found = [store().lookup(op, P.parse(params)) for op, params in keys]
        answers.append((store().searched is not None, found, sorted(messages(caught))))
    return answers


def test_a_searched_file_answers_as_a_whole_read(tmp_path, monkeypatch):
    """A large plain file answered by search gives the same entries (same lines), wildcard answers and
    warnings, for the keys looked up, as the file read whole."""
    rows = [
        f"mm,NT_64_48_32_ld_32_32_float16,{TRITON_A},0.5",
        f"mm,NT_64_48_32_ld_32_32_float16,{TRITON_B},0.25",  # the same key again, faster: kept, said
        "mm,NT_65_48_32_ld_32_32_float16,extern_mm,0.3,extra",  # a bad row of a looked-up key
        "mm,NT_65_48_32_ld_32_32_float16,extern_mm,0.4",
        f"mm,NT_*_48_32_ld_32_32_float16,{TRITON_A},0",  # a wildcard row
        f"addmm,NN_64_48_32_ld_32_48_float16_bias-R,{TRITON_B},0.1",
        f"baddbmm,B4_NN_64_48_32_ld_32_48_float16_bias-N48-b3072,{TRITON_A},0.2",
        "mm,NT_66_48_32_ld_32_32_float16,extern_mm,0.1",
        "mm,NT_66_48_32_ld_32_32_float16,extern_mm,0.05",  # same solution, faster: kept, not said
    ]
    keys = [("mm", "NT_64_48_32_ld_32_32_float16"), ("mm", "NT_65_48_32_ld_32_32_float16"),
            ("mm", "NT_66_48_32_ld_32_32_float16"), ("mm", "NT_999_48_32_ld_32_32_float16"),
            ("mm", "NT_7_49_32_ld_32_32_float16"), ("addmm", "NN_64_48_32_ld_32_48_float16_bias-R"),
            ("baddbmm", "B4_NN_64_48_32_ld_32_48_float16_bias-N48-b3072")]
    searched, whole = _searched_and_whole(tmp_path, monkeypatch, validator_lines() + "\n".join(rows) + "\n", keys)
    assert searched[0] and not whole[0]
    assert searched[1] == whole[1]
    assert [entry.solution if entry else None for entry, _ in whole[1]] == [
        TRITON_B, "extern_mm", "extern_mm", TRITON_A, None, TRITON_B, TRITON_A]
    # the same words about the looked-up keys' rows (the duplicate, the extra field); the whole read says them too
    assert set(searched[2]) <= set(whole[2]) and len(searched[2]) == 2


@pytest.mark.parametrize("line", [
    "mm,NT_64_48_32_ld_32_32_float16, extern_mm,0.5",  # a space
    "# a comment",
    "mm,NT_064_48_32_ld_32_32_float16,extern_mm,0.5",  # a leading zero
    "addmm,NN_64_48_32_ld_32_48_float16,extern_mm,0.5",  # an addmm row written before the bias was recorded
    'mm,"NT_64_48_32_ld_32_32_float16",extern_mm,0.5',  # quotes
    "Validator,PT_VERSION,1.0",  # a validator after the rows
])
def test_a_file_that_is_not_plain_is_read_whole(tmp_path, monkeypatch, line):
    """Where a row's text may differ from its key (or a later line changes the file's meaning), searching
    could miss it: such a file is read whole, whatever its size."""
    text = validator_lines() + f"mm,NT_63_48_32_ld_32_32_float16,extern_mm,0.5\n{line}\n"
    searched, whole = _searched_and_whole(tmp_path, monkeypatch, text, [("mm", "NT_64_48_32_ld_32_32_float16")])
    assert not searched[0] and searched[1] == whole[1]
