"""Decode one batch of a trained model: CTC greedy / beam, or the attention decoder.

``decode_batch`` is shared by evaluation (``asr_pe.evaluation.pipeline``) and ``transcribe.py``;
``encode`` lets either replace ``model.encode`` with a long-form encoder (`make_encode_fn`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import torch

from asr_pe.decoding.ctc import ctc_beam_batch, ctc_greedy
from asr_pe.errors import ConfigError
from asr_pe.models.asr import ASRModel

DECODE_METHODS = ("greedy", "beam", "attention", "joint")
NEEDS_DECODER = ("attention", "joint")


def check_decode_settings(decode: Mapping[str, Any], *, ctc_weight: float, where: str = "decode") -> None:
    """Reject a ``decode:`` section that cannot work with a model trained at ``loss.ctc_weight``
    (``ConfigError``), before any model is loaded or audio decoded.

    greedy/beam on a model without a CTC head (ctc_weight 0) stay allowed: evaluation switches
    them to the attention decoder and says so. attention/joint need the decoder that a CTC-only
    model (ctc_weight 1) does not have; joint also needs the CTC head."""
    method = decode.get("method", "greedy")
    if method not in DECODE_METHODS:
        raise ConfigError(f"{where}.method={method!r}: choose one of {', '.join(DECODE_METHODS)}")
    if method in NEEDS_DECODER and float(ctc_weight) >= 1.0:
        raise ConfigError(f"{where}.method={method}: this model has no attention decoder (loss.ctc_weight="
                          f"{float(ctc_weight):g}, CTC only); use {where}.method=greedy or beam")
    if method == "joint" and float(ctc_weight) <= 0.0:
        raise ConfigError(f"{where}.method=joint: this model has no CTC head to score with (loss.ctc_weight=0, "
                          f"attention only); use {where}.method=attention")
    beam = decode.get("beam", 10)
    if isinstance(beam, bool) or not isinstance(beam, int) or beam < 1:
        raise ConfigError(f"{where}.beam={beam!r}: must be an integer >= 1")
    for key, low, high in (("ctc_weight", 0.0, 1.0), ("length_penalty", -math.inf, math.inf),
                           ("max_len_ratio", 0.0, math.inf)):
        value = decode.get(key)
        if value is None:
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not low <= value <= high or (key == "max_len_ratio" and value == 0):
            bound = {"ctc_weight": "in [0, 1]", "length_penalty": "finite", "max_len_ratio": "> 0"}[key]
            raise ConfigError(f"{where}.{key}={value!r}: must be a number {bound}")


@torch.no_grad()
def decode_batch(model: ASRModel, batch: dict, tokenizer, decode: Mapping[str, Any], device: str,
                 encode=None) -> list[str]:
    """``encode(features, lengths) -> (enc, enc_lengths)`` replaces ``model.encode`` (e.g. the
    full-context or chunked long-form encoders of ``asr_pe.inference``)."""
    method = decode.get("method", "greedy")
    if model.ctc_head is None and method in ("greedy", "beam"):
        raise ValueError("this model has no CTC head; use decode.method=attention")
    feats = batch["features"].to(device)
    lengths = batch["feature_lengths"].to(device)
    enc, enc_lengths = (encode or model.encode)(feats, lengths)
    if method == "greedy":
        hyps = ctc_greedy(model.ctc_log_probs(enc), enc_lengths, blank=tokenizer.blank_id)
    elif method == "beam":
        nbest = ctc_beam_batch(model.ctc_log_probs(enc).cpu(), enc_lengths.cpu(), beam=int(decode.get("beam", 10)),
                               blank=tokenizer.blank_id)
        hyps = [n[0][0] if n else [] for n in nbest]
    elif method in ("attention", "joint"):
        from asr_pe.decoding.attention_decoding import attention_decode  # seq2seq / hybrid heads

        hyps = attention_decode(model, enc, enc_lengths, tokenizer, decode)
    else:
        raise ValueError(f"decode.method={method!r}; choose one of {DECODE_METHODS}")
    return [tokenizer.decode(h) for h in hyps]


__all__ = ["DECODE_METHODS", "check_decode_settings", "decode_batch"]
