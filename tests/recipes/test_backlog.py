"""recipes/synth/study/backlog.py, the helpers of the ladder backlog lane, on archived runs: a run's
ladder decodings staged and archived give the rows study/ladder/ holds for it, its report and
choice are copied with the study's paths, and the reproduction check tells an identical rerun
from one that differs."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

from asr_pe.results_table import add_runs, read_table, render_run, table_of

REPO = Path(__file__).resolve().parents[2]
STUDY = REPO / "recipes" / "synth" / "study"

_NAME = "asr_pe_synth_backlog"
if _NAME not in sys.modules:     # loaded by path: recipes/ is no package
    _spec = importlib.util.spec_from_file_location(_NAME, STUDY / "backlog.py")
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])
backlog = sys.modules[_NAME]


def _write_out(study: Path, run: str, dest: Path) -> Path:
    """An archived run's files written out as a run folder."""
    for rel, text in render_run(read_table(table_of(study))[run]).items():
        (dest / run / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / run / rel).write_text(text, encoding="utf-8")
    return dest / run


def test_a_ladder_run_staged_and_archived_gives_the_archived_rows(tmp_path):
    run = _write_out(STUDY / "ladder", "rope_ctc_s3", tmp_path / "runs")
    (run / "eval" / "ladder").mkdir()
    shutil.copy(STUDY / "ladder" / "reports" / "rope_ctc_s3.md", run / "eval" / "ladder" / "report.md")
    choice = json.loads((STUDY / "ladder" / "reports" / "rope_ctc_s3.choice.json").read_text())
    (run / "eval" / "ladder" / "choice.json").write_text(json.dumps(
        {**choice, "run": str(run), "ladder": "/root/.cache/asr_pe/synth_ladder/3b1c23b1774d"}))
    staged = backlog.stage(run, tmp_path / "archive")
    add_runs(tmp_path / "dest" / "results.jsonl.xz", [staged], remedy_utts=True)
    assert read_table(tmp_path / "dest" / "results.jsonl.xz")["rope_ctc_s3"] \
        == read_table(table_of(STUDY / "ladder"))["rope_ctc_s3"]
    backlog.reports(run, tmp_path / "dest" / "reports")
    assert (tmp_path / "dest" / "reports" / "rope_ctc_s3.choice.json").read_text() \
        == (STUDY / "ladder" / "reports" / "rope_ctc_s3.choice.json").read_text()
    assert backlog.archived(tmp_path / "dest", "rope_ctc_s3") and not backlog.archived(tmp_path / "dest", "rope_ctc_s4")
    assert "chosen window:2.5" in backlog.summary(tmp_path / "dest", "rope_ctc_s3")


def test_the_summary_of_a_run_whose_dev_ladder_keeps_the_plain_decoding(tmp_path):
    # test is then decoded plainly only: choice.json has "test_rate_chosen": null (a transducer run,
    # 2026-11-28, stopped its lane's archiving with a TypeError here)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "relative_transducer_s2.choice.json").write_text(json.dumps(
        {"dev_rates": {"plain": 1.392, "window:2.5": 1.396}, "chosen": "plain", "test_rate_plain": 1.315,
         "test_rate_chosen": None}))
    assert backlog.summary(tmp_path, "relative_transducer_s2") == \
        "relative_transducer_s2: dev (no-gap, every rung) plain 1.39, window:2.5 1.40; chosen plain; test 1.31 %"


def test_the_reproduction_check_tells_an_identical_rerun_from_a_different_one(tmp_path):
    run = _write_out(STUDY / "seeds", "rope_ctc_s4", tmp_path / "runs")
    same = backlog.reproduce(run, STUDY / "seeds")
    assert same["reproduced"] and same["test"]["differing"] == 0 and same["longform"]["differing"] == 0
    # the machine it ran on, which "reproduced" depends on (the lanes' code records none in run_info.json)
    import torch
    assert same["machine"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and same["machine"]["cpu"]
    per_utt = run / "eval" / "test" / "per_utt.jsonl"
    rows = [json.loads(line) for line in per_utt.read_text().splitlines()]
    rows[3]["hyp"] += " x"
    per_utt.write_text("".join(json.dumps(r) + "\n" for r in rows))
    other = backlog.reproduce(run, STUDY / "seeds")
    assert not other["reproduced"] and other["test"]["differing"] == 1


def test_the_reproduction_check_reads_an_archive_of_another_checkout_and_names_it_as_the_repository_does(tmp_path):
    # stage 6 reads the commit checkout's archive, which the lane's older worktree lacks
    other = tmp_path / "checkout" / "recipes" / "synth" / "study" / "seeds"
    other.mkdir(parents=True)
    shutil.copy(STUDY / "seeds" / "results.jsonl.xz", other / "results.jsonl.xz")
    run = _write_out(STUDY / "seeds", "rope_ctc_s4", tmp_path / "runs")
    for study in (other, STUDY / "seeds", Path("recipes/synth/study/seeds")):
        got = backlog.reproduce(run, study)
        assert got["reproduced"] and got["study"] == "recipes/synth/study/seeds", study


def test_the_staged_run_keeps_its_own_test_decodings_and_drops_the_dev_pool_s_utterances(tmp_path):
    """A retrain that does not reproduce the archived run is another model: its test and long-form
    decodings go into the archive with it; the dev pool's sets keep their bucket tables only."""
    run = _write_out(STUDY / "seeds", "rope_ctc_s4", tmp_path / "runs")
    dev = run / "eval" / "ladder_dev_nogap_5"
    dev.mkdir(parents=True)
    for name in ("buckets.csv", "buckets.meta.json", "per_utt.jsonl"):
        (dev / name).write_text((run / "eval" / "test" / name).read_text())
    staged = backlog.stage(run, tmp_path / "archive")
    kept = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
    assert "eval/test/per_utt.jsonl" in kept and "eval/longform/per_utt.jsonl" in kept
    assert "eval/ladder_dev_nogap_5/buckets.csv" in kept and "eval/ladder_dev_nogap_5/per_utt.jsonl" not in kept


def test_the_staged_run_keeps_every_decoding_of_test_and_longform_and_nothing_else_of_eval(tmp_path):
    # stage 6 archives the hop ladder of `test`, stage 7 the windowed decodings of test and the long-form
    # set; a folder that is no set of any stage (the ladder's report, another set) stays out
    run = _write_out(STUDY / "seeds", "rope_ctc_s4", tmp_path / "runs")
    for name in ("test_hop8", "test_tempo1p3", "test_window2p5", "longform_window5", "ladder", "dev_window5"):
        (run / "eval" / name).mkdir(parents=True)
        for f in ("buckets.csv", "buckets.meta.json", "per_utt.jsonl"):
            (run / "eval" / name / f).write_text((run / "eval" / "test" / f).read_text())
    staged = backlog.stage(run, tmp_path / "archive")
    sets = sorted(p.name for p in (staged / "eval").iterdir())
    assert sets == ["longform", "longform_window5", "test", "test_hop8", "test_tempo1p3", "test_window2p5"]
    assert (staged / "eval" / "test_hop8" / "per_utt.jsonl").is_file()


def test_the_reproduction_check_reads_the_main_study_s_archive_that_names_its_checkpoint_only(tmp_path):
    """study/runs/ predates checkpoint records ("checkpoint": "best.ckpt", no step): a retrain of
    one of its runs, whose meta records the step, is judged by its hypotheses alone."""
    run = _write_out(STUDY / "runs", "shaw_ctc_s0", tmp_path / "runs")
    for s in ("test", "longform"):
        meta_path = run / "eval" / s / "buckets.meta.json"
        meta = json.loads(meta_path.read_text())
        assert meta["checkpoint"] == "best.ckpt"
        meta["checkpoint"] = {"name": "best.ckpt", "global_step": 1015, "sha256": "0" * 64}
        meta_path.write_text(json.dumps(meta))
    same = backlog.reproduce(run, STUDY / "runs")
    assert same["reproduced"] and same["test_best_step"] == [None, 1015]
    assert same["test"]["differing"] == 0 and same["test"]["utterances"] == 150
    per_utt = run / "eval" / "longform" / "per_utt.jsonl"
    rows = [json.loads(line) for line in per_utt.read_text().splitlines()]
    rows[0]["hyp"] += " x"
    per_utt.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert not backlog.reproduce(run, STUDY / "runs")["reproduced"]


FAKE_PYTHON = r'''#!/usr/bin/env bash
[ "$1" = -c ] && exec REAL_PYTHON "$@"
printf '%s\n' "$*" >> "$FAKE_LOG"
case "$1" in
  recipes/synth/study/backlog.py)
    case "$2" in
      archived) exit 1 ;;
      stage) mkdir -p "$4/$(basename "$3")" ;;
      reports) mkdir -p "$4"; touch "$4/$(basename "$3").md" "$4/$(basename "$3").choice.json" ;;
      summary) [ "$4" = "${FAKE_SUMMARY_FAILS:-none}" ] && exit 1; echo "$4: chosen window:2.5" ;;
      reproduce) echo "$3" >> "$7"; echo '{"run": "x", "reproduced": false}' ;;
      attention-summary) echo "$(basename "$3"): local share alone 80.0 %" ;;
      same-source) [ -n "${FAKE_SAME_SOURCE_FAILS:-}" ] && { echo "error: not the source" >&2; exit 1; } ;;
      export-source) mkdir -p "$4/checkpoints" && cp "$3/checkpoints/best.ckpt" "$4/checkpoints/" && echo '{}' > "$4/source.json" ;;
      choose)  # the first candidate, as the real one would for equal CERs
        out=""; prev=""; for a in "$@"; do [ "$prev" = --out ] && out=$a; prev=$a; done
        printf '{"chosen": "%s"}\n' "$4" > "$out"; echo "$4" ;;
    esac ;;
  scripts/attention_vs_length.py)
    mkdir -p "${2#run=}/attention_stats" && touch "${2#run=}/attention_stats/attention_stats.csv" ;;
  train.py)
    # a lane that must still be training when another commits (the shared-stage test)
    if [ -n "${FAKE_TRAIN_WAITS_FOR:-}" ]; then
      for i in $(seq 1 600); do [ -e "$FAKE_TRAIN_WAITS_FOR" ] && break; sleep 0.1; done
    fi
    loss=ctc
    rd=""
    for a in "$@"; do case "$a" in hydra.sweep.dir=*) d=${a#*=} ;; pe=*) pe=${a#*=} ;; seed=*) seed=${a#*=} ;;
      loss=*) loss=${a#*=} ;; run_dir=*) rd=${a#*=} ;; esac; done
    if [ -n "$rd" ]; then mkdir -p "$rd/checkpoints" && touch "$rd/checkpoints/best.ckpt"   # stage 7: no evaluation
    else mkdir -p "$d/${pe}_${loss}_s${seed}/eval" && touch "$d/${pe}_${loss}_s${seed}/eval/done.json"; fi ;;
  -m)
    [ "$2" = asr_pe.inference.remedy_specs ] && exec REAL_PYTHON "$@"
    [ "$2" = pytest ] && { echo "pytest in $PWD" >> "$FAKE_LOG"; echo "pytest of ${*: -2}" >> "$FAKE_LOG"
                           [ -z "${FAKE_ARCHIVE_CHECK_FAILS:-}" ]; exit; }
    [ "$3" = add ] && mkdir -p "$4" && basename "$5" >> "$4/results.jsonl.xz" ;;   # the table: a run a line
esac
exit 0
'''


def _checkout(path: Path, *, with_code: bool) -> Path:
    """A git checkout holding backlog.sh (and, ``with_code``, the files stages 3-4 need)."""
    import subprocess

    (path / "recipes" / "synth" / "study").mkdir(parents=True)
    shutil.copy(REPO / "recipes" / "synth" / "study" / "backlog.sh", path / "recipes" / "synth" / "study")
    shutil.copy(REPO / "recipes" / "python.sh", path / "recipes")
    if with_code:
        for rel in ("scripts/evaluate_rates.py", "asr_pe/models/transducer.py", "conf/experiment/synth_finetune160.yaml"):
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text("")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "start"], check=True)
    return path


def _start_lane(tmp_path, repo: Path, work: Path, *, stages=("3", "4"), summary_fails: str = "", extra=(),
                env_extra=None):
    """backlog.sh of ``repo`` started with a stand-in Python that records its calls (in
    tmp_path/calls.log) and writes what each step leaves, on checked inputs in ``work``."""
    import os
    import subprocess

    exe = tmp_path / "python"
    if not exe.exists():
        exe.write_text(FAKE_PYTHON.replace("REAL_PYTHON", sys.executable))
        exe.chmod(0o755)
    work.mkdir(exist_ok=True)
    (work / "inputs_checked").write_text("checked\n")
    env = {**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(tmp_path / "calls.log"), "ASR_PE_CACHE": str(tmp_path),
           "FAKE_SUMMARY_FAILS": summary_fails, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", **(env_extra or {})}
    return subprocess.Popen(["bash", str(repo / "recipes" / "synth" / "study" / "backlog.sh"), "--stage", stages[0],
                             "--stop_stage", stages[1], "--work_dir", str(work), "--nice", "0", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _lane(tmp_path, *, with_code: bool, stages=("3", "4"), summary_fails: str = "", extra=(), env_extra=None):
    """One lane in its own checkout, run to its end: (the finished process, the stand-in's calls,
    the checkout, the work folder)."""
    import subprocess

    repo = _checkout(tmp_path / "repo", with_code=with_code)
    work = tmp_path / "work"
    lane = _start_lane(tmp_path, repo, work, stages=stages, summary_fails=summary_fails, extra=extra,
                       env_extra=env_extra)
    out, err = lane.communicate(timeout=300)
    proc = subprocess.CompletedProcess(lane.args, lane.returncode, out, err)
    calls = (tmp_path / "calls.log").read_text().splitlines() if (tmp_path / "calls.log").exists() else []
    return proc, calls, repo, work


def test_stages_3_and_4_train_the_cape_parts_and_the_transducer_arm_and_commit_each_run(tmp_path):
    proc, calls, repo, work = _lane(tmp_path, with_code=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ladder = tmp_path / "synth_ladder" / "3b1c23b1774d"
    train = [c for c in calls if c.startswith("train.py")]
    assert len(train) == 8 + 10
    # the first CAPE part: global shift only, seed 4 (seed-major), in its arm's folder
    first = f"{work}/runs/cape_shift_only/cape_ctc_s4"
    assert train[0] == (f"train.py -m experiment=synth_study hydra.sweep.dir={work}/runs/cape_shift_only pe=cape "
                        "seed=4 pe.input.max_local_shift=0 pe.input.max_global_scaling=1 arm=cape_shift_only")
    after = calls[calls.index(train[0]) + 1:calls.index(train[1])]
    assert [c.split()[0] for c in after if not c.startswith("recipes/")][:2] == ["scripts/evaluate_ladder.py",
                                                                                "scripts/evaluate_rates.py"]
    assert f"scripts/evaluate_rates.py run={first} axis=tempo device=cpu data.test=[{ladder}/ladder_test_alone.jsonl]" \
        in after
    assert not [c for c in calls if " reproduce " in f" {c} "]   # new runs: no archive to compare with
    assert f"hydra.sweep.dir={work}/runs/cape_shift60 pe=cape seed=3 pe.input.max_global_shift=60 arm=cape_shift60" \
        in train[7]
    # the transducer arm: seeds 2, 3 of five PEs with the study's encoder, no rate ladder
    assert train[8] == f"train.py -m experiment=synth_study hydra.sweep.dir={work}/runs pe=none seed=2 loss=transducer"
    assert not [c for c in calls if "evaluate_rates.py" in c and "_transducer_" in c]
    log = subprocess_log(repo)
    assert len(log) == 1 + 18 and log[-1] == "start"
    assert log[-2].startswith("issue 45 point 4: cape_shift_only, cape_ctc_s4 trained, on the ladder and the tempo ladder;")
    assert log[0].startswith("issue 44 point 5: cape_transducer_s3 trained, on the ladder;")
    assert (repo / "recipes/synth/study/cape_parts/cape_local_only/reports/cape_ctc_s3.choice.json").exists()


def test_two_lanes_sharing_stage_4_each_archive_on_top_of_the_other_s_commit(tmp_path):
    # lane B starts (and copies the committed table) before lane A commits its first run, and is still
    # training when A commits: B must add its runs to A's committed table, not to its stale copy
    commit_repo = _checkout(tmp_path / "main", with_code=True)
    a_repo, b_repo = (_checkout(tmp_path / name, with_code=True) for name in ("a", "b"))
    dest = "recipes/synth/study/transducer"
    a_first = commit_repo / dest / "reports" / "none_transducer_s2.md"
    b = _start_lane(tmp_path, b_repo, tmp_path / "work_b", stages=("4", "4"),
                    extra=("--commit_repo", str(commit_repo), "--pes", "rope"),
                    env_extra={"FAKE_TRAIN_WAITS_FOR": str(a_first)})
    a = _start_lane(tmp_path, a_repo, tmp_path / "work_a", stages=("4", "4"),
                    extra=("--commit_repo", str(commit_repo), "--pes", "none,sinusoidal"))
    for lane in (a, b):
        out, err = lane.communicate(timeout=300)
        assert lane.returncode == 0, out[-3000:] + err[-3000:]
    table = (commit_repo / dest / "results.jsonl.xz").read_text().split()
    assert sorted(table) == sorted(f"{pe}_transducer_s{seed}" for pe in ("none", "sinusoidal", "rope")
                                   for seed in (2, 3))
    log = subprocess_log(commit_repo)
    assert len(log) == 1 + 6 and all(line.startswith("issue 44 point 5: ") for line in log[:-1])
    trained = [c for c in (tmp_path / "calls.log").read_text().splitlines() if c.startswith("train.py")]
    assert len(trained) == 6   # each run by one lane


def test_two_lanes_sharing_stage_5_s_arm_each_archive_on_top_of_the_other_s_commit(tmp_path):
    # the Conformer arm split by seed (--seeds 0 / --seeds 1): lane B trains while lane A commits, and must
    # add its runs and its retrained.jsonl lines to A's committed files, not to its copy from before
    commit_repo = _checkout(tmp_path / "main", with_code=False)
    a_repo, b_repo = (_checkout(tmp_path / name, with_code=False) for name in ("a", "b"))
    dest = commit_repo / "recipes/synth/study/attention/arms/conformer"
    b = _start_lane(tmp_path, b_repo, tmp_path / "work_b", stages=("5", "5"),
                    extra=("--commit_repo", str(commit_repo), "--arms", "conformer", "--seeds", "1"),
                    env_extra={"FAKE_TRAIN_WAITS_FOR": str(dest / "results.jsonl.xz")})
    a = _start_lane(tmp_path, a_repo, tmp_path / "work_a", stages=("5", "5"),
                    extra=("--commit_repo", str(commit_repo), "--arms", "conformer", "--seeds", "0"))
    for lane in (a, b):
        out, err = lane.communicate(timeout=300)
        assert lane.returncode == 0, out[-3000:] + err[-3000:]
    runs = sorted(f"{pe}_ctc_s{seed}" for pe in ("none", "sinusoidal", "rope", "relative", "cape") for seed in (0, 1))
    assert sorted((dest / "results.jsonl.xz").read_text().split()) == runs
    assert sorted(Path(line).name for line in (dest / "retrained.jsonl").read_text().split()) == runs
    log = subprocess_log(commit_repo)
    assert len(log) == 1 + 10 and all(line.startswith("issue 48 point 7: arms/conformer, ") for line in log[:-1])


def _commit_repo_with_a_table(tmp_path) -> tuple[Path, Path]:
    """A commit checkout with the archive tests and a committed Conformer table of one line."""
    import subprocess

    commit_repo = _checkout(tmp_path / "main", with_code=False)
    (commit_repo / "tests").mkdir()
    (commit_repo / "tests" / "test_results_table.py").write_text("")
    (commit_repo / "tests" / "recipes").mkdir()
    (commit_repo / "tests" / "recipes" / "test_backlog.py").write_text("")
    dest = commit_repo / "recipes/synth/study/attention/arms/conformer"
    dest.mkdir(parents=True)
    (dest / "results.jsonl.xz").write_text("archived_before\n")
    git = ["git", "-C", str(commit_repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the table so far"], check=True)
    return commit_repo, dest


def test_each_commit_waits_for_the_commit_checkout_s_archive_tests(tmp_path):
    commit_repo, dest = _commit_repo_with_a_table(tmp_path)
    lane = _start_lane(tmp_path, _checkout(tmp_path / "a", with_code=False), tmp_path / "work", stages=("5", "5"),
                       extra=("--commit_repo", str(commit_repo), "--arms", "conformer", "--seeds", "0"))
    out, err = lane.communicate(timeout=300)
    assert lane.returncode == 0, out[-3000:] + err[-3000:]
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls.count(f"pytest in {commit_repo}") == 5   # one check a commit, run where the commit is made
    # both files that read the committed archives (test_backlog.py reads finetune160's: CI, 2026-12-03)
    assert calls.count("pytest of tests/test_results_table.py tests/recipes/test_backlog.py") == 5
    assert len(subprocess_log(commit_repo)) == 2 + 5


def test_a_table_the_archive_tests_fail_is_not_committed_and_the_commit_checkout_is_put_back(tmp_path):
    # what CI failed on (2026-12-02): a lane committed a table that tests/test_results_table.py refused
    commit_repo, dest = _commit_repo_with_a_table(tmp_path)
    lane = _start_lane(tmp_path, _checkout(tmp_path / "a", with_code=False), tmp_path / "work", stages=("5", "5"),
                       extra=("--commit_repo", str(commit_repo), "--arms", "conformer", "--seeds", "0"),
                       env_extra={"FAKE_ARCHIVE_CHECK_FAILS": "1"})
    out, err = lane.communicate(timeout=300)
    assert lane.returncode == 1
    assert "ARCHIVE CHECK FAILED" in out and "commit FAILED; stopped:" in out
    trained = [c for c in (tmp_path / "calls.log").read_text().splitlines() if c.startswith("train.py")]
    assert len(trained) == 1   # the first run, then the lane stops
    assert subprocess_log(commit_repo) == ["the table so far", "start"]
    assert (dest / "results.jsonl.xz").read_text() == "archived_before\n"   # the tracked table put back
    assert not (dest / "retrained.jsonl").exists()                           # the new file taken away
    import subprocess
    status = subprocess.run(["git", "-C", str(commit_repo), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""


def test_a_pe_outside_the_transducer_arm_is_refused_before_anything_runs(tmp_path):
    proc, calls, _, _ = _lane(tmp_path, with_code=True, stages=("4", "4"), extra=("--pes", "none,shaw"))
    assert proc.returncode == 2 and not calls
    assert "error: --pes: no PE shaw in the transducer arm" in proc.stdout


def test_a_run_whose_archiving_fails_after_its_rows_are_staged_stops_the_lane(tmp_path):
    # going on would copy the commit checkout's table over the staged one at the next run's sync_dest
    proc, calls, repo, _ = _lane(tmp_path, with_code=True, summary_fails="cape_ctc_s4")
    assert proc.returncode == 1
    train = [c for c in calls if c.startswith("train.py")]
    assert len(train) == 1   # cape_shift_only's seed 4, then nothing more
    assert "cape_ctc_s4: summary FAILED; stopped:" in proc.stdout
    assert "holds cape_ctc_s4's rows uncommitted" in proc.stdout
    assert subprocess_log(repo) == ["start"]


def test_stages_3_and_4_refuse_a_checkout_without_their_code(tmp_path):
    proc, calls, _, _ = _lane(tmp_path, with_code=False)
    assert proc.returncode == 1 and not [c for c in calls if c.startswith("train.py")]
    assert "stage 3 needs scripts/evaluate_rates.py, which this checkout" in proc.stdout
    assert "stage 4 needs asr_pe/models/transducer.py" in proc.stdout


def test_stage_5_trains_the_arms_again_measures_their_attention_and_commits_each_run(tmp_path):
    proc, calls, repo, work = _lane(tmp_path, with_code=False, stages=("5", "5"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ladder = tmp_path / "synth_ladder" / "3b1c23b1774d"
    train = [c for c in calls if c.startswith("train.py")]
    assert len(train) == 8 + 10 + 9   # arm 3 (4 PEs x 2 seeds), the Conformer (5 x 2), arm 3 at 3x (3 x 3)
    first = f"{work}/runs/arms/frontend70/relative_ctc_s0"
    assert train[0] == f"train.py -m experiment=synth_arm_frontend70 hydra.sweep.dir={work}/runs/arms/frontend70 pe=relative seed=0"
    assert train[8] == f"train.py -m experiment=synth_arm_conformer hydra.sweep.dir={work}/runs/arms/conformer pe=none seed=0"
    assert train[-1] == (f"train.py -m experiment=synth_arm_frontend70_long hydra.sweep.dir={work}/runs/arms/frontend70_long "
                         "pe=cape seed=2")
    after = calls[calls.index(train[0]) + 1:calls.index(train[1])]
    dest = repo / "recipes/synth/study/attention/arms/frontend70"
    sets = ",".join([f"{ladder}/ladder_test_alone.jsonl"] + [f"{ladder}/ladder_test_gap500ms_{r}.jsonl"
                                                            for r in (5, 10, 20, 40, 80, 160)])
    assert after == [
        f"scripts/attention_vs_length.py run={first} per_bucket=50 data.test=[{sets}]",
        f"recipes/synth/study/backlog.py reproduce {first} --study recipes/synth/study/arms/frontend70 "
        f"--out {dest}/retrained.jsonl",
        f"recipes/synth/study/backlog.py stage {first} {work}/archive/arms/frontend70",
        f"-m asr_pe.results_table add {dest} {work}/archive/arms/frontend70/relative_ctc_s0 --remedy-utts",
        f"-m asr_pe.results_table check {dest} {work}/archive/arms/frontend70/relative_ctc_s0",
        f"recipes/synth/study/backlog.py attention-summary {first}",
        f"recipes/synth/study/backlog.py archived {repo}/recipes/synth/study/attention/arms/frontend70 none_ctc_s0 "
        "--table-only"]
    assert not [c for c in calls if "evaluate_ladder.py" in c]   # no ladder decoding: attention only
    log = subprocess_log(repo)
    assert len(log) == 1 + 27 and log[-1] == "start"
    assert log[-2] == ("issue 48 point 7: arms/frontend70, relative_ctc_s0 retrained (archived run reproduced: false), "
                       "its attention on the ladder's test pool; relative_ctc_s0: local share alone 80.0 %")
    assert log[0].startswith("issue 48 point 7: arms/frontend70_long, cape_ctc_s2 retrained")
    assert len((dest / "retrained.jsonl").read_text().splitlines()) == 8


def test_stage_2_archives_each_seed_in_its_own_table(tmp_path):
    proc, calls, repo, _ = _lane(tmp_path, with_code=False, stages=("2", "2"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    adds = [c.split()[3] for c in calls if c.startswith("-m asr_pe.results_table add")]
    ladder = f"{repo}/recipes/synth/study/ladder"
    assert adds == [f"{ladder}/more_pes"] * 7 + [f"{ladder}/more_pes/seed1"] * 7
    assert (repo / "recipes/synth/study/ladder/more_pes/seed1/reports/shaw_ctc_s1.choice.json").exists()
    assert not (repo / "recipes/synth/study/ladder/more_pes/reports/shaw_ctc_s1.choice.json").exists()


def test_stage_6_trains_cape_s_parts_again_and_archives_their_hop_ladder_of_test(tmp_path):
    proc, calls, repo, work = _lane(tmp_path, with_code=True, stages=("6", "6"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    train = [c for c in calls if c.startswith("train.py")]
    assert len(train) == 4 * 2   # four arms, seeds 4 then 3
    # stage 3's command: the arm's overrides and its name
    assert train[0] == (f"train.py -m experiment=synth_study hydra.sweep.dir={work}/runs/hop/cape_shift_only pe=cape "
                        "seed=4 pe.input.max_local_shift=0 pe.input.max_global_scaling=1 arm=cape_shift_only")
    assert train[-1] == (f"train.py -m experiment=synth_study hydra.sweep.dir={work}/runs/hop/cape_shift60 pe=cape "
                         "seed=3 pe.input.max_global_shift=60 arm=cape_shift60")
    first = f"{work}/runs/hop/cape_shift_only/cape_ctc_s4"
    after = [c for c in calls[calls.index(train[0]) + 1:calls.index(train[1])] if not c.startswith("-c")]
    dest = repo / "recipes/synth/study/cape_parts/hop/cape_shift_only"
    assert after[0] == f"scripts/evaluate_rates.py run={first} axis=hop_ms data.test=test device=cpu"
    # the arm's archive read from the commit checkout (here the lane's own): a worktree of stage 3's
    # commit predates it
    assert after[1] == (f"recipes/synth/study/backlog.py reproduce {first} --study {repo}/recipes/synth/study/cape_parts/"
                        f"cape_shift_only --out {dest}/retrained.jsonl")
    assert not [c for c in calls if "evaluate_ladder.py" in c]   # the length ladder is archived already
    log = subprocess_log(repo)
    assert len(log) == 1 + 8 and log[0].startswith("issue 45 point 4: cape_parts/hop/cape_shift60, cape_ctc_s3 retrained")
    assert (dest / "results.jsonl.xz").read_text().split() == ["cape_ctc_s4", "cape_ctc_s3"]


def test_stage_5_runs_the_arms_it_is_given_in_their_order(tmp_path):
    proc, calls, _, work = _lane(tmp_path, with_code=False, stages=("5", "5"),
                                 extra=("--arms", "frontend70_long,conformer"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    train = [c for c in calls if c.startswith("train.py")]
    assert len(train) == 9 + 10 and not [c for c in train if "synth_arm_frontend70 " in c]
    assert train[0] == (f"train.py -m experiment=synth_arm_frontend70_long hydra.sweep.dir={work}/runs/arms/frontend70_long "
                        "pe=none seed=0")
    assert train[9] == f"train.py -m experiment=synth_arm_conformer hydra.sweep.dir={work}/runs/arms/conformer pe=none seed=0"
    # checked before any stage runs: stage 2's runs are not trained either
    proc, calls, _, _ = _lane(tmp_path / "typo", with_code=False, stages=("2", "5"), extra=("--arms", "conformr"))
    assert proc.returncode == 2 and "no arm conformr" in proc.stdout
    assert not [c for c in calls if c.startswith("train.py")]


def test_stage_5_runs_only_the_seeds_it_is_given_so_two_lanes_can_share_an_arm(tmp_path):
    proc, calls, _, work = _lane(tmp_path, with_code=False, stages=("5", "5"),
                                 extra=("--arms", "conformer", "--seeds", "1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    train = [c for c in calls if c.startswith("train.py")]
    assert [c.rsplit(" ", 2)[1:] for c in train] == [[f"pe={pe}", "seed=1"]
                                                      for pe in ("none", "sinusoidal", "rope", "relative", "cape")]
    # a seed the arm does not have is refused before anything runs
    proc, calls, _, _ = _lane(tmp_path / "typo", with_code=False, stages=("5", "5"),
                              extra=("--arms", "conformer", "--seeds", "2"))
    assert proc.returncode == 2 and "--seeds: arm conformer has seeds 0 1, not 2" in proc.stdout
    assert not [c for c in calls if c.startswith("train.py")]


def test_the_attention_summary_reads_the_share_per_set(tmp_path):
    run = tmp_path / "none_ctc_s0"
    (run / "attention_stats").mkdir(parents=True)
    (run / "attention_stats" / "attention_stats.csv").write_text(
        "test_set,bucket,utt,duration,frames,layer,head,mean_distance_s,entropy,norm_entropy,local_mass\n"
        "ladder_test_alone,2-4,u1,2.0,50,0,0,0.6,3.3,0.85,0.5\n"
        "ladder_test_alone,2-4,u1,2.0,50,0,1,0.6,3.3,0.85,0.3\n"
        "ladder_test_gap500ms_160,128-256,u2,192.0,4800,0,0,60.0,8.0,0.9,0.01\n")
    assert backlog.attention_summary(run) == "none_ctc_s0: local share alone 40.0 %, gap500ms_160 1.0 %"
    staged = backlog.stage(_write_out(STUDY / "seeds", "rope_ctc_s4", tmp_path / "runs"), tmp_path / "archive")
    assert not (staged / "attention_stats").exists()


def subprocess_log(repo) -> list[str]:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True,
                          check=True).stdout.splitlines()


def test_stage_7_chooses_on_seed_2_s_dev_rungs_and_trains_the_choice_at_seeds_3_and_4(tmp_path):
    proc, calls, repo, work = _lane(tmp_path, with_code=True, stages=("7", "7"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs, ladder = f"{work}/runs/finetune160", tmp_path / "synth_ladder" / "3b1c23b1774d"
    train = [c for c in calls if c.startswith("train.py")]
    trained = [next(a.split("=", 1)[1].rsplit("/", 1)[1] for a in c.split() if a.startswith("run_dir=")) for c in train]
    grid = [f"{m}_ft160_lr{lr}_st{st}_ctc_s2" for m in ("rope", "rope_pi", "rope_yarn_b10", "rope_yarn_b32", "rope_shortft")
            for lr in ("3e-4", "1e-3") for st in ("100", "300")]
    # seed 2: its source once (then remembered), the 20 grid runs, the 5 chosen again (resume=auto: a
    # finished training is not trained again), the yardstick; seeds 3 and 4: source, the 5 choices, yardstick
    chosen = [f"{m}_ft160_lr3e-4_st100_ctc_s{{}}" for m in ("rope", "rope_pi", "rope_yarn_b10", "rope_yarn_b32", "rope_shortft")]
    assert trained == (["source_rope_ctc_s2"] + grid + [c.format(2) for c in chosen] + ["rope_yardstick160_ctc_s2"]
                       + [r for s in (3, 4) for r in [f"source_rope_ctc_s{s}"] + [c.format(s) for c in chosen]
                          + [f"rope_yardstick160_ctc_s{s}"]])
    assert train[0] == (f"train.py experiment=synth_study pe=rope seed=2 run_dir={runs}/source_rope_ctc_s2 "
                        "eval_after_train=false resume=auto")
    pi3 = train[trained.index("rope_pi_ft160_lr3e-4_st100_ctc_s3")]
    assert pi3 == (f"train.py experiment=synth_finetune160 init_from={runs}/source_rope_ctc_s3 seed=3 optim.lr=3e-4 "
                   "trainer.max_steps=100 arm=rope_pi_lr3e-4_st100 pe=rope_pi pe.attention.scaling.target_seconds=160 "
                   f"run_dir={runs}/rope_pi_ft160_lr3e-4_st100_ctc_s3 eval_after_train=false resume=auto")
    assert "data.concat_max_seconds=null" in train[trained.index("rope_shortft_ft160_lr1e-3_st300_ctc_s2")]
    assert "pe.attention.scaling.beta=32" in train[trained.index("rope_yarn_b32_ft160_lr1e-3_st100_ctc_s2")]
    assert train[-1] == (f"train.py experiment=synth_yardstick160 pe=rope seed=4 run_dir={runs}/rope_yardstick160_ctc_s4 "
                         "eval_after_train=false resume=auto")
    dev = f"data.test=[{ladder}/ladder_dev_gap500ms_160.jsonl,{ladder}/ladder_dev_nogap_160.jsonl]"
    decodes = [c for c in calls if c.startswith("evaluate.py")]
    assert f"evaluate.py run={runs}/rope_pi_ft160_lr3e-4_st100_ctc_s2 {dev}" in decodes
    # the continuation control and the source are decoded with each window on dev, and on test plainly and
    # with the window chosen
    assert [c for c in decodes if c.split()[1] == f"run={runs}/rope_shortft_ft160_lr1e-3_st300_ctc_s2"] == [
        f"evaluate.py run={runs}/rope_shortft_ft160_lr1e-3_st300_ctc_s2 {dev} eval.remedy=window:2.5",
        f"evaluate.py run={runs}/rope_shortft_ft160_lr1e-3_st300_ctc_s2 {dev} eval.remedy=window:5"]
    assert [c for c in decodes if c.split()[1] == f"run={runs}/source_rope_ctc_s3"] == [
        f"evaluate.py run={runs}/source_rope_ctc_s3", f"evaluate.py run={runs}/source_rope_ctc_s3 eval.remedy=window:2.5"]
    assert not [c for c in decodes if "_s3 " in c + " " and "ladder_dev" in c]   # seeds 3, 4 choose nothing
    chooses = [c for c in calls if " choose " in c]
    assert len(chooses) == 6 and chooses[0].split()[3:6] == [
        "source_rope_ctc_s2@window:2.5", "source_rope_ctc_s2@window:5", "--sets"]
    assert chooses[-1].split()[3:12] == [f"rope_shortft_ft160_lr{lr}_st{st}_ctc_s2@window:{w}"
                                         for lr in ("3e-4", "1e-3") for st in ("100", "300") for w in ("2.5", "5")] + ["--sets"]
    reports = repo / "recipes/synth/study/finetune160/reports"
    assert sorted(p.name for p in reports.iterdir()) == sorted(
        f"choice_{m}_s2.json" for m in ("source", "rope", "rope_pi", "rope_yarn_b10", "rope_yarn_b32", "rope_shortft"))
    log = subprocess_log(repo)
    # each run archived and committed when done: seed 2's 20 grid runs and its source with their dev sets,
    # then each seed's source, 5 chosen fine-tunes and yardstick with their test sets; each source's
    # weights once trained, before any fine-tune of it
    assert len(log) == 1 + 21 + 3 * 7 + 3 and log[-1] == "start"
    weights = [i for i, m in enumerate(log) if "'s weights archived" in m]
    assert [log[i] for i in weights] == [f"issue 48 point 4: finetune160, source_rope_ctc_s{s}'s weights archived "
                                         f"(sources/source_rope_ctc_s{s}: a later session fine-tunes them)" for s in (4, 3, 2)]
    assert weights[2] == len(log) - 2 and log[weights[1] - 1] == (
        "issue 48 point 4: finetune160, source_rope_ctc_s3 on test and the long-form set (plain and window:2.5)")
    assert log[-3] == ("issue 48 point 4: finetune160, rope_ft160_lr3e-4_st100_ctc_s2 trained, on the dev ladder's "
                       "160 s rungs")
    assert log[0] == "issue 48 point 4: finetune160, rope_yardstick160_ctc_s4 on test and the long-form set"
    assert log[-24] == ("issue 48 point 4: finetune160, source_rope_ctc_s2 on test and the long-form set "
                        "(plain and window:2.5)")
    assert [c for c in calls if " export-source " in c] == [
        f"recipes/synth/study/backlog.py export-source {runs}/source_rope_ctc_s{s} "
        f"{repo}/recipes/synth/study/finetune160/sources/source_rope_ctc_s{s}" for s in (2, 3, 4)]
    import subprocess
    tracked = subprocess.run(["git", "-C", str(repo), "ls-files", "recipes/synth/study/finetune160/reports"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert sorted(tracked) == sorted(f"recipes/synth/study/finetune160/reports/{p.name}" for p in reports.iterdir())
    tracked = subprocess.run(["git", "-C", str(repo), "ls-files", "recipes/synth/study/finetune160/sources"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert tracked == [f"recipes/synth/study/finetune160/sources/source_rope_ctc_s{s}/{f}"
                       for s in (2, 3, 4) for f in ("checkpoints/best.ckpt", "source.json")]


def test_stage_7_stops_when_a_source_trained_again_is_not_the_one_its_archived_fine_tunes_started_from(tmp_path):
    proc, calls, repo, work = _lane(tmp_path, with_code=True, stages=("7", "7"), extra=("--ft_seeds", "2"),
                                    env_extra={"FAKE_SAME_SOURCE_FAILS": "1"})
    assert proc.returncode == 1
    assert ("finetune160/source_rope_ctc_s2: NOT the source the archived fine-tunes started from" in proc.stdout
            and "; stopped" in proc.stdout)
    runs = f"{work}/runs/finetune160"
    assert [c for c in calls if " same-source " in c] == [
        f"recipes/synth/study/backlog.py same-source {repo}/recipes/synth/study/finetune160 {runs}/source_rope_ctc_s2"]
    train = [c for c in calls if c.startswith("train.py")]
    assert len(train) == 1 and f"run_dir={runs}/source_rope_ctc_s2 " in train[0]   # the source, no fine-tune of it
    assert subprocess_log(repo) == ["start"]


def test_the_source_check_compares_the_checkpoint_s_bytes_with_what_each_archived_fine_tune_names(tmp_path):
    """`same-source` on the archived finetune160 table: its fine-tunes of source_rope_ctc_s2 name that run's
    best.ckpt by digest; a checkpoint of other bytes is named for every one of them, a table whose runs name
    this checkpoint's digest passes, and runs of another source are not compared."""
    import hashlib
    import lzma

    from asr_pe.results_table import read_table, table_of

    study = STUDY / "finetune160"
    # the source itself is archived beside its fine-tunes, trained from scratch: no init_from
    archived = {run: next(r["data"].get("init_from") for r in rows if r["path"] == "run_info.json")
                for run, rows in read_table(table_of(study)).items()}
    assert archived.get("source_rope_ctc_s2", "absent") is None
    fine_tunes = sorted(r for r, init in archived.items() if init and init["run"].endswith("/source_rope_ctc_s2"))
    assert len(fine_tunes) >= 4
    source = tmp_path / "runs" / "source_rope_ctc_s2"
    (source / "checkpoints").mkdir(parents=True)
    (source / "checkpoints" / "best.ckpt").write_bytes(b"other weights")
    bad = backlog.same_source(study, source)
    assert [line.split()[0] for line in bad] == fine_tunes
    assert backlog.main(["same-source", str(study), str(source)]) == 1
    # the same check on a table whose runs started from these bytes, beside a fine-tune of another source
    digest = hashlib.sha256(b"other weights").hexdigest()
    dest = tmp_path / "dest"
    dest.mkdir()
    rows = [{"run": run, "path": "run_info.json", "kind": "json",
             "data": {"init_from": {"run": f"/elsewhere/{src}", "name": "best.ckpt", "sha256": sha, "global_step": 1}}}
            for run, src, sha in (("a_ft", "source_rope_ctc_s2", digest), ("b_ft", "source_rope_ctc_s3", "0" * 64))]
    with lzma.open(dest / "results.jsonl.xz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    assert backlog.same_source(dest, source) == []
    assert backlog.same_source(dest, tmp_path / "runs" / "source_rope_ctc_s3") == [
        f"b_ft started from source_rope_ctc_s3/checkpoints/best.ckpt sha256 000000000000, "
        f"{tmp_path}/runs/source_rope_ctc_s3/checkpoints/best.ckpt is missing"]
    assert backlog.same_source(tmp_path / "no_table", source) == []


def test_the_source_check_compares_weights_where_the_record_has_their_digest(tmp_path):
    """A source trained again in another work folder is another file (its callbacks name the folder):
    a record with ``weights_sha256`` passes it on the weights and fails other weights; a record with the
    file's digest only fails it, and the message names the folder to train the source in."""
    import lzma

    import torch

    from asr_pe.evaluation.provenance import file_sha256, weights_sha256

    weights = {"w": torch.randn(5, 2)}

    def source(folder, w):
        run = tmp_path / folder / "source_rope_ctc_s3"
        (run / "checkpoints").mkdir(parents=True)
        torch.save({"state_dict": w, "callbacks": {"dirpath": str(run / "checkpoints")}}, run / "checkpoints" / "best.ckpt")
        return run

    first, again, other = source("lane4", weights), source("lane5", dict(weights)), source("lane6", {"w": torch.randn(5, 2)})
    ckpt = first / "checkpoints" / "best.ckpt"
    init = {"run": str(first), "name": "best.ckpt", "global_step": 1, "sha256": file_sha256(ckpt)}
    dest = tmp_path / "dest"
    dest.mkdir()

    def archive(record):
        with lzma.open(dest / "results.jsonl.xz", "wt") as f:
            f.write(json.dumps({"run": "ft_s3", "path": "run_info.json", "kind": "json", "data": {"init_from": record}}) + "\n")

    archive(dict(init, weights_sha256=weights_sha256(ckpt)))
    assert backlog.same_source(dest, first) == [] and backlog.same_source(dest, again) == []
    assert backlog.same_source(dest, other) == [
        f"ft_s3 started from source_rope_ctc_s3/checkpoints/best.ckpt weights_sha256 {weights_sha256(ckpt)[:12]}, "
        f"{other}/checkpoints/best.ckpt is {weights_sha256(other / 'checkpoints' / 'best.ckpt')[:12]} "
        "(training is deterministic on one machine type, not across CPU vendors)"]
    archive(init)   # an older record: the file's digest only
    assert backlog.same_source(dest, first) == []
    [line] = backlog.same_source(dest, again)
    assert line.startswith("ft_s3 started from source_rope_ctc_s3/checkpoints/best.ckpt sha256 ")
    assert line.endswith(f"(this record has the file's digest only, and the file names its run folder: train the "
                         f"source in {first}) (training is deterministic on one machine type, not across CPU vendors)")


def _finish(lane, log_dir: Path) -> tuple[int, str, list[str]]:
    out, _ = lane.communicate(timeout=300)
    calls = (log_dir / "calls.log").read_text().splitlines() if (log_dir / "calls.log").exists() else []
    return lane.returncode, out, calls


def test_stage_7_fine_tunes_a_source_s_archived_weights_in_a_later_session_and_never_trains_it_again(tmp_path):
    """The first session trains seed 2's source and archives its weights (sources/); a later one, in
    another work folder, copies those and fine-tunes them: no training of the source, no second export,
    the same-source check on the copy; run again, the copy is not trained either (resume=auto would
    train a folder without last.ckpt afresh). ``--ft_models`` keeps the lane to one method's models."""
    repo = _checkout(tmp_path / "repo", with_code=True)
    (tmp_path / "first").mkdir()
    code, out, _ = _finish(_start_lane(tmp_path / "first", repo, tmp_path / "work1", stages=("7", "7"),
                                       extra=("--ft_seeds", "2", "--ft_parts", "controls")), tmp_path / "first")
    assert code == 0, out
    archived = repo / "recipes/synth/study/finetune160/sources/source_rope_ctc_s2"
    assert (archived / "source.json").is_file()
    runs2 = f"{tmp_path}/work2/runs/finetune160"
    for again in ("second", "third"):
        (tmp_path / again).mkdir()
        code, out, calls = _finish(_start_lane(tmp_path / again, repo, tmp_path / "work2", stages=("7", "7"),
                                               extra=("--ft_seeds", "2", "--ft_parts", "controls", "--ft_models", "rope_pi")),
                                   tmp_path / again)
        assert code == 0, out
        assert ("finetune160/source_rope_ctc_s2: the weights archived in "
                "recipes/synth/study/finetune160/sources/source_rope_ctc_s2") in out if again == "second" else True
        train = [c for c in calls if c.startswith("train.py")]
        grid = [f"rope_pi_ft160_lr{lr}_st{st}_ctc_s2" for lr in ("3e-4", "1e-3") for st in ("100", "300")]
        assert [next(a.rsplit("/", 1)[1] for a in c.split() if a.startswith("run_dir=")) for c in train] == grid + grid[:1]
        assert all(f"init_from={runs2}/source_rope_ctc_s2 " in c for c in train)
        assert [c for c in calls if " same-source " in c] == [
            f"recipes/synth/study/backlog.py same-source {repo}/recipes/synth/study/finetune160 {runs2}/source_rope_ctc_s2"]
        assert not [c for c in calls if " export-source " in c]
        # the source's own dev and test decodings are another model's of this lane's: not this lane's
        assert not [c for c in calls if c.startswith("evaluate.py") and "rope_pi" not in c]
        assert (Path(runs2) / "source_rope_ctc_s2" / "source.json").is_file()


def test_the_source_s_weights_exported_are_the_checkpoint_s_alone_and_its_digest(tmp_path):
    """export-source: best.ckpt keeps the state_dict (every entry: the same weights digest) and the step,
    not the optimiser or the callbacks; the files a fine-tune reads come along; source.json says where
    from; an existing folder or a run without its files is an error, and nothing is left half-written."""
    import os

    import pytest
    import torch

    from asr_pe.evaluation.provenance import file_sha256, weights_sha256

    run = tmp_path / "runs" / "source_rope_ctc_s4"
    (run / "checkpoints").mkdir(parents=True)
    state = {"model.w": torch.randn(4, 3), "skipped_batches": torch.tensor(0)}
    torch.save({"state_dict": state, "global_step": 1015, "epoch": 7, "optimizer_states": [{"m": torch.randn(4, 3)}],
                "callbacks": {"dirpath": str(run)}}, run / "checkpoints" / "best.ckpt")
    for name in backlog._source_files():
        (run / name).write_text(f"{name}\n")
    out = tmp_path / "sources" / run.name
    out.parent.mkdir()
    record = backlog.export_source(run, out)
    ckpt = run / "checkpoints" / "best.ckpt"
    kept = torch.load(out / "checkpoints" / "best.ckpt", weights_only=True)
    assert sorted(kept) == ["epoch", "global_step", "state_dict"] and kept["global_step"] == 1015
    assert weights_sha256(out / "checkpoints" / "best.ckpt") == weights_sha256(ckpt) == record["weights_sha256"]
    assert record["from"] == {"run": str(run), "name": "best.ckpt", "global_step": 1015, "sha256": file_sha256(ckpt)}
    assert json.loads((out / "source.json").read_text()) == record and record["machine"]["cpu"]
    for name in backlog._source_files():
        assert (out / name).read_text() == f"{name}\n"
    assert os.stat(out).st_mode & 0o777 == 0o755
    with pytest.raises(SystemExit, match="exists"):
        backlog.export_source(run, out)
    (run / "cmvn.json").unlink()
    with pytest.raises(SystemExit, match=f"{run} lacks cmvn.json"):
        backlog.export_source(run, tmp_path / "sources" / "other")
    assert sorted(p.name for p in out.parent.iterdir()) == [run.name]   # no temporary folder left
    # the check of a source against its archived weights, before any fine-tune of it is archived
    dest = tmp_path / "dest"
    (dest / "sources").mkdir(parents=True)
    shutil.copytree(out, dest / "sources" / run.name)
    assert backlog.same_source(dest, run) == []
    torch.save({"state_dict": {**state, "model.w": state["model.w"] + 1e-6}}, ckpt)
    assert backlog.same_source(dest, run) == [
        f"sources/{run.name} archives weights_sha256 {record['weights_sha256'][:12]}, {ckpt} is "
        f"{weights_sha256(ckpt)[:12]} (training is deterministic on one machine type, not across CPU vendors)"]
    ckpt.unlink()
    assert backlog.same_source(dest, run) == [
        f"sources/{run.name} archives weights_sha256 {record['weights_sha256'][:12]}, {ckpt} is missing"]


def test_stage_7_refuses_a_seed_it_does_not_have(tmp_path):
    proc, calls, _, _ = _lane(tmp_path, with_code=True, stages=("7", "7"), extra=("--ft_seeds", "2,5"))
    assert proc.returncode == 2 and "error: --ft_seeds: stage 7 has seeds 2, 3, 4, not 5" in proc.stdout
    assert not [c for c in calls if c.startswith(("train.py", "evaluate.py"))]


def test_stage_7_shared_by_two_lanes_one_part_each(tmp_path):
    # the yardstick's lane trains it and nothing else: no source, no fine-tune, no choice
    proc, calls, repo, work = _lane(tmp_path / "y", with_code=True, stages=("7", "7"),
                                    extra=("--ft_seeds", "3", "--ft_parts", "yardstick"))
    assert proc.returncode == 0, proc.stdout
    assert [c for c in calls if c.startswith("train.py")] == [
        f"train.py experiment=synth_yardstick160 pe=rope seed=3 "
        f"run_dir={work}/runs/finetune160/rope_yardstick160_ctc_s3 eval_after_train=false resume=auto"]
    assert not [c for c in calls if " same-source " in c or " choose " in c]
    assert subprocess_log(repo) == [
        "issue 48 point 4: finetune160, rope_yardstick160_ctc_s3 on test and the long-form set", "start"]
    # the controls' lane without seed 2's choices: each method reports its missing choice, no yardstick
    proc, calls, repo, work = _lane(tmp_path / "c", with_code=True, stages=("7", "7"),
                                    extra=("--ft_seeds", "3,4", "--ft_parts", "controls"))
    assert proc.returncode == 1 and proc.stdout.count("stage 7: no choice for rope_pi in") == 2
    assert not [c for c in calls if c.startswith("train.py")]
    assert subprocess_log(repo) == ["start"]
    for opt, bad, why in (("--ft_parts", "transfer", "no part transfer (controls, yardstick)"),
                          ("--ft_parts", "", "none given (controls, yardstick)"),
                          ("--ft_models", "rope,alibi", "no model alibi (source, rope, rope_pi, rope_yarn_b10, "
                                                        "rope_yarn_b32, rope_shortft)"),
                          ("--ft_models", "", "none given")):
        proc, calls, _, _ = _lane(tmp_path / f"bad{opt}{bad}", with_code=True, stages=("7", "7"), extra=(opt, bad))
        assert proc.returncode == 2 and f"error: {opt}: {why}" in proc.stdout, proc.stdout
        assert not [c for c in calls if c.startswith(("train.py", "evaluate.py"))]


def test_the_dev_choice_pools_the_char_errors_of_every_set_and_takes_the_lowest(tmp_path):
    """`choose` on the archived fine-tunes: each candidate's CER is its char errors over its reference
    chars summed over the sets (recounted here from the per-utterance rows), a remedy's candidate reads
    its own folders (``@window:5``: eval/<set>_window5), and a set a candidate lacks is an error."""
    import pytest

    study = STUDY / "finetune"
    files = {run: render_run(rows) for run, rows in read_table(table_of(study)).items()}

    def recount(run, suffix=""):
        rows = [json.loads(line) for s in ("longform", "test")
                for line in files[run][f"eval/{s}{suffix}/per_utt.jsonl"].splitlines()]
        return round(100 * sum(r["char_errors"] for r in rows) / sum(r["ref_chars"] for r in rows), 3)

    cands = ["rope_finetune300_ctc_s2", "rope_finetune300_ctc_s2@window:5", "rope_pi_finetune300_ctc_s2"]
    c = backlog.choose(study, cands, ["longform", "test"])
    assert c["dev_cer"] == {"rope_finetune300_ctc_s2": recount("rope_finetune300_ctc_s2"),
                            "rope_finetune300_ctc_s2@window:5": recount("rope_finetune300_ctc_s2", "_window5"),
                            "rope_pi_finetune300_ctc_s2": recount("rope_pi_finetune300_ctc_s2")}
    assert c["chosen"] == min(c["dev_cer"], key=c["dev_cer"].get) == "rope_finetune300_ctc_s2@window:5"
    assert backlog.main(["choose", str(study), *cands[::-1], "--sets", "longform", "test",
                         "--out", str(tmp_path / "c.json")]) == 0
    assert json.loads((tmp_path / "c.json").read_text())["chosen"] == "rope_finetune300_ctc_s2@window:5"
    with pytest.raises(SystemExit, match="has no eval/longform_window2p5/buckets.csv"):
        backlog.choose(study, ["rope_finetune300_ctc_s2@window:2.5"], ["longform"])
    with pytest.raises(SystemExit, match="holds no run 'rope_ctc_s9'"):
        backlog.choose(study, ["rope_ctc_s9"], ["longform"])
    assert backlog.archived(study, "rope_finetune300_ctc_s2", table_only=True, with_set="longform_window5")
    assert not backlog.archived(study, "rope_finetune300_ctc_s2", table_only=True, with_set="longform_window2p5")


def test_stage_7_at_seeds_3_and_4_without_seed_2_s_choices_trains_only_the_yardsticks(tmp_path):
    # two lanes share stage 7: the one of seeds 3 and 4 starts before seed 2's choices exist
    proc, calls, repo, work = _lane(tmp_path, with_code=True, stages=("7", "7"), extra=("--ft_seeds", "3,4"))
    assert proc.returncode == 1 and "stage 7: no choice for rope_pi in" in proc.stdout
    train = [c for c in calls if c.startswith("train.py")]
    assert train == [f"train.py experiment=synth_yardstick160 pe=rope seed={s} "
                     f"run_dir={work}/runs/finetune160/rope_yardstick160_ctc_s{s} eval_after_train=false resume=auto"
                     for s in (3, 4)]
    assert not [c for c in calls if " choose " in c]
    assert subprocess_log(repo)[0] == "issue 48 point 4: finetune160, rope_yardstick160_ctc_s4 on test and the long-form set"
