"""recipes/synth/RESULTS.md against the archived runs: every quantitative sentence is a claim of
recipes/synth/claims.py, recomputed from recipes/synth/study/ through the project's readers."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from asr_pe.evaluation.in_context import InContextResult, RecordingRow
from asr_pe.plots.results_claims import (Claim, Fact, StudyData, check_claims, markdown_rows, number_pattern,
                                         paired_ratio_difference, supports)

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "recipes" / "synth" / "RESULTS.md"

_NAME = "asr_pe_synth_results_claims"
if _NAME not in sys.modules:     # loaded by path: recipes/ is no package
    _spec = importlib.util.spec_from_file_location(_NAME, REPO / "recipes" / "synth" / "claims.py")
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])
synth = sys.modules[_NAME]


@pytest.fixture(scope="module")
def data():
    """One cache of the archived runs for every test here (the CIs are recomputed once)."""
    return synth.study_data()


def test_every_claim_of_results_md_agrees_with_the_archived_runs(data):
    assert synth.failures(data) == []
    assert len(synth.CLAIMS) >= 90       # the report's statements, not a sample


def test_results_md_stays_under_30_kb():
    # a budget that forces pruning: what is superseded goes to History in a few lines, the rest to
    # the study folders' READMEs
    assert len(RESULTS.read_bytes()) < 30_000


def test_a_number_changed_in_the_text_is_reported_with_the_archived_value(data):
    text = RESULTS.read_text(encoding="utf-8")
    sentence = "takes RoPE from 23.5 % to 4.6 % CER at 160 s"
    assert sentence in text
    failures = check_claims(text.replace(sentence, sentence.replace("23.5", "23.6")), synth.CLAIMS, data)
    assert [f.name for f in failures] == ["window on RoPE"]
    assert "printed 23.6 (data: 23.54)" in failures[0].message


def test_a_ci_changed_in_the_text_is_reported(data):
    text = RESULTS.read_text(encoding="utf-8")
    old = "5.41× [4.22, 7.52]) in both seeds"
    assert old in text
    failures = check_claims(text.replace(old, old.replace("4.22", "3.97")), synth.CLAIMS, data)
    assert [f.name for f in failures] == ["recommendation: rope"]


def test_a_statement_in_words_that_the_data_contradict_is_reported(data):
    """The logit-scale sentence once said every PE got worse; Shaw's 160 s CER went down (8.5 -> 8.4)."""
    fact = next(c for c in synth.CLAIMS if c.name == "logit scale worse for all but Shaw")
    assert fact.exceptions(data) == []
    wrong = Fact("every PE worse", fact.text, lambda d: [] if all(
        synth.long_(d, pe, "_logit_scale") > synth.long_(d, pe) for pe in ("rope", "shaw")) else ["shaw is better"])
    assert [f.name for f in check_claims(RESULTS.read_text(encoding="utf-8"), [wrong], data)] == ["every PE worse"]


def test_a_copied_table_row_edited_by_hand_is_reported():
    text = RESULTS.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| t5 | 0, 1 |"))
    assert synth.copied_rows(text) == []
    bad = synth.copied_rows(text.replace(row, row.replace("| 29.1 |", "| 29.2 |")))
    assert len(bad) == 1 and "row t5" in bad[0]


# ---------------------------------------------------------------- the machinery on made-up text

class _Data(StudyData):
    def __init__(self):
        super().__init__(Path("."))


def _claim(text, *values):
    return Claim("c", text, lambda d: values)


@pytest.mark.parametrize("printed, value, ok", [
    ("6.4", 6.448, True), ("6.5", 6.448, False), ("80", 79.48, False), ("79", 79.48, True),
    ("1.05", 1.0549, True), ("−1.1", -1.1, True), ("+0.9", 0.92, True), ("0.9", math.nan, False)])
def test_a_number_agrees_within_its_printed_rounding(printed, value, ok):
    failures = check_claims(f"gap of {printed} points", [_claim("gap of {} points", value)], _Data())
    assert (failures == []) is ok


def test_a_sentence_wrapped_over_lines_is_found_and_a_missing_or_repeated_one_is_reported():
    claim = _claim("from {} % to {} %", 23.5, 4.6)
    assert check_claims("RoPE from 23.5\n  % to 4.6 %.", [claim], _Data()) == []
    assert "occurs 0 times" in check_claims("RoPE from 23.5 % down to 4.6 %", [claim], _Data())[0].message
    assert "occurs 2 times" in check_claims("from 1 % to 2 %; from 3 % to 4 %", [claim], _Data())[0].message


def test_the_template_escapes_the_report_s_own_brackets_and_signs():
    assert number_pattern("| {}× [{}, {}] | +{} |").fullmatch("| 1.48× [1.02, 2.61] | +0.92 |")
    assert markdown_rows("| a | 1 |\n| --- | --- |\n| b | 2 |\n\n| a | 3 |") == {"a": ["a", "1"], "b": ["b", "2"]}


REMEDY_TABLES = {
    "recipes/synth/study/remedies.md": ["recipes/synth/study/runs/*_ctc_s*"],
    "recipes/synth/study/remedies_report/remedies.md": ["recipes/synth/study/runs/rope_ctc_s*",
                                                        "recipes/synth/study/runs/sinusoidal_ctc_s*",
                                                        "recipes/synth/study/remedies/*"],
}


@pytest.mark.slow
@pytest.mark.parametrize("committed", sorted(REMEDY_TABLES))
def test_committed_remedy_tables_are_what_the_archived_runs_give(committed, tmp_path):
    """The remedy tables RESULTS.md quotes (accuracy with the in-context column and the
    overlap-aware CIs, attention, remedies), regenerated from the archive:
        python scripts/study_summary.py <runs> --remedies --parts recipes/synth/study/longform/parts.json"""
    import subprocess
    # the patterns as written: the runs are rows of the studies' tables, not folders a glob here finds
    runs = REMEDY_TABLES[committed]
    out = subprocess.run([sys.executable, "scripts/study_summary.py", *runs, "--remedies",
                          "--parts", "recipes/synth/study/longform/parts.json"],
                         cwd=REPO, check=True, capture_output=True, text=True).stdout
    assert out == (REPO / committed).read_text(encoding="utf-8")


# ---------------------------------------------------------------- the study notes and comparative words

def test_every_study_note_with_numbers_is_checked():
    """RESULTS.md and every study README that prints results of the archive (issue 48 point 1)."""
    checked = {p.relative_to(REPO).as_posix() for p in synth.DOCUMENTS}
    assert checked >= {"recipes/synth/RESULTS.md", "recipes/synth/study/ladder/README.md",
                       "recipes/synth/study/seeds/README.md", "recipes/synth/study/finetune/README.md",
                       "recipes/synth/study/retrain/README.md", "recipes/synth/study/hybrid/README.md",
                       "recipes/synth/study/remedies_report/README.md", "recipes/synth/study/attention/README.md"}
    assert len(synth.LADDER_NOTE_CLAIMS) >= 30 and len(synth.FINETUNE_NOTE_CLAIMS) >= 20


def test_a_ladder_number_changed_in_its_readme_is_reported(data):
    path = REPO / "recipes" / "synth" / "study" / "ladder" / "README.md"
    text = path.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| RoPE, gap 0.5 s | 2-4 |"))
    failures = check_claims(text.replace(row, row.replace("| 1.32 |", "| 1.36 |")), synth.LADDER_NOTE_CLAIMS, data)
    assert [f.name for f in failures] == ["ladder table: rope, gap500ms"]


def test_a_comparative_word_the_paired_interval_contradicts_is_reported(data):
    """The ladder README once said CAPE behaves like `none`; CAPE − none at 160 s is +0.05 [+0.03, +0.07]
    (seeds 2-4; seeds 2-3: +0.05 [+0.03, +0.09])."""
    interval = data.ladder_difference(synth.lruns("cape", synth.S2_4), synth.lruns("none", synth.S2_4), synth.GAP, 160)
    assert supports("degrades more", interval) == []
    assert "'like' not supported" in supports("like", interval)[0]


def test_the_ladder_pools_seed_4_from_its_own_folder_and_pairs_the_joins(data):
    """Seeds 2 and 3 come from ladder/, seed 4 from ladder/seed4/; the gap and no-gap recordings of a
    rung are made of the same parts, so their ratios pair recording by recording."""
    paths = synth.lruns("rope", synth.S2_4)
    assert [Path(p).parent.name for p in paths] == ["ladder", "ladder", "seed4"]
    assert data.ladder(paths, synth.GAP, 160).extra == {"seeds": 3}
    assert synth._same_parts(data) == []
    point, lo, hi = synth.lgapdiff(data, "relative", 160)
    assert 0 < lo < point < hi


def test_paired_ratio_difference_of_made_up_recordings():
    def result(whole, alone):
        rows = tuple(RecordingRow(id=f"r{i}", duration=1.0, parts=1, ref_chars=100, whole_char_errors=w,
                                  alone_char_errors=a, ref_words=10, whole_word_errors=0, alone_word_errors=0)
                     for i, (w, a) in enumerate(zip(whole, alone)))
        return InContextResult(metric="cer", rows=rows, whole=math.nan, alone=math.nan, ratio=math.nan,
                               ci_low=math.nan, ci_high=math.nan, n_boot=0)
    a = result([4, 6, 5, 5], [2, 3, 2, 3])              # ratio 2
    b = result([2, 3, 2, 3], [2, 3, 2, 3])              # ratio 1
    assert paired_ratio_difference([a], [a]) == (0.0, 0.0, 0.0)
    point, lo, hi = paired_ratio_difference([a, a], [b])
    assert point == pytest.approx(1.0) and lo <= 1.0 <= hi
    with pytest.raises(ValueError, match="different recordings"):
        paired_ratio_difference([a], [result([1], [1])])


@pytest.mark.parametrize("word, interval, ok", [
    ("worse", (0.5, 0.1, 0.9), True), ("worse", (0.5, -0.1, 0.9), False), ("better", (-0.5, -0.9, -0.1), True),
    ("like", (0.05, -0.01, 0.1), True), ("like", (0.05, 0.01, 0.1), False), ("no better", (-0.1, -0.3, 0.1), True),
    ("no better", (-0.2, -0.3, -0.1), False), ("degrades more", (0.05, 0.01, 0.1), True)])
def test_comparative_words_need_the_paired_interval_on_their_side(word, interval, ok):
    assert (supports(word, interval) == []) is ok


def test_best_needs_every_rival_beaten():
    assert supports("best", [(-1, -2, -0.5), (-0.3, -0.6, -0.1)]) == []
    assert len(supports("best", [(-1, -2, -0.5), (-0.3, -0.6, 0.1)])) == 1
