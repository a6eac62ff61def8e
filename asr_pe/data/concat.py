"""Longer training inputs by concatenation: a training-time remedy for length generalisation.

``data.concat_max_seconds: N`` joins training utterances into inputs of up to N seconds, for
any PE: the utterances are shuffled once with the run's seed and packed greedily in that order
(an utterance longer than N stays alone), and each packed group is one training example: the
features of its utterances one after the other (each with its own CMVN and SpecAugment), the
transcripts joined by a space. The grouping is fixed for the run (so the duration-bucketed
sampler, its epoch order and a mid-epoch resume work as for plain utterances); the features
come from the base dataset's cache, so nothing is written to disk.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from asr_pe.data.dataset import ASRDataset, encode_all
from asr_pe.data.manifest import Utterance
from asr_pe.data.sampler import augment_seed


def pack_groups(durations: Sequence[float], max_seconds: float, seed: int = 0) -> list[list[int]]:
    """Indices of ``durations`` in groups of total duration <= ``max_seconds`` (one index alone
    may exceed it): a seeded shuffle, then greedy packing in that order. Every index once."""
    if max_seconds <= 0:
        raise ValueError(f"data.concat_max_seconds must be > 0, got {max_seconds}")
    order = list(range(len(durations)))
    random.Random(seed).shuffle(order)
    groups: list[list[int]] = []
    current: list[int] = []
    total = 0.0
    for i in order:
        if current and total + durations[i] > max_seconds:
            groups.append(current)
            current, total = [], 0.0
        current.append(i)
        total += durations[i]
    if current:
        groups.append(current)
    return groups


class ConcatDataset(torch.utils.data.Dataset):
    """Items of ``base`` (an ``ASRDataset`` with a tokenizer) joined in ``groups``."""

    def __init__(self, base: ASRDataset, groups: Sequence[Sequence[int]]):
        assert base.tokenizer is not None, "ConcatDataset needs a dataset with a tokenizer"
        seen = sorted(i for g in groups for i in g)
        assert seen == list(range(len(base))), "every utterance must be in exactly one group"
        self.base = base
        self.groups = [list(g) for g in groups]
        self.utterances = [self._joined(g) for g in self.groups]
        self._tokens = encode_all(self.utterances, base.tokenizer)

    def _joined(self, group: list[int]) -> Utterance:
        utts = [self.base.utterances[i] for i in group]
        first = utts[0]
        return Utterance(
            id="+".join(u.id for u in utts), audio_filepath=first.audio_filepath,
            duration=sum(u.duration for u in utts), text=" ".join(u.text for u in utts),
            offset=first.offset, source=first.source,
        )

    @property
    def durations(self) -> list[float]:
        return [u.duration for u in self.utterances]

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, key: int | tuple[int, int]) -> dict[str, Any]:
        """Item ``key``: an index, or ``(index, seed)``; each part's masks then get a seed of their own."""
        i, seed = key if isinstance(key, tuple) else (key, None)
        keys = self.groups[i] if seed is None else [(j, augment_seed(seed, 0, n)) for n, j in enumerate(self.groups[i])]
        parts = [self.base[k] for k in keys]
        utt = self.utterances[i]
        return {
            "id": utt.id,
            "features": torch.cat([p["features"] for p in parts], dim=0),  # (ΣT, F)
            "tokens": torch.tensor(self._tokens[i], dtype=torch.int64),  # (U,)
            "text": utt.text,
            "duration": utt.duration,
        }
