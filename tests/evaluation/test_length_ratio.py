"""The bootstrap CI of the long/short degradation ratio (asr_pe/evaluation/length_ratio.py)."""

import json

import numpy as np
import pytest

from asr_pe.evaluation.length_ratio import difference_ci, length_ratio_ci, read_errors


def write_set(folder, utts):
    """utts: (duration, char_errors, ref_chars) per utterance -> folder/per_utt.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "per_utt.jsonl", "w") as f:
        for i, (dur, err, ref) in enumerate(utts):
            f.write(json.dumps({"id": f"u{i:05d}", "duration": dur, "errors": err, "ref_words": ref // 5,
                                "char_errors": err, "ref_chars": ref}) + "\n")
    return folder


def noisy(rng, n, rate, dur=3.0, ref=60):
    """n utterances of ref characters whose errors are Binomial(ref, rate)."""
    return [(dur, int(e), ref) for e in rng.binomial(ref, rate, size=n)]


def test_constant_rates_give_the_exact_ratio(tmp_path):
    short = write_set(tmp_path / "s", [(3.0, 6, 60)] * 20)           # 10 % in every utterance
    long = write_set(tmp_path / "l", [(160.0, 90, 300)] * 7)          # 30 %
    low, high = length_ratio_ci([short], [long], ref_lo=2, ref_hi=4)
    assert (low, high) == pytest.approx((3.0, 3.0))


def test_ci_holds_the_point_and_shrinks_with_more_utterances(tmp_path):
    rng = np.random.default_rng(0)
    widths = []
    for n in (25, 400):
        short = write_set(tmp_path / f"s{n}", noisy(rng, n, 0.08))
        long = write_set(tmp_path / f"l{n}", noisy(rng, n, 0.20, dur=160.0, ref=1500))
        _, e_s, r_s = read_errors(short, lo=2, hi=4)
        _, e_l, r_l = read_errors(long)
        point = (e_l.sum() / r_l.sum()) / (e_s.sum() / r_s.sum())
        low, high = length_ratio_ci([short], [long], ref_lo=2, ref_hi=4, n_boot=2000)
        assert low < point < high
        widths.append(high - low)
    # the standard error falls as 1/sqrt(n): 16x the utterances, about a quarter of the width
    assert 0.15 < widths[1] / widths[0] < 0.4


def test_only_the_reference_bucket_of_the_short_set_counts(tmp_path):
    rng = np.random.default_rng(1)
    base = noisy(rng, 30, 0.1)
    long = write_set(tmp_path / "l", noisy(rng, 10, 0.2, dur=150.0, ref=2000))
    plain = write_set(tmp_path / "plain", base)
    # utterances outside [2, 4) s with wild error rates, interleaved by id, must change nothing
    mixed = write_set(tmp_path / "mixed", [u for b in base for u in (b, (1.0, 59, 60), (40.0, 0, 800))])
    a = length_ratio_ci([plain], [long], ref_lo=2, ref_hi=4, seed=3)
    _, e, _ = read_errors(mixed, lo=2, hi=4)
    assert len(e) == 30
    # ids differ, so the draws differ: the same distribution, not the same numbers
    b = length_ratio_ci([mixed], [long], ref_lo=2, ref_hi=4, seed=3)
    assert b[0] == pytest.approx(a[0], rel=0.1) and b[1] == pytest.approx(a[1], rel=0.1)


def test_seeds_share_the_draws_when_they_score_the_same_utterances(tmp_path):
    rng = np.random.default_rng(2)
    short = write_set(tmp_path / "s", noisy(rng, 25, 0.1))
    long = write_set(tmp_path / "l", noisy(rng, 13, 0.3, dur=160.0, ref=2000))
    one = length_ratio_ci([short], [long], ref_lo=2, ref_hi=4, seed=5)
    # two identical seeds, paired draws: the mean over seeds is each seed's rate, so the same CI
    two = length_ratio_ci([short, short], [long, long], ref_lo=2, ref_hi=4, seed=5)
    assert two == pytest.approx(one)


def test_the_seed_mean_is_the_ratio_of_the_seed_means(tmp_path):
    # constant rates per seed: 10 % / 30 % and 20 % / 30 % -> mean(30, 30) / mean(10, 20) = 2
    s0 = write_set(tmp_path / "s0", [(3.0, 6, 60)] * 5)
    s1 = write_set(tmp_path / "s1", [(3.0, 12, 60)] * 5)
    l0 = write_set(tmp_path / "l0", [(160.0, 30, 100)] * 4)
    l1 = write_set(tmp_path / "l1", [(160.0, 30, 100)] * 4)
    assert length_ratio_ci([s0, s1], [l0, l1], ref_lo=2, ref_hi=4) == pytest.approx((2.0, 2.0))


def test_missing_or_empty_scores_give_none_and_bad_lines_name_the_file(tmp_path):
    short = write_set(tmp_path / "s", [(3.0, 6, 60)] * 5)
    long = write_set(tmp_path / "l", [(160.0, 30, 100)] * 4)
    (tmp_path / "remedy").mkdir()                                      # bucket tables only
    assert length_ratio_ci([short], [tmp_path / "remedy"], ref_lo=2, ref_hi=4) is None
    assert length_ratio_ci([short], [long], ref_lo=8, ref_hi=16) is None   # empty reference bucket
    assert length_ratio_ci([write_set(tmp_path / "z", [(3.0, 0, 60)] * 5)], [long], ref_lo=2, ref_hi=4) is None
    with open(long / "per_utt.jsonl", "a") as f:
        f.write('{"id": "x", "duration": 150}\n')
    with pytest.raises(ValueError, match=r"l/per_utt.jsonl:5: .*char_errors"):
        length_ratio_ci([short], [long], ref_lo=2, ref_hi=4)
    with pytest.raises(ValueError, match="one short and one long set per seed"):
        length_ratio_ci([short, short], [long], ref_lo=2, ref_hi=4)
    with pytest.raises(ValueError, match="metric"):
        read_errors(short, metric="per")


# ----------------------------------------------------------------------------- difference_ci

def test_a_shared_difficulty_cancels_in_the_paired_difference(tmp_path):
    # utterances of very different difficulty; A makes exactly 3 more errors per 100 characters on
    # each: a paired bootstrap sees the same +3 points in every draw, an unpaired one would not
    rng = np.random.default_rng(4)
    base = [(160.0, int(e), 1000) for e in rng.integers(20, 400, size=13)]
    b = write_set(tmp_path / "b", base)
    a = write_set(tmp_path / "a", [(d, e + 30, r) for d, e, r in base])
    assert difference_ci([a], [b]) == pytest.approx((3.0, 3.0, 3.0))
    assert difference_ci([b], [b]) == pytest.approx((0.0, 0.0, 0.0))


def test_difference_is_of_the_seed_means_and_its_ci_holds_it(tmp_path):
    rng = np.random.default_rng(5)
    sets = {name: write_set(tmp_path / name, noisy(rng, 40, rate)) for name, rate in
            (("a0", 0.12), ("a1", 0.10), ("b0", 0.08), ("b1", 0.07))}

    def pooled(folder):
        _, e, r = read_errors(folder)
        return 100 * e.sum() / r.sum()

    point = (pooled(sets["a0"]) + pooled(sets["a1"])) / 2 - (pooled(sets["b0"]) + pooled(sets["b1"])) / 2
    d, low, high = difference_ci([sets["a0"], sets["a1"]], [sets["b0"], sets["b1"]], n_boot=2000)
    assert d == pytest.approx(point)
    assert low < d < high and high - low < 4


def test_difference_only_counts_the_bucket_and_needs_the_same_utterances(tmp_path):
    a = write_set(tmp_path / "a", [(3.0, 6, 60)] * 5 + [(40.0, 400, 800)] * 5)   # 10 % at 2-4 s
    b = write_set(tmp_path / "b", [(3.0, 3, 60)] * 5 + [(40.0, 0, 800)] * 5)     # 5 %
    assert difference_ci([a], [b], lo=2, hi=4) == pytest.approx((5.0, 5.0, 5.0))
    other = write_set(tmp_path / "other", [(3.0, 3, 60)] * 4)                     # 4 utterances, not 5
    assert difference_ci([a], [other], lo=2, hi=4) is None
    (tmp_path / "remedy").mkdir()
    assert difference_ci([a], [tmp_path / "remedy"]) is None
    with pytest.raises(ValueError, match="at least one eval set"):
        difference_ci([], [b])


def _named_set(folder, utts):
    """utts: (id, duration, char_errors, ref_chars) -> folder/per_utt.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "per_utt.jsonl").write_text("".join(
        json.dumps({"id": i, "duration": d, "errors": e, "ref_words": r // 5, "char_errors": e, "ref_chars": r})
        + "\n" for i, d, e, r in utts))
    return folder


def test_parts_keep_a_recording_and_the_reference_utterances_inside_it_together(tmp_path):
    """A long set built from the short set: each recording holds one reference utterance and
    errs twice as often. Drawn together (clusters), every draw's ratio is exactly 2; drawn as if
    the sets were independent, the CI is wide."""
    rng = np.random.default_rng(4)
    errs = rng.integers(1, 20, size=20)
    short = _named_set(tmp_path / "s", [(f"t{k}", 3.0, int(e), 60) for k, e in enumerate(errs)])
    long = _named_set(tmp_path / "l", [(f"r{k}", 160.0, 2 * int(e), 60) for k, e in enumerate(errs)])
    parts = {f"r{k}": [f"t{k}", f"other{k}"] for k in range(20)}
    assert length_ratio_ci([short], [long], ref_lo=2, ref_hi=4, parts=parts) == pytest.approx((2.0, 2.0))
    low, high = length_ratio_ci([short], [long], ref_lo=2, ref_hi=4)
    assert low < 1.6 and high > 2.5
    # recordings that share an utterance form one cluster: still exactly 2 in every draw
    parts["r1"] = ["t0", "t1"]
    assert length_ratio_ci([short, short], [long, long], ref_lo=2, ref_hi=4, parts=parts) == pytest.approx((2.0, 2.0))


def test_parts_without_overlap_give_a_ci_around_the_point(tmp_path):
    rng = np.random.default_rng(5)
    short = _named_set(tmp_path / "s", [(f"t{k}", 3.0, int(e), 60) for k, e in enumerate(rng.binomial(60, 0.1, 40))])
    long = _named_set(tmp_path / "l", [(f"r{k}", 160.0, int(e), 1500) for k, e in enumerate(rng.binomial(1500, 0.2, 10))])
    _, e_s, r_s = read_errors(short, lo=2, hi=4)
    _, e_l, r_l = read_errors(long)
    point = (e_l.sum() / r_l.sum()) / (e_s.sum() / r_s.sum())
    low, high = length_ratio_ci([short], [long], ref_lo=2, ref_hi=4, parts={"r0": ["elsewhere"]}, n_boot=2000)
    assert low < point < high
