"""The bootstrap CI of the long/short degradation ratio (asr_pe/evaluation/length_ratio.py)."""

import json

import numpy as np
import pytest

from asr_pe.evaluation.length_ratio import length_ratio_ci, read_errors


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
