"""In-context ratio: hand-computed counts, a bootstrap paired over recordings, and the two-level
bootstrap's mathematics (one seed = the one-level CI, identical seeds add no width, a spread
between seeds widens it)."""

import json
import math

import numpy as np
import pytest

from asr_pe.data.manifest import Part
from asr_pe.evaluation.in_context import (InContextError, in_context, paired_ratio_ci, pooled_in_context,
                                          read_parts, two_level_ratio_ci)


def rec(rid, ref, hyp, duration=1.0):
    return {"id": rid, "duration": duration, "ref": ref, "hyp": hyp}


# Two recordings of two parts each. A: whole has 1 char error (d -> x), alone 1 (f -> x).
# B: whole has 2 (h -> x, j -> x), alone none. Each reference has 8 characters.
LONG = [rec("A", "ab cd ef", "ab cx ef", 10.0), rec("B", "gh ij kl", "gx ix kl", 12.0)]
PARTS = {"A": ["a1", "a2"], "B": [Part("b1", 0.0, 1.0), Part("b2", 1.0, 2.0)]}
ALONE = [rec("a1", "ab cd", "ab cd"), rec("a2", "ef", "ex"), rec("b1", "gh", "gh"),
         rec("b2", "ij kl", "ij kl"), rec("unused", "zz", "zz")]


def test_hand_computed_rates_ratio_and_rows():
    res = in_context(LONG, PARTS, ALONE, n_boot=200)
    assert res.whole == pytest.approx(100 * 3 / 16) and res.alone == pytest.approx(100 * 1 / 16)
    assert res.ratio == pytest.approx(3.0)
    a, b = res.rows
    assert (a.id, a.parts, a.ref_chars, a.whole_char_errors, a.alone_char_errors) == ("A", 2, 8, 1, 1)
    assert (b.whole_char_errors, b.alone_char_errors, b.duration) == (2, 0, 12.0)
    assert a.ratio() == 1.0 and math.isnan(b.ratio())
    # words: A whole 1 (cd -> cx), alone 1 (ef -> ex); B whole 2, alone 0
    assert [r.counts("wer") for r in res.rows] == [(1, 1, 3), (2, 0, 3)]
    assert in_context(LONG, PARTS, ALONE, metric="wer", n_boot=10).ratio == pytest.approx(3.0)


def test_bootstrap_is_paired_over_recordings():
    # Resampling the two recordings with their pairs kept gives {A, A} -> 2/2 = 1, {A, B} -> 3/1
    # = 3, {B, B} -> 4/0 (left out): only 1 and 3. Drawing the whole and alone decodings
    # independently would also give 2 and 4 (e.g. whole {B, B} over alone {A, B}).
    res = in_context(LONG, PARTS, ALONE, n_boot=4000, seed=1)
    assert (res.ci_low, res.ci_high) == (1.0, 3.0)


def test_errors_name_the_recording():
    with pytest.raises(InContextError, match="'A'.*not decoded alone.*'a2'"):
        in_context(LONG, PARTS, [r for r in ALONE if r["id"] != "a2"])
    with pytest.raises(InContextError, match="'B' has no parts"):
        in_context(LONG, {"A": PARTS["A"]}, ALONE)
    with pytest.raises(InContextError, match="'A'.*different content"):
        in_context(LONG, {"A": ["a2", "a1"], "B": PARTS["B"]}, ALONE)
    with pytest.raises(InContextError, match="appears twice"):
        in_context(LONG + LONG[:1], PARTS, ALONE)


def _naive_one_level(num, den, n_boot, seed, ci=0.95):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num), size=(n_boot, len(num)))
    top, bottom = num[idx].sum(axis=1), den[idx].sum(axis=1)
    ok = bottom > 0
    return tuple(np.percentile(top[ok] / bottom[ok], [100 * (1 - ci) / 2, 100 * (1 + ci) / 2]))


@pytest.fixture()
def counts():
    rng = np.random.default_rng(7)
    alone = rng.integers(5, 40, size=30).astype(float)
    whole = alone * rng.uniform(0.8, 2.5, size=30)
    return whole, alone


def test_one_seed_equals_the_one_level_ci(counts):
    whole, alone = counts
    expected = _naive_one_level(whole, alone, 1000, 3)
    assert two_level_ratio_ci(whole[None], alone[None], n_boot=1000, seed=3) == pytest.approx(expected, abs=1e-12)
    assert paired_ratio_ci(whole, alone, n_boot=1000, seed=3) == pytest.approx(expected, abs=1e-12)


def test_identical_seeds_add_no_width(counts):
    whole, alone = counts
    one = paired_ratio_ci(whole, alone, n_boot=1000, seed=5)
    three = two_level_ratio_ci(np.stack([whole] * 3), np.stack([alone] * 3), n_boot=1000, seed=5)
    assert three == pytest.approx(one, rel=1e-12)


def test_a_spread_between_seeds_widens_the_ci(counts):
    whole, alone = counts
    same = two_level_ratio_ci(np.stack([whole, whole]), np.stack([alone, alone]), n_boot=2000, seed=0)
    # the same mean, but one seed degrades 40 % more and the other 40 % less
    spread = two_level_ratio_ci(np.stack([whole * 1.4, whole * 0.6]), np.stack([alone, alone]),
                                n_boot=2000, seed=0)
    assert spread[1] - spread[0] > 1.5 * (same[1] - same[0])
    assert spread[0] < same[0] and spread[1] > same[1]


def test_pooled_seeds_sum_counts_and_use_the_two_level_ci():
    s0 = in_context(LONG, PARTS, ALONE, n_boot=50)
    worse = [rec("A", "ab cd ef", "xb cx ef", 10.0), rec("B", "gh ij kl", "gx ix kl", 12.0)]
    s1 = in_context(worse, PARTS, ALONE, n_boot=50)
    pooled = pooled_in_context([s0, s1], n_boot=500, seed=2)
    assert pooled.ratio == pytest.approx((3 + 4) / (1 + 1))
    assert pooled.whole == pytest.approx(100 * 7 / 32) and pooled.extra == {"seeds": 2}
    assert [r.whole_char_errors for r in pooled.rows] == [3, 4]
    num = np.array([[1, 2], [2, 2]], float)
    assert (pooled.ci_low, pooled.ci_high) == two_level_ratio_ci(num, np.array([[1, 0], [1, 0]], float),
                                                                 n_boot=500, seed=2)
    with pytest.raises(InContextError, match="different recordings"):
        pooled_in_context([s0, in_context(LONG[:1], PARTS, ALONE, n_boot=5)])


def test_read_parts_from_a_manifest_and_a_sources_file(tmp_path):
    manifest = tmp_path / "long.jsonl"
    manifest.write_text(json.dumps({"id": "A", "parts": [{"id": "a1", "start": 0, "end": 1},
                                                         {"id": "a2", "start": 1.5, "end": 2}]}) + "\n")
    assert read_parts(manifest) == {"A": ["a1", "a2"]}
    sources = tmp_path / "sources.json"
    sources.write_text(json.dumps({"A": ["a1", "a2"], "B": ["b1"]}))
    assert read_parts(sources) == {"A": ["a1", "a2"], "B": ["b1"]}
    manifest.write_text(json.dumps({"id": "A"}) + "\n")
    with pytest.raises(InContextError, match=r"long\.jsonl:1: .*parts"):
        read_parts(manifest)


def test_pairs_and_files_written_beside_the_long_set(tmp_path):
    from asr_pe.data.manifest import Utterance
    from asr_pe.evaluation.in_context import in_context_pairs, write_in_context

    def utt(uid, parts=None):
        return Utterance(id=uid, audio_filepath="x.flac", duration=30.0, text="a",
                         parts=None if parts is None else tuple(Part(p, k, k + 1.0) for k, p in enumerate(parts)))

    sets = {"test": [utt(i) for i in ("a1", "a2", "b1", "b2")], "longform": [utt("A", ["a1", "a2"]),
                                                                            utt("B", ["b1", "b2"])],
            "other": [utt("C", ["zz"])], "plain": [utt("p")]}
    assert in_context_pairs(sets) == {"longform": ("test", {"A": ["a1", "a2"], "B": ["b1", "b2"]})}
    # an older build without parts in its rows: the builder's sources.json beside its manifest
    old = tmp_path / "old"
    old.mkdir()
    (old / "sources.json").write_text(json.dumps({"A": ["a1", "a2"], "B": ["b1", "b2"]}))
    sets["longform"] = [utt("A"), utt("B")]
    assert in_context_pairs(sets) == {}
    assert in_context_pairs(sets, {"longform": old / "longform.jsonl"}) == {
        "longform": ("test", {"A": ["a1", "a2"], "B": ["b1", "b2"]})}
    for name, records in (("long", LONG), ("alone", ALONE)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "per_utt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    res = write_in_context(tmp_path / "long", tmp_path / "alone", PARTS, alone_set="test", n_boot=50)
    saved = json.loads((tmp_path / "long" / "in_context.json").read_text())
    assert saved["ratio"] == pytest.approx(3.0) == res.ratio and saved["alone_set"] == "test"
    assert [r["whole_char_errors"] for r in saved["rows"]] == [1, 2]
    md = (tmp_path / "long" / "in_context.md").read_text()
    assert md.startswith("In-context ratio: 3.00×") and "| B | 12.0 | 2 | 25.00 | 0.00 | – |" in md
