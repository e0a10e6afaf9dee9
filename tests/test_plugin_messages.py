"""What the plugin tells a user without being asked twice: the CPU GEMM message and the verbose line at exit."""

from __future__ import annotations

import os
import subprocess
import sys

from ah_plugin import cpu_gemm, settings
from ah_plugin.collector import CollectStats
from ah_plugin.exit_summary import summary_line
from ah_plugin.ranking import UseStats


def test_the_cpu_gemm_message_says_what_was_asked_and_what_to_set():
    both = settings.Settings(collect=frozenset({"mm"}), use=frozenset({"mm"}))
    assert cpu_gemm.asked_about("mm", both) and cpu_gemm.asked_about("addmm", both)
    assert not cpu_gemm.asked_about("bmm", both)  # autotuned on the CPU without freezing
    assert not cpu_gemm.asked_about("mm", settings.Settings(collect=frozenset({"packed_linear"})))
    text = cpu_gemm.message("addmm", both)
    assert text.startswith("ah_plugin: Inductor does not autotune this CPU addmm (aten is its only choice), so "
                           "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT=mm has nothing to log and "
                           "TORCHINDUCTOR_AUTOHEURISTIC_USE=mm has nothing to prune for it.")
    assert "TORCHINDUCTOR_FREEZING=1" in text and "torch.no_grad()" in text and "\n" not in text


def test_the_exit_line_renders_each_part_and_says_when_nothing_happened():
    current = settings.Settings(collect=frozenset({"mm"}), use=frozenset({"mm"}), tunable=True, verbose=True)
    collect = CollectStats(inputs=1, rows=2, files={"mm.txt"})
    use = UseStats(autotunings=3, offered=6, kept=3, without_ranking=1)
    status = {"settings": current, "collect_stats": collect, "use_stats": use,
              "cache_stats": {"hits": 1, "misses": 2, "tuned": 2}, "cpu_gemms_not_autotuned": 4}
    assert summary_line(status) == (
        "[ah_plugin] at exit: collect mm: 1 input logged (2 rows) to mm.txt; use mm: kept 3 of 6 choices in 3 "
        "autotunings (1 with no artifact to rank them: aten kept); results cache: 1 hit, 2 misses, 2 tuned; "
        "4 CPU GEMMs not autotuned by Inductor (freezing off or not under no_grad)")
    nothing = {"settings": settings.Settings(collect=frozenset({"mm"})), "collect_stats": CollectStats()}
    assert summary_line(nothing) == "[ah_plugin] at exit: collect mm: 0 inputs logged (0 rows)"


def _import_torch(**variables):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_PLUGIN_", "AH_TUNABLE_"))}
    env.update(variables)
    return subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_exit_line_is_printed_only_when_verbose():
    said = _import_torch(TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", AH_PLUGIN_VERBOSE="1")
    assert said.returncode == 0, said.stderr
    assert said.stderr.strip().splitlines()[-1] == \
        "[ah_plugin] at exit: nothing compiled (torch never imported Inductor)"
    quiet = _import_torch(TORCHINDUCTOR_AUTOHEURISTIC_USE="mm")
    assert quiet.returncode == 0 and "at exit" not in quiet.stderr
