"""The plugin as a hostile user and an unlucky one would use it, on the CPU path: real files, real
processes, real kills, a real file-size limit. docs/reliability.md lists every case with what the user
sees and what is kept.

Sections:
1. artifacts: a child process per hostile artifact (no torch: fast) must survive and name the file,
   whether the thread guard contains it (exceptions, exits, waits) or its trial in a separate process
   does (a loop inside C code, os._exit, a crash, a huge allocation); a trial runs once per file content;
   files and folders others can write to are refused; a real Ctrl-C stops the program within a second.
2. the results file and the log: lines kept, corrupt bytes, rejected files, stale rows, named write
   failures, a link that stays a link, a file that is not a results file, planted side-file links, a
   full disk, a large file searched instead of read (real files, in this process or a child).
3. settings, merge_data and the trainer: bad values (and values that only look right) disable only what
   they govern; merge_data never writes over a log; data with no usable row.
4. one real run (compiles, shared by the tests below it): 8 processes compiling different shapes
   against one results file and one log, one of them killed with SIGKILL in the middle of its second
   compile; then one run each for the careless-user files and values; then a use-mode compile in a
   folder of hostile artifacts. Every compile is compared with eager.
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
from ah_plugin.use import artifact_loader
from ah_plugin.config import env_values, settings
from ah_plugin.collect import log_format
from ah_plugin.collect.collector import CollectorPolicy
from ah_plugin.policy import AutotuneRequest
import ah_plugin.tunable as tunable
from ah_plugin.tunable import results_file as F
from ah_plugin.tunable import results_search
from ah_plugin.tunable import store as store_module
from ah_plugin.tunable import settings as TS
from ah_plugin.tunable.store import store
from linear_child import PRELUDE, child_env, cpu_artifact

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

CPU_META = {"name": "packed_linear", "device_capa": (0, 0), "shared_memory": 0, "device_name": "cpu",
            "numerical_features": ["in0_size_0"], "categorical_features": []}
MKL, CPP = "extern__mkl_linear", "cpp_CppMicroGemmFP32Vec_bm8_bn32_bk1"

def write_artifact(directory, name, *, prelude="", rank=None, precondition="return True", filename=None):
    """A Contract-2 artifact for the CPU's packed_linear (``linear_child.cpu_artifact``)."""
    rank = rank or f"return [({CPP!r}, 0.9), ({MKL!r}, 0.1)]"
    path = directory / (filename or f"_{name}.py")
    path.write_text(cpu_artifact(name, "packed_linear", [MKL, CPP], rank, prelude=prelude, precondition=precondition))
    path.chmod(0o644)  # whatever the umask: writable by its owner only
    return path


# --------------------------------------------------------------------------------------------------
# 1. artifacts

# The user's program: asks the USE policy twice, then says it survived. Short time limits, no torch.
USER_PROGRAM = textwrap.dedent(
    """
    import json, sys, time, warnings
    warnings.simplefilter("always")
    from ah_plugin.use import artifact_guard
    artifact_guard.IMPORT_TIMEOUT_S = artifact_guard.CALL_TIMEOUT_S = float(sys.argv[2])
    from ah_plugin.policy import AutotuneRequest
    from ah_plugin.use.ranking import RankingPolicy
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
    # what no thread can contain: found by the trial in a separate process, never run in the program
    "c_loop_at_import": ("import itertools\nsum(itertools.repeat(1))", None, "return True",
                         "executing it gave no answer within 1 s"),
    "os_exit_at_import": ("import os\nos._exit(3)", None, "return True", "which exited with code 3"),
    "crash_at_import": ("import ctypes\nctypes.string_at(0)", None, "return True", "which was killed by SIGSEGV"),
    "huge_allocation_at_import": ("_table = b'x' * (64 << 30)", None, "return True", "raised MemoryError"),
    "c_loop_in_rank": ("import itertools", "return sum(itertools.repeat(1))", "return True",
                       "rank() gave no answer within 1 s"),
    "os_exit_in_precondition": ("import os", None, "os._exit(4)", "check_precondition() ended its trial process, "
                                "which exited with code 4"),
    # answers that are not what they look like
    "precondition_says_no_as_a_string": ("", None, "return 'no'", "check_precondition() returned 'no' (str), "
                                         "expected True or False"),
    "rank_scores_infinite": ("", f"return [({CPP!r}, float('inf')), ({MKL!r}, float('-inf'))]", "return True",
                             "rank() returned a ranking whose entry 0 is"),
}
SLOW_TO_ANSWER = ("rank_waits_forever", "sleep_at_import", "c_loop_at_import", "c_loop_in_rank")


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_artifact_never_ends_the_users_program(tmp_path, case):
    prelude, rank, precondition, said = HOSTILE[case]
    path = write_artifact(tmp_path, "Hostile", prelude=prelude, rank=rank, precondition=precondition)
    # stdin stays open and silent, as a terminal nobody types into: reading it must not hang the program
    silent, keep_open = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-c", USER_PROGRAM, str(tmp_path), "1", "--users-own-flag"],
                                env=child_env(XDG_CACHE_HOME=str(tmp_path / "cache")), stdin=silent,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(silent)
        os.close(keep_open)
    assert proc.returncode == 0 and "SURVIVED" in out, (out, err[-3000:])
    kept = re.findall(r"KEPT (\S+) (\S+)", out)  # (a prompt the artifact printed may precede one)
    assert [k[0] for k in kept] == ["null", "null"]  # no pruning from a failed artifact: Inductor's own choices
    assert said in err and str(path) in err, err[-3000:]
    assert "--users-own-flag" not in err  # an argument parser in an artifact never sees the user's arguments
    if case in SLOW_TO_ANSWER:  # one wait of the time limit, then none
        assert float(kept[0][1]) >= 1.0 and float(kept[1][1]) < 0.5, kept


def test_an_artifact_is_tried_once_per_content(tmp_path):
    """The trial's verdict is kept by the file's content: a second program runs no trial (a good file)
    or names the kept verdict (a bad one, at once); an edited file is tried again."""
    marker = tmp_path / "executions.txt"
    good = write_artifact(tmp_path, "Good", prelude=SLEEPER.format(marker=str(marker), only_in_program=True)
                          .replace("time.sleep(3600)", "pass"))
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir(mode=0o755)
    write_artifact(bad_dir, "Looping", prelude="import itertools\nsum(itertools.repeat(1))")
    env = child_env(XDG_CACHE_HOME=str(tmp_path / "cache"))

    def run(folder):
        out = subprocess.run([sys.executable, "-c", USER_PROGRAM, str(folder), "1"], env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0 and "SURVIVED" in out.stdout, out.stderr[-3000:]
        return out

    for _ in range(2):
        assert run(tmp_path).stdout.count(f'KEPT ["{CPP}"]') == 2
    assert [line.split()[0] for line in marker.read_text().splitlines()] == ["trial", "program", "program"]
    good.write_text(good.read_text() + "\n# edited\n")
    run(tmp_path)
    assert [line.split()[0] for line in marker.read_text().splitlines()][3:] == ["trial", "program"]

    first, second = run(bad_dir), run(bad_dir)
    assert "executing it gave no answer within 1 s" in first.stderr
    assert "the verdict of an earlier trial, kept in" in second.stderr and "delete it to try" in second.stderr
    assert float(re.findall(r"KEPT \S+ (\S+)", second.stdout)[0]) < 0.5  # no second wait


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


# At import: say where it runs (the trial process, or the program itself: it has imported the ranking),
# then wait; `only_in_program`: pass the trial and wait in the program only.
SLEEPER = """import os, sys, time
_where = "program" if "ah_plugin.use.ranking" in sys.modules else "trial"
open({marker!r}, "a").write(f"{{_where}} {{os.getpid()}}\\n")
if _where == "program" or not {only_in_program}:
    time.sleep(3600)"""


@pytest.mark.parametrize("where", ["trial", "program"])
def test_a_real_ctrl_c_still_stops_the_program_within_a_second(tmp_path, where):
    """Waiting on an artifact's trial process, or on its import in the program itself (an artifact that
    behaves in the trial and not in the program), the user's Ctrl-C ends the program at once; the trial
    process and what it started end with it."""
    marker = tmp_path / "started.txt"
    write_artifact(tmp_path, "Sleeper", prelude=SLEEPER.format(marker=str(marker), only_in_program=where == "program"))
    proc = subprocess.Popen([sys.executable, "-c", USER_PROGRAM, str(tmp_path), "60"], env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while where not in (marker.read_text() if marker.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert where in marker.read_text()
    time.sleep(0.2)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - start < 1.0
    assert proc.returncode != 0 and "KeyboardInterrupt" in err and "SURVIVED" not in out
    trial_pid = int(marker.read_text().split("\n")[0].split()[1])
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(trial_pid, 0)  # the trial process did not outlive the program


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
    assert names == ["Writable"] and counter.read_text() == "xx"  # safe again: tried (once), then loaded
    if IS_ROOT:  # only root can give a file away: a file owned by another user never runs as root
        os.chown(path, 65534, -1)
        names, said = _load_user_dir(folder)
        assert names == [] and counter.read_text() == "xx"
        assert any(str(path) in m and "is owned by uid 65534" in m for m in said), said
        os.chown(path, 0, -1)
        os.chown(path, -1, 1)  # group "daemon"/"bin", not root's own group: group-writable is refused
        path.chmod(0o664)
        names, said = _load_user_dir(folder)
        assert names == [] and any("writable by its group" in m for m in said), said


# --------------------------------------------------------------------------------------------------
# 2. the results file and the log (real files, in this process or a child)


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
    said = [str(w.message) for w in caught]
    assert said == [f"ah_plugin: the results file {cache_file} is a folder, not a regular file: never opened, read "
                    "or written; the results of this run stay in memory"], said
    assert policy.select(linear_request(51)) == [CPP]  # the cache still answers from memory

    # the collect log is a folder, then its parent is a file: each path said once, rows counted as lost
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    (tmp_path / "log_dir").mkdir()
    for path, error in ((tmp_path / "log_dir", "RefusedWrite: " + str(tmp_path / "log_dir") + " is a folder"),
                        (blocker / "log.txt", "at " + str(blocker))):
        collector = CollectorPolicy(ops=["packed_linear"], log_path=str(path))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for m in (52, 53):
                collector.on_timings(linear_request(m), {MKL: 0.3, CPP: 0.1}, [])
        said = [str(w.message) for w in caught]
        assert len(said) == 1 and f"collect log {path}: cannot write" in said[0] and error in said[0], said
        assert "lost" in said[0] and collector.stats.rows_lost == 4 and collector.stats.rows == 0


def _tune(policy, m, winner=CPP):
    """One tuning miss of shape m answered by the timings: the winner is recorded (and put on disk)."""
    assert policy.select(linear_request(m)) is None
    policy.on_timings(linear_request(m), {MKL: 0.3, CPP: 0.1} if winner == CPP else {MKL: 0.1, CPP: 0.3}, [])


def _said(caught, *words) -> list[str]:
    return [str(w.message) for w in caught if all(word in str(w.message) for word in words)]


def test_a_linked_results_file_stays_a_link(cache_file, tmp_path):
    """AH_TUNABLE_FILENAME names a link to a shared file: winners go into the shared file, through the link,
    and the compaction writes the shared file anew, never a new file over the link. Its lock lies beside the
    shared file, so every name of one file shares one lock."""
    shared = tmp_path / "team" / "results.csv"
    shared.parent.mkdir()
    shared.write_text(validator_text() + f"packed_linear,{key_of(61)},{MKL},0.2\n")
    cache_file.symlink_to(shared)
    policy = tunable.policy()
    assert policy.select(linear_request(61)) == [MKL]  # the shared file's row, read through the link
    _tune(policy, 62)
    assert f"packed_linear,{key_of(62)},{CPP},0.1" in shared.read_text().splitlines()  # journaled through it
    assert store().write()  # the compaction, as at exit
    assert cache_file.is_symlink() and os.readlink(cache_file) == str(shared)
    assert {f"packed_linear,{key_of(61)},{MKL},0.2", f"packed_linear,{key_of(62)},{CPP},0.1"} <= set(
        shared.read_text().splitlines())
    assert (shared.parent / "results.csv.lock").exists() and not (tmp_path / "res0.csv.lock").exists()
    dangling = tmp_path / "res_dangling.csv"
    dangling.symlink_to(tmp_path / "nowhere" / "results.csv")
    with pytest.raises(F.RefusedFile, match="is a symbolic link to .*which does not exist"):
        F.append_entries(str(dangling), F.current_validators(), [F.Entry("packed_linear", key_of(63), MKL, 0.1)])
    assert not (tmp_path / "nowhere").exists()


SCRIPT = "#!/usr/bin/env python\n" + "".join(f"print('step {i}, a, b, c')\n" for i in range(45)) + "# end\n"


def test_a_file_that_is_not_a_results_file_is_never_written(cache_file):
    """A script given as the results file: said once, as a whole; never moved, replaced or written to;
    the cache goes on in memory (a shape tuned in this run is a hit)."""
    cache_file.write_text(SCRIPT)
    cache_file.chmod(0o755)
    policy = tunable.policy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _tune(policy, 64)
        assert policy.select(linear_request(64)) == [CPP]  # from memory
        assert store().write() is False
        store_module._write_at_exit()
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and said[0].startswith(f"ah_plugin: {cache_file}:1: not a results file"), said
    assert "never moved, replaced or written to" in said[0] and "stay in memory" in said[0]
    assert cache_file.read_text() == SCRIPT and stat.S_IMODE(cache_file.stat().st_mode) == 0o755
    assert sorted(p.name for p in cache_file.parent.iterdir() if p.name.startswith("res0")) == ["res0.csv"]


@pytest.mark.parametrize("side", [".unreadable", ".lock"])
def test_side_files_are_never_opened_through_a_link(cache_file, tmp_path, side):
    """A link planted at `<results>.unreadable` or `<results>.lock`: nothing is written through it; the
    failure names it; the results file keeps every line (the corrupt one too) and the new winner."""
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n")
    corrupt = b"packed_linear,NN_\xff\xfe_bad,x,1\n"
    cache_file.write_bytes(validator_text().encode() + f"packed_linear,{key_of(65)},{MKL},0.2\n".encode() + corrupt)
    (tmp_path / ("res0.csv" + side)).symlink_to(victim)
    policy = tunable.policy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _tune(policy, 66)
        store_module._write_at_exit()  # the compaction would move the corrupt line aside
    assert victim.read_text() == "not yours\n"
    said = _said(caught, f"res0.csv{side} is a symbolic link")
    assert len(said) == 1 and said[0].startswith(f"ah_plugin: {cache_file}: cannot write (RefusedFile"), said
    data = cache_file.read_bytes()
    assert corrupt in data
    assert (f"packed_linear,{key_of(66)},{CPP},0.1".encode() in data) == (side == ".unreadable")  # no lock: no write
    assert policy.select(linear_request(66)) == [CPP]  # kept in memory either way


def test_a_read_only_results_file_answers_but_is_never_written(cache_file):
    """A results file with no write bits (0444; root too, which could write it): its rows answer, a winner
    of this run stays in memory, said once, and the file is byte for byte as it was, at exit as well."""
    cache_file.write_text(validator_text() + f"packed_linear,{key_of(71)},{MKL},0.2\n")
    cache_file.chmod(0o444)
    before = cache_file.read_bytes()
    policy = tunable.policy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert policy.select(linear_request(71)) == [MKL]  # its row is a hit
        _tune(policy, 72)
        assert policy.select(linear_request(72)) == [CPP]  # the winner answers from memory
        assert store().write() is False
        store_module._write_at_exit()
    said = _said(caught, str(cache_file), "has no write permission (mode 0o444)")
    assert len(said) == 1 and "stay in memory" in said[0], [str(w.message) for w in caught]
    assert cache_file.read_bytes() == before and stat.S_IMODE(cache_file.stat().st_mode) == 0o444


@pytest.mark.skipif(not IS_ROOT, reason="making a device node (mknod) needs root")
def test_a_device_file_is_never_replaced_directly_or_through_a_link(cache_file, tmp_path, monkeypatch):
    """A copy of /dev/null (made with mknod) as the results file, or a link to one: never opened or replaced
    by a regular file; said once; the cache answers from memory."""
    device = tmp_path / "null.csv"
    os.mknod(device, stat.S_IFCHR | 0o644, os.makedev(1, 3))
    for name in (device, cache_file):
        if name == cache_file:
            store().clear()
            cache_file.symlink_to(device)
        monkeypatch.setenv(TS.FILENAME, str(name))
        policy = tunable.policy()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _tune(policy, 73)
            assert policy.select(linear_request(73)) == [CPP]
            assert store().write() is False
            store_module._write_at_exit()
        said = _said(caught, str(name), "is a character device, not a regular file")
        assert len(said) == 1 and "stay in memory" in said[0], [str(w.message) for w in caught]
        assert stat.S_ISCHR(device.stat().st_mode) and not (tmp_path / "null.csv.lock").exists()
    assert cache_file.is_symlink()


def test_a_file_of_another_user_is_appended_to_never_replaced(cache_file):
    """A shared results file owned by another user, writable by all: a winner is appended, but the file is
    never replaced by a new one (which would then be ours): the rewrite is refused, named."""
    cache_file.write_text(validator_text() + f"packed_linear,{key_of(74)},{MKL},0.2\n")
    cache_file.chmod(0o666)
    if not IS_ROOT:
        pytest.skip("giving a file to another user (chown) needs root")
    os.chown(cache_file, 65534, 65534)
    policy = tunable.policy()
    _tune(policy, 75)
    assert f"packed_linear,{key_of(75)},{CPP},0.1" in cache_file.read_text().splitlines()  # appended
    with pytest.raises(OSError, match="belongs to uid 65534, not to you: appended to, never replaced"):
        store().write()
    assert cache_file.stat().st_uid == 65534


FIFO_CHILD = textwrap.dedent(
    """
    import os, sys, warnings
    warnings.simplefilter("always")
    import torch._inductor  # as a program does before compiling (the plugin's hooks go in here)
    import ah_plugin.tunable as tunable
    from ah_plugin.collect.collector import CollectorPolicy
    from ah_plugin.policy import AutotuneRequest
    from ah_plugin.tunable import store as store_module
    meta = {"name": "packed_linear", "device_capa": (0, 0), "shared_memory": 0, "device_name": "cpu",
            "numerical_features": ["in0_size_0"], "categorical_features": []}
    tensors = [{"size": [9, 16], "stride": [16, 1], "dtype": "torch.float32"},
               {"size": [1, 1], "stride": [1, 0], "dtype": "torch.float32"},
               {"size": [8, 16], "stride": [1, 8], "dtype": "torch.float32"}]
    request = AutotuneRequest("packed_linear", {"in0_size_0": 9}, meta, ["extern__mkl_linear", "cpp_x"],
                              tensors=tensors)
    tunable.enable(True)
    policy = tunable.policy()
    assert policy.select(request) is None
    policy.on_timings(request, {"extern__mkl_linear": 0.3, "cpp_x": 0.1}, [])
    assert policy.select(request) == ["cpp_x"]
    CollectorPolicy(ops=["packed_linear"], log_path=sys.argv[1]).on_timings(request, {"cpp_x": 0.1}, [])
    store_module._write_at_exit()
    print("finished")
    """
)


def test_a_fifo_never_blocks_the_program(tmp_path):
    """A FIFO as the results file, the verbose log or the collection log: nothing opens it (it would block
    until a reader comes, or swallow the rows); each is named; the program finishes; the FIFOs stay FIFOs."""
    fifos = {name: tmp_path / name for name in ("results.csv", "verbose.log", "collect.txt")}
    for path in fifos.values():
        os.mkfifo(path)
    env = child_env(AH_TUNABLE_FILENAME=str(fifos["results.csv"]), AH_TUNABLE_VERBOSE="2",
                    AH_TUNABLE_VERBOSE_FILENAME=str(fifos["verbose.log"]))
    done = subprocess.run([sys.executable, "-c", FIFO_CHILD, str(fifos["collect.txt"])], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "finished" in done.stdout, done.stderr[-3000:]
    for name, path in fifos.items():
        assert f"{path} is a FIFO (named pipe), not a regular file" in done.stderr, (name, done.stderr[-3000:])
        assert stat.S_ISFIFO(path.stat().st_mode)
    assert "the results of this run stay in memory" in done.stderr
    assert "cannot open the verbose log" in done.stderr and "writing to stderr" in done.stderr
    assert f"collect log {fifos['collect.txt']}: cannot write" in done.stderr


def test_the_verbose_log_is_never_the_results_file(cache_file, monkeypatch):
    """AH_TUNABLE_VERBOSE_FILENAME naming the results file would turn it into a log the cache then refuses:
    the verbose lines go to stderr instead, said once, and the file stays a results file."""
    cache_file.write_text(validator_text() + f"packed_linear,{key_of(76)},{MKL},0.2\n")
    monkeypatch.setenv(TS.VERBOSE, "1")
    monkeypatch.setenv(TS.VERBOSE_FILENAME, str(cache_file))
    store_module.verbose._name = None
    policy = tunable.policy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert policy.select(linear_request(76)) == [MKL]
        _tune(policy, 77)
    said = _said(caught, "cannot open the verbose log (it is the results file")
    assert len(said) == 1 and "writing to stderr" in said[0], [str(w.message) for w in caught]
    assert not any("results cache:" in line for line in cache_file.read_text().splitlines())
    assert F.read_results(str(cache_file), F.current_validators()).entries.keys() == {
        ("packed_linear", key_of(76)), ("packed_linear", key_of(77))}
    store_module.verbose._name = None


def test_a_missing_folder_is_created_and_said(cache_file, tmp_path, monkeypatch):
    """A results file and a collection log in folders that do not exist: each folder is created, once, and
    said, naming it; the rows are written."""
    results = tmp_path / "new" / "deep" / "res.csv"
    monkeypatch.setenv(TS.FILENAME, str(results))
    policy = tunable.policy()
    log = tmp_path / "logs" / "run1" / "mm.txt"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _tune(policy, 78)
        _tune(policy, 79)
        collector = CollectorPolicy(ops=["packed_linear"], log_path=str(log))
        for m in (78, 79):
            collector.on_timings(linear_request(m), {MKL: 0.3, CPP: 0.1}, [])
    assert len(_said(caught, f"{results}: its folder {results.parent} did not exist; created it")) == 1
    assert len(_said(caught, f"collect log {log}: its folder {log.parent} did not exist; created it")) == 1
    assert f"packed_linear,{key_of(79)},{CPP},0.1" in results.read_text().splitlines()
    assert collector.stats.rows == 4 and len(log.read_text().splitlines()) == 6


FULL_DISK = textwrap.dedent(
    """
    import os, resource, signal, sys, warnings
    warnings.simplefilter("always")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
    import ah_plugin.tunable as tunable
    from ah_plugin.collect.collector import CollectorPolicy
    from ah_plugin.policy import AutotuneRequest
    from ah_plugin.tunable.store import store
    results, log = sys.argv[1], sys.argv[2]
    tunable.enable(True)
    tunable.set_filename(results)
    meta = {"name": "packed_linear", "device_capa": (0, 0), "shared_memory": 0, "device_name": "cpu",
            "numerical_features": ["in0_size_0"], "categorical_features": []}
    collector = CollectorPolicy(ops=["packed_linear"], log_path=log)
    collector.on_timings(AutotuneRequest("packed_linear", {"in0_size_0": 1}, meta, ["a", "b"]),
                         {"a": 1.0, "b": 2.0}, [])
    store().ensure_loaded()
    def room_for_part_of_a_line(path):
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 25, resource.RLIM_INFINITY))
    room_for_part_of_a_line(results)
    store().record("packed_linear", "NN_70_8_16_ld_16_8_float32", "extern__mkl_linear_with_a_long_name", 0.25)
    room_for_part_of_a_line(log)
    collector.on_timings(AutotuneRequest("packed_linear", {"in0_size_0": 123456789}, meta,
                                         ["a_long_choice_name", "b"]), {"a_long_choice_name": 1.0, "b": 2.0}, [])
    print("ANSWERS", store().exact(("packed_linear", "NN_70_8_16_ld_16_8_float32")).solution)
    """
)


def test_a_full_disk_cuts_a_write_back_to_its_last_whole_line(tmp_path):
    """The disk fills in the middle of a line (a file-size limit, here): the results file and the log keep
    only whole lines, each failure is named once, the winner stays in memory; the next run reads both
    without a warning."""
    results, log = tmp_path / "results.csv", tmp_path / "log.txt"
    results.write_text(validator_text() + f"packed_linear,{key_of(69)},{MKL},0.2\n")
    before = results.read_bytes()
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(results), str(log)], env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ANSWERS extern__mkl_linear_with_a_long_name" in proc.stdout, proc.stderr[-3000:]
    assert f"{results}: cannot write (OSError: File too large)" in proc.stderr
    assert f"collect log {log}: cannot write (OSError: File too large)" in proc.stderr
    assert results.read_bytes() == before  # nothing of the line that did not fit
    log_lines = log.read_text().split("\n")
    assert log_lines[-1] == "" and len(log_lines) == 5  # metadata, header, the first input's 2 rows: whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(F.read_results(str(results), F.current_validators()).entries) == 1
    from torchgen_ah.data.ah_log import read_log

    assert not read_log(str(log)).skipped


def _large_file(path, rows: int, bad_at: int) -> str:
    """A plain results file of `rows` rows (over results_search.MIN_BYTES), with a bad row at line
    `bad_at`; returns the bad line."""
    bad = f"packed_linear,{key_of(5)},{MKL},fast"
    body = [f"packed_linear,NN_{100 + i}_8_16_ld_16_8_float32,{CPP if i % 3 else MKL},0.{i % 97 + 1}"
            for i in range(rows)]
    head = validator_text()
    body.insert(bad_at - head.count("\n") - 1, bad)
    path.write_text(head + "\n".join(body) + "\n")
    return bad


def test_a_large_file_costs_a_search_per_shape_not_a_read(cache_file):
    """A results file of 60,000 rows (5 MB): a hit and a new winner read neither the whole file nor
    rewrite it (a bad row deep inside is not even seen); the winner is one more line at the end. Reading
    the file whole (here `get_results()`) finds and names the bad row."""
    bad = _large_file(cache_file, 60_000, bad_at=40_000)
    assert cache_file.stat().st_size > results_search.MIN_BYTES
    before = cache_file.read_bytes()
    policy = tunable.policy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all: the bad row is never read
        assert policy.select(linear_request(100 + 59_999)) == [MKL if 59_999 % 3 == 0 else CPP]
        assert store().searched is not None
        _tune(policy, 7)
        store_module._write_at_exit()  # nothing to compact: every winner is on disk
    after = cache_file.read_bytes()
    assert after.startswith(before) and after[len(before):] == f"packed_linear,{key_of(7)},{CPP},0.1\n".encode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = tunable.get_results()
    assert len(results) == 60_001
    assert _said(caught, f"{cache_file}:40000: time_ms 'fast' is not a number") and bad in cache_file.read_text()


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
# 3. settings, merge_data and the trainer


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
    assert code != 0 and last.startswith(f"python -m torchgen_ah.mm.train_decision_mm: error: {data}: no usable row"), last
    assert not (tmp_path / "out" / "_X.py").exists()


def test_merge_data_with_no_usable_row_writes_nothing(tmp_path):
    data, out = tmp_path / "data.txt", tmp_path / "merged.txt"
    _write_log(data, "nan")
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.merge_data", str(out), str(data)], env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and not out.exists()
    assert proc.stderr.strip().splitlines()[-1].startswith(f"python -m torchgen_ah.merge_data: error: {data}: no usable row")



STRICT = [
    # (variable, value, what the warning must say, the getter, the value it must give: the unset one)
    (TS.NUMERICAL_CHECK, "nan_nan", "two finite numbers >= 0", TS.numerical_check, TS.api.numerical_check),
    (TS.NUMERICAL_CHECK, "-1_-1", "two finite numbers >= 0", TS.numerical_check, TS.api.numerical_check),
    (TS.NUMERICAL_CHECK, "inf_inf", "two finite numbers >= 0", TS.numerical_check, TS.api.numerical_check),
    (TS.ENABLED, "\u0661", "one of 1/0", TS.is_enabled, False),  # an Arabic-Indic one: int() would read 1
    (TS.MAX_TUNING_ITERATIONS, "1_000", "an integer in [0, inf]", TS.max_tuning_iterations, 100),
    (TS.FILENAME, "   ", "a path: not blank", TS.raw_filename, TS.DEFAULT_FILENAME),
    (TS.FILENAME, "~nobody_here/x.csv", "is no home folder here", TS.raw_filename, TS.DEFAULT_FILENAME),
    (TS.VERBOSE_FILENAME, " log.txt", "no spaces around it", TS.verbose_filename, "err"),
    (settings.ENV_TOP_K, "\u0663", "'fast', 'quality', an integer >= 1", lambda: settings.current().ranking_off,
     (settings.ENV_TOP_K,)),
    (settings.ENV_ATEN_MARGIN, "nan", "a number in [0, 1]", lambda: settings.current().aten_margin, 0.02),
    (settings.ENV_ARTIFACT_DIR, "  ", "a path: not blank", lambda: settings.current().artifact_dir, None),
]


@pytest.mark.parametrize("name,value,said,getter,unset", STRICT, ids=[f"{row[0]}={row[1]!r}" for row in STRICT])
def test_a_value_that_only_looks_right_is_refused_and_named(monkeypatch, tunable_env, fresh_warnings, name, value,
                                                            said, getter, unset):
    monkeypatch.setenv(name, value)
    with pytest.warns(env_values.SettingsWarning) as record:
        assert getter() == unset
    (message,) = [str(w.message) for w in record]
    assert message.startswith(f"ah_plugin: {name}={value!r} is not ") and said in message, message


def test_an_integer_of_5000_digits_is_named_and_refused_per_variable(monkeypatch, tunable_env, fresh_warnings):
    """Python refuses to read an integer of more than 4300 digits; such a value is refused like any bad one,
    naming its variable (and its length, not its 5000 digits), and disables only what it governs."""
    huge = "7" * 5000
    for name, getter, unset in ((settings.ENV_TOP_K, lambda: settings.current().ranking_off, (settings.ENV_TOP_K,)),
                                (settings.ENV_VERBOSE, lambda: settings.current().verbose, False),
                                (TS.MAX_TUNING_ITERATIONS, TS.max_tuning_iterations, 100),
                                (TS.VERBOSE, TS.verbose_level, 0)):
        monkeypatch.setenv(name, huge)
        with pytest.warns(env_values.SettingsWarning) as record:
            assert getter() == unset
        (message,) = [str(w.message) for w in record]
        assert message.startswith(f"ah_plugin: {name}='{'7' * 60}'... (5,000 characters) is not "), message[:300]
        assert ("of at most 18 digits" in message or "one of 1/0" in message) and len(message) < 400
        monkeypatch.delenv(name)
    monkeypatch.setenv("LOCAL_RANK", huge)
    with pytest.warns(TS.TunableSettingsWarning, match=r"LOCAL_RANK='7{60}'\.\.\. \(5,000 characters\) is not"):
        assert TS.with_ordinal("results%d.csv") == "results0.csv"


def test_a_huge_field_of_a_results_file_is_named_not_echoed(cache_file):
    """A row whose time is a 1 MB field: skipped with one warning that shows its start and its length."""
    cache_file.write_text(validator_text() + f"packed_linear,{key_of(80)},{MKL},{'9x' * 500_000}\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tunable.policy().select(linear_request(80)) is None  # skipped: a miss
    (said,) = _said(caught, f"{cache_file}:{len(validator_text().splitlines()) + 1}: time_ms ")
    assert "(1,000,000 characters) is not a number; skipped" in said and len(said) < 300, said[:400]


def test_a_home_folder_in_a_path_is_expanded(monkeypatch, tunable_env, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(TS.FILENAME, "~/tuned/results%d.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tunable.get_filename() == str(tmp_path / "tuned" / "results0.csv")  # not a folder named ~
    with pytest.raises(ValueError, match="filename='   '"):
        tunable.set_filename("   ")
    with pytest.raises(ValueError, match="atol=nan"):
        tunable.set_numerical_check_tolerances(True, float("nan"), 1e-3)


def test_merge_data_never_writes_over_the_users_log(tmp_path):
    """`merge_data mm_data.txt mm_data2.txt`, typed for "merge these two": the first is the output, and it
    exists, so nothing is written; the message says what to type instead."""
    first, second = tmp_path / "mm_data.txt", tmp_path / "mm_data2.txt"
    _write_log(first, "0.5")
    _write_log(second, "0.25")
    before = first.read_bytes()
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.merge_data", str(first), str(second)], env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and first.read_bytes() == before
    (last,) = proc.stderr.strip().splitlines()[-1:]
    merge = "python -m torchgen_ah.merge_data"
    assert last.startswith(f"{merge}: error: {first}: exists; {merge} writes a new file and never replaces one")
    # a new file, or the merge that keeps the log's own rows (it is also the first input): never a command
    # that would replace it with the other file's rows alone
    assert f"{merge} MERGED.txt {first} {second}" in last
    assert last.endswith(f"to add {second} to {first}, keeping its rows: {merge} --force {first} {first} {second}")
    kept = subprocess.run([sys.executable, "-m", "torchgen_ah.merge_data", "--force", str(first), str(first),
                           str(second)], env=child_env(), capture_output=True, text=True, timeout=120)
    assert kept.returncode == 0, kept.stderr
    assert first.read_bytes().startswith(before) and first.read_text().count("\n") == before.count(b"\n") + 22


# --------------------------------------------------------------------------------------------------
# 4. one real run: 8 processes, one results file, one log, a kill -9; careless files and values; then hostile
#    artifacts in use mode

RUN = PRELUDE + textwrap.dedent(
    """
    import os, time, warnings
    warnings.simplefilter("always")
    import ah_plugin
    from ah_plugin.policy import ChoicePolicy, registry
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
        torch.compiler.reset()
        module = Linear(k, n).eval()
        x = torch.randn(m, k)
        with torch.no_grad():
            y = torch.compile(module, mode="max-autotune-no-cudagraphs", dynamic=False)(x)
            return bool(torch.allclose(y, x @ module.w, atol=1e-4, rtol=1e-4))

    class StopBeforeRecording(ChoicePolicy):
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

    # the results file as a careless user gives it (a link to a shared file, a script, a corrupt line with a
    # link planted beside it) and values that only look right: each compile a run of its own
    from ah_plugin.tunable import store as store_module
    for name, m, variables in cfg["file_cases"]:
        store_module.store().clear()
        os.environ.update(variables)
        say("FILES", name, compile_matches_eager(m, 16, 8))
        store_module._write_at_exit()  # the end of that run
        for variable in variables:
            os.environ.pop(variable)
        sys.stdout.flush(); sys.stderr.flush()

    # use mode in a folder of hostile artifacts (the cache and collection off: the ranking is asked)
    from ah_plugin.use import artifact_guard
    artifact_guard.CALL_TIMEOUT_S = artifact_guard.IMPORT_TIMEOUT_S = 5.0
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


def _careless_files(base) -> dict:
    """The files of the careless-user cases: a link to a shared results file, a script, a results file with
    a corrupt line and a link planted where that line would be moved, and the file the link points to."""
    shared = base / "team" / "shared.csv"
    shared.parent.mkdir()
    shared.write_text(validator_text())
    (base / "link.csv").symlink_to(shared)
    (base / "script.csv").write_text(SCRIPT)
    (base / "planted.csv").write_bytes(validator_text().encode() + b"packed_linear,NN_\xff_bad,x,1\n")
    (base / "victim.txt").write_text("not yours\n")
    (base / "planted.csv.unreadable").symlink_to(base / "victim.txt")
    return {"link": base / "link.csv", "shared": shared, "script": base / "script.csv",
            "planted": base / "planted.csv", "victim": base / "victim.txt"}


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
    write_artifact(arts, "LoopsInC", prelude="import itertools\nsum(itertools.repeat(1))")  # contained by its trial
    write_artifact(arts, "ExitsHard", prelude="import os\nos._exit(3)")
    paths = {"results": base / "results.csv", "log": base / "log.txt", "artifacts": arts}
    paths.update(_careless_files(base))
    file_cases = [
        ["link", 50, {"AH_TUNABLE_FILENAME": str(paths["link"])}],
        ["script", 51, {"AH_TUNABLE_FILENAME": str(paths["script"])}],
        ["planted", 52, {"AH_TUNABLE_FILENAME": str(paths["planted"])}],
        ["values", 53, {"AH_TUNABLE_FILENAME": str(base / "values.csv"), "AH_TUNABLE_NUMERICAL_CHECK": "nan_nan",
                        "AH_TUNABLE_MAX_TUNING_DURATION_MS": "\u0661", "AH_TUNABLE_VERBOSE": "\u0662"}],
    ]
    cfg = {"results": str(paths["results"]), "warm": WARM, "children": CHILDREN, "block_at": BLOCK_AT,
           "seed_lines": SEED_LINES, "artifacts": str(arts), "file_cases": file_cases}
    env = child_env(
        AH_TUNABLE_ENABLED="1", AH_TUNABLE_FILENAME=str(paths["results"]), AH_TUNABLE_MAX_TUNING_DURATION_MS="1",
        TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="packed_linear", TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=str(paths["log"]),
        TORCHINDUCTOR_CACHE_DIR=str(base / "inductor"), TORCHINDUCTOR_COMPILE_THREADS="1", OMP_NUM_THREADS="1",
        XDG_CACHE_HOME=str(base / "cache"))
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
    assert f"{arts}/_LoopsInC.py: executing it gave no answer within 5 s" in err
    assert f"{arts}/_ExitsHard.py: executing it ended its trial process, which exited with code 3" in err


@pytest.mark.slow
def test_careless_results_files_and_values_cost_nothing_of_the_users(real_run):
    """Each compile matches eager; the link stays a link and the shared file gets the winner; the script is
    left byte for byte, said once; the planted link is not followed (the corrupt line stays); values that
    only look right are named and ignored."""
    lines, err, paths = real_run
    assert [w[1:] for w in lines if w[0] == "FILES"] == [["link", "True"], ["script", "True"], ["planted", "True"],
                                                          ["values", "True"]]
    assert paths["link"].is_symlink() and os.readlink(paths["link"]) == str(paths["shared"])
    assert any(line.startswith(f"packed_linear,{key_of(50)},") for line in paths["shared"].read_text().splitlines())
    assert paths["script"].read_text() == SCRIPT and err.count(f"{paths['script']}:1: not a results file") == 1
    assert paths["victim"].read_text() == "not yours\n"
    assert f"{paths['planted']}.unreadable is a symbolic link" in err
    planted = paths["planted"].read_bytes()
    assert b"NN_\xff_bad" in planted and f"packed_linear,{key_of(52)},".encode() in planted
    for named in ("AH_TUNABLE_NUMERICAL_CHECK='nan_nan'", "AH_TUNABLE_MAX_TUNING_DURATION_MS='\u0661'",
                  "AH_TUNABLE_VERBOSE='\u0662'"):
        assert named in err


BARS = PRELUDE + textwrap.dedent(
    """
    import ah_plugin
    ok, source = compile_linear(40, 64, 48, 1e-4)
    status = ah_plugin.status()
    print("RESULT " + json.dumps({"ok": ok, "installed": status.get("installed"),
                                  "cache": status.get("cache_stats"), "benchmarked": benchmarked}))
    """
)


def _bar_run(tmp_path, tag, **variables):
    env = child_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor_{tag}"), **variables)
    done = subprocess.run([sys.executable, "-c", BARS], env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads([line for line in done.stdout.splitlines() if line.startswith("RESULT ")][-1][7:])
    return result, done.stderr


@pytest.mark.slow
def test_a_fifo_a_read_only_file_and_a_5000_digit_value_in_real_compiles(tmp_path):
    """The bars, in real compiles (each equal to eager): a FIFO as the results file, the compile finishes and
    the FIFO is untouched; a 0444 results file is unchanged after a run that tunes and records; an
    AH_PLUGIN_TOP_K of 5000 digits is named in the output, the plugin stays installed (the results cache
    goes on, the USE ranking is off)."""
    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    result, err = _bar_run(tmp_path, "fifo", AH_TUNABLE_ENABLED="1", AH_TUNABLE_FILENAME=str(fifo))
    assert result["ok"] and result["cache"]["tuned"] == 1, result
    assert stat.S_ISFIFO(fifo.stat().st_mode) and f"the results file {fifo} is a FIFO (named pipe)" in err

    read_only = tmp_path / "read_only.csv"
    read_only.write_text(validator_text() + f"packed_linear,{key_of(9)},{MKL},0.2\n")
    read_only.chmod(0o444)
    before = read_only.read_bytes()
    result, err = _bar_run(tmp_path, "read_only", AH_TUNABLE_ENABLED="1", AH_TUNABLE_FILENAME=str(read_only))
    assert result["ok"] and result["cache"]["tuned"] == 1 and len(result["benchmarked"]) == 1, result
    assert read_only.read_bytes() == before and stat.S_IMODE(read_only.stat().st_mode) == 0o444
    assert f"the results file {read_only} has no write permission (mode 0o444)" in err

    huge = "7" * 5000
    result, err = _bar_run(tmp_path, "huge", TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", AH_PLUGIN_TOP_K=huge,
                           AH_TUNABLE_ENABLED="1", AH_TUNABLE_FILENAME=str(tmp_path / "huge.csv"))
    assert result["ok"] and result["installed"] and result["cache"]["tuned"] == 1, result
    assert f"AH_PLUGIN_TOP_K='{'7' * 60}'... (5,000 characters) is not 'fast'" in err and huge not in err
    assert "not activated" not in err and "switched off" not in err
