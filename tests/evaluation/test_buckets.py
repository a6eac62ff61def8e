"""Duration buckets: pooled WER, bootstrap CIs, open last bucket, files."""

import csv
import json
import math

import numpy as np
import pytest

from asr_pe.evaluation.buckets import (
    ROW_KEYS, PerUttError, bucket_table, bucketize, format_table,
    read_bucket_csv, read_per_utt, write_bucket_files, write_per_utt,
)
from asr_pe.evaluation.scoring import score_record

# an explicit edge list ending at 64 s: longer utterances share the open bucket "64+"
EDGES_TO_64 = [0, 2, 4, 8, 16, 32, 64]


def rec(uid, duration, errors, words, chars_err=None, chars=None):
    return {"id": uid, "duration": duration, "ref": "", "hyp": "", "errors": errors,
            "ref_words": words, "sub": errors, "del": 0, "ins": 0,
            "char_errors": errors if chars_err is None else chars_err,
            "ref_chars": 5 * words if chars is None else chars}


def random_records(n, seed, dur=(0.5, 1.9)):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        w = int(rng.integers(3, 15))
        out.append(rec(f"u{i}", float(rng.uniform(*dur)), int(rng.binomial(w, 0.2)), w))
    return out


def row_of(rows, label):
    (row,) = [r for r in rows if r["bucket"] == label]
    return row


def test_wer_is_pooled_not_mean_of_utterance_wers():
    recs = [rec("a", 1.0, 1, 10, 2, 50), rec("b", 1.5, 3, 2, 4, 10), rec("c", 3.0, 0, 4, 0, 20)]
    rows = bucket_table(recs, EDGES_TO_64, n_boot=50)
    r = row_of(rows, "0-2")
    assert r["utterances"] == 2 and r["ref_words"] == 12 and r["errors"] == 4
    assert r["wer"] == pytest.approx(100 * 4 / 12)      # mean of per-utterance WERs would be 80 %
    assert r["cer"] == pytest.approx(100 * 6 / 60)
    assert r["mean_duration"] == pytest.approx(1.25)
    assert row_of(rows, "2-4")["wer"] == 0.0
    everything = row_of(rows, "all")
    assert everything["wer"] == pytest.approx(100 * 4 / 16) and everything["utterances"] == 3
    assert rows[-1]["bucket"] == "all"


def test_sub_del_ins_are_summed():
    recs = [score_record("a", 1.0, "a b c", "a x c d"), score_record("b", 1.0, "a b", "")]
    r = row_of(bucket_table(recs, n_boot=10), "0-2")
    assert (r["sub"], r["del"], r["ins"], r["errors"], r["ref_words"]) == (1, 2, 1, 4, 5)


def test_bucket_boundaries_and_open_last_bucket():
    recs = [rec("lo", 0.0, 0, 1), rec("edge", 2.0, 0, 1), rec("just", 63.99, 0, 1),
            rec("at", 64.0, 0, 1), rec("long", 500.0, 0, 1)]
    buckets = {b.label: [r["id"] for r in b.records] for b in bucketize(recs, EDGES_TO_64)}
    assert buckets["0-2"] == ["lo"] and buckets["2-4"] == ["edge"]
    assert buckets["32-64"] == ["just"] and buckets["64+"] == ["at", "long"]
    assert sum(len(v) for v in buckets.values()) == len(recs)          # nothing dropped
    rows = bucket_table(recs, EDGES_TO_64, n_boot=10)
    assert row_of(rows, "64+")["hi"] == math.inf
    # empty buckets are omitted, the table keeps edge order
    assert [r["bucket"] for r in rows] == ["0-2", "2-4", "32-64", "64+", "all"]


def test_edges_not_starting_at_zero_get_a_leading_bucket_and_bad_edges_fail():
    labels = [b.label for b in bucketize([rec("x", 0.5, 0, 1)], [1, 3])]
    assert labels == ["0-1", "1-3", "3+"]
    with pytest.raises(ValueError, match="increasing"):
        bucketize([], [0, 4, 2])
    with pytest.raises(KeyError, match="lacks"):
        bucket_table([{"id": "x", "duration": 1.0}])


def test_ci_contains_point_estimate_and_is_ordered():
    rows = bucket_table(random_records(40, 1), n_boot=500, seed=3)
    for r in rows:
        assert r["wer_ci_low"] <= r["wer"] <= r["wer_ci_high"]
        assert r["cer_ci_low"] <= r["cer"] <= r["cer_ci_high"]
        assert r["wer_ci_low"] < r["wer_ci_high"]


def test_ci_collapses_when_every_utterance_has_the_same_rate():
    # every resample has WER exactly 20 %, so the interval is a point
    recs = [rec(f"u{i}", 1.0, k, 5 * k) for i, k in enumerate([1, 2, 3, 4, 5])]
    r = row_of(bucket_table(recs, n_boot=200), "0-2")
    assert r["wer"] == pytest.approx(20.0)
    assert r["wer_ci_low"] == pytest.approx(20.0) and r["wer_ci_high"] == pytest.approx(20.0)


def test_ci_narrows_with_more_data():
    small = random_records(20, 7)
    big = [dict(r, id=f"{r['id']}_{k}") for k in range(25) for r in small]   # same WER, 25x data
    r_small = row_of(bucket_table(small, n_boot=1000), "0-2")
    r_big = row_of(bucket_table(big, n_boot=1000), "0-2")
    assert r_big["wer"] == pytest.approx(r_small["wer"])
    width = lambda r: r["wer_ci_high"] - r["wer_ci_low"]
    assert width(r_big) < 0.5 * width(r_small)      # ~ 1/sqrt(25) = 0.2 in theory


def test_ci_is_seeded():
    recs = random_records(30, 2)
    a = bucket_table(recs, n_boot=300, seed=0)
    b = bucket_table(recs, n_boot=300, seed=0)
    c = bucket_table(recs, n_boot=300, seed=1)
    assert a == b
    assert (row_of(a, "0-2")["wer_ci_low"], row_of(a, "0-2")["wer_ci_high"]) != \
        (row_of(c, "0-2")["wer_ci_low"], row_of(c, "0-2")["wer_ci_high"])
    # a bucket's interval does not depend on which other buckets exist
    extra = recs + [rec("long", 10.0, 1, 4)]
    assert row_of(bucket_table(extra, n_boot=300, seed=0), "0-2") == row_of(a, "0-2")


def test_ci_matches_a_naive_percentile_bootstrap():
    recs = random_records(25, 5)
    r = row_of(bucket_table(recs, n_boot=200, seed=4, ci=0.9), "0-2")
    e = np.array([x["errors"] for x in recs], float)
    w = np.array([x["ref_words"] for x in recs], float)
    # same construction, written as a loop: resample utterances, pool, take percentiles
    import zlib
    rng = np.random.default_rng([4, zlib.crc32(b"0-2")])
    idx = rng.integers(0, len(recs), size=(200, len(recs)))
    wers = [100 * e[i].sum() / w[i].sum() for i in idx]
    assert r["wer_ci_low"] == pytest.approx(np.percentile(wers, 5))
    assert r["wer_ci_high"] == pytest.approx(np.percentile(wers, 95))


def test_bucket_without_reference_words_has_nan_wer():
    r = row_of(bucket_table([rec("e", 1.0, 2, 0, 3, 0)], n_boot=20), "0-2")
    assert math.isnan(r["wer"]) and math.isnan(r["wer_ci_low"])
    assert r["errors"] == 2


def test_files_written_and_parseable(tmp_path):
    recs = random_records(12, 0) + [rec("long", 100.0, 1, 10)]
    rows = bucket_table(recs, n_boot=100)  # doubling edges: the 100 s utterance is in 64-128
    meta = {"run": "r1", "pe": "rope", "loss": "ctc", "decoding": "greedy", "test_set": "test"}
    paths = write_bucket_files(rows, tmp_path / "eval", meta=meta)
    with open(paths["csv"], newline="") as f:
        parsed = list(csv.DictReader(f))
    assert tuple(parsed[0].keys()) == ROW_KEYS
    assert [p["bucket"] for p in parsed] == [r["bucket"] for r in rows]
    back = read_bucket_csv(paths["csv"])
    for got, want in zip(back, rows):
        assert got["utterances"] == want["utterances"]
        assert got["wer"] == pytest.approx(want["wer"], abs=1e-4)
        assert got["hi"] == want["hi"]                       # inf survives the round trip
    md = paths["md"].read_text()
    assert "rope" in md.splitlines()[0] and "greedy" in md.splitlines()[0]
    assert "| 64-128 |" in md and "| all |" in md and "empty buckets omitted" in md
    assert [r["bucket"] for r in rows] == ["0-2", "64-128", "all"]
    assert json.loads(paths["meta"].read_text()) == meta
    assert not [p for p in (tmp_path / "eval").iterdir() if p.name.endswith(".tmp")]


def test_format_table_is_aligned():
    text = format_table(bucket_table(random_records(5, 0), n_boot=20))
    lines = text.splitlines()
    assert lines[0].startswith("bucket") and len({len(line) for line in lines}) == 1


def test_per_utt_round_trip_and_bad_line(tmp_path):
    recs = [score_record("a", 1.0, "hello world", "hello"), score_record("b", 2.5, "x", "y")]
    path = tmp_path / "per_utt.jsonl"
    write_per_utt(recs, path)
    assert read_per_utt(path) == recs
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(PerUttError, match=r"per_utt.jsonl:3:"):
        read_per_utt(path)
