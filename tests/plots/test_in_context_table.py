"""The in-context table and figure panel from run directories, and the committed synth-study table
regenerated from its archived per-utterance scores."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from asr_pe.evaluation.buckets import write_bucket_files
from asr_pe.evaluation.scoring import score_record
from asr_pe.plots import length_figures as lf
from asr_pe.plots.in_context_table import in_context_table, label_in_context

REPO = Path(__file__).resolve().parents[2]
PARTS = {"r0": ["u0", "u1"], "r1": ["u2", "u3"], "r2": ["u4", "u5"]}


def word(errors: int) -> str:
    return "b" * errors + "a" * (9 - errors)


def write_eval(run: Path, name: str, records):
    """(id, duration, ref, hyp) -> per_utt.jsonl and the bucket files of one pooled row."""
    recs = [score_record(*r) for r in records]
    folder = run / "eval" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "per_utt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    chars, errs = sum(r["ref_chars"] for r in recs), sum(r["char_errors"] for r in recs)
    lo, hi = (2, 4) if name == "test" else (128, 256)
    row = {"bucket": f"{lo}-{hi}", "lo": float(lo), "hi": float(hi), "utterances": len(recs),
           "mean_duration": records[0][1], "ref_words": 10, "errors": 0, "sub": 0, "del": 0, "ins": 0,
           "wer": 0.0, "wer_ci_low": 0.0, "wer_ci_high": 0.0, "ref_chars": chars, "char_errors": errs,
           "cer": 100 * errs / chars, "cer_ci_low": 100 * errs / chars - 1, "cer_ci_high": 100 * errs / chars + 1}
    write_bucket_files([row, dict(row, bucket="all", lo=0.0, hi=math.inf)], folder)


def fake_run(root: Path, pe: str, seed: int, alone: list[int], whole: list[int]) -> Path:
    """Six 3 s utterances with ``alone[i]`` errors each; three recordings of two, whose parts have
    ``whole[i]`` errors when decoded inside them."""
    run = root / f"{pe}_ctc_s{seed}"
    write_eval(run, "test", [(f"u{i}", 3.0, "aaaaaaaaa", word(e)) for i, e in enumerate(alone)])
    write_eval(run, "longform", [(rid, 160.0, "aaaaaaaaa aaaaaaaaa",
                                  " ".join(word(whole[int(u[1:])]) for u in ids)) for rid, ids in PARTS.items()])
    (run / "run_info.json").write_text(json.dumps({"pe": pe, "loss": "ctc", "seed": seed, "label": f"{pe}/ctc",
                                                   "train_max_duration": 5.0}))
    return run


@pytest.fixture()
def study(tmp_path):
    root = tmp_path / "runs"
    fake_run(root, "rope", 0, [1, 1, 2, 2, 1, 1], [3, 3, 6, 6, 3, 3])      # 3x in every recording
    fake_run(root, "rope", 1, [2, 2, 1, 1, 2, 2], [6, 6, 3, 3, 6, 6])
    fake_run(root, "none", 0, [1, 2, 1, 2, 1, 2], [1, 2, 2, 2, 1, 3])      # r0 1x, r1 4/3, r2 4/3
    parts = tmp_path / "parts.json"
    parts.write_text(json.dumps(PARTS))
    return root, parts


def test_pooled_ratios_per_seed_and_per_recording(study):
    root, parts = study
    results = label_in_context([root], long_set="longform", alone_set="test", parts_path=parts)
    rope, none = results["rope/ctc"], results["none/ctc"]
    assert [r.ratio for r in rope.per_seed] == [3.0, 3.0] and rope.pooled.ratio == 3.0
    assert (rope.pooled.ci_low, rope.pooled.ci_high) == (3.0, 3.0)
    assert none.pooled.ratio == pytest.approx(11 / 9) and len(none.per_seed) == 1
    table = in_context_table([root], parts_path=parts, ref_bucket="2-4")
    lines = table.splitlines()
    assert "in-context ratio 160 s" in lines[0] and "cross-set 160 s / 2-4 s" in lines[0]
    rows = {ln.split(" | ")[0].strip("| "): ln.strip("| ").split(" | ") for ln in lines[2:4]}
    assert list(rows) == ["rope", "none"]                                  # by ratio, largest first
    assert rows["rope"][1:6] == ["0, 1", "3", "47.37", "15.79", "3.00× [3.00, 3.00]"]
    assert rows["rope"][6] == "3.00× [3.00, 3.00]; 3.00× [3.00, 3.00]"
    per_recording = table.split("\n\n")[1].splitlines()
    assert per_recording[0] == "| recording | s | parts | rope | none |"
    assert per_recording[2:] == ["| r0 | 160 | 2 | 3.00 | 1.00 |", "| r1 | 160 | 2 | 3.00 | 1.33 |",
                                 "| r2 | 160 | 2 | 3.00 | 1.33 |"]


def test_no_parts_no_in_context_ratio(study):
    root, _ = study
    assert label_in_context([root], long_set="longform", alone_set="test") == {}
    with pytest.raises(FileNotFoundError, match="known parts"):
        in_context_table([root])


def test_the_study_figure_leads_with_the_in_context_ratio(study, tmp_path, monkeypatch):
    monkeypatch.setattr(lf, "DPI", 40)
    root, parts = study
    results = label_in_context([root], long_set="longform", alone_set="test", parts_path=parts)
    ratios = {r.label: r for r in lf.in_context_ratios(results)}
    assert ratios["rope/ctc"].ratio == 3.0 and ratios["rope/ctc"].per_seed == [3.0, 3.0]
    assert ratios["rope/ctc"].is_ci
    files = lf.make_study_figures([root], tmp_path / "fig", parts_path=parts)
    assert files[0].is_file()
    fig = lf.plot_faceted(*_series(root), tmp_path / "f.png", in_context=results)
    assert fig.axes[-1].get_title().startswith("in-context ratio")
    assert [t.get_text() for t in fig.axes[-1].get_yticklabels()] == ["none", "rope"]


def _series(root):
    from asr_pe.plots.wer_vs_length import aggregate, load_runs
    return (aggregate(load_runs([root], "test")[0], "cer"), aggregate(load_runs([root], "longform")[0], "cer"))


COMMITTED = sorted((REPO / "recipes" / "synth" / "study").rglob("in_context*.md"))


@pytest.mark.parametrize("committed", COMMITTED, ids=[str(p.parent.relative_to(REPO)) for p in COMMITTED])
def test_committed_synth_tables_are_what_the_archived_scores_give(committed, tmp_path):
    """Each committed in_context.md of the synth study (the main runs and every arm) is
    regenerated from the archived per_utt files and the archived parts by the command it names,
    and must not differ."""
    command = next(line for line in committed.read_text().splitlines() if line.startswith("Generated by"))
    args = command.split("`")[1].split()[2:]
    out = tmp_path / "in_context.md"
    args[args.index("--out") + 1] = str(out)
    subprocess.run([sys.executable, "scripts/in_context_table.py", *args], cwd=REPO, check=True,
                   capture_output=True, text=True)
    assert out.read_text().split("\n", 3)[3] == committed.read_text().split("\n", 3)[3]


def test_the_main_table_is_committed():
    assert REPO / "recipes" / "synth" / "study" / "in_context.md" in COMMITTED and len(COMMITTED) >= 5


SUMMARY_COMMAND = ["scripts/study_summary.py", "--attention-names", "2-4 s", "32-64 s", "160 s", "--decodings",
                   "test", "--decodings-long", "longform", "--parts", "recipes/synth/study/longform/parts.json"]


def test_committed_synth_summary_is_what_the_archived_scores_give(tmp_path):
    """recipes/synth/study/summary.md (the accuracy table led by the in-context ratio, attention,
    per-bucket CER of each decoding) is regenerated from the archived runs and must not differ:
        python scripts/study_summary.py recipes/synth/study/runs/*_ctc_s* --attention-names "2-4 s" \\
            "32-64 s" "160 s" --decodings test --decodings-long longform \\
            --parts recipes/synth/study/longform/parts.json --out recipes/synth/study/summary.md"""
    runs = ["recipes/synth/study/runs/*_ctc_s*"]     # the runs of the study's table that match
    out = tmp_path / "summary.md"
    subprocess.run([sys.executable, SUMMARY_COMMAND[0], *runs, *SUMMARY_COMMAND[1:], "--out", str(out)],
                   cwd=REPO, check=True, capture_output=True, text=True)
    assert out.read_text() == (REPO / "recipes/synth/study/summary.md").read_text()
