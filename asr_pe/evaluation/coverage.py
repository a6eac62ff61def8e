"""Check that an evaluation scored every utterance of its test manifest exactly once.

A result table over part of a test set reads like one over all of it (a WER is a WER), and the
part that goes missing is rarely random: a sharded sampler or a crashed batch drops whole batches,
and the bucket sampler groups utterances by length, so the longest are what disappears. Every
evaluation therefore compares the ids it scored with the manifest's before writing anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


class IncompleteScoringError(RuntimeError):
    """The scored utterances are not exactly the manifest's (some missing, repeated or foreign)."""


def _some(ids: Iterable[str], n: int = 5) -> str:
    ids = sorted(ids)
    return ", ".join(ids[:n]) + (f", ... ({len(ids)} in all)" if len(ids) > n else "")


def check_scored_every_utterance(scored_ids: Iterable[str], manifest_ids: Iterable[str], *, what: str) -> None:
    """Raise `IncompleteScoringError` unless ``scored_ids`` holds each of ``manifest_ids`` exactly once
    and nothing else. ``what`` names the test set and its manifest in the message."""
    scored, wanted = Counter(scored_ids), Counter(manifest_ids)
    if scored == wanted:
        return
    missing = set(wanted) - set(scored)
    repeated = {i for i, c in scored.items() if c > 1}
    foreign = set(scored) - set(wanted)
    parts = [f"scored {sum(scored.values())} utterances, the manifest has {sum(wanted.values())}"]
    if missing:
        parts.append(f"missing: {_some(missing)}")
    if repeated:
        parts.append(f"scored more than once: {_some(repeated)}")
    if foreign:
        parts.append(f"not in the manifest: {_some(foreign)}")
    raise IncompleteScoringError(f"{what}: {'; '.join(parts)}; no result written")
