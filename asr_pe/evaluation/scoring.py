"""Per-utterance word and character error counts (jiwer 4).

Normalisation policy: transcripts are already normalised by the corpus preparation
(and the tokenizer's decode), so scoring only lowercases and collapses runs of
whitespace (leading/trailing whitespace removed). No punctuation stripping, no number
expansion: anything else would hide real errors and make runs on different corpora
incomparable.

Counts, not rates, are returned so that buckets can pool them (WER = Σ errors / Σ words).
"""

from __future__ import annotations

import jiwer

__all__ = ["normalize_text", "score_utterance", "score_record", "SCORE_KEYS"]

SCORE_KEYS = ("errors", "ref_words", "sub", "del", "ins", "char_errors", "ref_chars")


def normalize_text(text: str) -> str:
    """Lowercase and collapse whitespace (the only normalisation applied at scoring)."""
    if not isinstance(text, str):
        raise TypeError(f"transcript must be a str, got {type(text).__name__}: {text!r}")
    return " ".join(text.lower().split())


def _char_counts(ref: str, hyp: str) -> tuple[int, int]:
    """(character edit errors, reference characters); spaces between words count as characters."""
    if not ref:
        return len(hyp), 0
    if not hyp:
        return len(ref), len(ref)
    out = jiwer.process_characters(ref, hyp)
    return out.substitutions + out.deletions + out.insertions, len(ref)


def score_utterance(ref: str, hyp: str) -> dict:
    """Edit counts of one hypothesis against its reference.

    Returns ``errors`` (= ``sub`` + ``del`` + ``ins`` words), ``ref_words``, ``sub``,
    ``del``, ``ins``, ``char_errors`` and ``ref_chars``. CER is on characters **including
    the single spaces between words** (after normalisation), as jiwer's ``cer`` does.
    An empty hypothesis gives only deletions; an empty reference gives ``ref_words == 0``
    and ``errors == ins`` (the number of hypothesis words), so pooling stays exact.
    """
    ref_n, hyp_n = normalize_text(ref), normalize_text(hyp)
    ref_w, hyp_w = ref_n.split(), hyp_n.split()
    if not ref_w:
        sub, dele, ins = 0, 0, len(hyp_w)
    elif not hyp_w:
        sub, dele, ins = 0, len(ref_w), 0
    else:
        out = jiwer.process_words(ref_n, hyp_n)
        sub, dele, ins = out.substitutions, out.deletions, out.insertions
    char_errors, ref_chars = _char_counts(ref_n, hyp_n)
    return {
        "errors": sub + dele + ins,
        "ref_words": len(ref_w),
        "sub": sub,
        "del": dele,
        "ins": ins,
        "char_errors": char_errors,
        "ref_chars": ref_chars,
    }


def score_record(utt_id: str, duration: float, ref: str, hyp: str) -> dict:
    """One ``per_utt.jsonl`` record: id, duration, ref, hyp and the counts of `score_utterance`."""
    return {"id": utt_id, "duration": float(duration), "ref": ref, "hyp": hyp,
            **score_utterance(ref, hyp)}
