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
from rapidfuzz.distance import Levenshtein

__all__ = ["normalize_text", "score_utterance", "edit_distances", "score_record"]


def normalize_text(text: str) -> str:
    """Lowercase and collapse whitespace (the only normalisation applied at scoring)."""
    if not isinstance(text, str):
        raise TypeError(f"transcript must be a str, got {type(text).__name__}: {text!r}")
    return " ".join(text.lower().split())


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
    # a side is empty exactly when it has no words (normalised text); jiwer refuses an empty side:
    # then every word and character of the other side is an edit
    if not ref_w or not hyp_w:
        sub, dele, ins = 0, len(ref_w), len(hyp_w)
        char_errors = len(ref_n) + len(hyp_n)
    else:
        out = jiwer.process_words(ref_n, hyp_n)
        sub, dele, ins = out.substitutions, out.deletions, out.insertions
        chars = jiwer.process_characters(ref_n, hyp_n)  # spaces between words count as characters
        char_errors = chars.substitutions + chars.deletions + chars.insertions
    return {"errors": sub + dele + ins, "ref_words": len(ref_w), "sub": sub, "del": dele, "ins": ins,
            "char_errors": char_errors, "ref_chars": len(ref_n)}


def edit_distances(ref: str, hyp: str) -> dict:
    """``errors``, ``ref_words``, ``char_errors`` and ``ref_chars`` of `score_utterance`, without
    the split into substitutions, deletions and insertions.

    Why: the in-context ratio scores every long recording twice and needs the totals only; jiwer
    builds an alignment of each (its Python-side checks cost ~7x the edit distance on a 160 s
    recording). The totals are the same numbers: jiwer counts the edits of rapidfuzz's minimal
    Levenshtein alignment, whose length is the Levenshtein distance computed here
    (tests/evaluation/test_scoring.py compares the two)."""
    ref_n, hyp_n = normalize_text(ref), normalize_text(hyp)
    ref_w = ref_n.split()
    return {"errors": Levenshtein.distance(ref_w, hyp_n.split()), "ref_words": len(ref_w),
            "char_errors": Levenshtein.distance(ref_n, hyp_n), "ref_chars": len(ref_n)}


def score_record(utt_id: str, duration: float, ref: str, hyp: str) -> dict:
    """One ``per_utt.jsonl`` record: id, duration, ref, hyp and the counts of `score_utterance`."""
    return {"id": utt_id, "duration": float(duration), "ref": ref, "hyp": hyp,
            **score_utterance(ref, hyp)}
