"""DurationBucketSampler: coverage, caps, len, determinism, shuffling, buckets and DDP shares."""

import numpy as np
import pytest

from asr_pe.data.sampler import DurationBucketSampler, StepBatches


def durations(n=600, seed=0, lo=0.5, hi=12.0):
    return np.random.default_rng(seed).uniform(lo, hi, n)


def epoch(sampler, e):
    sampler.set_epoch(e)
    return [list(b) for b in sampler]


@pytest.mark.parametrize("seed", [0, 1, 7, 123])
@pytest.mark.parametrize("shuffle", [True, False])
def test_every_index_once_and_cap_respected(seed, shuffle):
    d = durations(seed=seed)
    s = DurationBucketSampler(d, 40.0, num_buckets=6, shuffle=shuffle, seed=seed)
    for e in range(3):
        batches = epoch(s, e)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(d)))  # every index exactly once
        assert all(d[b].sum() <= 40.0 for b in batches)
        assert len(batches) == len(s)  # len matches iteration, every epoch


def test_over_cap_utterance_forms_its_own_batch():
    d = np.array([1.0, 2.0, 30.0, 1.5, 2.5, 25.0, 1.0])
    for shuffle in (True, False):
        s = DurationBucketSampler(d, 10.0, num_buckets=2, shuffle=shuffle)
        for e in range(4):
            batches = epoch(s, e)
            assert [2] in batches and [5] in batches
            assert all(d[b].sum() <= 10.0 for b in batches if b not in ([2], [5]))
            assert sorted(i for b in batches for i in b) == list(range(7))


def test_max_batch_size_caps_batch_length():
    d = np.full(50, 0.1)
    s = DurationBucketSampler(d, 100.0, num_buckets=1, max_batch_size=8)
    batches = epoch(s, 0)
    assert max(len(b) for b in batches) == 8
    assert len(batches) == len(s) == 7  # ceil(50 / 8)


def test_batches_are_packed_within_buckets_of_similar_duration():
    d = durations(n=400)
    num_buckets = 4
    s = DurationBucketSampler(d, 30.0, num_buckets=num_buckets, seed=3)
    # Bucket k holds ranks [100k, 100k + 100) of the sorted durations.
    rank = np.empty(len(d), dtype=int)
    rank[np.argsort(d, kind="stable")] = np.arange(len(d))
    for e in range(3):
        for b in epoch(s, e):
            assert len({int(rank[i]) // 100 for i in b}) == 1


def test_no_shuffle_is_deterministic_and_sorted():
    d = durations()
    s = DurationBucketSampler(d, 40.0, num_buckets=5, shuffle=False)
    first = epoch(s, 0)
    assert epoch(s, 5) == first
    assert first == epoch(DurationBucketSampler(d, 40.0, num_buckets=5, shuffle=False), 0)
    flat = [i for b in first for i in b]
    assert np.all(np.diff(d[flat]) >= 0)  # shortest bucket first, ascending inside


def test_shuffle_changes_between_epochs_but_is_reproducible():
    d = durations()
    a = DurationBucketSampler(d, 40.0, num_buckets=5, seed=11)
    b = DurationBucketSampler(d, 40.0, num_buckets=5, seed=11)
    e0, e1 = epoch(a, 0), epoch(a, 1)
    assert e0 != e1
    # contents change too, not only the order of batches
    assert {frozenset(x) for x in e0} != {frozenset(x) for x in e1}
    assert epoch(b, 1) == e1 and epoch(b, 0) == e0  # same seed and epoch -> same batches
    assert epoch(a, 0) == e0  # going back to an epoch reproduces it
    c = DurationBucketSampler(d, 40.0, num_buckets=5, seed=12)
    assert epoch(c, 0) != e0


def test_len_is_the_same_for_every_epoch():
    d = durations(n=1000, lo=1.0, hi=35.0)
    s = DurationBucketSampler(d, 200.0, num_buckets=10, seed=0)
    n = len(s)
    for e in range(6):
        assert len(epoch(s, e)) == n == len(s)


@pytest.mark.parametrize("num_replicas", [2, 3, 4])
def test_ddp_shares_are_disjoint_equal_and_cover_everything(num_replicas):
    d = durations(n=301)
    for e in range(2):
        shares = []
        for rank in range(num_replicas):
            s = DurationBucketSampler(d, 40.0, num_buckets=5, seed=5, num_replicas=num_replicas, rank=rank)
            shares.append(epoch(s, e))
            assert len(shares[-1]) == len(s)
        total = DurationBucketSampler(d, 40.0, num_buckets=5, seed=5).total_batches
        assert len({len(x) for x in shares}) == 1  # equal number of batches per rank
        assert len(shares[0]) == -(-total // num_replicas)
        covered = {i for share in shares for b in share for i in b}
        assert covered == set(range(len(d)))
        # Disjoint except for the padding: exactly (padded - total) batches repeat.
        all_batches = [tuple(b) for share in shares for b in share]
        padding = len(all_batches) - total
        assert len(set(all_batches)) == total and 0 <= padding < num_replicas
        if padding == 0:
            assert sum(len(b) for b in all_batches) == len(d)


def test_ddp_disjoint_when_divisible():
    d = np.full(40, 1.0)
    shares = [
        epoch(DurationBucketSampler(d, 4.0, num_buckets=2, num_replicas=2, rank=r), 0) for r in range(2)
    ]  # 10 batches of 4
    a = {i for b in shares[0] for i in b}
    b = {i for b in shares[1] for i in b}
    assert not a & b and a | b == set(range(40)) and len(shares[0]) == len(shares[1]) == 5


def test_fewer_batches_than_replicas_pads_cyclically():
    d = np.array([1.0, 1.0])
    shares = [epoch(DurationBucketSampler(d, 10.0, num_buckets=1, num_replicas=3, rank=r), 0) for r in range(3)]
    assert all(len(x) == 1 for x in shares)
    assert sorted(shares[0][0]) == [0, 1] and shares[0] == shares[1] == shares[2]


def test_bad_arguments():
    with pytest.raises(ValueError, match="index 1 is"):
        DurationBucketSampler([1.0, 0.0], 10.0)
    with pytest.raises(ValueError, match="max_batch_seconds"):
        DurationBucketSampler([1.0], 0.0)
    with pytest.raises(ValueError, match="rank"):
        DurationBucketSampler([1.0], 10.0, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="non-empty"):
        DurationBucketSampler([], 10.0)


def _take(iterable, n):
    it = iter(iterable)
    return [next(it) for _ in range(n)]


def test_step_batches_are_the_epochs_one_after_the_other_from_any_start():
    """Position p is batch p % len of epoch p // len, on every rank, whatever position a stream
    starts from: a run stopped anywhere and restarted at its step sees the batches it would have."""
    d = np.linspace(1, 5, 41)
    for rank in (0, 1):
        epochs = DurationBucketSampler(d, 8.0, num_buckets=3, seed=1, num_replicas=2, rank=rank, augment_seeds=True)
        per_epoch = len(epochs)
        stream = [b for e in range(4) for b in epochs.rank_batches(e)]  # (4 * per_epoch,) epochs 0-3 in order
        assert stream[:per_epoch] == list(epochs), "position 0 is epoch 0's first batch"
        for start in (0, 3, per_epoch - 1, per_epoch, 2 * per_epoch + 1):
            batches = StepBatches(epochs, start=lambda: start)
            assert _take(batches, len(stream) - start) == stream[start:]
        # the start is read when an iteration begins (a restored step), not when the stream is made
        position = [0]
        batches = StepBatches(epochs, start=lambda: position[0])
        position[0] = per_epoch + 2
        assert _take(batches, 3) == stream[per_epoch + 2:per_epoch + 5]
        with pytest.raises(TypeError):
            len(batches)  # endless: a loader over it has no length, the trainer stops at its step count
    # the seeds follow the epoch of the position: another epoch, other masks for the same item
    first = {i: seed for b in stream[:per_epoch] for i, seed in b}
    second = {i: seed for b in stream[per_epoch:2 * per_epoch] for i, seed in b}
    common = first.keys() & second.keys()  # (a rank's share of the items changes between epochs)
    assert len(common) > 5 and all(first[i] != second[i] for i in common)


def test_is_padding_marks_exactly_the_repeated_batches():
    d = np.linspace(1, 5, 23)
    ranks = [DurationBucketSampler(d, 6.0, num_buckets=2, shuffle=False, num_replicas=3, rank=r) for r in range(3)]
    total = ranks[0].total_batches
    assert total % 3, "the test needs a batch count that does not divide by the ranks"
    real = [b for s in ranks for p, b in enumerate(s) if not s.is_padding(p)]
    padding = [b for s in ranks for p, b in enumerate(s) if s.is_padding(p)]
    assert sorted(real) == sorted(ranks[0].epoch_batches()), "the non-padding batches are the epoch, once each"
    assert len(padding) == 3 * len(ranks[0]) - total and all(b in real for b in padding)
