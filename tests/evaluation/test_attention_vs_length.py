"""asr_pe.evaluation.attention_vs_length (behind scripts/attention_vs_length.py): which utterances
are picked per bucket, the rows of hand-made attention patterns, the CSV and markdown files."""

import csv
import math

import pytest
import torch

from asr_pe.data.manifest import Utterance, write_manifest
from asr_pe.evaluation.attention_vs_length import (
    CSV_KEYS, collect_rows, csv_text, first_per_bucket, write_report,
)

SHIFT = 0.04


def utt(uid, duration, folder="/x"):
    return Utterance(id=uid, audio_filepath=f"{folder}/{uid}.wav", duration=duration, text="a")


def test_first_per_bucket_keeps_manifest_order_and_drops_empty_buckets():
    utts = [utt("a", 1.0), utt("b", 3.0), utt("c", 0.5), utt("d", 1.5), utt("e", 9.0), utt("f", 2.0)]
    picked = first_per_bucket(utts, [0, 2, 4, 8], 2)
    assert {k: [u.id for u in v] for k, v in picked.items()} == {"0-2": ["a", "c"], "2-4": ["b", "f"], "8+": ["e"]}
    assert list(picked) == ["0-2", "2-4", "8+"]  # bucket order; 4-8 had nobody
    assert [u.id for u in first_per_bucket(utts, [2, 4], 1)["0-2"]] == ["a"]  # [0, 2) prepended


def fake_attend(n_layers=2, n_heads=3):
    """Layer 0 attends to its own frame (entropy 0), the others uniformly (entropy ln T); T = 10 frames/s."""
    def attend(u):
        T = max(2, round(u.duration * 10))
        eye = torch.eye(T).expand(1, n_heads, T, T)
        uniform = torch.full((1, n_heads, T, T), 1.0 / T)
        return u.duration, [eye] + [uniform] * (n_layers - 1)
    return attend


@pytest.fixture()
def sets(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.wav").touch()  # the manifest wants the files; the fake attend reads none
    write_manifest(tmp_path / "test.jsonl", [utt("a", 1.0, tmp_path), utt("b", 3.0, tmp_path),
                                             utt("c", 1.5, tmp_path)])
    return {"test": str(tmp_path / "test.jsonl")}


def test_collect_rows_one_per_utterance_layer_and_head(sets, capsys):
    rows, n_layers = collect_rows(sets, "doubling", 1, fake_attend(), SHIFT, 0.5)
    assert n_layers == 2
    assert len(rows) == 2 * 2 * 3 and all(tuple(r) == CSV_KEYS for r in rows)  # utts a (0-2), b (2-4)
    assert [(r["utt"], r["bucket"]) for r in rows[::6]] == [("a", "0-2"), ("b", "2-4")]
    for r in rows:
        assert r["frames"] == round(r["duration"] * 10)
        if r["layer"] == 0:
            assert r["norm_entropy"] == 0 and r["mean_distance_s"] == 0 and r["local_mass"] == pytest.approx(1)
        else:
            assert r["norm_entropy"] == pytest.approx(1.0)
    assert "test 0-2: a (1.0 s, 10 frames)" in capsys.readouterr().out  # progress


def test_explicit_edges_and_per_bucket(sets):
    rows, _ = collect_rows(sets, [0, 5], 2, fake_attend(n_layers=1, n_heads=1), SHIFT, 0.5)
    assert [(r["utt"], r["bucket"]) for r in rows] == [("a", "0-5"), ("b", "0-5")]


def test_files_and_markdown(sets, tmp_path):
    rows, n_layers = collect_rows(sets, "doubling", 3, fake_attend(), SHIFT, 0.5)
    csv_path, md = write_report(rows, tmp_path / "out", "rope/ctc, run0, best.ckpt", n_layers, 0.5)
    assert csv_path == tmp_path / "out" / "attention_stats.csv"
    assert csv_path.read_text() == csv_text(rows) and (tmp_path / "out" / "attention_stats.md").read_text() == md
    with open(csv_path, newline="") as f:
        read = list(csv.DictReader(f))
    assert tuple(read[0]) == CSV_KEYS and len(read) == len(rows) == 3 * 2 * 3
    uniform = next(r for r in read if r["utt"] == "a" and r["layer"] == "1")  # T = 10, 6 significant digits
    assert (uniform["norm_entropy"], uniform["mean_distance_s"], uniform["frames"]) == ("1", "0.132", "10")
    assert md.startswith("# Attention vs input length — rope/ctc, run0, best.ckpt")
    for title in ("## mean attended distance (s)", "## attention entropy / ln T (0 = one frame, 1 = uniform)",
                  "## share of attention within ±local_s"):
        assert title in md
    assert "| set | bucket (s) | utts | mean dur (s) | layer 0 | layer 1 | all | 95 % CI (utterances) |" in md
    # entropy table: layer 0 one-hot, layer 1 uniform, mean of the two; 0-2 holds a and c, each
    # 0.5 over its layers, so every resample of the two utterances has mean 0.5
    assert "| test | 0-2 | 2 | 1.2 | 0.000 | 1.000 | 0.500 | [0.500, 0.500] |" in md


def test_the_interval_resamples_utterances_weighing_each_the_same():
    from asr_pe.evaluation.attention_vs_length import utterance_ci

    # utterance u: 0 in its 3 rows, v: 1 in its single row: per utterance 0 and 1 (not 1/4 per row);
    # a quarter of the resamples are (u, u) and a quarter (v, v), so the 2.5 / 97.5 % points are 0 and 1
    rows = [{"utt": "u", "x": 0.0}] * 3 + [{"utt": "v", "x": 1.0}]
    assert utterance_ci(rows, "x") == (0.0, 1.0)
    lo, hi = utterance_ci([{"utt": str(i), "x": float(i)} for i in range(100)], "x")
    assert 43 < lo < 49.5 < hi < 56  # the mean 49.5 ± 1.96 · 28.9 / √100
    assert all(math.isnan(v) for v in utterance_ci([{"utt": "u", "x": 1.0}], "x"))


def test_csv_leaves_non_finite_numbers_as_python_writes_them():
    row = dict.fromkeys(CSV_KEYS, 0)
    row.update(test_set="t", bucket="0-2", utt="u", duration=1.23456789, norm_entropy=math.nan)
    line = csv_text([row]).splitlines()[1]
    assert line.startswith("t,0-2,u,1.23457,") and ",nan," in line
