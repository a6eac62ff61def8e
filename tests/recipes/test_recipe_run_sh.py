"""recipes/*/run.sh: stage selection, resumability and the exact commands each stage runs.

Stages 0-2 run for real on fixture archives/trees. Stages 3-6 (long-form, training, evaluation,
plots) run with a stand-in ``$PYTHON`` that records its arguments, so the shell logic (loops over
PEs, skip-if-done, Hydra overrides) is checked without training anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asr_pe.data.manifest import read_manifest

REPO = Path(__file__).resolve().parents[2]
LIBRI = REPO / "recipes" / "librispeech" / "run.sh"
TED = REPO / "recipes" / "tedlium3" / "run.sh"

FAKE_PYTHON = """#!/usr/bin/env bash
# Records each call; mimics the files the real scripts would leave behind.
printf '%s\\n' "$*" >> "$FAKE_LOG"
for a in "$@"; do
  case "$a" in
    out=*) touch "${a#out=}" ;;           # make_longform.py out=<manifest>
    run_dir=*) mkdir -p "${a#run_dir=}" ;; # train.py run_dir=<run>
  esac
done
"""


def run(script: Path, *args: str, python: str = sys.executable, env: dict | None = None, check: bool = True):
    full_env = {**os.environ, "PYTHON": python, **(env or {})}
    proc = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, env=full_env, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def fake_python(tmp_path):
    exe = tmp_path / "fake_python"
    exe.write_text(FAKE_PYTHON)
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    return str(exe), log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("script", [LIBRI, TED])
def test_syntax_help_and_unknown_option(script):
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    helped = run(script, "--help")
    assert "stage 4" in helped.stdout and "stage 6" in helped.stdout
    bad = run(script, "--no_such_option", "1", check=False)
    assert bad.returncode == 1 and "unknown option --no_such_option" in bad.stderr
    stray = run(script, "stage=3", check=False)
    assert stray.returncode == 1 and "unexpected argument" in stray.stderr


def test_librispeech_stages_0_to_2_from_predownloaded_archives(build, tmp_path):
    expected = build.make_librispeech_tree(tmp_path / "src")
    build.make_librispeech_archives(tmp_path / "src", tmp_path / "dl")
    work = tmp_path / "work"
    common = ["--work_dir", str(work), "--data_dir", str(tmp_path / "dl"), "--train_parts", "dev-clean",
              "--dev_parts", "dev-clean", "--test_parts", "test-clean"]
    # Checksums are on by default: fixture archives are not the official ones.
    refused = run(LIBRI, "--stage", "0", "--stop_stage", "0", *common, check=False)
    assert refused.returncode == 1 and "checksum mismatch" in refused.stderr
    out = run(LIBRI, "--stage", "0", "--stop_stage", "2", "--verify", "false", *common)
    assert "stage 3" not in out.stdout
    for part in ("dev-clean", "test-clean"):
        got = read_manifest(work / "manifests" / f"{part}.jsonl")
        assert [u.id for u in got] == [e.id for e in expected[part]]
        assert [u.text for u in got] == [e.text for e in expected[part]]
    again = run(LIBRI, "--stage", "0", "--stop_stage", "2", "--verify", "false", *common)
    assert "already downloaded" in again.stdout
    assert "already extracted" in again.stderr and "exists; skipping" in again.stderr


def test_tedlium_stages_0_to_2_from_an_extracted_tree(build, tmp_path):
    expected = build.make_tedlium_tree(tmp_path / "corpus")
    work = tmp_path / "work"
    out = run(TED, "--stage", "0", "--stop_stage", "2", "--work_dir", str(work),
              "--corpus_dir", str(tmp_path / "corpus"))
    assert "stage 0: skipped (--corpus_dir" in out.stdout and "stage 1: skipped" in out.stdout
    for split in ("train", "dev", "test"):
        assert [u.id for u in read_manifest(work / "manifests" / f"{split}.jsonl")] == [
            s.id for s in expected[split]["segments"]
        ]
        assert [u.id for u in read_manifest(work / "manifests" / f"{split}_talks.jsonl")] == [
            s.id for s in expected[split]["talks"]
        ]


def test_librispeech_stages_3_to_6_commands_and_skips(fake_python, tmp_path):
    python, log = fake_python
    work = tmp_path / "work"
    md, runs = work / "manifests", work / "runs"
    md.mkdir(parents=True)
    for part in ("test-clean", "test-other"):
        (md / f"{part}.jsonl").write_text("")
    (runs / "rope" / "eval" / "test-clean").mkdir(parents=True)
    (runs / "rope" / "eval" / "test-clean" / "buckets.csv").write_text("done")  # rope: trained+evaluated
    args = ["--stage", "3", "--stop_stage", "6", "--work_dir", str(work), "--pes", "none rope",
            "--extra", "trainer.max_steps=2 trainer.accelerator=cpu", "--eval_extra", "device=cpu"]
    run(LIBRI, *args, python=python, env={"FAKE_LOG": str(log)})
    got = calls(log)
    lf = [c for c in got if "make_longform.py" in c]
    assert lf == [
        f"{REPO}/scripts/make_longform.py in={md}/{p}.jsonl out={md}/{p}_long.jsonl durations=[10,20,40,80,160]"
        for p in ("test-clean", "test-other")
    ]
    train = [c for c in got if "train.py" in c]
    assert train == [
        f"{REPO}/train.py experiment=cape_librispeech pe=none run_dir={runs}/none resume=auto "
        f"data.corpus.manifest_dir={md} trainer.max_steps=2 trainer.accelerator=cpu"
    ]  # rope skipped: its eval/ exists
    ev = [c for c in got if "evaluate.py" in c]
    sets = ["test-clean", "test-clean_long", "test-other", "test-other_long"]

    def hydra_list(names):
        return "[" + ",".join(f"'{md}/{s}.jsonl'" for s in names) + "]"

    assert ev == [
        f"{REPO}/evaluate.py run={runs}/none data.test={hydra_list(sets)} device=cpu",
        f"{REPO}/evaluate.py run={runs}/rope data.test={hydra_list(sets[1:])} device=cpu",  # test-clean done
    ]
    plots = [c for c in got if "plot_wer_vs_length.py" in c]
    assert plots == [
        f"{REPO}/scripts/plot_wer_vs_length.py {runs}/none {runs}/rope --test-set {s} --out {work}/plots/{s}"
        for s in sets
    ]
    # Re-running stage 3 does nothing: every long-form manifest exists.
    log.unlink()
    run(LIBRI, "--stage", "3", "--stop_stage", "3", "--work_dir", str(work), python=python, env={"FAKE_LOG": str(log)})
    assert calls(log) == []


def test_tedlium_stage_5_evaluates_segments_long_form_and_full_talks(fake_python, tmp_path):
    python, log = fake_python
    work = tmp_path / "work"
    md, runs = work / "manifests", work / "runs"
    md.mkdir(parents=True)
    for name in ("dev", "dev_talks", "test", "test_talks", "test_long"):
        (md / f"{name}.jsonl").write_text("")
    (runs / "cape").mkdir(parents=True)
    run(TED, "--stage", "5", "--stop_stage", "5", "--work_dir", str(work), "--pes", "cape",
        python=python, env={"FAKE_LOG": str(log)})
    sets = ["dev", "dev_talks", "test", "test_long", "test_talks"]
    listed = ",".join(f"'{md}/{s}.jsonl'" for s in sets)
    assert calls(log) == [f"{REPO}/evaluate.py run={runs}/cape data.test=[{listed}]"]
    # a missing run is an error that names the stage to run
    failed = run(TED, "--stage", "5", "--stop_stage", "5", "--work_dir", str(work), "--pes", "rope",
                 python=python, env={"FAKE_LOG": str(log)}, check=False)
    assert failed.returncode == 1 and "run stage 4" in failed.stderr
