"""Decode one batch of a trained model: CTC greedy / beam, or the attention decoder.

``decode_batch`` is shared by evaluation (``asr_pe.training.evaluate``) and ``transcribe.py``;
``encode`` lets either replace ``model.encode`` with a long-form encoder (`make_encode_fn`).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from asr_pe.decoding.ctc import ctc_beam_batch, ctc_greedy
from asr_pe.models.asr import ASRModel

DECODE_METHODS = ("greedy", "beam", "attention", "joint")


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
        from asr_pe.decoding.attention import attention_decode  # seq2seq / hybrid heads

        hyps = attention_decode(model, enc, enc_lengths, tokenizer, decode)
    else:
        raise ValueError(f"decode.method={method!r}; choose one of {DECODE_METHODS}")
    return [tokenizer.decode(h) for h in hyps]


__all__ = ["DECODE_METHODS", "decode_batch"]
