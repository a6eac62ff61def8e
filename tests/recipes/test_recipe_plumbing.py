"""recipes/*/run.sh plumbing: signals reach the stage's child, and --test_splits reaches the
evaluation that follows training.

Signals are sent for real (os.kill) to a running run.sh whose stage 4 child is a long-lived
process named like train.py: run.sh must stop it, not start the next stage or PE, and exit
128 + the signal's number.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIBRI = REPO / "recipes" / "librispeech" / "run.sh"
TED = REPO / "recipes" / "tedlium3" / "run.sh"
SYNTH = REPO / "recipes" / "synth" / "run.sh"
# the stand-in answers `python -c` (reading a config) for real
ANSWER_C = f'#!/usr/bin/env bash\n[ "$1" = -c ] && exec {sys.executable} "$@"\n'

# A stand-in interpreter: records each call, then becomes a Python process (same pid) that runs
# for a minute with Python's default signal handling, as train.py does before Lightning starts.
SLEEPING_PYTHON = ANSWER_C + f"""printf '%s %s\\n' "$$" "$*" >> "$FAKE_LOG"
exec {sys.executable} -c 'import time; time.sleep(60)' "$@"
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _default_signals() -> None:
    """run.sh starts with SIGINT/SIGHUP at their defaults, whatever started pytest: a suite run
    under `nohup` or as `cmd &` inherits them ignored, and bash cannot trap a signal ignored on
    entry (the recipe would then rightly ignore it, as nohup asks)."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _start(script: Path, tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    exe = tmp_path / "fake_python"
    exe.write_text(SLEEPING_PYTHON)
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    proc = subprocess.Popen(["bash", str(script), *args, "--work_dir", str(tmp_path / "work")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals,
                            env={**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)})
    deadline = time.monotonic() + 30
    while not (log.exists() and log.read_text().strip()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "run.sh never started its child"
        time.sleep(0.05)
    return proc, log


@pytest.mark.parametrize("script,sig,code", [(LIBRI, signal.SIGTERM, 143), (TED, signal.SIGTERM, 143),
                                             (LIBRI, signal.SIGINT, 130), (LIBRI, signal.SIGHUP, 129)])
def test_a_signal_to_run_sh_stops_its_child_and_the_recipe(script, sig, code, tmp_path):
    proc, log = _start(script, tmp_path, "--stage", "4", "--stop_stage", "6", "--pes", "none rope")
    child = int(log.read_text().split()[0])
    assert "train.py" in log.read_text() and _alive(child)
    time.sleep(0.3)  # let the child reach its sleep (past interpreter start-up)
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == code, (out, err)
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "train.py outlived run.sh"
    assert f"SIG{sig.name[3:]}: stopping pid {child} (train.py)" in err
    # nothing after the interrupted child: not the second PE, not stage 5
    assert len(log.read_text().splitlines()) == 1


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_signal_to_the_synth_study_stops_every_run_it_started(sig, code, tmp_path):
    """Stage 2 of recipes/synth/run.sh trains runs side by side through xargs: a signal to run.sh
    reaches each train.py (which saves last.ckpt and stops), starts no further run, and run.sh
    exits 128 + n only once they are gone (before: run.sh died alone, the runs trained on)."""
    exe = tmp_path / "fake_python"
    exe.write_text(SLEEPING_PYTHON)
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    proc = subprocess.Popen(["bash", str(SYNTH), "--stage", "2", "--stop_stage", "2", "--pes", "none,rope,cape",
                             "--seeds", "0", "--jobs", "2", "--threads", "1", "--study_dir", str(tmp_path / "study")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals,
                            env={**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)})
    deadline = time.monotonic() + 30
    while not (log.exists() and len(log.read_text().splitlines()) == 2):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "run.sh never started its two runs"
        time.sleep(0.05)
    children = [int(line.split()[0]) for line in log.read_text().splitlines()]
    assert all("train.py" in line for line in log.read_text().splitlines()) and all(map(_alive, children))
    time.sleep(0.3)  # let the children reach their sleep (past interpreter start-up)
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == code, (out, err)
    assert not any(map(_alive, children)), "a train.py outlived run.sh"  # gone before run.sh exited
    assert f"SIG{sig.name[3:]}: stopping the runs of stage 2" in err
    assert len(log.read_text().splitlines()) == 2  # the third run was not started


def test_timeout_on_run_sh_leaves_no_train_py_behind(tmp_path):
    exe = tmp_path / "fake_python"
    exe.write_text(SLEEPING_PYTHON)
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    proc = subprocess.run(["timeout", "3", "bash", str(LIBRI), "--stage", "4", "--stop_stage", "4", "--pes", "none",
                           "--work_dir", str(tmp_path / "work")], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)})
    assert proc.returncode == 124  # timeout's own status: the command was stopped
    child = int(log.read_text().split()[0])
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_tedlium_test_splits_reach_the_evaluation_after_training(tmp_path):
    exe = tmp_path / "fake_python"
    exe.write_text(ANSWER_C + 'printf "%s\\n" "$*" >> "$FAKE_LOG"\n')
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    work = tmp_path / "work"
    subprocess.run(["bash", str(TED), "--stage", "4", "--stop_stage", "4", "--pes", "cape", "--test_splits", "dev",
                    "--work_dir", str(work)], check=True, capture_output=True, timeout=60,
                   env={**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)})
    (call,) = log.read_text().splitlines()
    assert "data.corpus.test=['dev','dev_talks']" in call.split() and "test_talks" not in call


@pytest.mark.parametrize("smoke_args", [["--smoke"], ["--smoke", "true"], ["--smoke=true"]])
def test_smoke_switch_selects_the_small_experiment_one_part_and_its_own_work_dir(smoke_args, tmp_path):
    exe = tmp_path / "fake_python"
    exe.write_text(ANSWER_C + 'printf "%s\\n" "$*" >> "$FAKE_LOG"\n')
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)}

    def stage4(script, *args):
        log.unlink(missing_ok=True)
        subprocess.run(["bash", str(script), "--stage", "4", "--stop_stage", "4", *args], check=True,
                       capture_output=True, timeout=60, env=env, cwd=tmp_path)
        return log.read_text().splitlines()

    # the smoke run's one part is split first: chapters held out for validation (test_recipe_outputs.py)
    split, *calls = stage4(LIBRI, *smoke_args)
    work = tmp_path / "exp" / "librispeech_smoke"
    assert "split_heldout.py" in split and f"{work}/manifests/dev-clean.jsonl" in split
    assert [c.split()[2] for c in calls] == [f"pe={pe}" for pe in ("none", "cape")]
    assert all("experiment=cape_librispeech_smoke" in c and f"run_dir={work}/runs/" in c and
               "data.corpus.train=['dev-clean_fit']" in c and "data.corpus.dev=['dev-clean_heldout']" in c and
               "data.corpus.test=['test-clean']" in c for c in calls)
    # an option given explicitly wins over the smoke default, wherever it stands
    (_, call) = stage4(LIBRI, "--pes", "rope", *smoke_args, "--work_dir", str(tmp_path / "w"))
    assert "pe=rope" in call and f"run_dir={tmp_path}/w/runs/rope" in call and "cape_librispeech_smoke" in call
    split, *calls = stage4(TED, *smoke_args)
    assert "split_heldout.py" in split
    assert all("experiment=cape_tedlium3_smoke" in c and "data.corpus.test=['test','test_talks']" in c and
               "data.corpus.train=['dev_fit']" in c and f"{tmp_path}/exp/tedlium3_smoke/runs/" in c
               for c in calls) and len(calls) == 2
    # --smoke false is the full recipe
    calls = stage4(LIBRI, "--smoke", "false", "--pes", "cape")
    assert "experiment=cape_librispeech " in calls[0] and f"{tmp_path}/exp/librispeech/runs/cape" in calls[0]


def test_a_second_signal_kills_a_child_that_ignores_the_first(tmp_path):
    exe = tmp_path / "fake_python"
    exe.write_text(ANSWER_C + f"""printf '%s %s\\n' "$$" "$*" >> "$FAKE_LOG"
exec {sys.executable} -c 'import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); open(sys.argv[1], "w").close(); time.sleep(60)' {tmp_path / "ready"}
""")
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    proc = subprocess.Popen(["bash", str(LIBRI), "--stage", "4", "--stop_stage", "4", "--pes", "none",
                             "--work_dir", str(tmp_path / "work")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)})
    deadline = time.monotonic() + 30
    while not (log.exists() and log.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    child = int(log.read_text().split()[0])
    while not (tmp_path / "ready").exists():  # the child ignores SIGTERM from here on
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    time.sleep(1.0)
    assert proc.poll() is None and _alive(child)  # run.sh waits for the child to stop
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=15)
    assert proc.returncode == 143
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
