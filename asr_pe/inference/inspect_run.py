"""Look inside a trained run: its test utterances, their features, the encoder's attention.

Shared by the diagnostics scripts (``scripts/plot_attention.py``, ``scripts/attention_vs_length.py``),
which load a run with `asr_pe.inference.run_loading.load_run` and feed it one utterance at a time
(batch 1: no padding, so every attention row covers exactly the utterance).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from omegaconf import DictConfig

from asr_pe.data.audio import load_audio
from asr_pe.data.manifest import Utterance, read_manifest
from asr_pe.errors import ConfigError
from asr_pe.evaluation.pipeline import resolve_test_sets

__all__ = ["run_test_sets", "find_utterance", "cropped_duration", "utterance_features", "encode_with_attention"]


def run_test_sets(cfg: DictConfig, test: str | list[str] | None = None, *,
                  corpus_manifests: Callable[[DictConfig], dict]) -> dict[str, str]:
    """The run's test sets (name -> manifest path); ``test`` overrides ``data.test`` (names or manifests).
    ``corpus_manifests`` locates the corpus (the scripts pass `asr_pe.training.data.resolve_manifests`,
    as ``evaluate.py`` does to `asr_pe.evaluation.pipeline.evaluate_run`)."""
    data_cfg = cfg.data.copy()
    if test:
        data_cfg.test = test
    return resolve_test_sets(data_cfg, corpus_manifests(data_cfg))


def find_utterance(sets: dict[str, str], utt_id: str) -> Utterance:
    utt = next((u for path in sets.values() for u in read_manifest(path) if u.id == utt_id), None)
    if utt is None:
        raise ConfigError(f"utterance {utt_id!r} is not in the test sets {sorted(sets)}; name one of theirs "
                          "(utt=<id>) or give its set (data.test=<name or manifest>)")
    return utt


def cropped_duration(utt: Utterance, max_seconds: float | None = None) -> float:
    """Seconds of ``utt`` that are used: all of it, or its first ``max_seconds``."""
    return utt.duration if max_seconds is None else min(utt.duration, float(max_seconds))


def utterance_features(utt: Utterance, features, cmvn, max_seconds: float | None = None) -> torch.Tensor:
    """Normalised features (1, T, F) of one utterance, its first ``max_seconds`` when given."""
    duration = cropped_duration(utt, max_seconds)
    wave = load_audio(utt.audio_filepath, offset=utt.offset, duration=duration, source=utt.source)
    return cmvn(features(wave)).unsqueeze(0)  # (1, T, F)


@torch.no_grad()
def encode_with_attention(model, feats: torch.Tensor):
    """feats (1, T, F) -> (enc (1, T', D), per-layer attention weights [(1, H, T', T')])."""
    enc, _, attn = model.encode(feats, torch.tensor([feats.size(1)]), return_attention=True)
    return enc, attn
