"""Every recipe's run.sh refuses a command line that would run nothing or mean something else.

`--stage x`, `--stage 9` and `--stage 3 --stop_stage 1` once exited 0 having run no stage (a test
`[ "$stage" -le N ]` on them is just false), and a misspelt last option (`--smok`) was reported
as an option that "needs a value". Each is now one `error:` line and exit 2, before anything runs
(no Python, no work_dir): recipes/lib/stage_range.sh, recipes/lib/stages.sh `parse_options`,
recipes/synth/run.sh.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RECIPES = {"librispeech": (REPO / "recipes" / "librispeech" / "run.sh", 6),
           "tedlium3": (REPO / "recipes" / "tedlium3" / "run.sh", 6),
           "synth": (REPO / "recipes" / "synth" / "run.sh", 4)}


def _run(script: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    # PYTHON points nowhere: a command line that got as far as the interpreter check would say so
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(cwd / "no-python")}
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


@pytest.mark.parametrize("name", sorted(RECIPES))
@pytest.mark.parametrize("args, says", [
    (["--stage", "x"], "--stage 'x': not a stage number"),
    (["--stop_stage", "two"], "--stop_stage 'two': not a stage number"),
    (["--stage", "-1"], "--stage '-1': not a stage number"),
    (["--stage", "9"], "--stage 9: no such stage"),
    (["--stage", "3", "--stop_stage", "1"], "--stage 3 is after --stop_stage 1, so no stage would run"),
    (["--stage", "1", "--smok"], "unknown option --smok"),
    (["--stage"], "option --stage needs a value"),
])
def test_a_command_line_that_runs_nothing_is_one_error_with_exit_2(name, args, says, tmp_path):
    script, last = RECIPES[name]
    proc = _run(script, *args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{script}: error: ") and says in first, proc.stderr
    if "stage" in says and "needs" not in says and "unknown" not in says:
        assert f"0-{last}" in first or "after" in first  # says which stages there are
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []  # nothing ran, nothing written


@pytest.mark.parametrize("name", ["librispeech", "tedlium3"])
def test_the_last_stage_alone_passes_the_check(name, tmp_path):
    # --stage 6 --stop_stage 6 is a valid range: it gets past the option check to the interpreter check
    script, _ = RECIPES[name]
    proc = _run(script, "--stage", "6", "--stop_stage", "6", cwd=tmp_path)
    assert "no Python interpreter" in proc.stderr and "error: --stage" not in proc.stderr, proc.stderr
