"""Word/character edit counts on hand-made examples."""

import pytest

from asr_pe.evaluation.scoring import normalize_text, score_record, score_utterance


def test_one_substitution():
    s = score_utterance("the cat sat", "the dog sat")
    assert (s["sub"], s["del"], s["ins"], s["errors"], s["ref_words"]) == (1, 0, 0, 1, 3)
    # "cat" -> "dog": three character substitutions; "the cat sat" has 11 characters incl. spaces
    assert (s["char_errors"], s["ref_chars"]) == (3, 11)


def test_one_deletion():
    s = score_utterance("the cat sat", "the sat")
    assert (s["sub"], s["del"], s["ins"], s["errors"], s["ref_words"]) == (0, 1, 0, 1, 3)
    assert s["char_errors"] == 4            # "cat" and one space deleted


def test_one_insertion():
    s = score_utterance("the cat sat", "the cat sat down")
    assert (s["sub"], s["del"], s["ins"], s["errors"], s["ref_words"]) == (0, 0, 1, 1, 3)
    assert s["char_errors"] == 5            # " down"


def test_mixed_errors_sum():
    s = score_utterance("a b c d", "a x c d e f")
    assert (s["sub"], s["del"], s["ins"]) == (1, 0, 2)
    assert s["errors"] == s["sub"] + s["del"] + s["ins"] == 3


def test_empty_hypothesis_is_all_deletions():
    s = score_utterance("hello big world", "")
    assert (s["sub"], s["del"], s["ins"], s["errors"], s["ref_words"]) == (0, 3, 0, 3, 3)
    assert s["char_errors"] == s["ref_chars"] == len("hello big world")


def test_whitespace_only_hypothesis_counts_as_empty():
    assert score_utterance("a b", "   \t ")["del"] == 2


def test_empty_reference_counts_insertions():
    s = score_utterance("", "two words")
    assert s["ref_words"] == 0 and s["ref_chars"] == 0
    assert s["errors"] == s["ins"] == 2 and s["sub"] == s["del"] == 0
    assert s["char_errors"] == len("two words")


def test_both_empty():
    assert all(v == 0 for v in score_utterance("", "").values())


def test_normalisation_is_lowercase_and_whitespace_only():
    assert normalize_text("  Hello   WORLD\n") == "hello world"
    assert score_utterance("Hello  world", "hello world ")["errors"] == 0
    # punctuation is not stripped: it is an error
    assert score_utterance("hello world", "hello world.")["sub"] == 1


def test_score_record_carries_fields():
    r = score_record("u1", 1.5, "a b", "a")
    assert r["id"] == "u1" and r["duration"] == 1.5 and r["ref"] == "a b" and r["hyp"] == "a"
    assert r["del"] == 1


def test_non_string_is_a_clear_error():
    with pytest.raises(TypeError, match="must be a str"):
        score_utterance(None, "a")


def test_edit_distances_are_score_utterance_s_totals():
    """The in-context ratio's fast totals (rapidfuzz's distance) against jiwer's alignment counts,
    on random transcripts of a small vocabulary (many ties between alignments), empty ones and
    unnormalised spacing and case included."""
    import random
    from asr_pe.evaluation.scoring import edit_distances
    rng = random.Random(0)
    vocab = ["a", "the", "cat", "cats", "sat", "at", "on", "mat", "Mat", ""]
    keys = ("errors", "ref_words", "char_errors", "ref_chars")
    for _ in range(400):
        ref = "  ".join(rng.choice(vocab) for _ in range(rng.randrange(0, 30)))
        hyp = " ".join(rng.choice(vocab) for _ in range(rng.randrange(0, 30)))
        full = score_utterance(ref, hyp)
        assert edit_distances(ref, hyp) == {k: full[k] for k in keys}, (ref, hyp)
