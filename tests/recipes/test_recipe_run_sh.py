"""recipes/*/run.sh: stage selection, resumability and the exact commands each stage runs.

Stages 0-2 run for real on fixture archives/trees. Stages 3-6 (long-form, training, evaluation,
plots) run with a stand-in ``$PYTHON`` that records its arguments, so the shell logic (loops over
PEs, skip-if-done, Hydra overrides) is checked without training anything; and every stage runs
for real with a tiny model on fixture corpora whose clips are long enough for CTC.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from asr_pe.data.manifest import read_manifest

REPO = Path(__file__).resolve().parents[2]
LIBRI = REPO / "recipes" / "librispeech" / "run.sh"
TED = REPO / "recipes" / "tedlium3" / "run.sh"

# Every stand-in interpreter starts with this: `python -c` calls (recipes/python.sh's package check,
# reading a config) go to the real interpreter and are not recorded.
# The fake python answers the recipes' questions with the real one (-c snippets, and what
# remedies.py says of a remedy's suffix and the PEs it applies to); every other call is recorded.
ANSWER_C = (f'#!/usr/bin/env bash\n[ "$1" = -c ] && exec {sys.executable} "$@"\n'
            f'[ "$1 $2" = "-m asr_pe.inference.remedy_specs" ] && exec {sys.executable} "$@"\n')

FAKE_PYTHON = ANSWER_C + """# Records each call; mimics the files the real scripts would leave behind.
printf '%s\\n' "$*" >> "$FAKE_LOG"
prev=
for a in "$@"; do
  case "$prev $a" in
    "--out "*.jsonl) touch "$a" ;;         # make_longform.py --out <manifest>
    *" run_dir="*) mkdir -p "${a#run_dir=}" ;; # train.py run_dir=<run>
  esac
  prev=$a
done
"""


def run(script: Path, *args: str, python: str = sys.executable, env: dict | None = None, check: bool = True,
        timeout: int = 120):
    full_env = {**os.environ, "PYTHON": python, **(env or {})}
    proc = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, env=full_env,
                          timeout=timeout)
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


def evaluated(run_dir: Path, test_set: str, checkpoint: bytes = b"weights", name: str = "best.ckpt") -> None:
    """``eval/<test_set>`` as evaluate.py leaves it, recording a checkpoint with these bytes; the run's
    ``checkpoints/<name>`` holds them unless it exists already."""
    import hashlib
    import json

    out = run_dir / "eval" / test_set
    out.mkdir(parents=True, exist_ok=True)
    for f in ("per_utt.jsonl", "buckets.csv"):
        (out / f).write_text("done")
    record = {"name": name, "global_step": 7, "sha256": hashlib.sha256(checkpoint).hexdigest()}
    (out / "buckets.meta.json").write_text(json.dumps({"checkpoint": record}))
    ckpt = run_dir / "checkpoints" / name
    if not ckpt.exists():
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        ckpt.write_bytes(checkpoint)


def work_with_manifests(tmp_path: Path, names, content: str = "") -> tuple[Path, Path, Path]:
    """(work, manifests, runs) of a recipe's work_dir whose manifests/<name>.jsonl hold ``content``."""
    work = tmp_path / "work"
    md, runs = work / "manifests", work / "runs"
    md.mkdir(parents=True)
    for name in names:
        (md / f"{name}.jsonl").write_text(content)
    return work, md, runs


@pytest.mark.parametrize("script", [LIBRI, TED])
def test_syntax_help_and_unknown_option(script):
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    helped = run(script, "--help")
    assert "stage 4" in helped.stdout and "stage 6" in helped.stdout
    bad = run(script, "--no_such_option", "1", check=False)
    assert bad.returncode == 2 and "unknown option --no_such_option" in bad.stderr
    stray = run(script, "stage=3", check=False)
    assert stray.returncode == 2 and "unexpected argument" in stray.stderr


def test_librispeech_stages_0_to_2_from_predownloaded_archives(build, tmp_path):
    expected = build.make_librispeech_tree(tmp_path / "src")
    build.make_librispeech_archives(tmp_path / "src", tmp_path / "dl")
    work = tmp_path / "work"
    common = ["--work_dir", str(work), "--data_dir", str(tmp_path / "dl"), "--train_parts", "dev-clean",
              "--dev_parts", "dev-clean", "--test_parts", "test-clean"]
    # Checksums are on by default: fixture archives are not the official ones.
    refused = run(LIBRI, "--stage", "0", "--stop_stage", "0", *common, check=False)
    assert refused.returncode == 2 and "checksum mismatch" in refused.stderr  # the data CLI's status
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
    work, md, runs = work_with_manifests(tmp_path, ("test-clean", "test-other"))
    evaluated(runs / "rope", "test-clean")  # rope: trained+evaluated
    (runs / "rope" / "eval" / "done.json").write_text('{"test_sets": ["test-clean"]}')
    # cape: killed while train.py evaluated it (a set scored, no done.json): stage 4 runs it again
    evaluated(runs / "cape", "test-clean")
    args = ["--stage", "3", "--stop_stage", "6", "--work_dir", str(work), "--pes", "none rope cape",
            "--extra", "trainer.max_steps=2 trainer.accelerator=cpu"]
    run(LIBRI, *args, python=python, env={"FAKE_LOG": str(log)})
    got = calls(log)
    lf = [c for c in got if "make_longform.py" in c]
    assert lf == [
        f"{REPO}/scripts/make_longform.py --manifest {md}/{p}.jsonl --out {md}/{p}_long.jsonl "
        "--durations 10 20 40 80 160"
        for p in ("test-clean", "test-other")
    ]
    train = [c for c in got if "train.py" in c]
    assert train == [
        f"{REPO}/train.py experiment=cape_librispeech pe={pe} run_dir={runs}/{pe} resume=auto "
        f"data.corpus.manifest_dir={md} data.corpus.train=['train-clean-100','train-clean-360','train-other-500'] "
        f"data.corpus.dev=['dev-clean','dev-other'] data.corpus.test=['test-clean','test-other'] "
        f"trainer.max_steps=2 trainer.accelerator=cpu"
        for pe in ("none", "cape")
    ]  # rope skipped: its eval/done.json exists
    ev = [c for c in got if "evaluate.py" in c]
    sets = ["test-clean", "test-clean_long", "test-other", "test-other_long"]

    def hydra_list(names):
        return "[" + ",".join(f"'{md}/{s}.jsonl'" for s in names) + "]"

    # every set to evaluate.py with reuse=true: what this checkpoint scored with these settings
    # (rope's test-clean) is read back there, not decided here
    assert ev == [f"{REPO}/evaluate.py run={runs}/{pe} data.test={hydra_list(sets)} reuse=true"
                  for pe in ("none", "rope", "cape")]
    plots = [c for c in got if "plot_wer_vs_length.py" in c]
    # a long-form set's relative degradation is against the set it was built from (its own buckets all
    # lie past the training lengths: without a reference the table said "n/a")
    reference = {"test-clean_long": " --reference-set test-clean", "test-other_long": " --reference-set test-other"}
    assert plots == [
        f"{REPO}/scripts/plot_wer_vs_length.py {runs}/none {runs}/rope {runs}/cape --test-set {s} --metric wer"
        f"{reference.get(s, '')} --out {work}/plots/{s}"
        for s in sets
    ]
    assert [c for c in got if "plot_corpus_figure.py" in c] == [
        f"{REPO}/scripts/plot_corpus_figure.py {runs}/none {runs}/rope {runs}/cape --test-sets {' '.join(sets)} "
        f"--metric wer --out {work}/plots/wer_vs_length_all.png"]
    # the headline measure: one table of every long-form set's in-context ratio per PE
    assert [c for c in got if "in_context_table.py" in c] == [
        f"{REPO}/scripts/in_context_table.py {runs}/none {runs}/rope {runs}/cape --pair test-clean_long test-clean "
        f"--pair test-other_long test-other --metric wer --out {work}/plots/in_context_wer.md"]
    # Re-running stage 3 does nothing: every long-form manifest exists.
    log.unlink()
    run(LIBRI, "--stage", "3", "--stop_stage", "3", "--work_dir", str(work), python=python, env={"FAKE_LOG": str(log)})
    assert calls(log) == []


def test_stage_5_hands_every_set_to_evaluate_py_with_reuse_with_or_without_other_settings(fake_python, tmp_path):
    """Results record the settings they were decoded with, which only evaluate.py can compare: every
    set goes to it with reuse=true (a set with this checkpoint and these settings is read back, any
    other decoded). A call without --eval_extra after one with it must not take the beam numbers for
    the run's own decoding: the old stage asked the checkpoint alone, found every set "evaluated
    from the current checkpoint" and called nothing."""
    python, log = fake_python
    work, md, runs = work_with_manifests(tmp_path, ("test-clean", "test-clean_long"))
    evaluated(runs / "rope", "test-clean")
    evaluated(runs / "rope", "test-clean_long")
    sets = f"data.test=['{md}/test-clean.jsonl','{md}/test-clean_long.jsonl']"
    out = run(LIBRI, "--stage", "5", "--stop_stage", "5", "--work_dir", str(work), "--pes", "rope",
              "--eval_extra", "decode.method=beam device=cpu", python=python, env={"FAKE_LOG": str(log)})
    assert calls(log) == [f"{REPO}/evaluate.py run={runs}/rope {sets} reuse=true decode.method=beam device=cpu"]
    assert "rope: evaluate test-clean test-clean_long with decode.method=beam device=cpu" in out.stdout
    log.unlink()  # without other settings: evaluate.py again, which decodes what beam search replaced
    run(LIBRI, "--stage", "5", "--stop_stage", "5", "--work_dir", str(work), "--pes", "rope",
        python=python, env={"FAKE_LOG": str(log)})
    assert calls(log) == [f"{REPO}/evaluate.py run={runs}/rope {sets} reuse=true"]


def test_tedlium_stage_5_evaluates_segments_long_form_and_full_talks(fake_python, tmp_path):
    python, log = fake_python
    work, md, runs = work_with_manifests(tmp_path, ("dev", "dev_talks", "test", "test_talks", "test_long"),
                                         '{"audio_filepath": "a.sph", "duration": 1.0, "text": "a"}\n')
    (runs / "cape").mkdir(parents=True)
    run(TED, "--stage", "5", "--stop_stage", "5", "--work_dir", str(work), "--pes", "cape",
        python=python, env={"FAKE_LOG": str(log)})
    sets = ["dev", "dev_talks", "test", "test_long", "test_talks"]
    listed = ",".join(f"'{md}/{s}.jsonl'" for s in sets)
    assert calls(log) == [f"{REPO}/evaluate.py run={runs}/cape data.test=[{listed}] reuse=true"]
    # a missing run is an error that names the stage to run
    failed = run(TED, "--stage", "5", "--stop_stage", "5", "--work_dir", str(work), "--pes", "rope",
                 python=python, env={"FAKE_LOG": str(log)}, check=False)
    assert failed.returncode == 1 and "run stage 4" in failed.stderr


# The real runs below are the recipes' smoke runs (run.sh --smoke: conf/experiment/*_smoke.yaml) on
# fixtures whose audio spells the transcripts, shortened to what the fixture needs to learn.
SMOKE_EXTRA = "trainer.max_steps=150 trainer.enable_progress_bar=false"
# One intra-op thread: on a machine shared with other tests and jobs, torch's OpenMP threads spin
# and wait on each other (a smoke step took 5-8 s with 2 threads on 2 busy cores, 0.4-0.9 s with 1).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _assert_learned(run_dir: Path, test_set: str, max_cer: float) -> None:
    """The smoke run learned: its training loss fell, and CER on the unseen test set is far below
    100 % (an empty or random output scores about 100 %)."""
    import csv

    from asr_pe.evaluation.buckets import read_bucket_csv

    rows = {r["bucket"]: r for r in read_bucket_csv(run_dir / "eval" / test_set / "buckets.csv")}
    assert rows["all"]["cer"] < max_cer, (test_set, rows["all"])
    (metrics,) = run_dir.glob("logs/**/metrics.csv")
    losses = [float(r["train/loss"]) for r in csv.DictReader(metrics.open()) if r.get("train/loss")]
    assert len(losses) >= 4 and sum(losses[-2:]) / 2 < 0.5 * sum(losses[:2]) / 2, losses


def _assert_runs_evaluated_and_plotted(work: Path, pes: list[str], sets: list[str]) -> None:
    for pe in pes:
        run_dir = work / "runs" / pe
        assert (run_dir / "checkpoints" / "last.ckpt").exists(), pe
        for s in sets:
            per_utt = (run_dir / "eval" / s / "per_utt.jsonl").read_text().splitlines()
            # every utterance of the test manifest is scored: none silently lost
            assert len(per_utt) == len(read_manifest(work / "manifests" / f"{s}.jsonl")), (pe, s)
            assert (run_dir / "eval" / s / "buckets.csv").exists(), (pe, s)
    for s in sets:
        assert {p.name for p in (work / "plots" / s).iterdir()} >= {
            "wer_vs_length.png", "wer_vs_length.csv", "wer_vs_length.md"}, s
    # the natural sets (not _long, not _talks) also in the CAPE paper's 5 s bins, every PE in the table
    for s in (s for s in sets if not s.endswith(("_long", "_talks"))):
        import csv as _csv

        rows = list(_csv.DictReader((work / "plots" / s / "natural_bins.csv").open()))
        assert (work / "plots" / s / "natural_bins.png").stat().st_size > 10_000, s
        assert {r["label"] for r in rows} == {f"{pe}/ctc" for pe in pes} and {r["metric"] for r in rows} == {"wer", "cer"}
    # the study's figure: a panel per set, a line per PE; its CSV holds every plotted point
    import csv

    assert (work / "plots" / "wer_vs_length_all.png").stat().st_size > 10_000
    points = list(csv.DictReader((work / "plots" / "wer_vs_length_all.csv").open()))
    assert {(r["pe"], r["test_set"]) for r in points} == {(pe, s) for pe in pes for s in sets}


# The top-level files every official LibriSpeech archive holds beside LibriSpeech/<part>/
# (https://www.openslr.org/12: BOOKS.TXT, CHAPTERS.TXT, LICENSE.TXT, README.TXT, SPEAKERS.TXT;
# ';'-comment headers and '|'-separated columns, as in the release).
LIBRISPEECH_TOP_FILES = {
    "SPEAKERS.TXT": "; Some speaker IDs are not in use\n;ID  |SEX| SUBSET           |MINUTES| NAME\n"
                    "84   | F | dev-clean        |  8.02 | Christie Nowak\n"
                    "174  | M | dev-clean        |  8.04 | Peter Eastman\n"
                    "1089 | M | test-clean       |  8.01 | Mr. Worldwide\n",
    "CHAPTERS.TXT": ";ID    |READER|MINUTES| SUBSET           | PROJ.|BOOK ID| CH. TITLE | PROJECT TITLE\n"
                    "121123|    84| 16.28| dev-clean        | 10020|   158 | Chapter 1 | Emma\n",
    "BOOKS.TXT": ";ID    |BOOK TITLE\n158   | Emma\n",
    "LICENSE.TXT": "Creative Commons Attribution 4.0 International License\n",
    "README.TXT": "LibriSpeech ASR corpus\n",
}


def _official_librispeech_archive(tree: Path, part: str, out: Path) -> bytes:
    import tarfile

    for name, text in LIBRISPEECH_TOP_FILES.items():
        (tree / "LibriSpeech" / name).write_text(text)
    with tarfile.open(out, "w:gz") as tar:
        for name in LIBRISPEECH_TOP_FILES:
            tar.add(tree / "LibriSpeech" / name, arcname=f"LibriSpeech/{name}")
        tar.add(tree / "LibriSpeech" / part, arcname=f"LibriSpeech/{part}")
    return out.read_bytes()


def _mtimes(root: Path, patterns: tuple[str, ...]) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for pat in patterns for p in root.rglob(pat)}


@pytest.mark.slow
def test_librispeech_stages_0_to_6_download_to_plots_then_a_rerun_redoes_nothing(build, tmp_path, http_server):
    """Every stage with the real Python: stage 0 downloads the official-layout archives from a
    local HTTP mirror and verifies them against the mirror's md5sum.txt, then extract, prepare,
    long-form, train two PEs, evaluate short + long-form, plot; a second call redoes nothing."""
    import hashlib

    build.make_librispeech_tree(tmp_path / "src", build.SMOKE_LIBRISPEECH_LAYOUT, seconds_per_char=0.07, spelled=True)
    sums = []
    for part in ("dev-clean", "test-clean"):
        body = _official_librispeech_archive(tmp_path / "src", part, tmp_path / f"{part}.tar.gz")
        http_server.files[f"/resources/12/{part}.tar.gz"] = body
        sums.append(f"{hashlib.md5(body).hexdigest()}  {part}.tar.gz\n")
    http_server.files["/resources/12/md5sum.txt"] = "".join(sums).encode()
    work = tmp_path / "work"
    args = ["--work_dir", str(work), "--mirror", http_server.url("/resources/12"),
            "--checksums", http_server.url("/resources/12/md5sum.txt"),
            "--train_parts", "dev-clean", "--dev_parts", "dev-clean", "--test_parts", "test-clean",
            "--longform_durations", "[8]", "--pes", "none rope", "--smoke", "--extra", SMOKE_EXTRA]
    out = run(LIBRI, *args, timeout=900, env=ONE_THREAD)
    assert "experiment=cape_librispeech_smoke" in out.stdout
    assert "stages 0..6 done" in out.stdout
    fetched = [path for path, _ in http_server.requests if path.endswith(".tar.gz")]
    assert sorted(fetched) == ["/resources/12/dev-clean.tar.gz", "/resources/12/test-clean.tar.gz"]
    assert "verifying md5" in out.stderr
    long_form = read_manifest(work / "manifests" / "test-clean_long.jsonl")
    assert long_form and all(u.duration > 5.0 for u in long_form)  # both test utterances joined
    _assert_runs_evaluated_and_plotted(work, ["none", "rope"], ["test-clean", "test-clean_long"])
    for pe in ("none", "rope"):
        _assert_learned(work / "runs" / pe, "test-clean", max_cer=40.0)
    # stage 4 trained on the parts given to run.sh, not the config's 960 h default, and validated on a
    # chapter held out of dev-clean (its third), not on the utterances it trained on
    config = (work / "runs" / "none" / "config.yaml").read_text()
    assert "- dev-clean_fit" in config and "- dev-clean_heldout" in config and "train-clean-100" not in config
    held = read_manifest(work / "manifests" / "dev-clean_heldout.jsonl")
    fit = read_manifest(work / "manifests" / "dev-clean_fit.jsonl")
    assert {u.speaker for u in held} == {"251-136532"} and len(fit) == 16
    assert not {u.id for u in held} & {u.id for u in fit}
    # stage 5 evaluated the long-form set with the set it was built from: its in-context ratio, per PE
    # and in stage 6's table; the long set's relative degradation is against test-clean's buckets
    for pe in ("none", "rope"):
        record = json.loads((work / "runs" / pe / "eval" / "test-clean_long" / "in_context.json").read_text())
        assert record["alone_set"] == "test-clean" and record["rows"], pe
    table = (work / "plots" / "in_context_wer.md").read_text()
    assert all(f"| test-clean_long | test-clean | {pe} |" in table for pe in ("none", "rope")), table
    degradation = (work / "plots" / "test-clean_long" / "wer_vs_length.md").read_text()
    assert "| test-clean: " in degradation and "n/a" not in degradation, degradation

    # A second call: nothing downloaded, extracted, prepared, trained or evaluated again.
    kept = _mtimes(work, ("*.jsonl", "*.ckpt", "buckets.csv", ".*.extracted"))
    requests = len(http_server.requests)
    again = run(LIBRI, *args, timeout=300, env=ONE_THREAD)
    assert len(http_server.requests) == requests, "stage 0 downloaded again"
    assert "already downloaded" in again.stdout
    assert "none: done" in again.stdout and again.stdout.count("decoded 0 sets, reused 2") == 2
    assert _mtimes(work, ("*.jsonl", "*.ckpt", "buckets.csv", ".*.extracted")) == kept

    # the CAPE paper's rate ladders on the trained runs (stages 5-6, --rate_axes): the natural set at
    # every rung of both axes, every utterance scored at every rung, and each ladder drawn
    from asr_pe.evaluation.rate_ladder import DEFAULT_HOPS, DEFAULT_TEMPOS

    run(LIBRI, *args, "--stage", "5", "--stop_stage", "6", "--rate_axes", "tempo hop_ms", timeout=900, env=ONE_THREAD)
    ids = sorted(u.id for u in read_manifest(work / "manifests" / "test-clean.jsonl"))
    for pe in ("none", "rope"):
        rungs = [d for d in (work / "runs" / pe / "eval").iterdir() if d.name.startswith("test-clean_")
                 and not d.name.startswith("test-clean_long")]
        # the rungs other than rate 1 and the run's own 10 ms hop, which are the plain eval/test-clean
        assert len(rungs) == len(DEFAULT_TEMPOS) - 1 + len(DEFAULT_HOPS) - 1, sorted(d.name for d in rungs)
        for rung in rungs:
            scored = sorted(json.loads(x)["id"] for x in (rung / "per_utt.jsonl").read_text().splitlines())
            assert scored == ids, (pe, rung.name)
    for axis, values in (("tempo", DEFAULT_TEMPOS), ("hop_ms", DEFAULT_HOPS)):
        import csv as _csv

        rows = list(_csv.DictReader((work / "plots" / "test-clean" / f"rate_{axis}.csv").open()))
        assert {(r["label"], float(r["value"])) for r in rows} >= {(f"{pe}/ctc", float(v)) for pe in ("none", "rope")
                                                                    for v in values}, rows[:3]
        assert (work / "plots" / "test-clean" / f"rate_{axis}.png").stat().st_size > 10_000

    # a corrupt download is refused by the mirror's checksums, naming the archive
    http_server.files["/resources/12/test-clean.tar.gz"] = b"not a tar file"
    bad = run(LIBRI, "--stage", "0", "--stop_stage", "0", "--work_dir", str(tmp_path / "w2"),
              "--mirror", http_server.url("/resources/12"), "--checksums", http_server.url("/resources/12/md5sum.txt"),
              "--train_parts", "test-clean", "--dev_parts", "test-clean", "--test_parts", "test-clean", check=False)
    assert bad.returncode == 2 and "test-clean.tar.gz" in bad.stderr and "checksum" in bad.stderr


# A tiny CAPE-configured model (post-LN Transformer, Conv1d front end, CTC) for a training that is
# stopped, not judged by what it learns.
TINY_RECIPE = ("trainer=cpu trainer.precision=32-true trainer.max_steps=3 trainer.log_every_n_steps=1 "
               "trainer.enable_model_summary=false encoder.d_model=32 encoder.n_heads=2 encoder.n_layers=1 encoder.ffn_dim=64 "
               "optim.warmup_steps=2 data.max_batch_seconds=30 data.num_workers=0 data.train_max_duration=null "
               "checkpoint.every_n_train_steps=2 eval.n_boot=20")


@pytest.mark.slow
def test_a_training_stopped_by_sigterm_stops_the_recipe_before_any_evaluation(build, tmp_path):
    """SIGTERM to stage 4's train.py (what a cluster sends): run.sh stops with its exit code 143
    instead of going on to evaluate a half-trained model in stage 5."""
    import signal
    import time

    build.make_librispeech_tree(tmp_path / "src", seconds_per_char=0.06)
    work = tmp_path / "work"
    extra = TINY_RECIPE.replace("trainer.max_steps=3", "trainer.max_steps=100000") + " +trainer.limit_val_batches=0"
    proc = subprocess.Popen(
        ["bash", str(LIBRI), "--stage", "2", "--stop_stage", "6", "--work_dir", str(work), "--corpus_dir",
         str(tmp_path / "src"), "--train_parts", "dev-clean", "--dev_parts", "dev-clean", "--test_parts",
         "test-clean", "--longform_durations", "[6]", "--pes", "none", "--extra", extra],
        env={**os.environ, "PYTHON": sys.executable}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last = work / "runs" / "none" / "checkpoints" / "last.ckpt"
    try:
        deadline = time.monotonic() + 600
        while not last.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "stage 4 wrote no checkpoint within 600 s"
            time.sleep(0.2)
        # the train.py child of run.sh (found by its parent pid; only that process is signalled)
        children = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == proc.pid
                    and b"train.py" in _cmdline(p)]
        assert len(children) == 1, children
        os.kill(children[0], signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, out[-2000:] + err[-3000:]
    assert "error: training stopped by SIGTERM" in err and "stage 5" not in out
    assert not (work / "runs" / "none" / "eval").exists()


def _parent(proc_dir: Path) -> int | None:
    try:
        return int((proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(proc_dir: Path) -> bytes:
    try:
        return (proc_dir / "cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.slow
def test_tedlium_stages_0_to_6_download_to_plots_then_a_rerun_redoes_nothing(build, tmp_path, http_server):
    """Stage 0 downloads the official-layout TEDLIUM_release-3.tgz (SPH + STM with
    inter_segment_gap and ignore lines, legacy/ links into data/, an 88.6 s talk) from a local
    HTTP mirror and verifies it against the mirror's sha256 list; extract, prepare segments and
    full talks, long-form, train, evaluate every set (whole talks included), plot; a second call
    redoes nothing."""
    import hashlib

    build.make_tedlium_tree(tmp_path / "corpus", spelled=True)
    body = build.make_tedlium_archive(tmp_path / "corpus", tmp_path / "dl").read_bytes()
    http_server.files["/resources/51/TEDLIUM_release-3.tgz"] = body
    http_server.files["/resources/51/sha256sum.txt"] = (
        f"{hashlib.sha256(body).hexdigest()}  TEDLIUM_release-3.tgz\n".encode())
    work = tmp_path / "work"
    args = ["--work_dir", str(work), "--mirror", http_server.url("/resources/51"),
            "--checksums", http_server.url("/resources/51/sha256sum.txt"),
            "--longform_durations", "[5]", "--pes", "cape", "--test_splits", "dev test", "--smoke",
            # the fixture's dev talks are short: its train talks too, so that the model hears every letter
            # (the dev talk held out for validation stays out: dev_fit is trained on, dev_heldout validates)
            "--train_splits", "train dev", "--extra", SMOKE_EXTRA]
    out = run(TED, *args, timeout=900, env=ONE_THREAD)
    assert "stages 0..6 done" in out.stdout and "experiment=cape_tedlium3_smoke" in out.stdout
    assert [p for p, _ in http_server.requests if p.endswith(".tgz")] == ["/resources/51/TEDLIUM_release-3.tgz"]
    sets = sorted(p.name for p in (work / "runs" / "cape" / "eval").iterdir() if p.is_dir())
    assert sets == ["dev", "dev_long", "dev_talks", "test", "test_long", "test_talks"], sets
    _assert_runs_evaluated_and_plotted(work, ["cape"], sets)
    talks = read_manifest(work / "manifests" / "test_talks.jsonl")
    assert max(u.duration for u in talks) > 80.0, "the whole-talk set lost its long talk"
    _assert_learned(work / "runs" / "cape", "test", max_cer=40.0)
    # validated on the dev talk held out of training (train talks + dev_fit trained on)
    config = (work / "runs" / "cape" / "config.yaml").read_text()
    assert "- dev_fit" in config and "- dev_heldout" in config
    assert {u.speaker for u in read_manifest(work / "manifests" / "dev_heldout.jsonl")} == {"MariaLopez_2010"}
    # every long-form set (built segments and whole talks) has its in-context ratio, in stage 6's table too
    table = (work / "plots" / "in_context_wer.md").read_text()
    for split in ("dev", "test"):
        for long_set in (f"{split}_long", f"{split}_talks"):
            record = json.loads((work / "runs" / "cape" / "eval" / long_set / "in_context.json").read_text())
            assert record["alone_set"] == split, long_set
            assert f"| {long_set} | {split} | cape |" in table, table

    kept = _mtimes(work, ("*.jsonl", "*.ckpt", "buckets.csv", ".*.extracted"))
    requests = len(http_server.requests)
    again = run(TED, *args, timeout=300, env=ONE_THREAD)
    assert len(http_server.requests) == requests, "stage 0 downloaded again"
    assert "already downloaded" in again.stdout and "cape: done" in again.stdout
    assert _mtimes(work, ("*.jsonl", "*.ckpt", "buckets.csv", ".*.extracted")) == kept


SYNTH = REPO / "recipes" / "synth" / "run.sh"


def test_synth_stage_2_runs_one_process_per_run_seed_major_sharing_the_cores(tmp_path):
    cores = len(os.sched_getaffinity(0))  # what nproc reports
    per_job = str(max(1, cores // 2))
    exe = tmp_path / "fake_python"
    exe.write_text(ANSWER_C + 'printf "%s %s\\n" "$OMP_NUM_THREADS" "$*" >> "$FAKE_LOG"\n')
    exe.chmod(0o755)
    log, study = tmp_path / "calls.log", tmp_path / "study"
    out = run(SYNTH, "--stage", "2", "--stop_stage", "2", "--pes", "none,rope,cape", "--seeds", "0,1",
              "--jobs", "2", "--study_dir", str(study), "--extra", "trainer.max_steps=2",
              python=str(exe), env={"FAKE_LOG": str(log)})
    got = calls(log)
    want = [f"{per_job} train.py -m experiment=synth_study hydra.sweep.dir={study} pe={pe} seed={seed} loss=ctc "
            "trainer.max_steps=2" for seed in (0, 1) for pe in ("none", "rope", "cape")]
    assert sorted(got) == sorted(want)
    # seed-major queue, two at a time: the first two to start are among the first three queued (on a
    # loaded machine the first run can end, and the third start, before the second has logged)
    assert set(got[:2]) <= set(want[:3])
    assert out.stdout.count("done ") == 6
    assert sorted(p.name for p in (study / "logs").iterdir()) == sorted(
        f"{pe}_ctc_s{seed}.log" for seed in (0, 1) for pe in ("none", "rope", "cape"))
    # --loss picks the head and names the logs like the runs (<pe>_<loss>_s<seed>)
    log.unlink()
    run(SYNTH, "--stage", "2", "--stop_stage", "2", "--pes", "rope", "--seeds", "0", "--jobs", "2",
        "--loss", "hybrid", "--study_dir", str(study), python=str(exe), env={"FAKE_LOG": str(log)})
    assert calls(log) == [f"{per_job} train.py -m experiment=synth_study hydra.sweep.dir={study} pe=rope seed=0 "
                          "loss=hybrid"]
    assert (study / "logs" / "rope_hybrid_s0.log").exists()
    # without --jobs: two at a time (the default); --jobs 1: one at a time with every core
    log.unlink()
    run(SYNTH, "--stage", "2", "--stop_stage", "2", "--pes", "none", "--seeds", "0",
        "--study_dir", str(study), python=str(exe), env={"FAKE_LOG": str(log), "OMP_NUM_THREADS": ""})
    assert calls(log) == [f"{per_job} train.py -m experiment=synth_study hydra.sweep.dir={study} pe=none seed=0 "
                          "loss=ctc"]
    log.unlink()
    run(SYNTH, "--stage", "2", "--stop_stage", "2", "--pes", "none,rope", "--seeds", "0", "--jobs", "1",
        "--study_dir", str(study), python=str(exe), env={"FAKE_LOG": str(log), "OMP_NUM_THREADS": ""})
    assert calls(log) == [f"{cores} train.py -m experiment=synth_study hydra.sweep.dir={study} pe={pe} seed=0 "
                          "loss=ctc" for pe in ("none", "rope")]
    # --threads overrides nproc/jobs: two calls side by side, one core each
    log.unlink()
    run(SYNTH, "--stage", "2", "--stop_stage", "2", "--pes", "none", "--seeds", "0", "--jobs", "1",
        "--threads", "1", "--study_dir", str(study), python=str(exe), env={"FAKE_LOG": str(log), "OMP_NUM_THREADS": ""})
    assert calls(log) == [f"1 train.py -m experiment=synth_study hydra.sweep.dir={study} pe=none seed=0 loss=ctc"]
    bad = subprocess.run(["bash", str(SYNTH), "--stage", "2", "--stop_stage", "2", "--threads", "two",
                          "--study_dir", str(study)], capture_output=True, text=True,
                         env={**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)})
    assert bad.returncode == 2 and "--threads must be a positive integer (got 'two')" in bad.stderr


def test_synth_stage_2_trains_an_arm_with_its_own_pe_and_seed_lists(tmp_path):
    exe = tmp_path / "fake_python"
    exe.write_text(ANSWER_C + 'printf "%s\\n" "$*" >> "$FAKE_LOG"\n')
    exe.chmod(0o755)
    log, study = tmp_path / "calls.log", tmp_path / "arm"
    run(SYNTH, "--stage", "2", "--stop_stage", "2", "--experiment", "synth_arm_conformer", "--jobs", "1",
        "--study_dir", str(study), python=str(exe), env={"FAKE_LOG": str(log)})
    params = OmegaConf.load(REPO / "conf/experiment/synth_arm_conformer.yaml").hydra.sweeper.params
    assert calls(log) == [f"train.py -m experiment=synth_arm_conformer hydra.sweep.dir={study} pe={pe} seed={seed} "
                          "loss=ctc" for seed in str(params.seed).split(",") for pe in params.pe.split(",")]
    # an arm without its own lists takes the study's
    log.unlink()
    run(SYNTH, "--stage", "2", "--stop_stage", "2", "--experiment", "synth_remedy_concat", "--jobs", "1",
        "--pes", "rope", "--seeds", "1", "--study_dir", str(study), python=str(exe), env={"FAKE_LOG": str(log)})
    assert calls(log) == [f"train.py -m experiment=synth_remedy_concat hydra.sweep.dir={study} pe=rope seed=1 loss=ctc"]


def test_synth_stage_3_hands_each_remedy_that_applies_to_evaluate_py_with_reuse(tmp_path):
    import json

    exe = tmp_path / "fake_python"
    exe.write_text(ANSWER_C + 'printf "%s\\n" "$*" >> "$FAKE_LOG"\n')
    exe.chmod(0o755)
    log, study = tmp_path / "calls.log", tmp_path / "study"
    for pe, done in (("rope", True), ("sinusoidal", True), ("alibi", True), ("t5", False)):
        run_dir = study / f"{pe}_ctc_s0"
        (run_dir / "eval").mkdir(parents=True)
        (run_dir / "run_info.json").write_text(json.dumps({"pe": pe, "loss": "ctc"}))
        if done:
            (run_dir / "eval" / "done.json").write_text(json.dumps({"test_sets": ["test", "longform"]}))
    args = ("--stage", "3", "--stop_stage", "3", "--study_dir", str(study), "--remedies",
            "window window:2.5 rope_yarn chunked", "--attention_seeds", "1")
    run(SYNTH, *args, python=str(exe), env={"FAKE_LOG": str(log)})
    rope, sin = study / "rope_ctc_s0", study / "sinusoidal_ctc_s0"
    remedy_calls = [
        f"evaluate.py run={rope} eval.remedy=window reuse=true", f"evaluate.py run={rope} eval.remedy=window:2.5 reuse=true",
        f"evaluate.py run={rope} eval.remedy=rope_yarn reuse=true",
        f"evaluate.py run={rope} eval.mode=chunked eval.suffix=_chunked reuse=true",
        f"evaluate.py run={sin} eval.remedy=window reuse=true", f"evaluate.py run={sin} eval.remedy=window:2.5 reuse=true",
        f"evaluate.py run={sin} eval.mode=chunked eval.suffix=_chunked reuse=true"]  # alibi: not listed; t5: not evaluated
    assert calls(log) == remedy_calls
    log.unlink()
    # again: every remedy goes to evaluate.py again, whose reuse=true reads back what this checkpoint
    # and these settings already scored (asr_pe/evaluation/reuse.py; tests/evaluation/test_evaluate_run.py)
    # and decodes the rest: the recipe never decides from the checkpoint alone
    run(SYNTH, *args, python=str(exe), env={"FAKE_LOG": str(log)})
    assert calls(log) == remedy_calls
    log.unlink()
    # attention statistics of the seed-0 runs (by default), once: the fake leaves no CSV, so the
    # call is repeated until one exists
    run(SYNTH, *args[:-2], "--remedies", "window", python=str(exe), env={"FAKE_LOG": str(log)})
    got = [c for c in calls(log) if "attention_vs_length" in c]
    assert got == [f"scripts/attention_vs_length.py run={study / f'{pe}_ctc_s0'} per_bucket=3 "
                   f"out={study / f'{pe}_ctc_s0' / 'attention_stats'}" for pe in ("alibi", "rope", "sinusoidal")]
    for pe in ("alibi", "rope", "sinusoidal"):
        (study / f"{pe}_ctc_s0" / "attention_stats").mkdir()
        (study / f"{pe}_ctc_s0" / "attention_stats" / "attention_stats.csv").write_text("x\n")
    log.unlink()
    run(SYNTH, *args[:-2], "--remedies", "window", python=str(exe), env={"FAKE_LOG": str(log)})
    assert not [c for c in calls(log) if "attention_vs_length" in c]


def test_synth_stage_0_builds_the_demo_and_the_study_corpus(tmp_path):
    exe = tmp_path / "fake_python"
    exe.write_text(ANSWER_C + 'printf "%s\\n" "$*" >> "$FAKE_LOG"\n')
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    run(SYNTH, "--stage", "0", "--stop_stage", "0", python=str(exe), env={"FAKE_LOG": str(log)})
    study_num_train = OmegaConf.load(REPO / "conf/experiment/synth_study.yaml").data.corpus.num_train
    assert calls(log) == ["-m asr_pe.data.synth --longform 160",
                          f"-m asr_pe.data.synth --longform 160 --num-train {study_num_train}"]


def test_synth_stage_2_appends_to_a_runs_log(tmp_path):
    # a resumed run keeps the log of its interrupted part; a skipped one adds to it
    exe = tmp_path / "fake_python"
    exe.write_text(ANSWER_C + 'echo "call $*"\n')
    exe.chmod(0o755)
    study = tmp_path / "study"
    for _ in range(2):
        run(SYNTH, "--stage", "2", "--stop_stage", "2", "--pes", "none", "--seeds", "0", "--jobs", "1",
            "--study_dir", str(study), python=str(exe))
    assert (study / "logs" / "none_ctc_s0.log").read_text().count("call train.py") == 2


def test_synth_stage_4_archives_result_files_and_reports_from_the_archive(tmp_path, monkeypatch):
    import json

    from asr_pe.evaluation.buckets import write_bucket_files

    study, archive, report = tmp_path / "study", tmp_path / "archive", tmp_path / "report"
    monkeypatch.setenv("ASR_PE_CACHE", str(tmp_path / "cache"))   # where the archive is read back from
    # two CTC runs, and a hybrid run decoded twice: attention (eval/test) and CTC greedy (eval.suffix=_ctc)
    runs = {("none", "ctc"): {"test": 12.0, "longform": 12.0}, ("rope", "ctc"): {"test": 7.0, "longform": 7.0},
            ("rope", "hybrid"): {"test": 4.0, "test_ctc": 8.0, "longform_ctc": 8.0}}
    for (pe, loss), sets in runs.items():
        run_dir = study / f"{pe}_{loss}_s0"
        for test_set, cer in sets.items():
            row = {"bucket": "0-2", "lo": 0.0, "hi": 2.0, "utterances": 4, "mean_duration": 1.5,
                   "ref_words": 20, "errors": 5, "sub": 5, "del": 0, "ins": 0, "wer": 25.0,
                   "wer_ci_low": 20.0, "wer_ci_high": 30.0, "ref_chars": 100, "char_errors": int(cer),
                   "cer": cer, "cer_ci_low": cer - 1, "cer_ci_high": cer + 1}
            method = "attention" if (loss, test_set) == ("hybrid", "test") else "greedy"
            write_bucket_files([row], run_dir / "eval" / test_set, meta={"decode": {"method": method}})
            (run_dir / "eval" / test_set / "per_utt.jsonl").write_text('{"id": "u1"}\n')
        (run_dir / "eval" / "done.json").write_text('{"test_sets": ["longform", "test"]}')
        (run_dir / "checkpoints").mkdir()
        (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"weights")
        (run_dir / "run_info.json").write_text(json.dumps(
            {"pe": pe, "loss": loss, "encoder": "transformer", "seed": 0, "train_max_duration": 5.0,
             "label": f"{pe}/{loss}"}))
    # scripts/attention_vs_length.py ran on one run: archived with it, and the summary's attention table
    stats = study / "rope_ctc_s0" / "attention_stats"
    stats.mkdir()
    (stats / "attention_stats.csv").write_text(
        "test_set,bucket,utt,duration,frames,layer,head,mean_distance_s,entropy,norm_entropy,local_mass\n"
        + "".join(f"test,{b},u,{d},10,0,0,{d / 3},1.0,0.5,0.25\n" for b, d in (("2-4", 3.0), ("32-64", 48.0))))
    (stats / "attention_stats.md").write_text("head means\n")
    # an inference remedy's folder is archived without its per-utterance scores
    write_bucket_files([row], study / "rope_ctc_s0" / "eval" / "test_window",
                       meta={"decode": {"method": "greedy"}, "remedy": "window"})
    (study / "rope_ctc_s0" / "eval" / "test_window" / "per_utt.jsonl").write_text('{"id": "u1"}\n')
    (study / "t5_ctc_s0").mkdir()  # started, not evaluated: left out of the archive
    (study / "t5_ctc_s0" / "run_info.json").write_text("{}")
    # being evaluated (test scored, longform not yet, so no eval/done.json): left out too
    shutil.copytree(study / "none_ctc_s0" / "eval" / "test", study / "cape_ctc_s0" / "eval" / "test")
    (study / "cape_ctc_s0" / "run_info.json").write_text("{}")
    out = run(SYNTH, "--stage", "4", "--stop_stage", "4", "--study_dir", str(study),
              "--archive_dir", str(archive), "--report_dir", str(report), timeout=300)
    assert "t5_ctc_s0: not evaluated yet" in out.stdout and "cape_ctc_s0: not evaluated yet" in out.stdout
    # one table, <archive>/results.jsonl.xz, with a row per file (or per row of it) of each run
    from asr_pe.results_table import TABLE_NAME, read_table
    assert [p.name for p in archive.iterdir()] == [TABLE_NAME]
    files = sorted({f"{run}/{row['path']}" for run, rows in read_table(archive / TABLE_NAME).items() for row in rows})
    want = [f"{pe}_{loss}_s0/{f}" for (pe, loss), sets in runs.items() for f in (
        "run_info.json", *(f"eval/{s}/{n}" for s in sets for n in ("buckets.csv", "buckets.meta.json", "per_utt.jsonl")))]
    want += [f"rope_ctc_s0/attention_stats/attention_stats.{ext}" for ext in ("csv", "md")]
    want += [f"rope_ctc_s0/eval/test_window/{n}" for n in ("buckets.csv", "buckets.meta.json")]
    assert files == sorted(want)
    archived = (archive / TABLE_NAME).read_bytes()
    for test_set in ("test", "longform"):
        for metric in ("wer", "cer"):
            assert (report / test_set / f"{metric}_vs_length.png").exists(), (test_set, metric)
    table = (report / "test" / "cer_vs_length.md").read_text()
    assert "rope/ctc" in table and "7.0" in table
    # long-form degradation is measured against the short test set's training-length bucket
    assert "| rope/ctc | 5.00 | test: 0-2 | 1.00× |" in (report / "longform" / "cer_vs_length.md").read_text()
    summary = (report / "summary.md").read_text()
    # the in-context column leads; these runs hold no long-form parts, so it is empty (–)
    assert "| rope | 0 | – | 7.0 |" in summary and "| none | 0 | – | 12.0 |" in summary
    # the remedy table (these runs have no remedy evaluations: one plain row per PE)
    assert "| rope | (none) | 0 |" in (report / "remedies.md").read_text()
    assert "| rope | 1.00 s (0.33) | 16.00 s (0.33) | – | 0.25 | 0.25 | – |" in summary  # no long-form rows
    # the decodings table: a row per model and decoding of the report sets but the long-form one
    # (these fake long-form sets have no overall bucket, so their column is empty)
    assert "| rope/ctc | test | 0 | 7.0 [6.0, 8.0] | – |" in summary and "| rope/ctc | longform |" not in summary
    assert "hybrid" not in table + summary  # the default report is the CTC study's
    # the hybrid study's report: its own runs and sets; CTC long-form against CTC short-form
    run(SYNTH, "--stage", "4", "--stop_stage", "4", "--study_dir", str(study), "--loss", "hybrid",
        "--archive_dir", str(archive), "--report_dir", str(tmp_path / "report_h"),
        "--report_sets", "test test_ctc longform_ctc", "--summary_sets", "test_ctc longform_ctc", timeout=300)
    assert (archive / TABLE_NAME).read_bytes() == archived  # the same runs archived again: the same table
    table = (tmp_path / "report_h" / "test" / "cer_vs_length.md").read_text()
    assert "rope/hybrid" in table and "4.0" in table and "/ctc" not in table
    assert "| rope/hybrid+greedy | 5.00 | test_ctc: 0-2 | 1.00× |" in (
        tmp_path / "report_h" / "longform_ctc" / "cer_vs_length.md").read_text()
    summary_h = (tmp_path / "report_h" / "summary.md").read_text()
    assert "| rope/hybrid+greedy | 0 | – | 8.0 |" in summary_h
    # one row per decoding
    assert "| rope/hybrid+attention | test | 0 | 4.0 [3.0, 5.0] | – |" in summary_h
    assert "| rope/hybrid+greedy | test_ctc | 0 | 8.0 [7.0, 9.0] | – |" in summary_h
    # the fake long-form set has no overall bucket, so no mean duration: its columns take its name
    assert "nan" not in summary_h and "CER longform_ctc" in summary_h
    # only the long-form set reported: no decodings table, and no empty --decodings for argparse
    run(SYNTH, "--stage", "4", "--stop_stage", "4", "--study_dir", str(study), "--archive_dir", str(archive),
        "--report_dir", str(tmp_path / "report_l"), "--report_sets", "longform", timeout=300)
    summary_l = (tmp_path / "report_l" / "summary.md").read_text()
    assert "| rope | 0 | – | 7.0 |" in summary_l and "| label | set |" not in summary_l


REWRITING_PYTHON = ANSWER_C + """# Records its call, then rewrites the running script in place (same inode: truncate and write, as
# `cat > run.sh` or an editor that saves in place would) with a longer, different one. bash reads a
# script in pieces as it goes, so without the { ... } block the running copy would go on with
# lines of the new file.
printf '%s\\n' "$*" >> "$FAKE_LOG"
for i in $(seq 2000); do echo 'echo CORRUPTED >&2; exit 7'; done > "$SCRIPT"
"""


@pytest.mark.parametrize("name,args,edited", [
    ("synth", ["--stage", "2", "--stop_stage", "2", "--pes", "none,rope", "--seeds", "0", "--jobs", "1"], "run.sh"),
    ("librispeech", ["--stage", "4", "--stop_stage", "4", "--pes", "none rope"], "run.sh"),
    ("tedlium3", ["--stage", "4", "--stop_stage", "4", "--pes", "none rope"], "run.sh"),
    # the shared stages (recipes/lib/stages.sh) are read in full when sourced
    ("librispeech", ["--stage", "4", "--stop_stage", "5", "--pes", "none rope"], "lib"),
])
def test_editing_run_sh_during_a_run_does_not_change_the_running_copy(name, args, edited, tmp_path):
    recipes = tmp_path / "repo" / "recipes"
    script = recipes / name / "run.sh"
    script.parent.mkdir(parents=True)
    script.write_text((REPO / "recipes" / name / "run.sh").read_text())
    shutil.copy(REPO / "recipes" / "python.sh", recipes / "python.sh")
    shutil.copytree(REPO / "recipes" / "lib", recipes / "lib")
    rewritten = script if edited == "run.sh" else recipes / "lib" / "stages.sh"
    exe = tmp_path / "fake_python"
    exe.write_text(REWRITING_PYTHON)
    exe.chmod(0o755)
    log = tmp_path / "calls.log"
    if edited == "lib":  # what stage 5 evaluates: a test manifest and the two runs
        (tmp_path / "work" / "manifests").mkdir(parents=True)
        (tmp_path / "work" / "manifests" / "test-clean.jsonl").write_text("")
        for pe in ("none", "rope"):
            (tmp_path / "work" / "runs" / pe).mkdir(parents=True)
    extra = ["--study_dir", str(tmp_path / "study")] if name == "synth" else ["--work_dir", str(tmp_path / "work")]
    proc = run(script, *args, *extra, python=str(exe), env={"FAKE_LOG": str(log), "SCRIPT": str(rewritten)},
               check=False)
    assert "CORRUPTED" not in proc.stderr and proc.returncode == 0, proc.stderr
    trained = [c.split(" pe=")[1].split()[0] for c in calls(log) if " pe=" in c]
    assert trained == ["none", "rope"]  # both runs, in order
    if edited == "lib":  # stage 5, after the edit, still ran the shared stage as it was sourced
        assert [c.split()[1] for c in calls(log) if "evaluate.py" in c] == [
            f"run={tmp_path}/work/runs/none", f"run={tmp_path}/work/runs/rope"]
    assert "CORRUPTED" in rewritten.read_text()  # the file on disk did change


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git work tree")
def test_the_committed_study_archive_is_not_git_ignored():
    # `make study` archives into recipes/synth/study/runs/results.jsonl.xz; a broad `runs/` ignore rule once hid it
    probe = "recipes/synth/study/runs/results.jsonl.xz"
    proc = subprocess.run(["git", "check-ignore", "-v", probe], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1, f"{probe} is ignored: {proc.stdout}"
    ignored = subprocess.run(["git", "check-ignore", "runs/synth_study/none_ctc_s0/config.yaml"], cwd=REPO)
    assert ignored.returncode == 0  # the training outputs themselves stay ignored


@pytest.mark.parametrize("name,args", [
    ("synth", ["--stage", "2", "--stop_stage", "2", "--pes", "none", "--seeds", "0"]),
    ("librispeech", ["--stage", "4", "--stop_stage", "4", "--pes", "none"]),
    ("tedlium3", ["--stage", "4", "--stop_stage", "4", "--pes", "none"]),
])
def test_a_python_without_the_toolkit_stops_the_recipe_with_one_line(name, args, tmp_path):
    script = REPO / "recipes" / name / "run.sh"
    extra = ["--study_dir", str(tmp_path / "study")] if name == "synth" else ["--work_dir", str(tmp_path / "work")]
    bare = tmp_path / "bare_python"  # the same interpreter without site-packages: no torch, no hydra
    bare.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    proc = run(script, *args, *extra, python=str(bare), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{bare} lacks torch torchaudio hydra omegaconf lightning" in proc.stderr
    assert "make install" in proc.stderr
    assert not (tmp_path / "study").exists() and not (tmp_path / "work").exists()  # stopped before any stage
    missing = run(script, *args, *extra, python=str(tmp_path / "no_such_python"), check=False)
    assert missing.returncode == 2 and "no Python interpreter" in missing.stderr, missing.stderr


def test_without_PYTHON_a_recipe_uses_the_repositorys_venv(tmp_path):
    repo = tmp_path / "repo"
    (repo / "recipes" / "synth").mkdir(parents=True)
    (repo / "recipes" / "lib").mkdir()
    for rel in ("recipes/synth/run.sh", "recipes/python.sh", "recipes/lib/stage_range.sh"):
        shutil.copy(REPO / rel, repo / rel)
    venv_python = repo / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(ANSWER_C + 'printf "%s\\n" "$*" >> "$FAKE_LOG"\n')
    venv_python.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    proc = subprocess.run(["bash", str(repo / "recipes/synth/run.sh"), "--stage", "2", "--stop_stage", "2",
                           "--pes", "none", "--seeds", "0", "--jobs", "1", "--study_dir", str(tmp_path / "study")],
                          capture_output=True, text=True, env={**env, "FAKE_LOG": str(log)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert calls(log) == [f"train.py -m experiment=synth_study hydra.sweep.dir={tmp_path / 'study'} pe=none seed=0 "
                          "loss=ctc"]
