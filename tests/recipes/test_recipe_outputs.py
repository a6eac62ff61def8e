"""What the corpus recipes hand a researcher (issue 46, point 4):

- the long-form sets the recipes build (LibriSpeech ``<part>_long``, TED-LIUM ``<split>_long`` and
  ``<split>_talks``) record their parts, so that stage 5, which evaluates every set of a run in one
  ``evaluate.py`` call, writes each one's in-context ratio (``eval/<long set>/in_context.json``), and
  stage 6's table reports it per PE: checked with the recipes' own preparation on the fixture
  corpora and a real (untrained) model;
- stage 6 takes ``--metric wer|cer``, gives a long-form set's relative degradation against the set
  it was built from, draws error rates from 0, and runs the in-context table;
- stage 4 never validates on what it trains on: a part that is both a training and a dev part (the
  smoke runs') is split into ``<part>_fit`` and ``<part>_heldout``.

Shell logic runs with a stand-in interpreter that records its calls (fast); the in-context check
decodes for real in this process.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asr_pe.data.manifest import read_manifest

REPO = Path(__file__).resolve().parents[2]
LIBRI = REPO / "recipes" / "librispeech" / "run.sh"
TED = REPO / "recipes" / "tedlium3" / "run.sh"
ANSWER_C = f'#!/usr/bin/env bash\n[ "$1" = -c ] && exec {sys.executable} "$@"\n'


@pytest.fixture
def fake(tmp_path):
    """(run a recipe with the recording stand-in interpreter -> (process, calls))."""
    exe = tmp_path / "fake_python"
    exe.write_text(ANSWER_C + 'printf "%s\\n" "$*" >> "$FAKE_LOG"\n')
    exe.chmod(0o755)
    log = tmp_path / "calls.log"

    def run(script, *args, check=True):
        log.unlink(missing_ok=True)
        proc = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)}, cwd=tmp_path)
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc, (log.read_text().splitlines() if log.exists() else [])
    return run


def manifests(tmp_path: Path, names) -> tuple[Path, Path, Path]:
    work = tmp_path / "work"
    md = work / "manifests"
    md.mkdir(parents=True)
    for name in names:
        (md / f"{name}.jsonl").write_text('{"audio_filepath": "a.sph", "duration": 1.0, "text": "a"}\n')
    return work, md, work / "runs"


# ----------------------------------------------------------------------------- stage 6


def test_stage_6_takes_the_metric_and_refers_long_form_sets_to_the_set_they_were_built_from(fake, tmp_path):
    work, md, runs = manifests(tmp_path, ("test", "test_long", "test_talks"))
    _, got = fake(TED, "--stage", "6", "--stop_stage", "6", "--work_dir", str(work), "--pes", "none cape",
                  "--test_splits", "test", "--metric", "cer")
    r = f"{runs}/none {runs}/cape"
    script = f"{REPO}/scripts"
    assert got == [
        f"{script}/plot_wer_vs_length.py {r} --test-set test --metric cer --out {work}/plots/test",
        # the natural utterances (test, not test_long nor test_talks) in the paper's 5 s bins, captioned
        # with what the paper did and the recipe's corpus note
        f"{script}/plot_natural_bins.py {r} --test-set test --out {work}/plots/test --paper-caption --note {TED_NOTE}",
        f"{script}/plot_wer_vs_length.py {r} --test-set test_long --metric cer --reference-set test "
        f"--out {work}/plots/test_long",
        f"{script}/plot_wer_vs_length.py {r} --test-set test_talks --metric cer --reference-set test "
        f"--out {work}/plots/test_talks",
        f"{script}/plot_corpus_figure.py {r} --test-sets test test_long test_talks --metric cer "
        f"--out {work}/plots/cer_vs_length_all.png",
        f"{script}/in_context_table.py {r} --pair test_long test --pair test_talks test --metric cer "
        f"--out {work}/plots/in_context_cer.md",
    ]


TED_NOTE = "Here: TED-LIUM 3, as in the paper (its WSJ is licensed; recipes/librispeech stands in)."


def test_the_rate_axes_decode_and_draw_the_natural_sets_on_the_paper_s_rate_ladders(fake, tmp_path):
    """--rate_axes "tempo hop_ms": stage 5 decodes each run's natural sets (not the joined or whole-talk
    ones) at every rung of each axis after the plain evaluation, stage 6 draws each ladder."""
    work, md, runs = manifests(tmp_path, ("test", "test_long", "test_talks"))
    for pe in ("none", "cape"):
        (runs / pe).mkdir(parents=True)
    _, got = fake(TED, "--stage", "5", "--stop_stage", "6", "--work_dir", str(work), "--pes", "none cape",
                  "--test_splits", "test", "--rate_axes", "tempo hop_ms")
    script, r = f"{REPO}/scripts", f"{runs}/none {runs}/cape"
    rates = [c for c in got if "evaluate_rates.py" in c or "plot_rate_ladder.py" in c]
    assert rates == [
        *(f"{script}/evaluate_rates.py run={runs}/{pe} axis={axis} data.test=['{md}/test.jsonl'] reuse=true"
          for pe in ("none", "cape") for axis in ("tempo", "hop_ms")),
        *(f"{script}/plot_rate_ladder.py {r} --test-set test --axis {axis} --metric wer --out {work}/plots/test "
          f"--paper-caption --note {TED_NOTE}" for axis in ("tempo", "hop_ms")),
    ]
    # each run's plain evaluation comes before its ladders
    assert [c.split()[0].rsplit("/", 1)[1] for c in got[:3]] == ["evaluate.py", "evaluate_rates.py",
                                                                 "evaluate_rates.py"]
    # without --rate_axes nothing is decoded again
    _, got = fake(TED, "--stage", "5", "--stop_stage", "6", "--work_dir", str(work), "--pes", "none cape",
                  "--test_splits", "test")
    assert not [c for c in got if "rate" in c.split()[0]]


@pytest.mark.parametrize("script", [LIBRI, TED])
def test_an_unknown_rate_axis_is_one_error_line_before_anything_runs(fake, tmp_path, script):
    proc, got = fake(script, "--stage", "5", "--rate_axes", "tempo speed", check=False)
    assert proc.returncode == 2 and got == []
    assert proc.stderr.strip() == f"{script}: error: --rate_axes 'tempo speed': the axes are tempo and hop_ms"


def test_stage_6_without_long_form_sets_draws_no_in_context_table(fake, tmp_path):
    work, _, _ = manifests(tmp_path, ("test-clean",))
    _, got = fake(LIBRI, "--stage", "6", "--stop_stage", "6", "--work_dir", str(work), "--pes", "rope",
                  "--test_parts", "test-clean")
    assert [c.split()[0].rsplit("/", 1)[1] for c in got] == ["plot_wer_vs_length.py", "plot_natural_bins.py",
                                                             "plot_corpus_figure.py"]
    assert "--metric wer" in got[0] and "--reference-set" not in got[0]


@pytest.mark.parametrize("script", [LIBRI, TED])
def test_an_unknown_metric_is_one_error_line_before_anything_runs(fake, tmp_path, script):
    proc, got = fake(script, "--stage", "6", "--metric", "bleu", check=False)
    assert proc.returncode == 2 and got == []
    assert proc.stderr.strip() == f"{script}: error: --metric 'bleu': the metrics are wer and cer"


# ----------------------------------------------------------------------------- stage 4: held-out validation


def test_a_part_trained_and_validated_on_is_split_into_fit_and_heldout(fake, tmp_path):
    work, md, _ = manifests(tmp_path, ("dev-clean", "dev-other", "train-clean-100"))
    args = ["--stage", "4", "--stop_stage", "4", "--work_dir", str(work), "--pes", "cape",
            "--train_parts", "dev-clean train-clean-100", "--dev_parts", "dev-clean dev-other"]
    proc, got = fake(LIBRI, *args)
    split = (f"{REPO}/scripts/split_heldout.py --manifest {md}/dev-clean.jsonl --fit-out {md}/dev-clean_fit.jsonl "
             f"--heldout-out {md}/dev-clean_heldout.jsonl --fraction 0.1")
    assert got[0] == split and len(got) == 2
    train = got[1].split()
    assert "data.corpus.train=['dev-clean_fit','train-clean-100']" in train
    assert "data.corpus.dev=['dev-clean_heldout','dev-other']" in train
    assert "dev-clean is a training and a dev part: holding out 0.1" in proc.stdout
    # split already (both files newer than dev-clean.jsonl): kept; the lists stay the same
    for name in ("dev-clean_heldout", "dev-clean_fit"):
        (md / f"{name}.jsonl").write_text("")
    past = time.time() - 60
    os.utime(md / "dev-clean.jsonl", (past, past))
    proc, again = fake(LIBRI, *args)
    assert again == got[1:] and "dev-clean_fit / dev-clean_heldout exist" in proc.stdout
    # dev-clean prepared again (newer than the split): split again, with the fraction given
    os.utime(md / "dev-clean.jsonl")
    os.utime(md / "dev-clean_fit.jsonl", (past - 60, past - 60))
    _, third = fake(LIBRI, *args, "--heldout_fraction", "0.25")
    assert third[0] == split.replace("0.1", "0.25")


def test_disjoint_parts_are_not_split(fake, tmp_path):
    work, _, _ = manifests(tmp_path, ())
    _, got = fake(LIBRI, "--stage", "4", "--stop_stage", "4", "--work_dir", str(work), "--pes", "cape")
    (call,) = got
    assert "data.corpus.dev=['dev-clean','dev-other']" in call.split() and "_fit" not in call


def test_the_smoke_runs_validate_on_held_out_groups(fake, tmp_path):
    from omegaconf import OmegaConf

    _, got = fake(LIBRI, "--stage", "4", "--stop_stage", "4", "--smoke")
    assert "split_heldout.py --manifest" in got[0] and "dev-clean.jsonl" in got[0]
    assert all("data.corpus.train=['dev-clean_fit']" in c.split() and "data.corpus.dev=['dev-clean_heldout']"
               in c.split() for c in got[1:]) and len(got) == 3
    _, got = fake(TED, "--stage", "4", "--stop_stage", "4", "--smoke")
    assert "split_heldout.py --manifest" in got[0] and "/dev.jsonl" in got[0]
    assert all("data.corpus.train=['dev_fit']" in c.split() and "data.corpus.dev=['dev_heldout']" in c.split()
               for c in got[1:]) and len(got) == 3
    # the smoke experiments say the same when used without run.sh: never a dev part that is trained on
    for name in ("cape_librispeech_smoke", "cape_tedlium3_smoke"):
        corpus = OmegaConf.load(REPO / "conf" / "experiment" / f"{name}.yaml").data.corpus
        assert not set(corpus.train) & set(corpus.dev), name
        assert [f"{p.removesuffix('_fit')}_heldout" for p in corpus.train] == list(corpus.dev), name


# ----------------------------------------------------------------------------- in-context ratio, for real


def _make_run(run: Path, md: Path) -> None:
    """An untrained run (evaluation/test_evaluate_run.make_run) whose corpus is ``md``, with the
    run_info.json the plot and table scripts read."""
    from evaluation.test_evaluate_run import make_run

    for part in ("train-clean-100", "dev-clean"):
        if not (md / f"{part}.jsonl").exists():
            shutil.copy(next(md.glob("*.jsonl")), md / f"{part}.jsonl")
    make_run(run, md, extra=["data.corpus.test=[dev-clean]"])
    (run / "run_info.json").write_text(json.dumps({"pe": "relative", "loss": "ctc", "encoder": "transformer",
                                                   "seed": 0, "train_max_duration": 4.0, "label": "relative/ctc"}))


def _evaluate_like_stage_5(run: Path, md: Path, sets: list[str]) -> None:
    """evaluate.py run=<run> data.test=[every set] reuse=true, as stage 5 calls it."""
    import asr_pe.evaluation.pipeline as ev
    from asr_pe.training.data import resolve_manifests

    ev.evaluate_run(run, {"eval": {"n_boot": 20}, "data": {"test": [str(md / f"{s}.jsonl") for s in sets]}},
                    corpus_manifests=resolve_manifests, reuse=ev.Reuse())


def _make_longform(md: Path, part: str, *durations: str) -> None:
    """Stage 3's command (recipes/lib/stages.sh stage_longform), in this process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_longform", REPO / "scripts" / "make_longform.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--manifest", str(md / f"{part}.jsonl"), "--out", str(md / f"{part}_long.jsonl"),
                     "--durations", *durations]) == 0


def _table(runs: list[Path], pairs: list[tuple[str, str]], out: Path) -> list[dict]:
    """Stage 6's command (scripts/in_context_table.py --pair ...), in this process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("in_context_table", REPO / "scripts" / "in_context_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = [str(r) for r in runs] + [x for p in pairs for x in ("--pair", *p)]
    assert mod.main([*args, "--metric", "wer", "--n-boot", "20", "--out", str(out)]) == 0
    return list(csv.DictReader(out.with_suffix(".csv").open()))


def test_librispeech_long_form_sets_get_their_in_context_ratio_from_stage_5_and_6(build, tmp_path):
    from asr_pe.data.librispeech import main as librispeech_cli

    build.make_librispeech_tree(tmp_path / "src", build.SMOKE_LIBRISPEECH_LAYOUT, seconds_per_char=0.07)
    md = tmp_path / "work" / "manifests"
    assert librispeech_cli(["prepare", "--corpus-dir", str(tmp_path / "src"), "--out-dir", str(md),
                            "--parts", "test-clean"]) == 0
    _make_longform(md, "test-clean", "8")
    long_form = read_manifest(md / "test-clean_long.jsonl")
    assert long_form and all(u.parts for u in long_form)          # what the in-context ratio needs
    run = tmp_path / "work" / "runs" / "relative"
    _make_run(run, md)
    _evaluate_like_stage_5(run, md, ["test-clean", "test-clean_long"])
    record = json.loads((run / "eval" / "test-clean_long" / "in_context.json").read_text())
    assert record["alone_set"] == "test-clean" and len(record["rows"]) == len(long_form)
    assert (run / "eval" / "test-clean_long" / "in_context.md").read_text().startswith("In-context ratio: ")
    rows = _table([run], [("test-clean_long", "test-clean")], tmp_path / "plots" / "in_context_wer.md")
    assert [(r["long_set"], r["alone_set"], r["label"], int(r["recordings"])) for r in rows] == [
        ("test-clean_long", "test-clean", "relative/ctc", len(long_form))]
    text = (tmp_path / "plots" / "in_context_wer.md").read_text()
    assert text.startswith("# In-context ratio per long-form set and PE (WER)")
    assert "| test-clean_long | test-clean | relative |" in text


def test_tedlium_long_form_sets_and_whole_talks_get_their_in_context_ratio(build, tmp_path):
    from asr_pe.data.tedlium import main as tedlium_cli

    build.make_tedlium_tree(tmp_path / "src")
    md = tmp_path / "work" / "manifests"
    assert tedlium_cli(["prepare", "--corpus-dir", str(tmp_path / "src"), "--out-dir", str(md)]) == 0
    _make_longform(md, "test", "20")
    assert all(u.parts for s in ("test_long", "test_talks") for u in read_manifest(md / f"{s}.jsonl"))
    run = tmp_path / "work" / "runs" / "relative"
    _make_run(run, md)
    _evaluate_like_stage_5(run, md, ["test", "test_long", "test_talks"])
    for long_set in ("test_long", "test_talks"):
        record = json.loads((run / "eval" / long_set / "in_context.json").read_text())
        assert record["alone_set"] == "test", long_set
    # a set that no run evaluated is a row saying so, not a failed stage 6
    rows = _table([run], [("test_long", "test"), ("test_talks", "test"), ("dev_long", "dev")],
                  tmp_path / "plots" / "in_context_wer.md")
    assert [(r["long_set"], r["alone_set"]) for r in rows] == [("test_long", "test"), ("test_talks", "test")]
    text = (tmp_path / "plots" / "in_context_wer.md").read_text()
    assert "| dev_long | dev | – |" in text and "no run has both sets evaluated" in text


def test_the_pair_table_refuses_the_single_set_options(tmp_path):
    proc = subprocess.run([sys.executable, "scripts/in_context_table.py", str(tmp_path), "--pair", "a_long", "a",
                           "--long", "b"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --pair names the sets itself; leave out --long"


# ----------------------------------------------------------------------------- figures: y from 0


def test_error_rate_axes_start_at_0(monkeypatch, tmp_path):
    import asr_pe.plots.corpus_figure as cf
    import asr_pe.plots.wer_vs_length as wv
    from asr_pe.evaluation.buckets import write_bucket_files

    run = tmp_path / "runs" / "rope"
    rows = [{"bucket": b, "lo": lo, "hi": hi, "utterances": 4, "mean_duration": (lo + hi) / 2, "ref_words": 20,
             "errors": 5, "sub": 5, "del": 0, "ins": 0, "wer": w, "wer_ci_low": w - 1, "wer_ci_high": w + 1,
             "ref_chars": 100, "char_errors": 5, "cer": w / 2, "cer_ci_low": w / 2 - 1, "cer_ci_high": w / 2 + 1}
            for b, lo, hi, w in (("2-4", 2.0, 4.0, 30.0), ("4-8", 4.0, 8.0, 32.0))]
    write_bucket_files(rows, run / "eval" / "test")
    (run / "run_info.json").write_text(json.dumps({"pe": "rope", "loss": "ctc", "seed": 0, "train_max_duration": 5.0}))
    figures = []
    monkeypatch.setattr(wv, "save_figure", lambda fig, path: figures.append(fig))
    monkeypatch.setattr(cf, "save_figure", lambda fig, path: figures.append(fig))
    wv.make_report([run], tmp_path / "out", test_set="test", metric="cer")
    cf.plot_corpus_figure([run], tmp_path / "all.png", metric="wer")
    bottoms = [ax.get_ylim()[0] for fig in figures for ax in fig.axes if ax.get_visible() and ax.lines]
    assert bottoms == [0.0, 0.0]   # the values lie at 14-33 %: matplotlib alone would start near 14
