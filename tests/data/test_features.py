"""Fbank shape/determinism, CMVN statistics and persistence, SpecAugment masking."""

import math

import pytest
import torch

from asr_pe.data.features import FbankExtractor, GlobalCMVN, SpecAugment


def noise(n, seed=0, scale=0.1):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g) * scale).clamp(-1, 1)


@pytest.mark.parametrize("n", [400, 401, 559, 560, 16000, 23456])
def test_fbank_frame_count_matches_kaldi_formula(n):
    fb = FbankExtractor()
    feats = fb(noise(n))
    expected = 1 + (n - 400) // 160  # 25 ms window, 10 ms shift at 16 kHz, snip_edges
    assert feats.shape == (expected, 80)
    assert fb.num_frames(n) == expected
    assert feats.dtype == torch.float32 and torch.isfinite(feats).all()


def test_fbank_shorter_than_one_window_gives_no_frames():
    fb = FbankExtractor(num_mel_bins=40)
    assert fb(noise(399)).shape == (0, 40)
    assert fb.num_frames(399) == 0 and fb.num_frames(0) == 0


def test_fbank_other_configuration():
    fb = FbankExtractor(num_mel_bins=64, sample_rate=8000, frame_length_ms=20.0, frame_shift_ms=5.0)
    # window 160 samples, shift 40 samples at 8 kHz
    assert fb(noise(8000)).shape == (1 + (8000 - 160) // 40, 64)
    assert fb.frames_per_second == 200.0


def test_fbank_is_deterministic_without_dither_and_uses_int16_scale():
    fb = FbankExtractor()
    x = noise(8000)
    assert torch.equal(fb(x), fb(x))
    # Kaldi features of int16-scaled input: scaling the wave by 2 adds log(4) to every log-mel energy
    # (no energy floor involved), which pins the scale convention down only up to a constant, so also
    # check the absolute level: a 0.1-std noise in int16 units has log-mel energies well above 0.
    diff = fb(2 * x) - fb(x)
    torch.testing.assert_close(diff, torch.full_like(diff, math.log(4.0)), atol=1e-3, rtol=0)
    assert fb(x).mean() > 5.0


def test_cmvn_normalises_its_own_data_to_zero_mean_unit_variance():
    fb = FbankExtractor()
    feats = [fb(noise(n, seed=s, scale=0.05 * (s + 1))) for s, n in enumerate([4000, 9000, 16000, 1200])]
    cmvn = GlobalCMVN.from_features(iter(feats))  # a one-pass stream
    assert cmvn.count == sum(f.shape[0] for f in feats)
    normed = torch.cat([cmvn(f) for f in feats]).double()
    torch.testing.assert_close(normed.mean(0), torch.zeros(80, dtype=torch.float64), atol=1e-4, rtol=0)
    torch.testing.assert_close(normed.std(0, unbiased=False), torch.ones(80, dtype=torch.float64), atol=1e-4, rtol=0)


def test_cmvn_streaming_equals_direct_float64_statistics():
    g = torch.Generator().manual_seed(1)
    chunks = [torch.randn(t, 5, generator=g) * 3 + 1000 for t in (1, 7, 30, 0, 2)]  # large offset
    cmvn = GlobalCMVN.from_features(chunks)
    allx = torch.cat(chunks).double()
    torch.testing.assert_close(cmvn.mean.double(), allx.mean(0), atol=1e-3, rtol=0)
    torch.testing.assert_close(cmvn.std.double(), allx.std(0, unbiased=False), atol=1e-4, rtol=1e-5)


def test_cmvn_constant_bin_is_floored_and_errors():
    cmvn = GlobalCMVN.from_features([torch.ones(10, 3)])
    assert torch.isfinite(cmvn(torch.ones(4, 3))).all()
    with pytest.raises(ValueError, match="no feature frames"):
        GlobalCMVN.from_features([torch.zeros(0, 3)])
    with pytest.raises(ValueError, match="features #1 have 4 bins"):
        GlobalCMVN.from_features([torch.ones(2, 3), torch.ones(2, 4)])
    with pytest.raises(AssertionError, match=r"CMVN expects \(T, 3\)"):
        cmvn(torch.ones(2, 5))


def test_cmvn_save_load_round_trip(tmp_path):
    cmvn = GlobalCMVN(torch.tensor([1.0, -2.0, 0.5]), torch.tensor([2.0, 0.25, 1.0]), count=17)
    path = tmp_path / "run" / "cmvn.json"
    cmvn.save(path)
    loaded = GlobalCMVN.load(path)
    assert torch.equal(loaded.mean, cmvn.mean) and torch.equal(loaded.std, cmvn.std) and loaded.count == 17
    assert GlobalCMVN.from_dict(cmvn.to_dict()).mean.tolist() == [1.0, -2.0, 0.5]
    x = torch.randn(6, 3)
    torch.testing.assert_close(loaded(x), (x - cmvn.mean) / cmvn.std)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="bad.json: not a valid CMVN file"):
        GlobalCMVN.load(tmp_path / "bad.json")


def test_spec_augment_masks_only_when_applied_in_training():
    torch.manual_seed(0)
    feats = torch.randn(400, 80) + 5.0  # no exact zeros in the input
    original = feats.clone()
    aug = SpecAugment(freq_masks=2, freq_width=27, time_masks=2, time_width_ratio=0.05, max_time_width=40)
    masked_any = False
    for _ in range(20):
        out = aug(feats)
        assert out.shape == feats.shape
        zero = out == 0
        # Masks are whole rows (time) or whole columns (frequency) set to 0.
        zero_cols = zero.all(dim=0)
        zero_rows = zero.all(dim=1)
        assert torch.equal(zero, zero_cols[None, :] | zero_rows[:, None])
        assert int(zero_cols.sum()) <= 2 * 26  # widths are drawn from [0, freq_width)
        assert int(zero_rows.sum()) <= 2 * 19  # min(40, 0.05 * 400) = 20 -> widths in [0, 20)
        masked_any |= bool(zero.any())
    assert masked_any
    assert torch.equal(feats, original)  # the input is not modified

    aug.eval()
    assert torch.equal(aug(feats), feats)  # identity outside training


def test_spec_augment_with_a_seed_draws_its_masks_from_it_alone():
    feats = torch.randn(400, 80, generator=torch.Generator().manual_seed(0)) + 5.0
    aug = SpecAugment(freq_masks=2, freq_width=27, time_masks=2, time_width_ratio=0.05, max_time_width=40)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    first = aug(feats, seed=7)
    assert torch.equal(torch.get_rng_state(), before), "a seeded draw moved the global random state"
    torch.manual_seed(999)  # whatever the global state, the same seed gives the same masks
    assert torch.equal(aug(feats, seed=7), first)
    others = [aug(feats, seed=s) for s in range(8, 16)]
    assert any(not torch.equal(o == 0, first == 0) for o in others), "the seed does not change the masks"
    assert (first == 0).any()


def test_spec_augment_time_width_adapts_to_length():
    torch.manual_seed(0)
    aug = SpecAugment(freq_masks=0, time_masks=1, time_width_ratio=0.05, max_time_width=40)
    # 0.05 * 30 = 1.5 -> max width 1 -> widths in [0, 1): nothing can be masked in a short input
    for _ in range(20):
        assert not (aug(torch.ones(30, 10)) == 0).any()
    # long input: capped by max_time_width
    widths = [int((aug(torch.ones(5000, 10)) == 0).all(1).sum()) for _ in range(50)]
    assert max(widths) < 40 and max(widths) > 0
