"""Hold out whole groups (chapters, talks) of one manifest for validation.

Why: the recipes' smoke runs train on a single small corpus part (LibriSpeech dev-clean, the
TED-LIUM dev talks). Validating on that same part measures how well the model remembers its
training utterances (CER ~1 % where the unseen test set gave 38-50 %), and the best checkpoint is
chosen by that number. Splitting the part into a training share (``<part>_fit``) and a held-out
share (``<part>_heldout``) gives a validation set the model has not heard.

Whole groups are held out (the ``speaker`` field: a LibriSpeech chapter ``<speaker>-<chapter>``, a
TED talk), never single utterances of a group: consecutive utterances of one chapter or talk share
the reader, the room and often words, so a split inside a group would leak. ``fraction`` of the
groups (rounded, at least one, never all) are held out, spread evenly over the manifest's order
(group ``round((i + 0.5) * n / k)`` for i = 0..k-1 of k held-out among n groups), so that with
LibriSpeech's speaker-ordered manifests they come from across the speakers. The split is a pure
function of the manifest and ``fraction``: the same input gives the same two manifests.
"""

from __future__ import annotations

from typing import Sequence

from asr_pe.data.manifest import Utterance
from asr_pe.errors import UserError

__all__ = ["HeldoutError", "heldout_groups", "split_heldout"]


class HeldoutError(UserError, ValueError):
    """The manifest cannot be split as asked (one group only, a bad fraction, a missing key)."""


def _group(u: Utterance, key: str, index: int) -> str:
    value = getattr(u, key, None)
    if value is None or not str(value).strip():
        where = u.source or f"manifest entry {index + 1}"
        raise HeldoutError(f"{where} (id {u.id!r}) has no {key}: the held-out split keeps whole groups "
                           f"(chapters, talks) apart and needs it on every entry")
    return str(value)


def heldout_groups(groups: Sequence[str], fraction: float) -> list[str]:
    """The held-out groups among ``groups`` (distinct, in manifest order); see the module docstring."""
    if not 0 < fraction < 1:
        raise HeldoutError(f"the held-out fraction must be in (0, 1), got {fraction}")
    n = len(groups)
    if n < 2:
        raise HeldoutError(f"{n} group(s): holding one out would leave nothing to train on (or nothing to "
                           f"validate on); give the dev part another corpus part instead")
    k = min(n - 1, max(1, round(fraction * n)))
    return [groups[min(n - 1, round((i + 0.5) * n / k))] for i in range(k)]


def split_heldout(utterances: Sequence[Utterance], fraction: float = 0.1, *, group_key: str = "speaker"
                  ) -> tuple[list[Utterance], list[Utterance], list[str]]:
    """(training share, held-out share, held-out group names) of ``utterances``, both shares in
    manifest order."""
    keys = [_group(u, group_key, i) for i, u in enumerate(utterances)]
    held = set(heldout_groups(list(dict.fromkeys(keys)), fraction))
    fit = [u for u, k in zip(utterances, keys) if k not in held]
    out = [u for u, k in zip(utterances, keys) if k in held]
    return fit, out, [g for g in dict.fromkeys(keys) if g in held]
