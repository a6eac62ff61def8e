"""Attention statistics: hand-computable patterns (one-hot, uniform, fixed key), block invariance."""

import math

import pytest
import torch

from asr_pe.evaluation.attention_stats import attention_stats

SHIFT = 0.04


def test_diagonal_attention_is_local_and_certain():
    s = attention_stats(torch.eye(50).expand(2, 50, 50), SHIFT)
    for h in range(2):
        assert s["mean_distance_s"][h] == 0 and s["entropy"][h] == 0 and s["norm_entropy"][h] == 0
        assert s["local_mass"][h] == pytest.approx(1.0)


def test_uniform_attention_is_maximally_spread():
    T = 40
    s = attention_stats(torch.full((1, T, T), 1.0 / T), SHIFT)
    assert s["entropy"][0].item() == pytest.approx(math.log(T))
    assert s["norm_entropy"][0].item() == pytest.approx(1.0)
    # E|i - j| for i, j uniform on 0..T-1 is (T^2 - 1) / (3T) frames
    assert s["mean_distance_s"][0].item() == pytest.approx((T * T - 1) / (3 * T) * SHIFT)
    # within ±0.5 s = ±12.5 frames: per query the keys |i - j| <= 12, averaged over queries
    inside = sum(min(i + 12, T - 1) - max(i - 12, 0) + 1 for i in range(T)) / (T * T)
    assert s["local_mass"][0].item() == pytest.approx(inside)


def test_every_query_on_the_first_frame():
    T = 30
    w = torch.zeros(1, T, T)
    w[:, :, 0] = 1
    s = attention_stats(w, SHIFT, local_s=0.2)                      # ±5 frames
    assert s["mean_distance_s"][0].item() == pytest.approx((T - 1) / 2 * SHIFT)
    assert s["local_mass"][0].item() == pytest.approx(6 / T)        # queries 0..5
    assert s["entropy"][0].item() == 0


def test_query_blocks_do_not_change_the_result():
    w = torch.randn(3, 37, 37).softmax(-1)
    whole = attention_stats(w, SHIFT, query_block=512)
    for block in (1, 7, 36):
        parts = attention_stats(w, SHIFT, query_block=block)
        for k in whole:
            torch.testing.assert_close(parts[k], whole[k])


def test_rejects_batched_or_non_square_weights():
    with pytest.raises(AssertionError, match="one utterance"):
        attention_stats(torch.rand(1, 2, 5, 5), SHIFT)
    with pytest.raises(AssertionError, match="one utterance"):
        attention_stats(torch.rand(2, 5, 4), SHIFT)


def test_weights_that_are_not_distributions_are_refused():
    """REM's diagnostic weights, (1 − σ)·softmax + σ·P with P signed and unnormalised, have no
    share, distance or entropy: refused instead of summarised into numbers that look like shares."""
    from asr_pe.errors import NotDistributions
    from asr_pe.models.positional.rem import REMPE

    torch.manual_seed(0)
    T = 40
    softmax = torch.softmax(torch.randn(1, 4, T, T), dim=-1)
    attention_stats(softmax[0], 0.04)                                       # probabilities: fine
    rem = REMPE(d_model=16, n_heads=4)
    pos = torch.arange(T)
    mixed = rem.mix_weights(softmax, pos, pos, None)
    with pytest.raises(NotDistributions, match="not distributions"):
        attention_stats(mixed[0], 0.04)
    with pytest.raises(NotDistributions):
        attention_stats(softmax[0] * 1.01, 0.04)                            # rows summing to 1.01
