"""The one bucket scheme (``eval.edges: doubling``): edges 0, 2, 4, ... s until past the longest
utterance, so every long-form duration gets a row of its own; and it reproduces every committed
synth-study table (evaluated with [0, 2, ..., 256]) byte for byte."""

import csv
import io
import math
from pathlib import Path

import pytest

from asr_pe.evaluation.buckets import (
    DEFAULT_EDGES,
    ROW_KEYS,
    _csv_value,
    bucket_table,
    bucketize,
    describe_edges,
    doubling_edges,
    read_per_utt,
    resolve_edges,
)

from asr_pe.results_table import TABLE_NAME, expand_run_paths

ROOT = Path(__file__).resolve().parents[2]


def rec(uid, duration, errors=1, words=10):
    return {"id": uid, "duration": duration, "errors": errors, "ref_words": words, "sub": errors, "del": 0,
            "ins": 0, "char_errors": errors, "ref_chars": 5 * words}


def test_doubling_edges_end_strictly_past_the_longest_utterance():
    assert doubling_edges(160.0) == [0, 2, 4, 8, 16, 32, 64, 128, 256]
    assert doubling_edges(59.8) == [0, 2, 4, 8, 16, 32, 64]        # the short synth test set
    assert doubling_edges(128.0)[-1] == 256                          # 128 itself needs [128, 256)
    assert doubling_edges(1199.9)[-2:] == [1024, 2048]               # a 20-minute talk
    assert doubling_edges(0.0) == doubling_edges(1.5) == [0, 2]
    assert doubling_edges(2.0) == [0, 2, 4]
    with pytest.raises(ValueError, match="max_duration"):
        doubling_edges(math.inf)
    with pytest.raises(ValueError, match="first doubling edge"):
        doubling_edges(10.0, first=0.0)


def test_every_long_form_duration_gets_its_own_closed_bucket():
    """80 s and 160 s long-form sets, a 10-minute and a 20-minute talk: four rows, none open."""
    recs = ([rec(f"s{i}", d) for i, d in enumerate((1.2, 3.5, 30.0))]
            + [rec(f"l80_{i}", 80.0 + i) for i in range(3)] + [rec(f"l160_{i}", 159.0 + i) for i in range(3)]
            + [rec("talk10", 601.3), rec("talk20", 1187.0)])
    rows = bucket_table(recs, DEFAULT_EDGES, n_boot=20)
    assert [r["bucket"] for r in rows] == ["0-2", "2-4", "16-32", "64-128", "128-256", "512-1024", "1024-2048",
                                           "all"]
    assert all(math.isfinite(r["hi"]) for r in rows[:-1])            # nothing falls into an open bucket
    assert [r["utterances"] for r in rows] == [1, 1, 1, 3, 3, 1, 1, 11]
    # bucketize keeps the empty buckets in between (4-8, 8-16, 32-64, 256-512) and the empty open one
    buckets = bucketize(recs, DEFAULT_EDGES)
    assert [b.label for b in buckets if not b.records] == ["4-8", "8-16", "32-64", "256-512", "2048+"]


def test_an_explicit_edge_list_still_works_and_bad_specs_fail():
    assert resolve_edges([0, 5, 10], [3.0, 70.0]) == [0, 5, 10]
    assert resolve_edges([1, 3], []) == [0, 1, 3]
    assert resolve_edges("doubling", [70.0]) == [0, 2, 4, 8, 16, 32, 64, 128]
    assert describe_edges("doubling", [0, 2, 4]) == "doubling: 0 2 4"
    assert describe_edges([0, 2.5], [0, 2.5]) == "0 2.5"
    with pytest.raises(ValueError, match="'doubling', 'step:<seconds>' or a list"):
        resolve_edges("doublin", [1.0])
    with pytest.raises(ValueError, match="'doubling', 'step:<seconds>' or a list"):
        resolve_edges([0, "x"], [1.0])
    with pytest.raises(ValueError, match="increasing"):
        resolve_edges([0, 5, 5], [1.0])


def csv_text(rows):
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(ROW_KEYS)
    for r in rows:
        writer.writerow([_csv_value(k, r[k]) for k in ROW_KEYS])
    return buf.getvalue()


def test_doubling_reproduces_every_committed_synth_study_table():
    """Every eval/<set>/ of the synth studies holding per_utt.jsonl (short test sets up to 64 s,
    160 s long-form sets, CTC / joint / attention decodings) was bucketed with
    [0, 2, 4, ..., 256]; the doubling scheme from each set's own longest utterance gives the
    identical buckets.csv, bootstrap intervals included (same seed, same bucket labels)."""
    # the archived runs are kept in one table per study (asr_pe/results_table.py), read here as
    # the run folders they render back to
    per_utt_files = sorted(path for table in (ROOT / "recipes" / "synth").glob("study*/**/" + TABLE_NAME)
                           for _, run in expand_run_paths(table) or []
                           for path in run.glob("eval/*/per_utt.jsonl"))
    # the current CTC study alone: 24 runs x (test, longform)
    assert len(per_utt_files) >= 48, "the committed synth-study results are missing"
    longest = 0.0
    for path in per_utt_files:
        records = read_per_utt(path)
        longest = max(longest, max(r["duration"] for r in records))
        rows = bucket_table(records, "doubling", n_boot=1000, seed=0)
        assert csv_text(rows) == (path.parent / "buckets.csv").read_text(), path
    assert 150 < longest < 256  # the 160 s long-form sets are the longest: no edge past 256 was needed
