"""recipes/synth/study/rate/retrain.sh, the resumable lane of the rate axis's other seeds, with a
stand-in Python for training and decoding and the real archive (results_table): each run is trained
with the training checkout's code, checked against the archived run, decoded on the three rate
ladders, archived with every rung's files and committed alone; a second call finds all five archived."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from asr_pe.results_table import read_table, render_run, table_of

REPO = Path(__file__).resolve().parents[2]
RATE = "recipes/synth/study/rate"

# what each step leaves: train.py a finished run with its plain decodings, evaluate_rates.py one
# folder per rung (tempo: 5 rungs besides 1; hop_ms: 4 besides 10), reproduce one JSON line
FAKE_PYTHON = r'''#!/usr/bin/env bash
case "$1" in -c|-m) exec REAL_PYTHON "$@" ;; esac
printf '%s | %s\n' "$PWD" "$*" >> "$FAKE_LOG"
scored() {  # folder: the three result files of a scored set
  mkdir -p "$1"; printf 'bucket,utts,wer\nall,2,10.0000\n' > "$1/buckets.csv"
  printf '{"set": "%s", "remedy": ""}\n' "$(basename "$1")" > "$1/buckets.meta.json"
  printf '{"id": "u1", "hyp": "a", "errors": 1}\n{"id": "u2", "hyp": "b", "errors": 0}\n' > "$1/per_utt.jsonl"
}
case "$1" in
  train.py)
    for a in "$@"; do case "$a" in hydra.sweep.dir=*) d=${a#*=} ;; pe=*) pe=${a#*=} ;; seed=*) seed=${a#*=} ;; esac; done
    r=$d/${pe}_ctc_s${seed}; mkdir -p "$r/eval"
    printf '{"pe": "%s", "loss": "ctc", "seed": %s}\n' "$pe" "$seed" > "$r/run_info.json"
    printf 'pe: %s\n' "$pe" > "$r/config.yaml"; scored "$r/eval/test"; scored "$r/eval/longform"; touch "$r/eval/done.json" ;;
  recipes/synth/study/backlog.py)
    echo "{\"run\": \"$(basename "$3")\", \"reproduced\": true}"; printf '{"run": "%s", "study": "%s", "reproduced": true}\n' "$(basename "$3")" "$5" >> "$7" ;;
  scripts/evaluate_rates.py)
    for a in "$@"; do case "$a" in run=*) r=${a#*=} ;; axis=*) axis=${a#*=} ;; data.test=*) t=${a#*=} ;; esac; done
    s=test; [ "$t" = test ] || s=ladder_test_alone
    [ "$s" = test ] || scored "$r/eval/$s"
    if [ "$axis" = tempo ]; then for f in 0.8 0.9 1.1 1.2 1.3; do scored "$r/eval/${s}_tempo$f"; done
    else for h in 8 9 11 12; do scored "$r/eval/${s}_hop$h"; done; fi ;;
esac
exit 0
'''


def _checkout(tmp_path: Path) -> tuple[Path, Path, dict]:
    repo, train_code = tmp_path / "repo", tmp_path / "train_code"
    for rel in (f"{RATE}/retrain.sh", f"{RATE}/archive.sh", f"{RATE}/report.sh", "recipes/python.sh"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, repo / rel)
    train_code.mkdir()
    (train_code / "train.py").write_text("")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    subprocess.run([*git, "init", "-q", str(train_code)], check=True)
    subprocess.run([*git, "-C", str(train_code), "commit", "-q", "--allow-empty", "-m", "old code"], check=True)
    exe = tmp_path / "python"
    exe.write_text(FAKE_PYTHON.replace("REAL_PYTHON", sys.executable))
    exe.chmod(0o755)
    cache = tmp_path / "cache"
    (cache / "synth_ladder" / "3b1c23b1774d").mkdir(parents=True)
    (cache / "synth_ladder" / "3b1c23b1774d" / "ladder_test_alone.jsonl").write_text("")
    env = {**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(tmp_path / "calls.log"), "ASR_PE_CACHE": str(cache),
           "PYTHONPATH": str(REPO), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return repo, train_code, env


def _run(repo, train_code, work, env):
    return subprocess.run(["bash", f"{RATE}/retrain.sh", "--train_code", str(train_code), "--work_dir", str(work),
                           "--nice", "0"], cwd=repo, capture_output=True, text=True, env=env, timeout=600)


def test_each_run_is_trained_from_the_old_code_decoded_archived_and_committed_then_skipped(tmp_path):
    repo, train_code, env = _checkout(tmp_path)
    work = tmp_path / "work"
    proc = _run(repo, train_code, work, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    calls = (tmp_path / "calls.log").read_text().splitlines()
    train = [c for c in calls if " | train.py" in c]
    assert [c.split(" | ")[0] for c in train] == [str(train_code)] * 6      # the training checkout's code
    assert [c.split("pe=")[1] for c in train] == [f"{pe} seed=3" for pe in ("rope", "relative", "sinusoidal", "none", "cape")] \
        + ["learned_wrap seed=1"]
    rates = [c.split(" | ")[1] for c in calls if "evaluate_rates.py" in c]
    assert len(rates) == 18 and all(c.split(" | ")[0] == str(repo) for c in calls if "evaluate_rates.py" in c)
    rows = read_table(table_of(repo / RATE / "seed3"))  # one table per seed: each file stays small
    assert sorted(rows) == sorted(f"{pe}_ctc_s3" for pe in ("none", "sinusoidal", "cape", "rope", "relative"))
    assert sorted(read_table(table_of(repo / RATE / "seed1"))) == ["learned_wrap_ctc_s1"]
    files = render_run(rows["cape_ctc_s3"])
    sets = sorted({Path(rel).parent.name for rel in files if rel.startswith("eval/")})
    # every rung of the three ladders and the plain sets they share, with all three files each
    assert sets == sorted(["test", "ladder_test_alone", *(f"test_tempo{f}" for f in (0.8, 0.9, 1.1, 1.2, 1.3)),
                           *(f"test_hop{h}" for h in (8, 9, 11, 12)),
                           *(f"ladder_test_alone_tempo{f}" for f in (0.8, 0.9, 1.1, 1.2, 1.3))])
    assert all(f"eval/{s}/{f}" in files for s in sets for f in ("buckets.csv", "buckets.meta.json", "per_utt.jsonl"))
    assert files["eval/test_hop8/per_utt.jsonl"].count("\n") == 2
    # each run compared with the study that archived its seed
    lines = {json.loads(x)["run"]: json.loads(x)["study"] for x in (repo / RATE / "retrained.jsonl").read_text().splitlines()}
    assert lines == {**{r: "recipes/synth/study/seeds" for r in rows}, "learned_wrap_ctc_s1": "recipes/synth/study/runs"}
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True).stdout.splitlines()
    assert len(log) == 7 and all(m.startswith("issue 45 point 3: the rate axis, ") for m in log[:6])
    assert "reproduced: true" in log[0]
    # again: all six archived, nothing trained or decoded
    (tmp_path / "calls.log").unlink()
    again = _run(repo, train_code, work, env)
    assert again.returncode == 0 and again.stdout.count("archived, skipped") == 6
    assert not (tmp_path / "calls.log").exists()
    assert not (repo / RATE / "results.jsonl.xz").exists()  # the seed-4 table untouched


def test_it_refuses_to_start_without_the_training_checkout(tmp_path):
    repo, _, env = _checkout(tmp_path)
    proc = subprocess.run(["bash", f"{RATE}/retrain.sh"], cwd=repo, capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "--train_code <worktree> is required" in proc.stderr


def test_a_run_list_it_cannot_read_is_refused(tmp_path):
    repo, train_code, env = _checkout(tmp_path)
    proc = subprocess.run(["bash", f"{RATE}/retrain.sh", "--train_code", str(train_code), "--work_dir",
                           str(tmp_path / "work"), "--runs", "rope:3 cape"], cwd=repo, capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "--runs: cape is not PE:SEED" in proc.stderr
    assert not (tmp_path / "calls.log").exists() and not (tmp_path / "work").exists()  # refused before rope:3 ran
