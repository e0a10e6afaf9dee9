"""The README's "Use it on your own program" commands, run on the CPU exactly as the README prints them.

The README promises, on the CPU: a program whose GEMM weights are frozen constants (``freezing`` on, under
``no_grad``) gets a log with rows from COLLECT=mm, and USE=mm prunes with an artifact trained from it by the
README's trainer command; any other program (a training step) gets one plain message saying what to set,
never silence. ``AH_PLUGIN_VERBOSE=1`` adds one line at exit saying what the plugin did. Each command runs
in a fresh process with a fresh Inductor cache, as a user's would.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[1] / "README.md"
MESSAGE = "Inductor does not autotune this CPU"

# A training step: Inductor lowers its GEMMs on the CPU with aten alone (nothing to autotune).
TRAIN_STEP = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 96, bias=False), torch.nn.ReLU(), torch.nn.Linear(96, 32, bias=False))
step = torch.compile(model, mode="max-autotune")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = step(torch.randn(32, 64)).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print("trained", float(loss))
"""

# Inference with frozen weights: the CPU GEMMs Inductor autotunes (packed_linear, which mm covers).
FROZEN_INFERENCE = """
import torch
torch._inductor.config.freezing = True
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 32)).eval()
compiled = torch.compile(model, mode="max-autotune")
with torch.no_grad():
    x = torch.randn(32, 64)
    assert torch.allclose(compiled(x), model(x), atol=1e-4, rtol=1e-4)
print("served")
"""


def readme_commands() -> list[str]:
    """The command lines of the README's "Use it on your own program" section."""
    text = README.read_text()
    section = text.split("## Use it on your own program", 1)[1].split("\n## ", 1)[0]
    return [line.split("#", 1)[0].strip() for line in section.splitlines() if line.startswith("    ")
            and not line.startswith("     ")]


def readme_command(pattern: str) -> str:
    (line,) = [c for c in readme_commands() if re.search(pattern, c)]
    return line


def run_readme(line: str, folder: Path, program: str | None = None, verbose: bool = True):
    """Run one README command line in ``folder`` (``VAR=value ... python X.py`` or ``python -m ...``)."""
    words = shlex.split(line)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_PLUGIN_", "AH_TUNABLE_"))}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(folder / f"inductor-{len(list(folder.glob('inductor-*')))}")
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    if verbose:
        env["AH_PLUGIN_VERBOSE"] = "1"
    assert words[0] == "python", line
    if program is not None:
        (folder / words[1]).write_text(program)
    return subprocess.run([sys.executable, *words[1:]], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=600)


def exit_line(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("ah_plugin: at exit:")]
    return line


def test_a_training_step_gets_the_one_plain_message(tmp_path):
    """COLLECT=mm and USE=mm on a CPU training step: not silent; one message, naming what to set."""
    collect = run_readme(readme_command("AUTOHEURISTIC_COLLECT=mm"), tmp_path, TRAIN_STEP)
    assert collect.returncode == 0 and "trained" in collect.stdout, collect.stderr[-3000:]
    assert collect.stderr.count(MESSAGE) == 1, collect.stderr[-3000:]  # once, though four GEMMs are lowered
    said = collect.stderr[collect.stderr.index(MESSAGE):].split("\n", 1)[0]
    assert "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT=mm has nothing to log" in said
    assert "TORCHINDUCTOR_FREEZING=1" in said and "torch.no_grad()" in said
    assert not (tmp_path / "mm_data.txt").exists()
    line = exit_line(collect.stderr)
    assert "collect mm: 0 inputs logged (0 rows)" in line and "CPU GEMMs not autotuned" in line, line

    use = run_readme(readme_command(r"AUTOHEURISTIC_USE=mm python"), tmp_path, TRAIN_STEP)
    assert use.returncode == 0, use.stderr[-3000:]
    assert use.stderr.count(MESSAGE) == 1 and "USE=mm has nothing to prune" in use.stderr, use.stderr[-3000:]
    assert "use mm: kept 0 of 0 choices in 0 autotunings" in exit_line(use.stderr)
    assert "no artifact matches" not in use.stderr  # a single choice is not ranked, so no fallback is said


def test_frozen_inference_gets_a_log_an_artifact_and_pruning(tmp_path):
    """The README's CPU route, its commands as printed: a log with rows, an artifact, then USE prunes."""
    collect = run_readme(readme_command("AUTOHEURISTIC_COLLECT=mm"), tmp_path, FROZEN_INFERENCE)
    assert collect.returncode == 0 and "served" in collect.stdout, collect.stderr[-3000:]
    assert MESSAGE not in collect.stderr
    lines = (tmp_path / "mm_data.txt").read_text().splitlines()
    metadata, header, rows = json.loads(lines[0]), lines[1].split(","), lines[2:]
    assert metadata["name"] == "packed_linear" and header[-2:] == ["choice", "feedback"]
    inputs = {",".join(r.split(",")[:-2]) for r in rows}
    assert len(inputs) == 2 and len(rows) == 4, rows  # two layers, each MKL and the C++ template timed
    assert "collect mm: 2 inputs logged (4 rows)" in exit_line(collect.stderr)

    train = readme_command("train_generic")
    words = shlex.split(train)
    trained = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
    assert trained.returncode == 0, trained.stderr
    assert (tmp_path / "_MyRanking.py").is_file()  # the current folder, as the README says

    use = run_readme(readme_command(r"AUTOHEURISTIC_USE=mm AH_PLUGIN_ARTIFACT_DIR"), tmp_path, FROZEN_INFERENCE)
    assert use.returncode == 0 and "served" in use.stdout, use.stderr[-3000:]
    assert MESSAGE not in use.stderr
    line = exit_line(use.stderr)
    assert "use mm: kept 2 of 4 choices in 2 autotunings" in line, line  # one choice each: nothing benchmarked


def test_frozen_inference_without_max_autotune_says_once_what_it_needs(tmp_path):
    """Freezing and no_grad, but a plain ``torch.compile``: Inductor autotunes nothing, so COLLECT and USE say
    once that max-autotune is needed; no hook fails, and the output is right."""
    program = FROZEN_INFERENCE.replace('torch.compile(model, mode="max-autotune")', "torch.compile(model)")
    assert program != FROZEN_INFERENCE
    for pattern, words in (("AUTOHEURISTIC_COLLECT=mm", "COLLECT=mm has nothing to log"),
                           (r"AUTOHEURISTIC_USE=mm python", "USE=mm has nothing to prune")):
        done = run_readme(readme_command(pattern), tmp_path, program)
        assert done.returncode == 0 and "served" in done.stdout, done.stderr[-3000:]
        assert "hook failed" not in done.stderr and "NotImplementedError" not in done.stderr, done.stderr[-3000:]
        said = [line for line in done.stderr.splitlines() if "Inductor autotunes GEMMs only under max-autotune" in line]
        assert len(said) == 1 and words in said[0] and 'mode="max-autotune"' in said[0], done.stderr[-3000:]
        assert MESSAGE not in done.stderr  # freezing is on: the CPU's other message is not said
        assert "2 GEMMs not autotuned by Inductor (max-autotune off)" in exit_line(done.stderr)
    assert not (tmp_path / "mm_data.txt").exists()
