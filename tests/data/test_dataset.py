"""ASRDataset items, collate padding, errors naming manifest lines, CTC filter, CMVN helper."""

import json
import logging

import numpy as np
import pytest
import torch

from asr_pe.data.audio import AudioError
from asr_pe.data.dataset import ASRDataset, collate, compute_cmvn, ctc_min_frames, filter_for_ctc
from asr_pe.data.features import FbankExtractor, GlobalCMVN, SpecAugment
from asr_pe.data.manifest import Utterance, read_manifest
from asr_pe.data.sampler import DurationBucketSampler
from asr_pe.data.tokenizer import CharTokenizer, TokenizerError

SR = 16000


def noise(seconds, seed):
    return (np.random.default_rng(seed).standard_normal(int(round(seconds * SR))) * 0.1).astype(np.float32)


@pytest.fixture()
def corpus(tmp_path, write_audio):
    """Three files, one of them read as two segments; returns (manifest path, utterances)."""
    write_audio("wav/a.wav", noise(0.5, 0))
    write_audio("wav/b.flac", noise(1.2, 1))
    write_audio("wav/long.wav", noise(2.0, 2))
    records = [
        {"audio_filepath": "wav/a.wav", "duration": 0.5, "text": "a cab"},
        {"audio_filepath": "wav/b.flac", "duration": 1.2, "text": "bad"},
        {"audio_filepath": "wav/long.wav", "duration": 0.75, "offset": 0.25, "text": "dab a bed"},
        {"audio_filepath": "wav/long.wav", "duration": 1.0, "offset": 1.0, "text": "ebb"},
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, read_manifest(path)


def test_items_have_features_tokens_and_metadata(corpus):
    _, utts = corpus
    tok = CharTokenizer.from_texts(u.text for u in utts)
    fb = FbankExtractor()
    ds = ASRDataset(utts, tok, fb)
    assert len(ds) == 4 and ds.durations == [0.5, 1.2, 0.75, 1.0]
    for i, utt in enumerate(utts):
        item = ds[i]
        assert item["id"] == utt.id and item["text"] == utt.text and item["duration"] == utt.duration
        n = int(round(utt.duration * SR))
        assert item["features"].shape == (fb.num_frames(n), 80)
        assert item["features"].dtype == torch.float32
        assert item["tokens"].dtype == torch.int64
        assert item["tokens"].tolist() == tok.encode(utt.text)


def test_cmvn_and_spec_augment_are_applied_after_the_raw_features(corpus):
    _, utts = corpus
    tok = CharTokenizer.from_texts(u.text for u in utts)
    raw = ASRDataset(utts, tok)
    cmvn = GlobalCMVN.from_features(raw[i]["features"] for i in range(len(raw)))
    normed = ASRDataset(utts, tok, cmvn=cmvn)
    torch.testing.assert_close(normed[1]["features"], cmvn(raw[1]["features"]))
    torch.manual_seed(0)
    aug = ASRDataset(utts, tok, cmvn=cmvn, spec_augment=SpecAugment(freq_width=30, max_time_width=10))
    assert any(bool((aug[1]["features"] == 0).all(dim=0).any()) for _ in range(10))  # a masked bin


def test_tokenizer_none_gives_no_tokens(corpus):
    _, utts = corpus
    ds = ASRDataset(utts)
    assert ds[0]["tokens"] is None
    batch = collate([ds[0], ds[1]])
    assert batch["tokens"] is None and batch["token_lengths"] is None
    assert batch["texts"] == ["a cab", "bad"]


def test_unencodable_texts_fail_in_init_naming_manifest_lines(corpus):
    path, utts = corpus
    tok = CharTokenizer.from_texts(["a b c d"])  # no 'e'
    with pytest.raises(TokenizerError) as info:
        ASRDataset(utts, tok)
    msg = str(info.value)
    assert "2 of 4 transcripts" in msg
    assert f"{path}:3: utterance 'long_0.25'" in msg and f"{path}:4: utterance 'long_1'" in msg
    assert "'e'" in msg


def test_audio_errors_name_the_manifest_line(corpus, tmp_path):
    path, utts = corpus
    ds = ASRDataset(utts, CharTokenizer.from_texts(u.text for u in utts))
    (tmp_path / "wav" / "b.flac").unlink()
    with pytest.raises(AudioError, match=rf"^{path}:2: cannot load audio .*b\.flac: file not found"):
        ds[1]


def test_cache_features_avoids_reloading(corpus, tmp_path):
    _, utts = corpus
    cached = ASRDataset(utts, cache_features=True)
    first = cached[0]["features"]
    (tmp_path / "wav" / "a.wav").unlink()
    assert torch.equal(cached[0]["features"], first)  # served from memory
    with pytest.raises(AudioError):
        ASRDataset(utts)[0]


def test_collate_pads_features_with_zeros_and_tokens_with_minus_one(corpus):
    _, utts = corpus
    tok = CharTokenizer.from_texts(u.text for u in utts)
    ds = ASRDataset(utts, tok)
    items = [ds[i] for i in range(4)]
    batch = collate(items)
    t_lens = [it["features"].shape[0] for it in items]
    u_lens = [len(it["tokens"]) for it in items]
    assert batch["features"].shape == (4, max(t_lens), 80)
    assert batch["feature_lengths"].tolist() == t_lens and batch["feature_lengths"].dtype == torch.int64
    assert batch["tokens"].shape == (4, max(u_lens)) and batch["tokens"].dtype == torch.int64
    assert batch["token_lengths"].tolist() == u_lens
    assert batch["ids"] == [u.id for u in utts] and batch["texts"] == [u.text for u in utts]
    torch.testing.assert_close(batch["durations"], torch.tensor([0.5, 1.2, 0.75, 1.0]))
    for b, it in enumerate(items):
        assert torch.equal(batch["features"][b, : t_lens[b]], it["features"])
        assert (batch["features"][b, t_lens[b] :] == 0).all()
        assert torch.equal(batch["tokens"][b, : u_lens[b]], it["tokens"])
        assert (batch["tokens"][b, u_lens[b] :] == -1).all()
    with pytest.raises(ValueError, match="empty batch"):
        collate([])


def test_dataloader_with_bucket_sampler(corpus):
    _, utts = corpus
    ds = ASRDataset(utts, CharTokenizer.from_texts(u.text for u in utts))
    sampler = DurationBucketSampler(ds.durations, 2.0, num_buckets=2, seed=0)
    loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate)
    seen = []
    for batch in loader:
        assert float(batch["durations"].sum()) <= 2.0 + 1e-6
        seen += batch["ids"]
    assert sorted(seen) == sorted(u.id for u in utts) and len(loader) == len(sampler)


def test_training_batches_augment_each_item_by_its_seed_whatever_the_workers(corpus):
    """The training sampler gives (index, seed) pairs: an item's SpecAugment masks depend on the run's
    seed, the epoch and the item, not on the loader's workers (each with its own random state)."""
    _, utts = corpus
    ds = ASRDataset(utts, CharTokenizer.from_texts(u.text for u in utts),
                    spec_augment=SpecAugment(freq_masks=2, freq_width=20, time_masks=2, max_time_width=10))

    def epoch(workers, epoch_no, seed=0):
        sampler = DurationBucketSampler(ds.durations, 2.0, num_buckets=2, seed=seed, augment_seeds=True)
        sampler.set_epoch(epoch_no)
        loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate, num_workers=workers)
        return {i: f[: n] for b in loader for i, f, n in zip(b["ids"], b["features"], b["feature_lengths"])}

    torch.manual_seed(0)
    main = epoch(0, 1)
    torch.manual_seed(1)  # another global state, and two worker processes seeded from it
    workers = epoch(2, 1)
    assert main.keys() == workers.keys() == {u.id for u in utts}
    assert all(torch.equal(main[k], workers[k]) for k in main)
    assert any((f == 0).any() for f in main.values()), "nothing was masked"
    for other in (epoch(0, 2), epoch(0, 1, seed=1)):  # another epoch or run seed: other masks
        assert any(not torch.equal(main[k], other[k]) for k in main)


def utt(i, text, duration):
    return Utterance(id=f"u{i}", audio_filepath="/nonexistent.wav", duration=duration, text=text, source=f"m:{i + 1}")


def test_ctc_min_frames_counts_repeats():
    assert ctc_min_frames([1, 2, 3]) == 3
    assert ctc_min_frames([1, 1, 2, 2, 2]) == 5 + 3
    assert ctc_min_frames([]) == 0


def test_filter_for_ctc_drops_exactly_the_infeasible(caplog):
    tok = CharTokenizer.from_texts(["ab c"])
    fps = 10.0  # frames = floor(duration * 10)
    utts = [
        utt(0, "ab", 0.2),  # needs 2, has 2 -> keep
        utt(1, "ab", 0.19),  # has 1 -> drop
        utt(2, "aa", 0.2),  # needs 3 (repeat needs a blank), has 2 -> drop
        utt(3, "aa", 0.3),  # has 3 -> keep
        utt(4, "abc cba", 0.69),  # needs 7, has 6 -> drop
        utt(5, "abc cba", 0.7),  # has 7 -> keep
        utt(6, "a" * 12 + "b" * 11, 2.3),  # needs 23 + 21 = 44, has 23 -> drop
        utt(7, "ab" * 11 + "c", 2.3),  # needs 23, 2.3 * 10 = 22.999... still 23 frames -> keep
    ]
    with caplog.at_level(logging.WARNING, logger="asr_pe.data.dataset"):
        kept, report = filter_for_ctc(utts, tok, fps)
    assert [u.id for u in kept] == ["u0", "u3", "u5", "u7"]
    assert report == {"dropped": 4, "ids": ["u1", "u2", "u4", "u6"]}
    msg = " ".join(r.getMessage() for r in caplog.records)
    assert "dropped 4 of 8" in msg and "u1" in msg


def test_filter_for_ctc_with_exact_frame_function_and_nothing_dropped(caplog):
    tok = CharTokenizer.from_texts(["ab"])
    utts = [utt(0, "ab", 1.0), utt(1, "ba", 1.0)]
    kept, report = filter_for_ctc(utts, tok, 25.0, encoder_frames=lambda d: 1)
    assert kept == [] and report["dropped"] == 2
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        kept, report = filter_for_ctc(utts, tok, 25.0)
    assert kept == utts and report == {"dropped": 0, "ids": []} and not caplog.records


def test_filter_for_ctc_unencodable_text_names_line():
    tok = CharTokenizer.from_texts(["ab"])
    with pytest.raises(TokenizerError, match=r"m:2: utterance 'u1': unknown character\(s\) 'z'"):
        filter_for_ctc([utt(0, "ab", 1.0), utt(1, "az", 1.0)], tok, 25.0)


def test_compute_cmvn_matches_direct_statistics(corpus):
    _, utts = corpus
    fb = FbankExtractor()
    ds = ASRDataset(utts, features=fb)
    direct = GlobalCMVN.from_features(ds[i]["features"] for i in range(len(ds)))
    cmvn = compute_cmvn(utts, fb)
    torch.testing.assert_close(cmvn.mean, direct.mean)
    torch.testing.assert_close(cmvn.std, direct.std)
    # an evenly spaced subset: utterances 0 and 2
    sub = compute_cmvn(utts, fb, max_utterances=2)
    assert sub.count == ds[0]["features"].shape[0] + ds[2]["features"].shape[0]
