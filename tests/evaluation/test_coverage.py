"""The check every evaluation runs before writing: the scored ids are the manifest's, each once."""

import pytest

from asr_pe.evaluation.pipeline import IncompleteScoringError, check_scored_every_utterance


def test_exactly_the_manifest_passes_in_any_order():
    check_scored_every_utterance(["b", "a", "c"], ["a", "b", "c"], what="test")


@pytest.mark.parametrize("scored,message", [
    (["a", "b"], "scored 2 utterances, the manifest has 3; missing: c"),
    (["a", "b", "c", "c"], "scored 4 utterances, the manifest has 3; scored more than once: c"),
    (["a", "b", "c", "x"], "scored 4 utterances, the manifest has 3; not in the manifest: x"),
    # the same count is not enough: one missing and one repeated
    (["a", "b", "b"], "scored 3 utterances, the manifest has 3; missing: c; scored more than once: b"),
])
def test_missing_repeated_or_foreign_ids_are_one_error(scored, message):
    with pytest.raises(IncompleteScoringError, match=rf"^test set 'x' \(m.jsonl\): {message}; no result written$"):
        check_scored_every_utterance(scored, ["a", "b", "c"], what="test set 'x' (m.jsonl)")


def test_long_lists_are_cut_with_a_count():
    with pytest.raises(IncompleteScoringError, match=r"missing: u00, u01, u02, u03, u04, \.\.\. \(40 in all\)"):
        check_scored_every_utterance([], [f"u{i:02d}" for i in range(40)], what="t")
