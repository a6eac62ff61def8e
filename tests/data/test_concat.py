"""Training inputs joined by concatenation (data.concat_max_seconds): packing, and items that
are exactly their utterances one after the other."""

from __future__ import annotations

import pytest
import torch

from asr_pe.data.concat import ConcatDataset, pack_groups
from asr_pe.data.dataset import ASRDataset
from asr_pe.data.manifest import Utterance
from asr_pe.data.tokenizer import build_tokenizer


def test_pack_groups_covers_every_utterance_once_within_the_limit():
    durations = [1.0, 4.5, 2.0, 3.0, 0.5, 6.0, 2.5, 1.5]
    groups = pack_groups(durations, 5.0, seed=0)
    assert sorted(i for g in groups for i in g) == list(range(len(durations)))
    for g in groups:
        assert len(g) == 1 or sum(durations[i] for i in g) <= 5.0
    assert [5] in groups, "an utterance longer than the limit stays alone"
    assert pack_groups(durations, 5.0, seed=0) == groups
    assert pack_groups(durations, 5.0, seed=1) != groups


def test_pack_groups_packs_greedily():
    groups = pack_groups([1.0] * 10, 3.0, seed=0)
    assert [len(g) for g in groups] == [3, 3, 3, 1]
    with pytest.raises(ValueError, match="concat_max_seconds"):
        pack_groups([1.0], 0)


def _dataset(tmp_path):
    import numpy as np
    import soundfile as sf

    utts = []
    rng = np.random.default_rng(0)
    for i, (dur, text) in enumerate([(0.5, "ab a"), (0.7, "ba"), (0.4, "aa b")]):
        path = tmp_path / f"u{i}.wav"
        sf.write(path, (rng.standard_normal(int(16000 * dur)) * 0.1).astype("float32"), 16000)
        utts.append(Utterance(f"u{i}", str(path), dur, text))
    tok = build_tokenizer("char", [u.text for u in utts], tmp_path)
    return ASRDataset(utts, tok, cache_features=True), tok


def test_a_joined_item_is_its_utterances_one_after_the_other(tmp_path):
    base, tok = _dataset(tmp_path)
    ds = ConcatDataset(base, [[2, 0], [1]])
    assert len(ds) == 2 and ds.durations == pytest.approx([0.9, 0.7])
    item = ds[0]
    torch.testing.assert_close(item["features"], torch.cat([base[2]["features"], base[0]["features"]]))
    assert item["text"] == "aa b ab a" and item["id"] == "u2+u0"
    assert item["tokens"].tolist() == tok.encode("aa b ab a")
    assert ds[1]["text"] == "ba"


def test_groups_must_cover_the_dataset(tmp_path):
    base, _ = _dataset(tmp_path)
    with pytest.raises(AssertionError, match="exactly one group"):
        ConcatDataset(base, [[0, 1]])
