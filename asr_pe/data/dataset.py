"""Utterances -> features and token ids; padding collate; CTC feasibility filter; CMVN stats."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from asr_pe.data.audio import load_audio
from asr_pe.data.features import FbankExtractor, GlobalCMVN, SpecAugment
from asr_pe.data.manifest import Utterance
from asr_pe.data.tempo import check_tempo, time_stretch
from asr_pe.data.tokenizer import Tokenizer, TokenizerError

logger = logging.getLogger(__name__)

# How many failures/ids an error or warning quotes.
MAX_REPORTED = 5
TOKEN_PAD = -1


def _where(utt: Utterance) -> str:
    return f"{utt.source}: utterance {utt.id!r}" if utt.source else f"utterance {utt.id!r}"


def encode_all(utterances: Sequence[Utterance], tokenizer: Tokenizer) -> list[list[int]]:
    """Token ids of every transcript; one ``TokenizerError`` listing the bad manifest lines."""
    encoded: list[list[int]] = []
    failures: list[str] = []
    for utt in utterances:
        try:
            ids = tokenizer.encode(utt.text)
            if not ids:
                raise TokenizerError("transcript encodes to no tokens")
        except TokenizerError as e:
            failures.append(f"{_where(utt)}: {e}")
            ids = []
        encoded.append(ids)
    if failures:
        shown = "\n  ".join(failures[:MAX_REPORTED])
        more = len(failures) - MAX_REPORTED
        raise TokenizerError(
            f"{len(failures)} of {len(utterances)} transcripts cannot be encoded by the tokenizer:\n  {shown}"
            + (f"\n  ... and {more} more" if more > 0 else "")
        )
    return encoded


class ASRDataset(torch.utils.data.Dataset):
    """Loads audio and computes features on access; token ids are computed up front.

    All transcripts are encoded in ``__init__`` so an unencodable one fails the run at once,
    naming its manifest line. ``tokenizer=None`` yields ``tokens=None`` (evaluation against
    raw references). With ``cache_features=True`` the raw fbank (before CMVN and
    SpecAugment, so augmentation stays fresh) is kept in memory; each DataLoader worker
    holds its own cache, so use it with persistent workers or ``num_workers=0``.

    ``tempo`` (evaluation only, ``eval.tempo``): each wave is time-stretched ``tempo`` times faster
    with its pitch kept before its features are computed (`asr_pe.data.tempo.time_stretch`), and
    an item's ``duration`` is the stretched one, ``duration / tempo``: what the model hears.
    """

    def __init__(
        self,
        utterances: Sequence[Utterance],
        tokenizer: Tokenizer | None = None,
        features: FbankExtractor | None = None,
        cmvn: GlobalCMVN | None = None,
        spec_augment: SpecAugment | None = None,
        cache_features: bool = False,
        tempo: float = 1.0,
    ):
        self.utterances = list(utterances)
        self.tokenizer = tokenizer
        self.features = features if features is not None else FbankExtractor()
        self.cmvn = cmvn
        self.spec_augment = spec_augment
        self.cache_features = bool(cache_features)
        self.tempo = check_tempo(tempo)
        self._cache: dict[int, torch.Tensor] = {}
        self._tokens = encode_all(self.utterances, tokenizer) if tokenizer is not None else None

    @property
    def durations(self) -> list[float]:
        return [u.duration for u in self.utterances]

    def __len__(self) -> int:
        return len(self.utterances)

    def raw_features(self, i: int) -> torch.Tensor:
        """Fbank of utterance ``i`` before CMVN/SpecAugment, ``(T, F)``."""
        if i in self._cache:
            return self._cache[i]
        utt = self.utterances[i]
        wave = load_audio(
            utt.audio_filepath,
            offset=utt.offset,
            duration=utt.duration,
            sample_rate=self.features.sample_rate,
            source=utt.source or f"utterance {utt.id!r}",
        )
        if self.tempo != 1.0:
            wave = time_stretch(wave, self.tempo, self.features.sample_rate)  # (round(N / tempo),)
        feats = self.features(wave)  # (T, F)
        if self.cache_features:
            self._cache[i] = feats
        return feats

    def __getitem__(self, key: int | tuple[int, int]) -> dict[str, Any]:
        """Item ``key``: an index, or ``(index, seed of its SpecAugment masks)`` (the training sampler's)."""
        i, seed = key if isinstance(key, tuple) else (key, None)
        utt = self.utterances[i]
        feats = self.raw_features(i)
        if self.cmvn is not None:
            feats = self.cmvn(feats)
        if self.spec_augment is not None:
            feats = self.spec_augment(feats, seed)
        tokens = None
        if self._tokens is not None:
            tokens = torch.tensor(self._tokens[i], dtype=torch.int64)  # (U,)
        duration = utt.duration if self.tempo == 1.0 else utt.duration / self.tempo
        return {"id": utt.id, "features": feats, "tokens": tokens, "text": utt.text, "duration": duration}


def collate(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pad a list of dataset items into a batch.

    features are zero-padded to ``(B, T_max, F)``; tokens are padded with -1 to
    ``(B, U_max)``. Items without tokens (``tokenizer=None``) give ``tokens`` and
    ``token_lengths`` of None.
    """
    if not items:
        raise ValueError("collate: empty batch")
    batch_size = len(items)
    feats = [it["features"] for it in items]
    num_bins = feats[0].shape[1]
    assert all(f.dim() == 2 and f.shape[1] == num_bins for f in feats), (
        f"collate: features must all be (T, {num_bins}), got {[tuple(f.shape) for f in feats]}"
    )
    feature_lengths = torch.tensor([f.shape[0] for f in feats], dtype=torch.int64)  # (B,)
    padded = feats[0].new_zeros(batch_size, int(feature_lengths.max()), num_bins)  # (B, T, F)
    for b, f in enumerate(feats):
        padded[b, : f.shape[0]] = f
    out: dict[str, Any] = {
        "ids": [it["id"] for it in items],
        "texts": [it["text"] for it in items],
        "durations": torch.tensor([float(it["duration"]) for it in items], dtype=torch.float32),
        "features": padded,
        "feature_lengths": feature_lengths,
        "tokens": None,
        "token_lengths": None,
    }
    has_tokens = [it.get("tokens") is not None for it in items]
    if any(has_tokens):
        assert all(has_tokens), "collate: some items have tokens and some do not"
        toks = [it["tokens"] for it in items]
        token_lengths = torch.tensor([t.numel() for t in toks], dtype=torch.int64)  # (B,)
        tokens = torch.full((batch_size, int(token_lengths.max())), TOKEN_PAD, dtype=torch.int64)  # (B, U)
        for b, t in enumerate(toks):
            tokens[b, : t.numel()] = t
        out["tokens"] = tokens
        out["token_lengths"] = token_lengths
    return out


def ctc_min_frames(ids: Sequence[int]) -> int:
    """Shortest CTC alignment: one frame per token plus a blank between each repeated pair."""
    repeats = sum(1 for a, b in zip(ids, ids[1:]) if a == b)
    return len(ids) + repeats


def filter_for_ctc(
    utterances: Sequence[Utterance],
    tokenizer: Tokenizer,
    encoder_frames_per_second: float,
    *,
    encoder_frames: Callable[[float], int] | None = None,
) -> tuple[list[Utterance], dict[str, Any]]:
    """Drop utterances whose transcript CTC cannot align (needs U + repeats encoder frames).

    Encoder frames are estimated as ``floor(duration * encoder_frames_per_second)``; pass
    ``encoder_frames(duration) -> int`` for an exact count (front-end edge effects).
    Returns ``(kept, {"dropped": n, "ids": [dropped ids]})`` and logs a warning when n > 0.
    """
    assert encoder_frames_per_second > 0, "encoder_frames_per_second must be > 0"
    if encoder_frames is None:
        # The epsilon keeps 2.3 s * 10 fps (= 22.999...) at 23 frames.
        def encoder_frames(duration: float) -> int:
            return math.floor(duration * encoder_frames_per_second + 1e-6)

    encoded = encode_all(utterances, tokenizer)
    kept: list[Utterance] = []
    dropped: list[str] = []
    for utt, ids in zip(utterances, encoded):
        if encoder_frames(utt.duration) >= ctc_min_frames(ids):
            kept.append(utt)
        else:
            dropped.append(utt.id)
    if dropped:
        logger.warning(
            "filter_for_ctc: dropped %d of %d utterances with more CTC tokens than encoder frames "
            "(%.1f frames/s), e.g. %s",
            len(dropped),
            len(utterances),
            encoder_frames_per_second,
            ", ".join(dropped[:MAX_REPORTED]),
        )
    return kept, {"dropped": len(dropped), "ids": dropped}


def compute_cmvn(
    utterances: Sequence[Utterance],
    features: FbankExtractor,
    max_utterances: int | None = None,
) -> GlobalCMVN:
    """Global CMVN from the audio of ``utterances``.

    With ``max_utterances`` an evenly spaced subset is used (deterministic, and spread over
    the manifest rather than its first lines, which are often one speaker).
    """
    utterances = list(utterances)
    if not utterances:
        raise ValueError("compute_cmvn: no utterances")
    if max_utterances is not None and max_utterances < len(utterances):
        assert max_utterances > 0, "max_utterances must be > 0"
        step = len(utterances) / max_utterances
        utterances = [utterances[int(k * step)] for k in range(max_utterances)]

    def stream():
        for utt in utterances:
            wave = load_audio(
                utt.audio_filepath,
                offset=utt.offset,
                duration=utt.duration,
                sample_rate=features.sample_rate,
                source=utt.source or f"utterance {utt.id!r}",
            )
            yield features(wave)

    return GlobalCMVN.from_features(stream())
