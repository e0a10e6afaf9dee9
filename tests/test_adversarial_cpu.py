"""The plugin as a hostile user and an unlucky one would use it, on the CPU path: real files, real
processes, real kills. docs/reliability.md lists every case with what the user sees and what is kept.

Sections:
1. artifacts: a child process per hostile artifact (no torch: fast) must survive and name the file;
   files and folders others can write to are refused; a real Ctrl-C still stops the program.
2. the results file and the log: lines kept, corrupt bytes, rejected files, stale rows, named write
   failures (real files, in this process).
3. settings and the trainer: bad values disable only what they govern; data with no usable row.
4. one real run (compiles, shared by the tests below it): 8 processes compiling different shapes
   against one results file and one log, one of them killed with SIGKILL in the middle of its second
   compile; then a use-mode compile in a folder of hostile artifacts. Every compile is compared with eager.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

import ah_plugin
from ah_plugin import artifact_loader, env_values, log_format, settings
from ah_plugin.collector import CollectorPolicy
from ah_plugin.policy import AutotuneRequest
import ah_plugin.tunable as tunable
from ah_plugin.tunable import results_file as F
from ah_plugin.tunable import settings as TS
from ah_plugin.tunable.store import store
from linear_child import PRELUDE, child_env

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

CPU_META = {"name": "packed_linear", "device_capa": (0, 0), "shared_memory": 0, "device_name": "cpu",
            "numerical_features": ["in0_size_0"], "categorical_features": []}
MKL, CPP = "extern__mkl_linear", "cpp_CppMicroGemmFP32Vec_bm8_bn32_bk1"

# A Contract-2 artifact for the CPU's packed_linear; {prelude} runs at import, {rank} is rank()'s body.
ARTIFACT = '''{prelude}
class {name}:
    heuristic_name = "{name}"
    op_name = "packed_linear"
    device_capa = (0, 0)
    shared_memory = 0
    device_names = ()
    numerical_features = ["in0_size_0"]
    categorical_features = []
    choices = ["{mkl}", "{cpp}"]

    def check_precondition(self, metadata):
        {precondition}

    def rank(self, features):
        {rank}
'''


def write_artifact(directory, name, *, prelude="", rank=None, precondition="return True", filename=None):
    rank = rank or f"return [({CPP!r}, 0.9), ({MKL!r}, 0.1)]"
    path = directory / (filename or f"_{name}.py")
    path.write_text(ARTIFACT.format(prelude=prelude, name=name, mkl=MKL, cpp=CPP, rank=rank,
                                    precondition=precondition))
    path.chmod(0o644)  # whatever the umask: writable by its owner only
    return path


# --------------------------------------------------------------------------------------------------
# 1. artifacts

# The user's program: asks the USE policy twice, then says it survived. Short time limits, no torch.
USER_PROGRAM = textwrap.dedent(
    """
    import json, sys, time, warnings
    warnings.simplefilter("always")
    from ah_plugin import artifact_guard
    artifact_guard.IMPORT_TIMEOUT_S = artifact_guard.CALL_TIMEOUT_S = float(sys.argv[2])
    from ah_plugin.policy import AutotuneRequest
    from ah_plugin.ranking import RankingPolicy
    policy = RankingPolicy(artifact_dir=sys.argv[1], package=False, top_k=1, min_choices=1, keep_aten=False)
    request = AutotuneRequest("packed_linear", {"in0_size_0": 8}, {"device_capa": (0, 0), "shared_memory": 0,
                              "device_name": "cpu"}, [%r, %r])
    print("ASKING", flush=True)
    for _ in range(2):
        start = time.monotonic()
        kept = policy.select(request)
        print("KEPT", json.dumps(kept), round(time.monotonic() - start, 2), flush=True)
    print("SURVIVED", flush=True)
    """ % (MKL, CPP)
)

HOSTILE = {
    # case: (prelude run at import, rank body, precondition body, what stderr must say)
    "exit_at_import": ("import sys\nsys.exit(7)", None, "return True", "raised SystemExit(7)"),
    "argparse_in_artifact": ("import argparse\n_p = argparse.ArgumentParser()\n_p.add_argument('--n', type=int, "
                             "required=True)\n_p.parse_args()", None, "return True", "raised SystemExit(2)"),
    "input_at_import": ("_answer = input('continue? ')", None, "return True", "raised EOFError"),
    "sleep_at_import": ("import time\ntime.sleep(3600)", None, "return True", "no answer within 1 s"),
    "exit_in_rank": ("", "raise SystemExit(9)", "return True", "rank() raised SystemExit(9)"),
    "own_keyboard_interrupt_in_rank": ("", "raise KeyboardInterrupt", "return True",
                                       "rank() raised KeyboardInterrupt itself"),
    "exit_in_precondition": ("", None, "raise SystemExit(5)", "check_precondition() raised SystemExit(5)"),
    "rank_returns_none": ("", "return None", "return True", "rank() returned NoneType"),
    "rank_returns_garbage": ("", "return [('x', 'high')]", "return True", "rank() returned a ranking whose entry 0"),
    "rank_waits_forever": ("import threading", "threading.Event().wait()", "return True",
                           "rank() gave no answer within 1 s"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_artifact_never_ends_the_users_program(tmp_path, case):
    prelude, rank, precondition, said = HOSTILE[case]
    path = write_artifact(tmp_path, "Hostile", prelude=prelude, rank=rank, precondition=precondition)
    # stdin stays open and silent, as a terminal nobody types into: reading it must not hang the program
    silent, keep_open = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-c", USER_PROGRAM, str(tmp_path), "1", "--users-own-flag"],
                                env=child_env(), stdin=silent, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(silent)
        os.close(keep_open)
    assert proc.returncode == 0 and "SURVIVED" in out, (out, err[-3000:])
    kept = re.findall(r"KEPT (\S+) (\S+)", out)  # (a prompt the artifact printed may precede one)
    assert [k[0] for k in kept] == ["null", "null"]  # no pruning from a failed artifact: Inductor's own choices
    assert said in err and str(path) in err, err[-3000:]
    assert "--users-own-flag" not in err  # an argument parser in an artifact never sees the user's arguments
    if case in ("rank_waits_forever", "sleep_at_import"):  # one wait of the time limit, then none
        assert float(kept[0][1]) >= 1.0 and float(kept[1][1]) < 0.5, kept


def test_a_helper_script_in_the_artifact_folder_is_never_run(tmp_path):
    (tmp_path / "_plot_results.py").write_text(
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('csv')\nparser.parse_args()\n")
    write_artifact(tmp_path, "Good")
    out = subprocess.run([sys.executable, "-c", USER_PROGRAM, str(tmp_path), "1", "--users-own-flag"],
                         env=child_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "SURVIVED" in out.stdout, out.stderr[-3000:]
    assert "_plot_results.py: defines no artifact class" in out.stderr and "not executed" in out.stderr
    assert "usage:" not in out.stderr  # it never ran
    assert out.stdout.count(f'KEPT ["{CPP}"]') == 2, out.stdout  # the real artifact next to it still prunes


def test_a_real_ctrl_c_still_stops_the_program(tmp_path):
    write_artifact(tmp_path, "Sleeper", prelude="import time\nprint('IMPORTING', flush=True)\ntime.sleep(3600)")
    proc = subprocess.Popen([sys.executable, "-c", USER_PROGRAM, str(tmp_path), "60"], env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ASKING"
    # the artifact is being imported, so the program waits on it (a fixed sleep races with a loaded machine)
    assert proc.stdout.readline().strip() == "IMPORTING"
    time.sleep(0.2)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - start < 10
    assert proc.returncode != 0 and "KeyboardInterrupt" in err and "SURVIVED" not in out


@pytest.fixture
def fresh_artifacts(clean_use_env):
    yield


def _load_user_dir(directory):
    artifact_loader.clear_cache()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = artifact_loader.load_artifacts(((artifact_loader.SOURCE_USER, str(directory)),))
    return [a.name for a in loaded], [str(w.message) for w in caught]


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="owners and modes are POSIX")
def test_artifacts_others_can_write_are_refused_like_an_ssh_key(tmp_path, fresh_artifacts):
    counter = tmp_path / "executed.txt"
    run_marker = f"open({str(counter)!r}, 'a').write('x')"
    folder = tmp_path / "arts"
    folder.mkdir(mode=0o755)
    path = write_artifact(folder, "Writable", prelude=run_marker)
    path.chmod(0o666)
    names, said = _load_user_dir(folder)
    assert names == [] and not counter.exists()
    assert any(str(path) in m and "writable by every user" in m and "chmod go-w" in m for m in said), said

    path.chmod(0o644)
    folder.chmod(0o777)  # a world-writable folder: anyone could have put any file there
    names, said = _load_user_dir(folder)
    assert names == [] and not counter.exists()
    assert any(f"every artifact in {folder}" in m and "writable by every user" in m for m in said), said

    folder.chmod(0o755)
    names, said = _load_user_dir(folder)
    assert names == ["Writable"] and counter.read_text() == "x"  # safe again: loaded
    if IS_ROOT:  # only root can give a file away: a file owned by another user never runs as root
        os.chown(path, 65534, -1)
        names, said = _load_user_dir(folder)
        assert names == [] and counter.read_text() == "x"
        assert any(str(path) in m and "is owned by uid 65534" in m for m in said), said
        os.chown(path, 0, -1)
        os.chown(path, -1, 1)  # group "daemon"/"bin", not root's own group: group-writable is refused
        path.chmod(0o664)
        names, said = _load_user_dir(folder)
        assert names == [] and any("writable by its group" in m for m in said), said


# --------------------------------------------------------------------------------------------------
# 2. the results file and the log (real files in this process)


@pytest.fixture
def cache_file(tunable_env):
    """The results cache on; its file (under tmp_path) holds rows with this process's validators."""
    saved = TS._ApiValues(**TS.api.__dict__)
    tunable.enable(True)
    yield tunable_env / "res0.csv"
    TS.api.__dict__.update(saved.__dict__)


def validator_text() -> str:
    return "".join(f"Validator,{k},{v}\n" for k, v in F.current_validators().items()).replace('"', "")


def linear_request(m, candidates=(MKL, CPP)):
    tensors = [{"size": [m, 16], "stride": [16, 1], "dtype": "torch.float32"},
               {"size": [1, 1], "stride": [1, 0], "dtype": "torch.float32"},
               {"size": [8, 16], "stride": [1, 8], "dtype": "torch.float32"}]
    return AutotuneRequest("packed_linear", {"in0_size_0": m}, dict(CPU_META), list(candidates), tensors=tensors)


def key_of(m) -> str:
    return f"NN_{m}_8_16_ld_16_8_float32"


UNDERSTOOD_NOT = [
    "# tuned on the staging box, 2026-11-29",
    "conv3d,NN_9_8_16_ld_16_8_float32,cudnn_algo_7,0.5",  # an op of a newer version
    f"packed_linear,{key_of(10)},{MKL},0.25,extra-column",  # a column of a newer version
    f"packed_linear,{key_of(11)},{MKL},fast",  # a time that is not a number
]


def test_rewrites_keep_every_line_they_do_not_understand(cache_file):
    cache_file.write_text(validator_text() + UNDERSTOOD_NOT[0] + "\n" + f"packed_linear,{key_of(9)},{MKL},0.5\n"
                          + "\n".join(UNDERSTOOD_NOT[1:]) + "\n")
    policy = tunable.policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert policy.select(linear_request(12)) is None  # a miss: tuned
        policy.on_timings(linear_request(12), {MKL: 0.4, CPP: 0.2}, [])  # journaled now
        assert store().write()  # and compacted, as at exit
    lines = cache_file.read_text().splitlines()
    kept = [line for line in lines if line in UNDERSTOOD_NOT]
    assert kept == UNDERSTOOD_NOT  # every one, in its place and order
    assert lines.index(UNDERSTOOD_NOT[0]) < lines.index(f"packed_linear,{key_of(9)},{MKL},0.5")
    assert f"packed_linear,{key_of(12)},{CPP},0.2" in lines


def test_a_corrupt_byte_costs_its_line_not_the_file(cache_file):
    good = [f"packed_linear,{key_of(m)},{MKL},0.5" for m in (20, 21, 22)]
    data = (validator_text().encode() + good[0].encode() + b"\n" + b"packed_linear,NN_\x00\x00,x,1\n"
            + good[1].encode() + b"\n" + b"packed_linear,NN_\xff\xfe_caf\xe9,x,1\n" + good[2].encode() + b"\n")
    cache_file.write_bytes(data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = F.read_results(str(cache_file), F.current_validators())
    said = [str(w.message) for w in caught]
    first_bad = len(F.current_validators()) + 2
    assert not result.rejected and {p for _, p in result.entries} == {key_of(m) for m in (20, 21, 22)}
    assert any(m.startswith(f"ah_plugin: {cache_file}:{first_bad}: holds a NUL byte") for m in said), said
    assert any(m.startswith(f"ah_plugin: {cache_file}:{first_bad + 2}: not UTF-8 text") for m in said), said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F.write_results(str(cache_file), F.current_validators(), {})
    assert any(".unreadable" in str(w.message) for w in caught)
    # the rewritten file is text with every good row; the bad lines, byte for byte, in the side file
    assert all(line in cache_file.read_text().splitlines() for line in good)
    side = (cache_file.parent / (cache_file.name + ".unreadable")).read_bytes()
    assert side == b"packed_linear,NN_\x00\x00,x,1\npacked_linear,NN_\xff\xfe_caf\xe9,x,1\n"


def test_a_rejected_file_is_kept_aside_and_never_overwritten(cache_file):
    other = validator_text().replace(F.current_validators()["PT_VERSION"], "1.0.0")
    firsts = []
    for attempt in range(3):
        content = other + f"packed_linear,{key_of(30 + attempt)},{MKL},0.5\n"
        cache_file.write_text(content)
        firsts.append(content)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            F.write_results(str(cache_file), F.current_validators(), {})
    kept = [cache_file.parent / (cache_file.name + suffix) for suffix in (".rejected", ".rejected.2", ".rejected.3")]
    assert [p.read_text() for p in kept] == firsts  # each rejected file whole, none overwritten


def test_a_stale_row_is_retuned_once_and_replaced(cache_file):
    """A row whose solution no longer exists (time 0 here, which would win any merge on time) is a
    miss; its new winner replaces it on disk, so the next run hits instead of tuning again."""
    stale = f"packed_linear,{key_of(40)},cpp_CppMicroGemmGone_bm4_bn4_bk1,0"
    pinned = f"packed_linear,{key_of(41)},{MKL},0"  # time 0 with a solution that exists: a pinned hit
    cache_file.write_text(validator_text() + stale + "\n" + pinned + "\n")
    policy = tunable.policy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert policy.select(linear_request(41)) == [MKL]
        assert policy.select(linear_request(40)) is None  # a miss: tuned
        policy.on_timings(linear_request(40), {MKL: 0.3, CPP: 0.1}, [])
    assert any("cpp_CppMicroGemmGone" in str(w.message) and "replaces the row" in str(w.message) for w in caught)
    lines = cache_file.read_text().splitlines()  # on disk already, before any exit-time write
    assert stale not in lines and f"packed_linear,{key_of(40)},{CPP},0.1" in lines and pinned in lines
    store().clear()  # the next run
    assert policy.select(linear_request(40)) == [CPP]
    assert store().stats.tuned == 0


def test_write_failures_name_the_path_once_and_what_is_lost(cache_file, tmp_path):
    # the results file is a folder: the winner stays in memory; said once, with the path and the cause
    cache_file.mkdir()
    policy = tunable.policy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for m in (50, 51):
            policy.select(linear_request(m))
            policy.on_timings(linear_request(m), {MKL: 0.3, CPP: 0.1}, [])
    said = [str(w.message) for w in caught if "cannot write" in str(w.message)]
    assert len(said) == 1 and said[0].startswith(f"ah_plugin: {cache_file}: cannot write (IsADirectoryError"), said
    assert "kept in memory" in said[0] and "lost" in said[0]
    assert policy.select(linear_request(51)) == [CPP]  # the cache still answers from memory

    # the collect log is a folder, then its parent is a file: each path said once, rows counted as lost
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    (tmp_path / "log_dir").mkdir()
    for path, error in ((tmp_path / "log_dir", "IsADirectoryError"), (blocker / "log.txt", "at " + str(blocker))):
        collector = CollectorPolicy(ops=["packed_linear"], log_path=str(path))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for m in (52, 53):
                collector.on_timings(linear_request(m), {MKL: 0.3, CPP: 0.1}, [])
        said = [str(w.message) for w in caught]
        assert len(said) == 1 and f"collect log {path}: cannot write" in said[0] and error in said[0], said
        assert "lost" in said[0] and collector.stats.rows_lost == 4 and collector.stats.rows == 0


@pytest.mark.skipif(IS_ROOT or not hasattr(os, "geteuid"), reason="root writes into read-only folders")
def test_a_read_only_folder_is_named(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        collector = CollectorPolicy(ops=["packed_linear"], log_path=str(folder / "log.txt"))
        with pytest.warns(RuntimeWarning, match=r"ro/log.txt: cannot write \(PermissionError"):
            collector.on_timings(linear_request(60), {MKL: 0.3, CPP: 0.1}, [])
    finally:
        folder.chmod(0o755)


# --------------------------------------------------------------------------------------------------
# 3. settings and the trainer


@pytest.fixture
def fresh_warnings():
    env_values.forget_warnings()
    yield
    env_values.forget_warnings()


@pytest.mark.parametrize("value", ["bogus_op", "mm;packed_linear", "mm,bogus_op"])
def test_unknown_op_names_are_refused_with_the_known_ones(value, fresh_warnings):
    with pytest.warns(env_values.SettingsWarning) as record:
        current = settings.current({settings.ENV_USE: value})
    (message,) = [str(w.message) for w in record]
    assert message.startswith(f"ah_plugin: {settings.ENV_USE}={value!r} is not a comma-separated list of known operations")
    assert "packed_linear" in message and "addmm" in message
    assert current.use == (frozenset({"mm"}) if value == "mm,bogus_op" else frozenset())
    assert ("separate operations with commas" in message) == (";" in value)
    with pytest.raises(ValueError, match="bogus_op"):
        ah_plugin.install(use="bogus_op")  # the API twin refuses at the call


def test_a_bad_setting_disables_only_what_it_governs(fresh_warnings, monkeypatch):
    env = {settings.ENV_COLLECT: "packed_linear", settings.ENV_USE: "packed_linear", settings.ENV_TOP_K: "ten",
           "AH_TUNABLE_ENABLED": "1"}
    with pytest.warns(env_values.SettingsWarning, match="AH_PLUGIN_TOP_K='ten' is not 'fast', 'quality', an integer >= 1"):
        current = settings.current(env)
    assert current.ranking_off == ("AH_PLUGIN_TOP_K",) and current.collect and current.use and current.tunable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings.current(env)  # said once
    monkeypatch.setenv(TS.MAX_TUNING_ITERATIONS, "many")
    with pytest.warns(TS.TunableSettingsWarning, match="AH_TUNABLE_MAX_TUNING_ITERATIONS='many'.*100 applies"):
        assert TS.max_tuning_iterations() == 100
    assert TS.max_tuning_duration_ms() == TS.api.max_tuning_duration_ms  # its neighbour is untouched


def _write_log(path, feedback: str) -> None:
    meta = {"shared_memory": 0, "device_capa": [0, 0], "name": "mm", "numerical_features": ["m", "k", "n"],
            "categorical_features": []}
    rows = [f"{16 * i},{8 * i},{4 * i},{choice},{feedback}" for i in range(1, 12) for choice in ("extern_mm", "t1")]
    path.write_text(json.dumps(meta) + "\nm,k,n,choice,feedback\n" + "\n".join(rows) + "\n")


@pytest.mark.parametrize("feedback", ["nan", "-1.0", "0.0", "inf"])
def test_the_trainer_on_data_with_no_usable_row_ends_with_one_line_of_ours(tmp_path, feedback, capsys):
    from torchgen_ah.mm import train_decision_mm

    data = tmp_path / "data.txt"
    _write_log(data, feedback)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = train_decision_mm.main([str(data), "--heuristic-name", "X", "--out", str(tmp_path / "out")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code != 0 and last.startswith(f"train_decision_mm: error: {data}: no usable row"), last
    assert not (tmp_path / "out" / "_X.py").exists()


def test_merge_data_with_no_usable_row_writes_nothing(tmp_path):
    data, out = tmp_path / "data.txt", tmp_path / "merged.txt"
    _write_log(data, "nan")
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.merge_data", str(out), str(data)], env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and not out.exists()
    assert proc.stderr.strip().splitlines()[-1].startswith(f"merge_data: error: {data}: no usable row")


# --------------------------------------------------------------------------------------------------
# 4. one real run: 8 processes, one results file, one log, a kill -9; then hostile artifacts in use mode

RUN = PRELUDE + textwrap.dedent(
    """
    import os, time, warnings
    warnings.simplefilter("always")
    import ah_plugin
    from ah_plugin import registry
    from ah_plugin.tunable import results_file as F

    cfg = json.loads(sys.argv[1])
    inductor_config.fx_graph_cache = False  # every process autotunes (and records); C++ builds are shared
    inductor_config.autotune_local_cache = False

    def say(*words):
        # one write per line: the forked processes share this pipe, and print() under PYTHONUNBUFFERED=1
        # writes word by word, so their lines could interleave ("DONEDONE w2 ...")
        sys.stdout.flush()
        os.write(1, (" ".join(map(str, words)) + "\\n").encode())

    def compile_matches_eager(m, k, n):
        torch._dynamo.reset()
        module = Linear(k, n).eval()
        x = torch.randn(m, k)
        with torch.no_grad():
            y = torch.compile(module, mode="max-autotune-no-cudagraphs", dynamic=False)(x)
            return bool(torch.allclose(y, x @ module.w, atol=1e-4, rtol=1e-4))

    class StopBeforeRecording:
        # asked first after benchmarking: holds the compile of one shape until the test kills the process
        op_names = {"packed_linear"}
        def __init__(self, m):
            self.m = m
        def on_timings(self, request, timings, untimed):
            if request.features.get("in0_size_0") == self.m:
                say("BLOCKED", os.getpid(), self.m)
                time.sleep(600)

    # the file as a user's might be: this process's validators, lines of other versions, corrupt bytes,
    # and a row whose solution no longer exists, with time 0
    with open(cfg["results"], "wb") as f:
        f.write("".join(f"Validator,{k},{v}\\n" for k, v in F.current_validators().items()).replace('"', "").encode())
        f.write("\\n".join(cfg["seed_lines"]).encode("utf-8", "surrogateescape") + b"\\n")

    say("WARM", compile_matches_eager(*cfg["warm"]))
    sys.stdout.flush(); sys.stderr.flush()
    children = {}
    for name, shapes in cfg["children"].items():
        pid = os.fork()
        if pid == 0:
            try:
                if name == "victim":
                    registry.register_policy(StopBeforeRecording(shapes[cfg["block_at"]][0]), -1)
                for m, k, n in shapes:
                    say("DONE", name, m, compile_matches_eager(m, k, n))
            except BaseException as error:
                say("FAILED", name, repr(error))
                os._exit(3)
            sys.stdout.flush(); sys.stderr.flush()
            sys.exit(0)  # a normal exit: the exit-time compaction runs in each process
        children[name] = pid
        say("CHILD", name, pid)
    statuses = {name: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for name, pid in children.items()}
    say("STATUSES", json.dumps(statuses))

    # use mode in a folder of hostile artifacts (the cache and collection off: the ranking is asked)
    from ah_plugin import artifact_guard
    artifact_guard.CALL_TIMEOUT_S = 5.0
    os.environ["AH_TUNABLE_ENABLED"] = "0"
    os.environ.pop("TORCHINDUCTOR_AUTOHEURISTIC_COLLECT")
    ah_plugin.install(use=["packed_linear"], artifact_dir=cfg["artifacts"], top_k=1, min_choices=1, keep_aten=False)
    say("USE", compile_matches_eager(*cfg["warm"]))
    say("END")
    """
)

K, N = 16, 8
WARM = [8, K, N]
CHILDREN = {f"w{i}": [[17 + i, K, N]] for i in range(7)}
CHILDREN["victim"] = [[40 + i, K, N] for i in range(3)]
BLOCK_AT = 1  # the victim is killed during its second compile: N = 1 of M = 3 done
SEED_LINES = [
    "# tuned on the staging box",
    "conv3d,NN_9_8_16_ld_16_8_float32,cudnn_algo_7,0.5",
    f"packed_linear,NN_99_8_16_ld_16_8_float32,{MKL},0.25,extra-column",
    f"packed_linear,NN_17_8_16_ld_16_8_float32,cpp_CppMicroGemmGone_bm4_bn4_bk1,0",  # w0's shape, stale
    "packed_linear,NN_\udcff\udcfe_bad,x,1",  # invalid UTF-8 (surrogate-escaped bytes 0xff 0xfe)
]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """Runs RUN once; kills the victim when it blocks. Returns (lines, stderr, paths)."""
    base = tmp_path_factory.mktemp("real_run")
    arts = base / "artifacts"
    arts.mkdir(mode=0o755)
    write_artifact(arts, "AAExitsInRank", rank="raise SystemExit(9)")  # chosen (first name) and exits
    write_artifact(arts, "ExitsAtImport", prelude="import sys\nsys.exit(7)")
    (arts / "_report_helper.py").write_text("import argparse\nargparse.ArgumentParser().parse_args()\n")
    write_artifact(arts, "WorldWritable").chmod(0o666)
    paths = {"results": base / "results.csv", "log": base / "log.txt", "artifacts": arts}
    cfg = {"results": str(paths["results"]), "warm": WARM, "children": CHILDREN, "block_at": BLOCK_AT,
           "seed_lines": SEED_LINES, "artifacts": str(arts)}
    env = child_env(
        AH_TUNABLE_ENABLED="1", AH_TUNABLE_FILENAME=str(paths["results"]), AH_TUNABLE_MAX_TUNING_DURATION_MS="1",
        TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="packed_linear", TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=str(paths["log"]),
        TORCHINDUCTOR_CACHE_DIR=str(base / "inductor"), TORCHINDUCTOR_COMPILE_THREADS="1", OMP_NUM_THREADS="1")
    err_path = base / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", RUN, json.dumps(cfg)], env=env, stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
        watchdog = threading.Timer(400, lambda: os.killpg(proc.pid, signal.SIGKILL))
        watchdog.start()
        lines, killed = [], None
        try:
            for line in proc.stdout:
                lines.append(line.split())
                if line.startswith("BLOCKED"):
                    killed = int(line.split()[1])
                    os.kill(killed, signal.SIGKILL)  # kill -9 in the middle of a compile
            proc.wait(timeout=60)
        finally:
            watchdog.cancel()
    assert proc.returncode == 0 and killed is not None, (lines, err_path.read_text()[-4000:])
    return lines, err_path.read_text(), paths


@pytest.mark.slow
def test_eight_processes_and_a_kill_lose_no_completed_winner_or_row(real_run):
    lines, err, paths = real_run
    done = [(w[1], int(w[2]), w[3]) for w in lines if w[0] == "DONE"]
    assert all(ok == "True" for _, _, ok in done), done  # every compile matched eager
    statuses = json.loads(" ".join(next(w for w in lines if w[0] == "STATUSES")[1:]))
    assert statuses.pop("victim") == -signal.SIGKILL and set(statuses.values()) == {0}, statuses
    victim_done = [m for name, m, _ in done if name == "victim"]
    assert victim_done == [40]  # N = 1 of M = 3, killed during the second

    result = F.read_results(str(paths["results"]), None)
    winners = {int(params.split("_")[1]) for _, params in result.entries}
    completed = {m for _, m, _ in done} | {WARM[0]}
    assert completed <= winners  # every completed compile's winner is on disk
    assert winners & {41, 42} == set()  # the compile in flight and the one after it: nothing half-written
    stale = result.entries[("packed_linear", "NN_17_8_16_ld_16_8_float32")]
    assert stale.solution != "cpp_CppMicroGemmGone_bm4_bn4_bk1" and stale.time_ms > 0  # re-tuned, replaced

    text = paths["results"].read_text(encoding="utf-8")
    for kept in SEED_LINES[:3]:
        assert text.count(kept + "\n") == 1  # lines of other versions and comments survived every rewrite
    unreadable = (paths["results"].parent / "results.csv.unreadable").read_bytes()
    assert unreadable == b"packed_linear,NN_\xff\xfe_bad,x,1\n"  # moved aside byte for byte, once

    from torchgen_ah.data.ah_log import read_log

    log = read_log(str(paths["log"]))
    assert not log.skipped  # every row whole, none interleaved
    per_input = log.frame.groupby("in0_size_0").size().to_dict()
    assert all(per_input.get(m) == 2 for m in completed), per_input  # both choices' rows of every input
    assert 41 not in per_input and 42 not in per_input
    assert not list(paths["results"].parent.glob("*.tmp"))


@pytest.mark.slow
def test_hostile_artifacts_cost_their_pruning_not_the_compile(real_run):
    lines, err, paths = real_run
    assert ["USE", "True"] in lines and ["END"] in lines  # the compile matched eager and the program went on
    arts = paths["artifacts"]
    assert f"{arts}/_AAExitsInRank.py): rank() raised SystemExit(9)" in err
    assert f"{arts}/_ExitsAtImport.py: executing it raised SystemExit(7)" in err
    assert f"{arts}/_report_helper.py: defines no artifact class" in err and "usage:" not in err
    assert f"{arts}/_WorldWritable.py is writable by every user" in err
