"""What the plugin tells a user: one prefix, the CPU GEMM message, one verbose line per decision in the
GEMM's and the device's terms, the line at exit, warnings shown at the user's line, and a misspelled
variable's name or value said with the closest known one."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import warnings

import pytest

from ah_plugin.collect.collector import CollectStats
from ah_plugin.config import env_names, env_values, settings
from ah_plugin.policy import AutotuneRequest
from ah_plugin.report import cpu_gemm, decision_words, messages
from ah_plugin.report.exit_summary import summary_line
from ah_plugin.use.ranking import RankingPolicy, UseStats

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_cpu_gemm_message_says_what_was_asked_and_what_to_set():
    both = settings.Settings(collect=frozenset({"mm"}), use=frozenset({"mm"}))
    assert cpu_gemm.asked_about("mm", both) and cpu_gemm.asked_about("addmm", both)
    assert not cpu_gemm.asked_about("bmm", both)  # autotuned on the CPU without freezing
    assert not cpu_gemm.asked_about("mm", settings.Settings(collect=frozenset({"packed_linear"})))
    text = cpu_gemm.message("addmm", both)
    assert text.startswith("Inductor does not autotune this CPU addmm (aten is its only choice), so "
                           "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT=mm has nothing to log and "
                           "TORCHINDUCTOR_AUTOHEURISTIC_USE=mm has nothing to prune for it.")
    assert "TORCHINDUCTOR_FREEZING=1" in text and "torch.no_grad()" in text and "\n" not in text
    off = cpu_gemm.no_max_autotune_message("packed_linear", both)
    assert off == ("Inductor autotunes GEMMs only under max-autotune, which is off for this packed_linear, so "
                   "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT=mm has nothing to log and TORCHINDUCTOR_AUTOHEURISTIC_USE=mm "
                   'has nothing to prune for it: compile with torch.compile(mode="max-autotune") (or set '
                   "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM=1); collection and use mode act only on the GEMMs it autotunes.")


def test_the_exit_line_renders_each_part_and_says_when_nothing_happened():
    current = settings.Settings(collect=frozenset({"mm"}), use=frozenset({"mm"}), tunable=True, verbose=True)
    collect = CollectStats(inputs=1, rows=2, files={"mm.txt"})
    use = UseStats(autotunings=3, offered=6, kept=3, without_ranking=1)
    status = {"settings": current, "collect_stats": collect, "use_stats": use,
              "cache_stats": {"hits": 1, "misses": 2, "tuned": 2}, "cpu_gemms_not_autotuned": 4,
              "neighbours_untimed": 2}
    assert summary_line(status) == (
        "ah_plugin: at exit: collect mm: 1 input logged (2 rows) to mm.txt; use mm: kept 3 of 6 choices in 3 "
        "autotunings (1 with no artifact to rank them: aten kept); results cache: 1 hit, 2 misses, 2 tuned; "
        "2 fusion neighbours not timed alone (no fused template to compare with); "
        "4 CPU GEMMs not autotuned by Inductor (freezing off or not under no_grad)")
    nothing = {"settings": settings.Settings(collect=frozenset({"mm"})), "collect_stats": CollectStats()}
    assert summary_line(nothing) == "ah_plugin: at exit: collect mm: 0 inputs logged (0 rows)"


def _import_torch(**variables):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_PLUGIN_", "AH_TUNABLE_"))}
    env.update(variables)
    return subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_exit_line_is_printed_only_when_verbose():
    said = _import_torch(TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", AH_PLUGIN_VERBOSE="1")
    assert said.returncode == 0, said.stderr
    assert said.stderr.strip().splitlines()[-1] == \
        "ah_plugin: at exit: nothing compiled (torch never imported Inductor)"
    quiet = _import_torch(TORCHINDUCTOR_AUTOHEURISTIC_USE="mm")
    assert quiet.returncode == 0 and "at exit" not in quiet.stderr


def _program(tmp_path, **variables):
    """``import torch`` as line 1 of a program file, in a fresh interpreter with these variables alone."""
    program = tmp_path / "prog.py"
    program.write_text("import torch\nprint('ran')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_PLUGIN_", "AH_TUNABLE_"))}
    env.update(variables)
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ran" in done.stdout, done.stderr[-3000:]
    return program, done.stderr.splitlines()


@pytest.mark.parametrize("variables, said", [
    # a misspelled value, with the closest word it takes
    ({"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm", "AH_PLUGIN_TOP_K": "qualty"},
     "AH_PLUGIN_TOP_K='qualty' is not 'fast', 'quality', an integer >= 1 or 'adaptive' (did you mean 'quality'?); "
     "the USE ranking is off (Inductor benchmarks all its choices); collection and the results cache go on"),
    # misspelled names, said once even when no other variable switches the plugin on
    ({"TORCHINDUCTOR_AUTOHEURISTIC_USEE": "mm", "AH_PLUGIN_TOPK": "5"},
     "AH_PLUGIN_TOPK (did you mean AH_PLUGIN_TOP_K?), TORCHINDUCTOR_AUTOHEURISTIC_USEE (did you mean "
     "TORCHINDUCTOR_AUTOHEURISTIC_USE?) are not variables the plugin reads; ignored (docs/plugin.md lists them)"),
])
def test_a_warning_is_shown_at_the_users_line_with_the_prefix(tmp_path, variables, said):
    program, lines = _program(tmp_path, **variables)
    if messages.SKIPS_FILES:
        assert lines == [f"{program}:1: SettingsWarning: ah_plugin: {said}",
                         "  import torch"]  # the user's source line, not the plugin's
    else:  # Python 3.11 and older: the program, never the plugin's own code
        assert lines == [f"{program}:0: SettingsWarning: ah_plugin: {said}"]


def _python_that_skips_files() -> str | None:
    """An interpreter of Python 3.12 or newer on this machine (``warnings.warn(skip_file_prefixes=...)``)."""
    found = [shutil.which(f"python3.{minor}") for minor in (12, 13, 14)]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    for python in filter(None, found):
        done = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                              capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == "True":
            return python
    return None


def test_on_python_3_12_a_warning_names_the_users_line(tmp_path):
    """The standard library skips the plugin's frames (no torch needed: the settings warn on their own)."""
    python = _python_that_skips_files()
    if python is None:
        pytest.skip("no Python 3.12 or newer on this machine")
    program = tmp_path / "prog.py"
    program.write_text(f"import sys; sys.path.insert(0, {REPO!r})\nfrom ah_plugin.config import settings\n"
                       "settings.current({'AH_PLUGIN_NON_GEMM': 'tun'})\n")
    done = subprocess.run([python, str(program)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"{program}:3: SettingsWarning: ah_plugin: AH_PLUGIN_NON_GEMM='tun'"), lines
    assert lines[1] == "  settings.current({'AH_PLUGIN_NON_GEMM': 'tun'})"


def test_unknown_names_get_the_closest_known_one_or_none():
    unknown = env_names.unknown_names({"AH_TUNABLE_ENABLD": "1", "AH_PLUGIN_TOP_K": "3", "AH_PLUGIN_ZZZ": "1",
                                       "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH": "x", "PATH": "/bin"})
    assert unknown == {"AH_TUNABLE_ENABLD": "AH_TUNABLE_ENABLED", "AH_PLUGIN_ZZZ": None}
    assert env_names.unknown_names({"HOME": "/root"}) == {}


@pytest.mark.parametrize("name, value, expected", [
    ("AH_PLUGIN_TOP_K", "Qualty", " (did you mean 'quality'?)"),
    ("AH_PLUGIN_NON_GEMM", "tun", " (did you mean 'tune'?)"),
    ("AH_PLUGIN_KEEP_ATEN", "ture", " (did you mean 'true'?)"),
    ("TORCHINDUCTOR_AUTOHEURISTIC_USE", "addm,mm,bogus_op", " (did you mean 'addmm' for 'addm'?)"),
    ("AH_PLUGIN_TOP_K", "ten", ""),  # nothing close: no guess
    ("AH_PLUGIN_TOP_K_MASS", "0.9x", ""),  # a number: no words to offer
])
def test_a_bad_value_close_to_a_known_word_is_named(name, value, expected):
    assert env_names.value_hint(name, value, "one of 1/0, true/false, yes/no, on/off"
                                if name == "AH_PLUGIN_KEEP_ATEN" else "anything") == expected


def test_a_warning_from_our_code_names_the_callers_file():
    env_values.forget_warnings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings.current({"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm", "AH_PLUGIN_NON_GEMM": "tun"})
    (said,) = caught
    named = __file__ if messages.SKIPS_FILES else getattr(sys.modules["__main__"], "__file__", "__main__")
    assert said.filename == named and str(said.message).startswith("ah_plugin: AH_PLUGIN_NON_GEMM='tun'")


def _described(op, *sizes, dtype="torch.bfloat16"):
    return AutotuneRequest(op, {}, {}, [], tensors=[{"size": list(s), "stride": [], "dtype": dtype} for s in sizes])


def test_a_gemm_and_its_device_in_a_users_words():
    assert decision_words.gemm(_described("mm", (4096, 1024), (1024, 512))) == "mm 4096x1024 @ 1024x512, bfloat16"
    assert decision_words.gemm(_described("addmm", (512,), (64, 1024), (1024, 512))) == "addmm 64x1024 @ 1024x512, bfloat16"
    assert decision_words.gemm(_described("bmm", (8, 128, 64), (8, 64, 32))) == "bmm 8 x 128x64 @ 64x32, bfloat16"
    packed = _described("packed_linear", (32, 64), (1459233, 1), (96, 64), dtype="torch.float32")
    assert decision_words.gemm(packed) == "packed_linear 32x64 @ 64x96, float32"
    assert decision_words.gemm(_described("int_mm", (5,), ())) == "int_mm 5, scalar, bfloat16"
    assert decision_words.device({"device_capa": (0, 0), "device_name": "cpu"}) == "the CPU"
    assert decision_words.device({"device_capa": (9, 0), "device_name": "NVIDIA H200"}) == "NVIDIA H200"
    assert decision_words.kept(["a"], ["a", "b"]) == "kept a alone of 2 choices"
    assert decision_words.kept(["a", "b", "c", "d"], list("abcdef")) == "kept 4 of 6 choices (a, b, c, ...)"


ARTIFACT = """
class _TinyRanking:
    heuristic_name = "TinyRanking"
    op_name = "mm"
    device_capa = (0, 0)
    shared_memory = 0
    device_names = ()
    numerical_features = ["m", "k", "n"]
    categorical_features = []
    choices = ["extern_mm", "cpp_a", "cpp_b"]

    def check_precondition(self, metadata):
        return metadata.get("name") == "mm"

    def rank(self, features):
        return [("cpp_a", 0.9), ("extern_mm", 0.1), ("cpp_b", 0.0)]

    def support(self, features):
        return {"choice": "cpp_a", "inputs": INPUTS, "timings": 24, "margin": 1.5, "spread": 1.2}
"""


def test_a_decision_is_one_line_with_the_gemm_what_was_kept_and_why(tmp_path, capsys, clean_use_env):
    request = AutotuneRequest("mm", {"m": 32, "k": 64, "n": 96},
                              {"name": "mm", "device_capa": (0, 0), "shared_memory": 0, "device_name": "cpu"},
                              ["extern_mm", "cpp_a", "cpp_b"],
                              tensors=[{"size": [32, 64], "stride": [64, 1], "dtype": "torch.float32"},
                                       {"size": [64, 96], "stride": [96, 1], "dtype": "torch.float32"}])
    for inputs, kept, why in (
            (6, ["cpp_a"], "kept cpp_a alone of 3 choices: TinyRanking ranks it first with a share of 0.90 (at "
             "least 0.8), 6 input(s) and 24 timing(s) behind it, 1.50x aten's speed with a spread of 1.20: nothing "
             "to time"),
            (2, ["extern_mm"], "kept extern_mm alone of 3 choices: TinyRanking ranks cpp_a first, but its data do "
             "not back it (2 input(s) and 24 timing(s) behind it, 1.50x aten's speed with a spread of 1.20; backing "
             "takes 3 inputs, each timed twice, and a speed-up above the spread): aten alone, as without an "
             "artifact")):
        folder = tmp_path / str(inputs)
        folder.mkdir()
        (folder / "_TinyRanking.py").write_text(ARTIFACT.replace("INPUTS", str(inputs)))
        policy = RankingPolicy(artifact_dir=str(folder), package=False, verbose=True)
        assert policy.select(request) == kept
        said = capsys.readouterr().err.splitlines()
        assert said[0].startswith("ah_plugin: mm on the CPU: ranked by TinyRanking (user: ")
        assert said[1:] == [f"ah_plugin: mm 32x64 @ 64x96, float32: {why}"]
