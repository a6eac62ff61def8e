"""Long-form test sets: concatenate consecutive utterances of one speaker/chapter/talk.

Why: the study measures WER on audio longer than anything seen in training. Real long
recordings with aligned transcripts are rare, so long inputs are built from consecutive
segments of the same source (a LibriSpeech chapter, a TED talk), in manifest order, with
``gap_s`` of the sources' own background between segments and transcripts joined in the
same order.

Grouping: a group is a maximal run of *consecutive* manifest entries with the same group
key (default: the ``speaker`` field, where the recipes store chapter/talk ids). Recordings
never cross a group boundary unless ``allow_mixed_speakers=True``, in which case the whole
manifest is one stream (group label ``mix``) and entries without a key are accepted.

Targets: each numeric target D (seconds) is met when the concatenation (segments + gaps)
lies in [D(1 - tolerance), D(1 + tolerance)]. Inside each group a two-pointer window walks
the utterances in order: extend on the right until the window reaches the lower bound;
emit it when it is within the upper bound (the next window starts after it, so recordings
of one target never overlap), otherwise drop the first utterance and try again. A target
``"full"`` gives one recording per whole group. Groups that give no recording for a target
are counted in the report (too short, or no run of consecutive segments fits the window).
A target that no group can meet is an error naming the longest group, since an empty
bucket would otherwise pass unnoticed.

Joins: a gap of exact digital zeros puts log-mel frames at the floor (log of float eps, about
-16, with dither off) into every join; audio recorded through a microphone (LibriSpeech,
TED-LIUM) has a noise floor instead, so a model trained on it would meet such frames only in
the long-form test sets. Each gap is therefore filled with
the background of the recording's own parts, estimated once per long-form recording over
all its parts (one chapter/talk; a single utterance may hold no pause at all), on the frames
of the features (25 ms windows every 10 ms):

- *digital silence*: when the parts hold at least ``DIGITAL_SILENCE_MIN_FRAMES`` frames
  whose RMS is at most one 16-bit step (1/32768; zeros up to rounding, as in synthesized
  or noise-gated audio), that is their background and the gaps are exact zeros. The
  embedded synthetic corpus is such audio: its long-form sets are byte-identical to those
  built with zero gaps.
- *noise floor*: otherwise each gap is Gaussian noise shaped to the mean power spectrum of
  the quietest ``QUIET_FRACTION`` of the parts' frames (at least ``MIN_QUIET_FRAMES``), scaled
  to their mean power, plus their mean (DC) value: the level and colour of the pauses in the
  recording. Audio without any pause gets a fill as loud as its quietest frames, never more.

The noise of each recording comes from a generator seeded by (``seed``, recording id), so
it is the same on every run and does not depend on which other recordings are built.

``max_per_duration`` caps the recordings per target; which ones are kept is a seeded
shuffle (``seed``), so the kept set spans the groups instead of favouring the first ones.
Output is deterministic: same manifest and arguments give the same ids, texts and bytes.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import soundfile as sf

from asr_pe.errors import UserError
from asr_pe.data.audio import load_audio
from asr_pe.data.manifest import Part, Utterance, write_manifest
from asr_pe.io import atomic_path, atomic_write_json

__all__ = ["JoinFill", "LongformError", "LongformReport", "build_longform", "estimate_background",
           "join_recording", "plan_windows", "target_label"]

log = logging.getLogger(__name__)

FULL = "full"
MIX_GROUP = "mix"

# Background estimation works on the frames of the features (FbankExtractor's defaults), so
# "quiet frame" means a frame that the model sees as quiet.
FRAME_S = 0.025
HOP_S = 0.010
# One 16-bit step: a frame at or below this RMS is digital silence up to rounding (resampled
# synthetic audio leaves +-1 residues in its zero pauses).
ONE_LSB = 1.0 / 32768
# 0.05 s of such frames make a source's background digital silence; a single odd frame does not.
DIGITAL_SILENCE_MIN_FRAMES = 5
# The floor is the quietest 1 % of the frames: in read or lecture speech the pauses are many
# times that, so these frames are background, not quiet speech; at least 0.1 s of frames so
# that a short recording still gives a spectrum averaged over several frames.
QUIET_FRACTION = 0.01
MIN_QUIET_FRAMES = 10
# Quiet frames are ranked by their power averaged over this many frames (0.11 s, centred).
SMOOTH_FRAMES = 11


class LongformError(UserError, ValueError):
    """The long-form set cannot be built as asked (missing speaker, mixing needed, bad target)."""


@dataclass
class LongformReport:
    """What was built, per target label (``"10"``, ``"2.5"``, ``"full"``)."""
    groups: int = 0
    made: dict = field(default_factory=dict)          # recordings written
    too_short: dict = field(default_factory=dict)     # groups whose whole audio is below the target
    no_fit: dict = field(default_factory=dict)        # long enough, but no consecutive run within tolerance
    capped: dict = field(default_factory=dict)        # recordings left out by max_per_duration
    seconds: dict = field(default_factory=dict)       # total seconds written
    silent_joins: dict = field(default_factory=dict)  # recordings whose background is digital silence
    noise_joins: dict = field(default_factory=dict)   # recordings whose joins are their noise floor
    floor_dbfs: dict = field(default_factory=dict)    # [min, max] noise-floor level (dBFS) of those

    def summary(self) -> str:
        lines = [f"{self.groups} group(s)",
                 f"{'target':>8} {'made':>6} {'hours':>7} {'too short':>10} {'no fit':>7} {'capped':>7}"
                 f"  joins"]
        for label in self.made:
            joins = (f"{self.silent_joins.get(label, 0)} digital silence, "
                     f"{self.noise_joins.get(label, 0)} noise floor")
            if label in self.floor_dbfs:
                lo, hi = self.floor_dbfs[label]
                joins += f" ({lo:.0f} to {hi:.0f} dBFS)"
            lines.append(f"{label:>8} {self.made[label]:>6} {self.seconds[label] / 3600:>7.2f} "
                         f"{self.too_short.get(label, 0):>10} {self.no_fit.get(label, 0):>7} "
                         f"{self.capped.get(label, 0):>7}  {joins}")
        return "\n".join(lines)


@dataclass(frozen=True)
class JoinFill:
    """The background of a long-form recording's parts, and the gaps it makes.

    ``power_spectrum`` is None for digital silence (the gaps are zeros); otherwise the mean
    power spectrum (``n_fft // 2 + 1`` bins) of the quietest frames, ``dc`` their mean and
    ``ac_power`` their mean power with the DC removed.
    """
    dc: float = 0.0
    ac_power: float = 0.0
    power_spectrum: np.ndarray | None = None

    @property
    def digital_silence(self) -> bool:
        return self.power_spectrum is None

    @property
    def level_dbfs(self) -> float:
        """RMS level of the fill relative to full scale (-inf for digital silence)."""
        power = self.dc ** 2 + self.ac_power
        return 10 * math.log10(power) if power > 0 and not self.digital_silence else -math.inf

    def make(self, num_samples: int, rng: np.random.Generator) -> np.ndarray:
        """A gap of ``num_samples``: zeros, or noise with this spectrum, power and DC (float32)."""
        if self.digital_silence or num_samples == 0:
            return np.zeros(num_samples, dtype=np.float32)
        white = rng.standard_normal(num_samples)
        spectrum = np.fft.rfft(white)                                   # (num_samples // 2 + 1,)
        # the estimate's bins are on a coarser grid: interpolate the power to this FFT's bins
        grid = np.linspace(0.0, 0.5, len(self.power_spectrum))
        gain = np.sqrt(np.interp(np.fft.rfftfreq(num_samples), grid, self.power_spectrum))
        noise = np.fft.irfft(spectrum * gain, n=num_samples)
        power = float(np.mean(noise ** 2))
        if power > 0:
            noise *= math.sqrt(self.ac_power / power)
        return (noise + self.dc).astype(np.float32)


def _frame_power(wave: np.ndarray, frame: int, hop: int) -> np.ndarray:
    """Mean square of each ``frame``-sample window every ``hop`` samples (snip edges), O(N)."""
    n = 1 + (len(wave) - frame) // hop if len(wave) >= frame else 0
    if n == 0:
        return np.zeros(0)
    cum = np.concatenate([[0.0], np.cumsum(wave.astype(np.float64) ** 2)])
    starts = np.arange(n) * hop
    return (cum[starts + frame] - cum[starts]) / frame


def _moving_mean(values: np.ndarray, width: int) -> np.ndarray:
    """Centred mean over ``width`` values (fewer at the ends, where fewer exist); same length."""
    cum = np.concatenate([[0.0], np.cumsum(values)])
    i = np.arange(len(values))
    lo, hi = np.maximum(i - width // 2, 0), np.minimum(i + width // 2 + 1, len(values))
    return (cum[hi] - cum[lo]) / (hi - lo)


def estimate_background(parts: Sequence[np.ndarray], sample_rate: int) -> JoinFill:
    """The background of ``parts`` (1-D float waves): digital silence or its noise floor.

    See the module docstring. Parts shorter than one frame contribute nothing; if no part
    holds a whole frame the background is digital silence (there is nothing to match).
    """
    frame, hop = int(round(FRAME_S * sample_rate)), int(round(HOP_S * sample_rate))
    powers = [_frame_power(np.asarray(p).reshape(-1), frame, hop) for p in parts]
    # (part index, frame index) of every frame, to cut the quiet ones out again
    owner = np.concatenate([np.full(len(pw), i) for i, pw in enumerate(powers)]) if powers else np.zeros(0)
    index = np.concatenate([np.arange(len(pw)) for pw in powers]) if powers else np.zeros(0)
    power = np.concatenate(powers) if powers else np.zeros(0)
    # (1 + 1e-9): a frame of +-1 steps only must not miss by the rounding of the cumulative sum
    if len(power) == 0 or np.count_nonzero(power <= ONE_LSB ** 2 * (1 + 1e-9)) >= DIGITAL_SILENCE_MIN_FRAMES:
        return JoinFill()
    n_quiet = min(len(power), max(MIN_QUIET_FRAMES, int(math.ceil(QUIET_FRACTION * len(power)))))
    # Rank frames by the power of their neighbourhood, not their own: the frames of a pause are
    # picked whole, where ranking single frames picks those whose noise happened to dip (a few
    # dB under the floor for hum or rumble).
    smoothed = np.concatenate([_moving_mean(pw, SMOOTH_FRAMES) for pw in powers])
    quiet = np.argsort(smoothed, kind="stable")[:n_quiet]
    frames = np.stack([np.asarray(parts[owner[q]], dtype=np.float64).reshape(-1)[index[q] * hop:
                                                                                index[q] * hop + frame]
                       for q in quiet])                                   # (n_quiet, frame)
    dc = float(frames.mean())
    frames -= dc
    ac_power = float(np.mean(frames ** 2))
    n_fft = 1 << (frame - 1).bit_length()
    spectra = np.abs(np.fft.rfft(frames * np.hanning(frame), n=n_fft, axis=1)) ** 2   # (n_quiet, n_fft // 2 + 1)
    return JoinFill(dc=dc, ac_power=ac_power, power_spectrum=spectra.mean(axis=0))


def _recording_rng(seed: int, uid: str) -> np.random.Generator:
    """The join noise of one recording: from the seed and its id, not its position in the set."""
    digest = int.from_bytes(hashlib.sha256(uid.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng([seed, digest])


def target_label(target: float | str) -> str:
    """``10 -> "10"``, ``2.5 -> "2.5"``, ``"full" -> "full"`` (used in ids and the report)."""
    if isinstance(target, str):
        return target
    return f"{float(target):g}"


def _check_targets(durations: Sequence) -> list:
    if isinstance(durations, (str, int, float)):
        durations = [durations]
    targets, seen = [], set()
    for d in durations:
        if isinstance(d, str) and d.strip().lower() == FULL:
            t = FULL
        else:
            try:
                t = float(d)
            except (TypeError, ValueError):
                raise LongformError(f"target duration {d!r} is neither a number of seconds nor 'full'") from None
            if not (t > 0 and math.isfinite(t)):
                raise LongformError(f"target duration must be > 0 seconds, got {d!r}")
        if target_label(t) in seen:
            raise LongformError(f"target duration {d!r} is listed twice")
        seen.add(target_label(t))
        targets.append(t)
    if not targets:
        raise LongformError("no target durations given")
    return targets


def _key_fn(group_key) -> tuple[Callable[[Utterance], object], str]:
    if group_key is None:
        return (lambda u: u.speaker), "speaker"
    if isinstance(group_key, str):
        name = group_key
        return (lambda u: getattr(u, name, None)), name
    if callable(group_key):
        return group_key, getattr(group_key, "__name__", "group key")
    raise TypeError(f"group_key must be None, a field name or a callable, got {group_key!r}")


def _groups(utterances: Sequence[Utterance], group_key, allow_mixed: bool
            ) -> list[tuple[str, list[Utterance]]]:
    """Maximal runs of consecutive utterances with the same key, in manifest order."""
    if allow_mixed:
        return [(MIX_GROUP, list(utterances))] if utterances else []
    key, name = _key_fn(group_key)
    groups: list[tuple[str, list[Utterance]]] = []
    for i, u in enumerate(utterances):
        k = key(u)
        if k is None or (isinstance(k, str) and not k.strip()):
            where = u.source or f"manifest entry {i + 1}"      # source is "<manifest>:<line>"
            raise LongformError(
                f"{where} (id {u.id!r}) has no {name}: long-form recordings would mix "
                f"unknown sources; set the {name} field (chapter/talk id) or pass allow_mixed_speakers=True")
        k = str(k)
        if groups and groups[-1][0] == k:
            groups[-1][1].append(u)
        else:
            groups.append((k, [u]))
    return groups


def plan_windows(durations: Sequence[float], target: float, *, gap_s: float, tolerance: float
                 ) -> list[tuple[int, int]]:
    """Non-overlapping [start, stop) runs whose span (segments + gaps) is within tolerance of target.

    Two pointers, left to right: extend until the span reaches the lower bound, emit if it is
    not above the upper bound, otherwise drop the leftmost segment. O(n) per target.
    """
    lo, hi = target * (1 - tolerance), target * (1 + tolerance)
    windows = []
    n, i, j, total = len(durations), 0, 0, 0.0       # total = sum of durations[i:j]

    def span(a, b, s):
        return s + gap_s * (b - a - 1) if b > a else 0.0

    while i < n:
        while j < n and span(i, j, total) < lo:
            total += durations[j]
            j += 1
        if span(i, j, total) < lo:
            break                                     # not enough audio left in this group
        if span(i, j, total) <= hi:
            windows.append((i, j))
            i, total = j, 0.0
        else:
            total -= durations[i]
            i += 1
            if i == j:
                total = 0.0
    return windows


def _safe(name: str) -> str:
    """Group keys become parts of ids and file names: keep [A-Za-z0-9.-], map the rest to '-'."""
    return re.sub(r"[^A-Za-z0-9.\-]+", "-", name).strip("-") or "g"


def _joined_speaker(parts: Sequence[Utterance]) -> str | None:
    speakers = list(dict.fromkeys(u.speaker for u in parts if u.speaker is not None))
    return "+".join(speakers) if speakers else None


def _write_flac(path: Path, wave: np.ndarray, sample_rate: int) -> None:
    """16-bit FLAC written atomically, so a kill never leaves a truncated file."""
    with atomic_path(path) as tmp:
        # clip so that full-scale samples do not wrap around in the int16 conversion
        sf.write(tmp, np.clip(wave, -1.0, 32767 / 32768), sample_rate, format="FLAC", subtype="PCM_16")


def join_recording(uid: str, parts: Sequence[Utterance], out_dir: str | os.PathLike, *, gap_s: float,
                   sample_rate: int = 16000, seed: int = 0, fill: JoinFill | None = None
                   ) -> tuple[Utterance, JoinFill | None]:
    """Write ``<out_dir>/<uid>.flac``: ``parts`` in order with ``gap_s`` of their background
    between them (`estimate_background` of the parts, or ``fill`` when given, e.g. one estimate
    for a whole set so that short recordings, whose few parts may hold no pause, get the same
    background as long ones; ``gap_s = 0``: the parts abut, sample after sample).

    Returns the recording (transcripts joined with spaces, the parts' speakers joined with ``+``,
    audio path absolute) with its ``parts``: each source utterance's id and its ``[start, end)``
    seconds in the recording, exact to the sample (start = samples before it / sample_rate), and
    the fill used (None where there is no gap). The gap noise is seeded by (``seed``, ``uid``).
    """
    gap_samples = int(round(gap_s * sample_rate))
    waves = [np.asarray(load_audio(u.audio_filepath, offset=u.offset, duration=u.duration,
                                   sample_rate=sample_rate, source=u.source),
                        dtype=np.float32).reshape(-1) for u in parts]
    if len(waves) < 2 or gap_samples == 0:
        fill = None
    elif fill is None:
        fill = estimate_background(waves, sample_rate)
    rng = _recording_rng(seed, uid)
    pieces, spans, at = [], [], 0
    for i, w in enumerate(waves):
        if i and fill is not None:
            pieces.append(fill.make(gap_samples, rng))
            at += gap_samples
        pieces.append(w)
        spans.append((at, at + len(w)))
        at += len(w)
    wave = np.concatenate(pieces)                      # (samples,) parts and gaps in order
    path = Path(out_dir) / f"{uid}.flac"
    _write_flac(path, wave, sample_rate)
    text = " ".join(t for t in (u.text.strip() for u in parts) if t)
    recorded = tuple(Part(id=u.id, start=a / sample_rate, end=b / sample_rate)
                     for u, (a, b) in zip(parts, spans))
    return Utterance(id=uid, audio_filepath=str(path), duration=len(wave) / sample_rate, text=text,
                     offset=0.0, speaker=_joined_speaker(parts), parts=recorded), fill


def build_longform(utterances: Sequence[Utterance], durations: Sequence, out_dir: str | os.PathLike, *,
                   gap_s: float = 0.5, tolerance: float = 0.15, allow_mixed_speakers: bool = False,
                   group_key=None, sample_rate: int = 16000, seed: int = 0,
                   max_per_duration: int | None = None, manifest_path: str | os.PathLike | None = None
                   ) -> tuple[list[Utterance], LongformReport]:
    """Build long-form recordings from consecutive same-group utterances (see module docstring).

    Writes ``<out_dir>/<id>.flac`` (16-bit FLAC at ``sample_rate``), the manifest
    (``manifest_path``, default ``<out_dir>/longform.jsonl``; audio paths stored relative to it) and ``<out_dir>/sources.json``
    (id -> source utterance ids); each manifest row also carries ``parts``, the source ids with
    their spans in the recording (`join_recording`). Ids are ``lf<target>_<group>_<k>``, k counting from 0 per
    (target, group). ``group_key``: None (the ``speaker`` field), a field name, or a callable
    ``Utterance -> str | None``. ``gap_s`` seconds between parts hold the parts' background
    (digital silence or their noise floor, see the module docstring); ``seed`` seeds that noise
    and the ``max_per_duration`` shuffle. Returns the new utterances (targets in the given order,
    each in manifest order) and a `LongformReport`.
    """
    targets = _check_targets(durations)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise LongformError(f"seed must be an integer >= 0, got {seed!r}")
    if not 0 <= tolerance < 1:
        raise LongformError(f"tolerance is relative and must be in [0, 1), got {tolerance}")
    if gap_s < 0:
        raise LongformError(f"gap_s must be >= 0, got {gap_s}")
    if max_per_duration is not None and max_per_duration < 1:
        raise LongformError(f"max_per_duration must be >= 1 or None, got {max_per_duration}")
    utterances = list(utterances)
    if not utterances:
        raise LongformError("the input manifest is empty")
    groups = _groups(utterances, group_key, allow_mixed_speakers)
    report = LongformReport(groups=len(groups))

    def group_span(members):
        return sum(u.duration for u in members) + gap_s * (len(members) - 1)

    # plan: (target label, group label, k, parts) in target order, then manifest order
    plans: list[tuple[str, str, int, list[Utterance]]] = []
    for t_index, target in enumerate(targets):
        label = target_label(target)
        for name in ("made", "too_short", "no_fit", "capped"):
            getattr(report, name)[label] = 0
        candidates = []
        counters: dict[str, int] = {}
        for gname, members in groups:
            if target == FULL:
                windows = [(0, len(members))]
            else:
                windows = plan_windows([u.duration for u in members], target, gap_s=gap_s,
                                       tolerance=tolerance)
                if not windows:
                    short = group_span(members) < target * (1 - tolerance)
                    report.too_short[label] += short
                    report.no_fit[label] += not short
            g = _safe(gname)
            for a, b in windows:
                k = counters.get(g, 0)            # a key that comes back later keeps counting
                counters[g] = k + 1
                candidates.append((label, g, k, members[a:b]))
        if not candidates:
            longest = max(groups, key=lambda gm: group_span(gm[1]))
            whole = group_span(utterances)
            hint = ("; pass allow_mixed_speakers=True to concatenate across groups"
                    if not allow_mixed_speakers and whole >= target * (1 - tolerance) else "")
            raise LongformError(
                f"no recording of {label} s (tolerance {tolerance:.0%}) can be built: the longest "
                f"group {longest[0]!r} holds {group_span(longest[1]):.1f} s, the whole manifest "
                f"{whole:.1f} s{hint}; or drop this target")
        if max_per_duration is not None and len(candidates) > max_per_duration:
            keep = np.sort(np.random.default_rng([seed, t_index]).permutation(len(candidates))
                           [:max_per_duration])
            report.capped[label] = len(candidates) - max_per_duration
            candidates = [candidates[i] for i in keep]
        plans.extend(candidates)

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    result: list[Utterance] = []
    sources: dict[str, list[str]] = {}
    for n, (label, g, k, parts) in enumerate(plans):
        utt, fill = join_recording(f"lf{label}_{g}_{k}", parts, out_dir, gap_s=gap_s,
                                   sample_rate=sample_rate, seed=seed)
        if fill is not None and fill.digital_silence:
            report.silent_joins[label] = report.silent_joins.get(label, 0) + 1
        elif fill is not None:
            report.noise_joins[label] = report.noise_joins.get(label, 0) + 1
            lo, hi = report.floor_dbfs.get(label, (math.inf, -math.inf))
            report.floor_dbfs[label] = (min(lo, fill.level_dbfs), max(hi, fill.level_dbfs))
        result.append(utt)
        sources[utt.id] = [u.id for u in parts]
        report.made[label] += 1
        report.seconds[label] = report.seconds.get(label, 0.0) + utt.duration
        if (n + 1) % 100 == 0 or n + 1 == len(plans):
            log.info("long-form: %d/%d recordings written", n + 1, len(plans))
    for label in report.made:
        report.seconds.setdefault(label, 0.0)

    manifest_path = Path(manifest_path) if manifest_path is not None else out_dir / "longform.jsonl"
    atomic_write_json(out_dir / "sources.json", sources, indent=1)
    # relative paths: the manifest and its audio folder can be moved together
    write_manifest(manifest_path, result, relative_paths=True)
    return result, report
