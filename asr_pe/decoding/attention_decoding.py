"""Attention decoding of an ``ASRModel`` with an attention decoder: attention beam search and
joint CTC/attention beam search, per utterance.

``attention_decode(model, enc, enc_lengths, tokenizer, decode) -> list[list[int]]`` with
``decode`` = {method, beam, ctc_weight, length_penalty, max_len_ratio} (``conf/decode/default.yaml``):

* ``method=attention``: label-synchronous beam search over the decoder's next-token
  log-probs (:func:`asr_pe.decoding.beam_search.beam_search`), hypotheses ranked by
  score / len^alpha with alpha = ``length_penalty`` (len counts eos), ESPnet end detection,
  at most ``max_len_ratio`` x encoder frames labels. ``beam=1`` is greedy decoding.
* ``method=joint``: **one-pass joint CTC/attention decoding** (Watanabe et al. 2017, "Hybrid
  CTC/attention architecture for end-to-end speech recognition", Sec. 4; ESPnet's
  ``BeamSearch`` with a ``CTCPrefixScorer``): the same search, where every candidate
  extension is scored by (1 - λ)·log p_att + λ·log psi_ctc (the CTC prefix probability,
  :class:`~asr_pe.decoding.ctc_prefix_score.CTCPrefixScorer`), λ = ``ctc_weight``, with an
  attention pre-beam of 1.5 x beam tokens. Not the rescoring variant (which re-ranks an
  attention n-best list with CTC afterwards). Needs a model with a CTC head (loss=hybrid).

Optional keys: ``min_len``, ``length_bonus``, ``pre_beam_ratio``, ``end_detect`` (see
``beam_search``). The CTC blank is never proposed as an output label. The decoder's
key/value cache (``TransformerDecoder.forward_step``) makes a step cost O(t + T) for a prefix
of t tokens and T encoder frames.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from asr_pe.decoding.beam_search import Hypothesis, beam_search
from asr_pe.decoding.ctc_prefix_score import CTCPrefixScorer

__all__ = ["ATTENTION_METHODS", "attention_decode", "decode_utterance"]

ATTENTION_METHODS = ("attention", "joint")
_OPTIONAL = {"min_len": int, "length_bonus": float, "pre_beam_ratio": float, "end_detect": bool}


def _options(decode: Mapping[str, Any]) -> dict[str, Any]:
    method = decode.get("method", "attention")
    if method not in ATTENTION_METHODS:
        raise ValueError(f"attention_decode: decode.method={method!r}; choose one of {ATTENTION_METHODS}")
    beam = int(decode.get("beam", 10))
    if beam < 1:
        raise ValueError(f"decode.beam must be >= 1, got {beam}")
    ctc_weight = float(decode.get("ctc_weight", 0.3)) if method == "joint" else 0.0
    if not 0.0 <= ctc_weight <= 1.0:
        raise ValueError(f"decode.ctc_weight must lie in [0, 1], got {ctc_weight}")
    ratio = float(decode.get("max_len_ratio", 1.0))
    if not ratio > 0:
        raise ValueError(f"decode.max_len_ratio must be > 0, got {ratio}")
    opts = {
        "method": method,
        "beam": beam,
        "ctc_weight": ctc_weight,
        "length_alpha": float(decode.get("length_penalty", 1.0)),
        "max_len_ratio": ratio,
    }
    for key, cast in _OPTIONAL.items():
        if decode.get(key) is not None:
            opts[key] = cast(decode[key])
    return opts


def _check_model(model: Any, method: str) -> None:
    if getattr(model, "decoder", None) is None:
        raise ValueError(
            f"decode.method={method} needs an attention decoder, but this model has none (trained with "
            f"loss=ctc); use decode.method=greedy or beam"
        )
    if method == "joint" and getattr(model, "ctc_head", None) is None:
        raise ValueError(
            "decode.method=joint needs a CTC head, but this model has none (trained with loss=seq2seq, "
            "ctc_weight 0); use decode.method=attention"
        )


@torch.no_grad()
def decode_utterance(model: Any, enc: torch.Tensor, tokenizer: Any, decode: Mapping[str, Any],
                     nbest: int = 1) -> list[Hypothesis]:
    """Beam search for one utterance: enc (T, D) are its valid encoder frames. Returns the
    ``nbest`` best hypotheses with their scores (components: total, att, ctc, length)."""
    opts = _options(decode)
    _check_model(model, opts["method"])
    if enc.dim() != 2 or enc.size(0) < 1:
        raise ValueError(f"decode_utterance expects the (T, D) encoder frames of one utterance, got {tuple(enc.shape)}")
    enc = enc[None]  # (1, T, D)
    decoder = model.decoder
    memory = decoder.precompute_memory(enc)

    blank = tokenizer.blank_id

    def step_fn(tokens: torch.Tensor, cache: Any):
        log_probs, cache = decoder.forward_step(tokens, memory, cache)  # (N, V)
        # Blank is no output label (targets never hold it), but an undertrained decoder can put mass
        # on it. It is removed from the candidates, not renormalised away: a hypothesis's score stays
        # its teacher-forced log-likelihood.
        log_probs[:, blank] = float("-inf")
        return log_probs, cache

    scorer = None
    if opts["method"] == "joint":
        ctc_lp = model.ctc_log_probs(enc)[0]  # (T, V)
        scorer = CTCPrefixScorer(ctc_lp.cpu(), blank=tokenizer.blank_id, eos=tokenizer.eos_id)
    extra = {k: opts[k] for k in _OPTIONAL if k in opts}
    return beam_search(
        step_fn,
        None,
        sos=tokenizer.sos_id,
        eos=tokenizer.eos_id,
        beam=opts["beam"],
        encoder_length=enc.size(1),
        max_len_ratio=opts["max_len_ratio"],
        length_alpha=opts["length_alpha"],
        ctc_scorer=scorer,
        ctc_weight=opts["ctc_weight"],
        nbest=nbest,
        device=enc.device,
        **extra,
    )


@torch.no_grad()
def attention_decode(model: Any, enc: torch.Tensor, enc_lengths: torch.Tensor, tokenizer: Any,
                     decode: Mapping[str, Any]) -> list[list[int]]:
    """Best label ids per utterance of a batch: enc (B, T, D), enc_lengths (B,)."""
    opts = _options(decode)
    _check_model(model, opts["method"])
    if enc.dim() != 3 or enc_lengths.shape != (enc.size(0),):
        raise ValueError(f"attention_decode expects enc (B, T, D) and enc_lengths (B,), got "
                         f"{tuple(enc.shape)} and {tuple(enc_lengths.shape)}")
    was_training = model.training
    model.eval()
    try:
        hyps = []
        for b, n in enumerate(enc_lengths.tolist()):
            best = decode_utterance(model, enc[b, : int(n)], tokenizer, decode, nbest=1)
            hyps.append(best[0].ids)
    finally:
        model.train(was_training)
    return hyps
