"""Set-level checks of the audio against its manifest, from the file headers alone.

``scan_audio(utterances, sample_rate=, name=)`` reads the header of every file a set uses
(no decoding: about 0.2 ms a file) before the set is trained on or scored, and decides per
case:

- **error** (``AudioError``, one line naming the manifest line and the file): a segment that
  ends more than ``end_tolerance`` past the end of its file (a truncated file, or a duration
  or offset that is wrong), a WAV whose header declares more data than the file holds, a
  missing or unreadable file. These would score part of the recording against the whole
  transcript, or stop the run halfway through.
- **counted warning** (one per set, with the count and the first cases): a whole-file
  utterance (no offset, the only utterance of its file in the set) whose file is longer than
  its manifest ``duration`` by more than ``WHOLE_FILE_TOLERANCE_S``: only the first
  ``duration`` seconds are read. That is right for a labelled segment at the start of a longer
  recording, wrong for a duration that was mis-measured, so it is reported rather than refused.
- **info** (one line per set): files at another sample rate (resampled on load, with the rates
  and counts) and multi-channel files (averaged to mono on load; channels that cancel are an
  error of ``load_audio`` itself, as only the samples show it).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .audio import DEFAULT_END_TOLERANCE_S, AudioError, audio_info
from .manifest import Utterance

log = logging.getLogger(__name__)

# A whole-file utterance may be this much shorter than its file before it is reported
# (manifest durations are rounded; 0.1 s is far above rounding and far below a missed word).
WHOLE_FILE_TOLERANCE_S = 0.1
# How many cases a warning quotes.
MAX_QUOTED = 3


@dataclass
class AudioScan:
    """What the headers of one set's files say; ``summary()`` goes into the run's data report."""

    name: str
    utterances: int = 0
    files: int = 0
    resampled: Counter = field(default_factory=Counter)      # file rate -> files
    multichannel: Counter = field(default_factory=Counter)   # channels -> files
    shorter_than_file: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"utterances": self.utterances, "files": self.files,
                "resampled_files": dict(sorted(self.resampled.items())),
                "multichannel_files": dict(sorted(self.multichannel.items())),
                "duration_shorter_than_file": len(self.shorter_than_file)}


def _where(utt: Utterance) -> str:
    return utt.source or f"utterance {utt.id!r}"


def scan_audio(utterances: Sequence[Utterance], *, sample_rate: int, name: str,
               end_tolerance: float = DEFAULT_END_TOLERANCE_S,
               whole_file_tolerance: float = WHOLE_FILE_TOLERANCE_S) -> AudioScan:
    """Check every utterance of a set against its file's header; log the set's summary once."""
    scan = AudioScan(name, utterances=len(utterances))
    uses = Counter(u.audio_filepath for u in utterances)
    info: dict[str, tuple[int, int, int]] = {}
    past_end: list[str] = []
    for utt in utterances:
        path = utt.audio_filepath
        if path not in info:
            info[path] = audio_info(path, source=_where(utt))
            frames, rate, channels = info[path]
            if rate != sample_rate:
                scan.resampled[rate] += 1
            if channels > 1:
                scan.multichannel[channels] += 1
        frames, rate, _ = info[path]
        file_s = frames / rate
        end = utt.offset + utt.duration
        if end - file_s > end_tolerance:
            past_end.append(f"{_where(utt)}: {path} holds {file_s:.3f}s of audio but the manifest's segment ends at "
                            f"{end:.3f}s (offset {utt.offset:g} + duration {utt.duration:g})")
        elif utt.offset == 0 and uses[path] == 1 and file_s - utt.duration > whole_file_tolerance:
            scan.shorter_than_file.append(f"{_where(utt)}: file {file_s:.2f}s, duration {utt.duration:.2f}s")
    scan.files = len(info)
    if past_end:
        raise AudioError(f"{past_end[0]}: the file is truncated or the manifest's duration is wrong; fix one or "
                         f"the other ({len(past_end)} of {len(utterances)} utterances of set {name!r} end past "
                         "their file)")
    if scan.shorter_than_file:
        log.warning("%s: %d of %d utterances are whole files longer than their manifest duration by more than "
                    "%.1f s: only the first <duration> seconds are read and scored against the whole transcript "
                    "(right only for a segment that starts its file; otherwise correct the durations), e.g. %s",
                    name, len(scan.shorter_than_file), len(utterances), whole_file_tolerance,
                    "; ".join(scan.shorter_than_file[:MAX_QUOTED]))
    if scan.resampled:
        rates = ", ".join(f"{r} Hz ({n})" if len(scan.resampled) > 1 else f"{r}"
                          for r, n in sorted(scan.resampled.items()))
        log.info("%s: %d of %d files resampled %s -> %d Hz on load", name, sum(scan.resampled.values()),
                 scan.files, rates, sample_rate)
    if scan.multichannel:
        chans = ", ".join(f"{n} with {c} channels" for c, n in sorted(scan.multichannel.items()))
        log.info("%s: %d of %d files averaged to mono on load (%s)", name, sum(scan.multichannel.values()),
                 scan.files, chans)
    return scan


__all__ = ["WHOLE_FILE_TOLERANCE_S", "AudioScan", "scan_audio"]
