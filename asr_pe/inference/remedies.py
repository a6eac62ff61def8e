"""Inference-time remedies for inputs longer than training: switch one on, no retraining.

A remedy spec is a name, a ``name:value`` or several joined by ``+``
(``eval.remedy=rope_yarn+window:10``); every remedy acts beyond the training length L_tr only
(the run's longest training utterance, ``run_info.json``), so short inputs decode as trained:

* ``window[:W]``: each query attends only to keys within ±W seconds (default W = L_tr), in
  every attention path (``MultiHeadAttention.window``; REM's P·V term too);
* ``logit_scale``: every attention logit × max(1, ln n / ln L_tr), n the utterance's frames
  (a length-aware softmax temperature: the entropy of attention over n keys stays as in
  training; Chiang & Cholak 2022, "Overcoming a theoretical limitation of self-attention");
* ``rope_pi``, ``rope_ntk``, ``rope_yarn``: RoPE position interpolation, NTK-aware base
  scaling and YaRN (``asr_pe/models/positional/rope.py``); RoPE models only.

The RoPE rescalings depend on the input's length, so under them every utterance is encoded on
its own (a padded batch would rescale all its members by the longest one's length).
Overlapping chunked inference (``eval.mode=chunked``) is the reference a remedy is compared with.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from asr_pe.models.positional.rope import RoPE, RopeScaling
from asr_pe.run_folder import run_info_path

# the specs (names, parsing, folder suffixes) live in a module without torch, for shell recipes
from .remedy_specs import (  # noqa: F401  (re-exported: the names callers import from here)
    REMEDIES, ROPE_SCALINGS, Remedy, RemedyError, applies_to, parse_remedies, per_utterance, remedy_label,
    remedy_suffix,
)

def run_train_seconds(run_dir: str | Path) -> float:
    """L_tr of a run: the longest training input, ``train_max_duration`` of its run_info.json."""
    path = run_info_path(run_dir)
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("train_max_duration")
    except (OSError, ValueError):
        value = None
    if not value:
        raise RemedyError(f"{path}: no train_max_duration to scale the remedies by; give the training "
                          "length in seconds with eval.train_length_s=<s>")
    return float(value)


def _rope_hooks(model: nn.Module) -> list[RoPE]:
    pe = model.encoder.pe
    hooks = [] if pe.attention is None else [h for h in pe.attention if isinstance(h, RoPE)]
    return hooks


def check_remedies(model: nn.Module, remedies: list[Remedy], pe_label: str = "") -> None:
    """Refuse a remedy the model cannot take (a RoPE rescaling without RoPE) before decoding."""
    for r in remedies:
        if r.name in ROPE_SCALINGS and not _rope_hooks(model):
            raise RemedyError(f"eval.remedy={r.label}: this run's encoder has no RoPE (pe={pe_label or '?'}); "
                              "rope_pi / rope_ntk / rope_yarn apply to pe=rope only (window and logit_scale to any)")
        trained = [h.scaling for h in _rope_hooks(model) if h.scaling is not None and h.scaling.factor is not None]
        if r.name in ROPE_SCALINGS and trained:
            raise RemedyError(f"eval.remedy={r.label}: this model was trained with a RoPE rescaling "
                              f"({trained[0].kind}, factor {trained[0].factor:g}); a second one would replace "
                              "it, not add to it; decode without the rope_* remedy (window and logit_scale apply)")


@contextlib.contextmanager
def remedies_applied(model: nn.Module, remedies: list[Remedy], train_seconds: float) -> Iterator[None]:
    """Switch the remedies on for the ``with`` block, then restore the model as it was.

    ``train_seconds``: L_tr, the longest training input; in encoder frames
    round(L_tr / frame shift)."""
    if not remedies:
        yield
        return
    if not train_seconds or train_seconds <= 0:
        raise RemedyError(f"remedies need the training length in seconds (> 0), got {train_seconds!r}")
    check_remedies(model, remedies)
    shift = float(model.frame_shift_s)
    train_frames = max(2, round(train_seconds / shift))
    encoder = model.encoder
    saved_attn = [(layer.attn.window, layer.attn.logit_scale_keys) for layer in encoder.layers]
    saved_hooks = [] if encoder.pe.attention is None else [(h, h.window) for h in encoder.pe.attention]
    saved_rope = [(h, h.scaling) for h in _rope_hooks(model)]
    try:
        for r in remedies:
            if r.name == "window":
                encoder.set_attention_window(round((train_seconds if r.value is None else r.value) / shift))
            elif r.name == "logit_scale":
                encoder.set_logit_scaling(train_frames)
            else:
                for hook in _rope_hooks(model):
                    hook.scaling = RopeScaling(ROPE_SCALINGS[r.name], train_frames)
        yield
    finally:
        for layer, (window, keys) in zip(encoder.layers, saved_attn):
            layer.attn.window, layer.attn.logit_scale_keys = window, keys
        for hook, window in saved_hooks:
            hook.window = window
        for hook, scaling in saved_rope:
            hook.scaling = scaling


def one_by_one(encode: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]):
    """An encode function (features (B, T, F), lengths) -> (enc (B, T', D), enc_lengths) that
    runs ``encode`` on each utterance alone, unpadded, and pads the outputs back into a batch."""

    def encode_each(features: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outs, out_lengths = [], []
        for b in range(features.size(0)):
            n = int(lengths[b])
            enc, enc_len = encode(features[b:b + 1, :n], lengths[b:b + 1])  # (1, T'_b, D)
            outs.append(enc[0, : int(enc_len[0])])
            out_lengths.append(enc_len[0])
        enc = nn.utils.rnn.pad_sequence(outs, batch_first=True)  # (B, max T', D), zeros past each end
        return enc, torch.stack(out_lengths)

    return encode_each

