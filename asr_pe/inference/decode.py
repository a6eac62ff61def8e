"""Decode one batch of a trained model: CTC greedy / beam, the attention decoder, or the
transducer (greedy, modified beam search).

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

DECODE_METHODS = ("greedy", "beam", "attention", "joint", "transducer_greedy", "transducer_beam")
NEEDS_DECODER = ("attention", "joint")
NEEDS_TRANSDUCER = ("transducer_greedy", "transducer_beam")


def effective_method(method: str, *, has_ctc: bool, has_transducer: bool) -> str:
    """What ``greedy`` / ``beam`` mean on a model without a CTC head: the transducer's search
    when it has a transducer head (loss=transducer), else the attention decoder (seq2seq)."""
    if method in ("greedy", "beam") and not has_ctc:
        return f"transducer_{method}" if has_transducer else "attention"
    return method


def check_decode_settings(decode: Mapping[str, Any], *, ctc_weight: float, transducer: bool = False,
                          where: str = "decode") -> None:
    """Reject a ``decode:`` section that cannot work with a model trained at ``loss.ctc_weight``
    (with a transducer head when ``transducer``) (``ConfigError``), before any model is loaded
    or audio decoded.

    greedy/beam on a model without a CTC head (ctc_weight 0) stay allowed: evaluation switches
    them to the attention decoder, or to the transducer's searches, and says so. attention/joint
    need the decoder that a CTC-only model (ctc_weight 1) or a transducer model does not have;
    joint also needs the CTC head; transducer_greedy/transducer_beam need a transducer head."""
    method = decode.get("method", "greedy")
    if method not in DECODE_METHODS:
        raise ConfigError(f"{where}.method={method!r}: choose one of {', '.join(DECODE_METHODS)}")
    if method in NEEDS_TRANSDUCER and not transducer:
        raise ConfigError(f"{where}.method={method}: this model has no transducer head (trained with loss.ctc_weight="
                          f"{float(ctc_weight):g} and no loss.transducer); train with loss=transducer or "
                          f"hybrid_transducer, or use {where}.method=greedy, beam, attention or joint")
    if method in NEEDS_DECODER and transducer:
        raise ConfigError(f"{where}.method={method}: this model has a transducer head, not an attention decoder; "
                          f"use {where}.method=transducer_greedy or transducer_beam"
                          + (" (or greedy / beam for its CTC head)" if float(ctc_weight) > 0 else ""))
    if method in NEEDS_DECODER and float(ctc_weight) >= 1.0:
        raise ConfigError(f"{where}.method={method}: this model has no attention decoder (loss.ctc_weight="
                          f"{float(ctc_weight):g}, CTC only); use {where}.method=greedy or beam")
    if method == "joint" and float(ctc_weight) <= 0.0:
        raise ConfigError(f"{where}.method=joint: this model has no CTC head to score with (loss.ctc_weight=0, "
                          f"attention only); use {where}.method=attention")
    for key in ("beam", "max_symbols_per_frame"):
        value = decode.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}.{key}={value!r}: must be an integer >= 1")
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
    transducer = getattr(model, "transducer", None)
    method = effective_method(method, has_ctc=model.ctc_head is not None, has_transducer=transducer is not None)
    if method in ("attention", "joint") and model.decoder is None:
        raise ValueError(f"decode.method={method}: this model has no attention decoder")
    feats = batch["features"].to(device)
    lengths = batch["feature_lengths"].to(device)
    enc, enc_lengths = (encode or model.encode)(feats, lengths)
    if method == "greedy":
        hyps = ctc_greedy(model.ctc_log_probs(enc), enc_lengths, blank=tokenizer.blank_id)
    elif method == "beam":
        nbest = ctc_beam_batch(model.ctc_log_probs(enc).cpu(), enc_lengths.cpu(), beam=int(decode.get("beam", 10)),
                               blank=tokenizer.blank_id)
        hyps = [n[0][0] if n else [] for n in nbest]
    elif method in NEEDS_TRANSDUCER:
        # frame by frame: the (T, U+1, V) lattice of the loss is never built at inference
        from asr_pe.decoding.transducer import transducer_beam_batch, transducer_greedy

        if transducer is None:
            raise ValueError(f"decode.method={method}: this model has no transducer head")
        if method == "transducer_greedy":
            hyps = transducer_greedy(transducer, enc, enc_lengths,
                                     max_symbols_per_frame=int(decode.get("max_symbols_per_frame", 3)))
        else:
            hyps = transducer_beam_batch(transducer, enc, enc_lengths, beam=int(decode.get("beam", 4)))
    elif method in ("attention", "joint"):
        from asr_pe.decoding.attention_decoding import attention_decode  # seq2seq / hybrid heads

        hyps = attention_decode(model, enc, enc_lengths, tokenizer, decode)
    else:
        raise ValueError(f"decode.method={method!r}; choose one of {DECODE_METHODS}")
    return [tokenizer.decode(h) for h in hyps]


__all__ = ["DECODE_METHODS", "check_decode_settings", "decode_batch", "effective_method"]
