"""Training losses: CTC with a finiteness mask, label smoothing, sos/eos, hybrid mix."""

import math

import pytest
import torch
import torch.nn.functional as F

from asr_pe.models.losses import LabelSmoothingLoss, add_sos_eos, ctc_loss, hybrid_loss


def make_ctc_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    log_probs = torch.randn(3, 12, 6, generator=g, dtype=torch.float64).log_softmax(-1)  # (B, T, V)
    lengths = torch.tensor([12, 9, 7])
    targets = torch.tensor([[1, 2, 3, 4], [5, 5, -1, -1], [2, 4, 1, -1]])
    target_lengths = torch.tensor([4, 2, 3])
    return log_probs, lengths, targets, target_lengths


def torch_ctc_per_utt(log_probs, lengths, targets, target_lengths):
    return F.ctc_loss(
        log_probs.transpose(0, 1), targets.clamp(min=0), lengths, target_lengths, reduction="none", zero_infinity=False
    )


# ---------------------------------------------------------------- CTC


def test_ctc_reductions_match_torch():
    log_probs, lengths, targets, target_lengths = make_ctc_batch()
    per_utt = torch_ctc_per_utt(log_probs, lengths, targets, target_lengths)
    loss, finite = ctc_loss(log_probs, lengths, targets, target_lengths, reduction="sum")
    assert finite.all()
    assert float(loss) == pytest.approx(float(per_utt.sum()), rel=1e-12)
    loss, _ = ctc_loss(log_probs, lengths, targets, target_lengths, reduction="mean_per_utt")
    assert float(loss) == pytest.approx(float(per_utt.sum()) / 3, rel=1e-12)
    loss, _ = ctc_loss(log_probs, lengths, targets, target_lengths, reduction="mean_per_token")
    assert float(loss) == pytest.approx(float(per_utt.sum()) / 9, rel=1e-12)
    # Frames past ``lengths`` do not matter.
    changed = log_probs.clone()
    changed[2, 7:] = changed[2, 7:].flip(-1)
    loss2, _ = ctc_loss(changed, lengths, targets, target_lengths, reduction="sum")
    assert float(loss2) == pytest.approx(float(per_utt.sum()), rel=1e-12)


def test_ctc_finite_mask_flags_infeasible_utterances_and_keeps_gradients_finite():
    log_probs, lengths, targets, target_lengths = make_ctc_batch()
    lengths = torch.tensor([12, 1, 7])  # utt 1: "5 5" needs 3 frames (a blank between repeats), has 1
    targets[2] = torch.tensor([2, 4, 1, 3])
    target_lengths = torch.tensor([4, 2, 4])
    lengths[2] = 3  # utt 2: 4 labels in 3 frames
    leaf = log_probs.clone().requires_grad_(True)
    loss, finite = ctc_loss(leaf, lengths, targets, target_lengths, reduction="mean_per_utt")
    assert finite.tolist() == [True, False, False]
    expected = torch_ctc_per_utt(log_probs[:1], lengths[:1], targets[:1], target_lengths[:1]).sum()
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-12)  # mean over the one finite utterance
    loss.backward()
    assert torch.isfinite(leaf.grad).all()
    assert leaf.grad[1:].abs().sum() == 0  # excluded utterances get no gradient
    per_utt, mask = ctc_loss(log_probs, lengths, targets, target_lengths, reduction="none")
    assert math.isinf(float(per_utt[1])) and mask.tolist() == [True, False, False]
    # Three frames are enough for "5 5" (5, blank, 5).
    _, finite = ctc_loss(log_probs[1:2], torch.tensor([3]), targets[1:2], torch.tensor([2]))
    assert finite.tolist() == [True]


def test_ctc_all_infeasible_gives_zero_loss_connected_to_graph():
    log_probs, _, targets, target_lengths = make_ctc_batch()
    leaf = log_probs.clone().requires_grad_(True)
    loss, finite = ctc_loss(leaf, torch.tensor([1, 1, 1]), targets, target_lengths)
    assert not finite.any() and float(loss.detach()) == 0.0
    loss.backward()
    assert torch.count_nonzero(leaf.grad) == 0


def test_ctc_rejects_bad_targets():
    log_probs, lengths, targets, target_lengths = make_ctc_batch()
    targets[0, 1] = 0  # blank inside a transcript
    with pytest.raises(ValueError, match="blank"):
        ctc_loss(log_probs, lengths, targets, target_lengths)
    with pytest.raises(ValueError, match="reduction"):
        ctc_loss(log_probs, lengths, targets, target_lengths, reduction="mean")
    with pytest.raises(ValueError, match="lengths"):
        ctc_loss(log_probs, torch.tensor([13, 1, 1]), targets, target_lengths)


# ---------------------------------------------------------------- label smoothing


def test_label_smoothing_zero_equals_cross_entropy_and_ignores_padding():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 7, generator=g)
    target = torch.tensor([[1, 2, 3, -1, -1], [6, 0, 4, 5, 2]])
    ce_sum = F.cross_entropy(logits.reshape(-1, 7), target.reshape(-1), ignore_index=-1, reduction="sum")
    per_batch = LabelSmoothingLoss(7, padding_idx=-1, smoothing=0.0, normalize_length=False)(logits, target)
    per_token = LabelSmoothingLoss(7, padding_idx=-1, smoothing=0.0, normalize_length=True)(logits, target)
    assert float(per_batch) == pytest.approx(float(ce_sum) / 2, rel=1e-5)
    assert float(per_token) == pytest.approx(float(ce_sum) / 8, rel=1e-5)
    changed = logits.clone()
    changed[0, 3:] = 100.0 * torch.randn(2, 7, generator=g)  # only padded positions change
    assert float(LabelSmoothingLoss(7, smoothing=0.1)(changed, target)) == pytest.approx(
        float(LabelSmoothingLoss(7, smoothing=0.1)(logits, target)), rel=1e-6
    )


def test_label_smoothing_is_kl_to_the_smoothed_distribution():
    eps, vocab = 0.2, 5
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(1, 3, vocab, generator=g, dtype=torch.float64)
    target = torch.tensor([[4, 0, -1]])
    loss = LabelSmoothingLoss(vocab, smoothing=eps, normalize_length=True)(logits, target)
    log_p = logits.log_softmax(-1)[0]
    expected = 0.0
    for u, y in enumerate([4, 0]):
        q = torch.full((vocab,), eps / (vocab - 1), dtype=torch.float64)
        q[y] = 1 - eps
        expected += float((q * (q.log() - log_p[u])).sum())
    assert float(loss) == pytest.approx(expected / 2, rel=1e-5)
    # The smoothed distribution itself has zero loss.
    q = torch.full((1, 1, vocab), eps / (vocab - 1), dtype=torch.float64)
    q[0, 0, 2] = 1 - eps
    assert float(LabelSmoothingLoss(vocab, smoothing=eps)(q.log(), torch.tensor([[2]]))) == pytest.approx(0.0, abs=1e-6)


# ---------------------------------------------------------------- sos/eos, hybrid


def test_add_sos_eos_shapes_and_values():
    targets = torch.tensor([[3, 4, 5], [6, -1, -1], [-1, -1, -1]])
    dec_in, dec_target = add_sos_eos(targets, sos=9, eos=9)
    assert dec_in.shape == dec_target.shape == (3, 4)
    assert dec_in.tolist() == [[9, 3, 4, 5], [9, 6, 9, 9], [9, 9, 9, 9]]
    assert dec_target.tolist() == [[3, 4, 5, 9], [6, 9, -1, -1], [9, -1, -1, -1]]
    dec_in, dec_target = add_sos_eos(torch.tensor([[1, 2]]), sos=7, eos=8)
    assert dec_in.tolist() == [[7, 1, 2]] and dec_target.tolist() == [[1, 2, 8]]
    with pytest.raises(ValueError, match="padding only at the end"):
        add_sos_eos(torch.tensor([[1, -1, 2]]), sos=9, eos=9)


def test_hybrid_loss_is_the_weighted_sum():
    ctc, att = torch.tensor(4.0), torch.tensor(2.0)
    assert float(hybrid_loss(ctc, att, 0.3)) == pytest.approx(0.3 * 4.0 + 0.7 * 2.0)
    assert float(hybrid_loss(ctc, att, 1.0)) == 4.0
    assert float(hybrid_loss(torch.tensor(float("nan")), att, 0.0)) == 2.0  # unused loss not touched
    assert float(hybrid_loss(None, att, 0.0)) == 2.0
    with pytest.raises(ValueError, match="ctc_weight"):
        hybrid_loss(ctc, att, 1.5)
    with pytest.raises(ValueError, match="both"):
        hybrid_loss(None, att, 0.5)
