"""Build the embedded synthetic speech corpus (``data=synth``).

Sentences from :mod:`asr_pe.data.synth.sentences` are spoken by espeak-ng with a fixed
set of speakers (voice, rate, pitch), resampled to 16 kHz and written as 16-bit FLAC with
JSON-lines manifests. ``train``/``dev`` hold short utterances; ``test`` spreads over
doubling duration buckets far longer than training, which is what the positional-encoding
study measures.

Everything about an utterance (speaker, jitter, text, espeak noise seed) derives from
``(seed, split, index)``, and espeak-ng runs in a forked pristine state per utterance
(:class:`~asr_pe.data.synth.espeak.IsolatedSynthesizer`), so a corpus is byte-identical
for the same config whatever the worker count. A corpus lives in
``<root>/synth/<config hash>/``; the marker ``COMPLETE.json`` is written last, and an
interrupted build resumes from its journal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import math
import multiprocessing as mp
import multiprocessing.util
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import torch
import torchaudio

from asr_pe.data.manifest import Utterance, write_manifest
from asr_pe.data.synth.espeak import IsolatedSynthesizer
from asr_pe.data.synth.sentences import generate_sentences, spoken_text, transcript
from asr_pe.io import atomic_path, atomic_write_json, atomic_write_text

log = logging.getLogger(__name__)

# Bump when a change in generation changes the audio or text of a given config, so that
# cached corpora built by older code are not reused.
GENERATOR_VERSION = 1
SPLITS = ("train", "dev", "test")
MARKER = "COMPLETE.json"
JOURNAL = "progress.jsonl"
# espeak speaks about 1.3x the nominal words/min on this vocabulary (short words); the
# first guess of the word count only has to be close, retries correct it.
_WORDS_PER_NOMINAL_WORD = 1.3
_MAX_ATTEMPTS = 12


@dataclass(frozen=True)
class Speaker:
    """A synthetic speaker: an espeak-ng voice (language + variant) and base prosody."""

    id: str
    voice: str
    rate: int  # words per minute
    pitch: int  # 0..100
    pitch_range: int = 50  # 0..100, intonation range


# British, Scottish, Caribbean, RP, New York, Lancastrian and West Midlands accents with
# male/female variants; a run uses the first ``num_speakers``.
SPEAKERS: tuple[Speaker, ...] = (
    Speaker("spk00", "en-us", 165, 45),
    Speaker("spk01", "en-us+f3", 175, 62),
    Speaker("spk02", "en+m3", 160, 40, 40),
    Speaker("spk03", "en-gb-scotland+f2", 170, 56),
    Speaker("spk04", "en-029+m1", 155, 50, 60),
    Speaker("spk05", "en-gb-x-rp+f4", 180, 66),
    Speaker("spk06", "en-us-nyc+m2", 172, 36),
    Speaker("spk07", "en-gb-x-gbclan+f1", 160, 58, 65),
    Speaker("spk08", "en-us+m7", 185, 42),
    Speaker("spk09", "en+f5", 150, 62, 45),
    Speaker("spk10", "en-gb-x-gbcwmd+m4", 165, 48),
    Speaker("spk11", "en-us+f2", 190, 55, 60),
)


@dataclass(frozen=True)
class SynthConfig:
    """Everything that decides the corpus content (hashed into its folder name).

    ``train``/``dev`` utterances last between ``min_duration`` and ``train_max_duration``
    seconds (uniformly spread targets). ``test`` has ``test_per_bucket`` utterances in each
    bucket ``[test_bucket_edges[i], test_bucket_edges[i+1])`` (the first bucket starts at
    ``min_duration`` at the earliest); a long test utterance is several sentences of one
    speaker spoken in one synthesis call.
    """

    seed: int = 0
    num_train: int = 2500
    num_dev: int = 150
    min_duration: float = 1.0
    train_max_duration: float = 5.0
    test_bucket_edges: tuple[float, ...] = (0.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
    test_per_bucket: int = 25
    num_speakers: int = 10
    rate_jitter: float = 0.08  # relative, uniform in [-j, +j]
    pitch_jitter: int = 6  # absolute on espeak's 0..100 scale
    sample_rate: int = 16000

    def __post_init__(self) -> None:
        # Hydra hands lists (ListConfig) and ints; normalise so the hash is stable.
        edges = tuple(float(e) for e in self.test_bucket_edges)
        object.__setattr__(self, "test_bucket_edges", edges)
        object.__setattr__(self, "min_duration", float(self.min_duration))
        object.__setattr__(self, "train_max_duration", float(self.train_max_duration))
        object.__setattr__(self, "rate_jitter", float(self.rate_jitter))
        for name in ("seed", "num_train", "num_dev", "test_per_bucket", "num_speakers",
                     "pitch_jitter", "sample_rate"):
            object.__setattr__(self, name, int(getattr(self, name)))
        if min(self.num_train, self.num_dev, self.test_per_bucket) < 0:
            raise ValueError("num_train, num_dev and test_per_bucket must be >= 0")
        if not 0 < self.min_duration < self.train_max_duration:
            raise ValueError(
                f"need 0 < min_duration < train_max_duration, got {self.min_duration}, "
                f"{self.train_max_duration}"
            )
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError(f"test_bucket_edges must increase, got {list(edges)}")
        if edges[1] <= self.min_duration:
            raise ValueError(
                f"first test bucket [{edges[0]}, {edges[1]}) ends below min_duration "
                f"{self.min_duration}"
            )
        if not 1 <= self.num_speakers <= len(SPEAKERS):
            raise ValueError(
                f"num_speakers must be in [1, {len(SPEAKERS)}], got {self.num_speakers}")
        if not 0 <= self.rate_jitter < 0.5 or not 0 <= self.pitch_jitter <= 30:
            raise ValueError("rate_jitter must be in [0, 0.5) and pitch_jitter in [0, 30]")
        if self.sample_rate < 8000:
            raise ValueError(f"sample_rate must be >= 8000, got {self.sample_rate}")

    @property
    def speakers(self) -> tuple[Speaker, ...]:
        return SPEAKERS[: self.num_speakers]

    def split_size(self, split: str) -> int:
        if split == "train":
            return self.num_train
        if split == "dev":
            return self.num_dev
        if split == "test":
            return self.test_per_bucket * (len(self.test_bucket_edges) - 1)
        raise ValueError(f"unknown split {split!r} (expected one of {SPLITS})")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["test_bucket_edges"] = list(self.test_bucket_edges)
        return d

    def digest(self) -> str:
        """Short hash of the config and generator version: the corpus folder name."""
        payload = json.dumps({"generator_version": GENERATOR_VERSION, **self.to_dict()},
                             sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


# ---------------------------------------------------------------- one utterance
def utterance_seed(seed: int, split: str, index: int) -> int:
    """A 63-bit seed from (corpus seed, split, index), stable across platforms and runs."""
    digest = hashlib.sha256(f"asr_pe.synth/{seed}/{split}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def utterance_id(split: str, index: int) -> str:
    return f"synth_{split}_{index:06d}"


def duration_window(config: SynthConfig, split: str, index: int) -> tuple[float, float, bool]:
    """``(low, high, high_inclusive)`` duration bounds (s) of utterance ``index``."""
    if split in ("train", "dev"):
        return config.min_duration, config.train_max_duration, True
    bucket = index // config.test_per_bucket
    edges = config.test_bucket_edges
    return max(edges[bucket], config.min_duration), edges[bucket + 1], False


@functools.lru_cache(maxsize=4)
def _resampler(orig_sr: int, new_sr: int) -> torchaudio.transforms.Resample:
    # The transform precomputes the sinc kernel that functional.resample rebuilds per call
    # (3-4x faster on short utterances); same algorithm and defaults.
    return torchaudio.transforms.Resample(orig_sr, new_sr)


def _resample_to_int16(samples: np.ndarray, orig_sr: int, new_sr: int) -> np.ndarray:
    wave = torch.from_numpy(samples.astype(np.float32) / 32768.0)
    if orig_sr != new_sr:
        with torch.no_grad():
            wave = _resampler(orig_sr, new_sr)(wave)
    return np.clip(np.round(wave.numpy() * 32768.0), -32768, 32767).astype(np.int16)


def make_utterance(config: SynthConfig, split: str, index: int, corpus_dir: Path,
                   synth: IsolatedSynthesizer, *, window: tuple[float, float] | None = None,
                   speaker_index: int | None = None) -> dict[str, Any]:
    """Synthesize utterance ``index`` of ``split``, write its audio, return its record.

    Draws a speaker with jittered rate and pitch, a target duration inside the window,
    and a word count from the speaker's rate; text is regenerated (deterministically, with
    the next draws of the same generator) with an adjusted word count until the audio
    falls inside the window. ``window`` ([low, high] s) and ``speaker_index`` replace the
    split's duration window and the drawn speaker, for pools outside the corpus's splits
    (`asr_pe.data.synth.ladder`); the draws stay the same, so the corpus's splits are unchanged.
    """
    utt_seed = utterance_seed(config.seed, split, index)
    rng = random.Random(utt_seed)
    speaker = config.speakers[rng.randrange(config.num_speakers)]
    if speaker_index is not None:
        speaker = config.speakers[speaker_index % config.num_speakers]
    rate = round(speaker.rate * (1.0 + rng.uniform(-config.rate_jitter, config.rate_jitter)))
    pitch = min(100, max(0, speaker.pitch + rng.randint(-config.pitch_jitter, config.pitch_jitter)))
    if window is None:
        low, high, high_inclusive = duration_window(config, split, index)
    else:
        low, high, high_inclusive = float(window[0]), float(window[1]), True
    margin = 0.1 * (high - low)
    target = rng.uniform(low + margin, high - margin) if split == "test" else rng.uniform(low, high)
    num_words = max(1, round(target * rate / 60.0 * _WORDS_PER_NOMINAL_WORD))

    def fits(duration: float) -> bool:
        return low <= duration and (duration <= high if high_inclusive else duration < high)

    tried: list[str] = []
    for _ in range(_MAX_ATTEMPTS):
        sentences = generate_sentences(rng, num_words)
        samples, espeak_sr = synth.synthesize(
            spoken_text(sentences), voice=speaker.voice, rate=rate, pitch=pitch,
            pitch_range=speaker.pitch_range, seed=utt_seed & 0x7FFFFFFF,
        )
        duration = len(samples) / espeak_sr
        if fits(duration):
            # Resample only a fitting take; the length can move by a sample at an edge.
            audio = _resample_to_int16(samples, espeak_sr, config.sample_rate)
            duration = len(audio) / config.sample_rate
            if fits(duration):
                break
        tried.append(f"{num_words} words -> {duration:.2f}s")
        if duration <= 0:
            new_words = num_words + 1
        else:
            new_words = max(1, round(num_words * target / duration))
        if new_words == num_words:
            new_words = num_words + 1 if duration < low else max(1, num_words - 1)
        num_words = new_words
    else:
        raise RuntimeError(
            f"synth {split} utterance {index}: no text of a fitting length for "
            f"[{low}, {high}] s with speaker {speaker.id} after {_MAX_ATTEMPTS} attempts "
            f"({'; '.join(tried)})"
        )

    utt_id = utterance_id(split, index)
    relative = Path("audio") / split / f"{utt_id}.flac"
    path = corpus_dir / relative
    with atomic_path(path) as tmp:
        sf.write(tmp, audio, config.sample_rate, format="FLAC", subtype="PCM_16")
    return {
        "split": split,
        "index": index,
        "id": utt_id,
        "audio_filepath": relative.as_posix(),
        "duration": duration,
        "text": transcript(sentences),
        "speaker": speaker.id,
    }


# ---------------------------------------------------------------- workers
_WORKER_SYNTH: IsolatedSynthesizer | None = None
_WORKER_ARGS: tuple[SynthConfig, Path] | None = None


def _init_worker(config: SynthConfig, corpus_dir: Path) -> None:
    global _WORKER_SYNTH, _WORKER_ARGS
    torch.set_num_threads(1)  # one core per worker; the pool provides the parallelism
    _WORKER_SYNTH = IsolatedSynthesizer()
    _WORKER_ARGS = (config, corpus_dir)
    # Runs when the worker exits after pool.close(): stop and reap the espeak server.
    mp.util.Finalize(_WORKER_SYNTH, _WORKER_SYNTH.close, exitpriority=10)


def _work(job: tuple) -> dict[str, Any]:
    """``job``: (split, index) or (split, index, make_utterance keyword options)."""
    assert _WORKER_SYNTH is not None and _WORKER_ARGS is not None, "worker not initialised"
    config, corpus_dir = _WORKER_ARGS
    return make_utterance(config, job[0], job[1], corpus_dir, _WORKER_SYNTH, **(job[2] if len(job) > 2 else {}))


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _run_jobs(config: SynthConfig, corpus_dir: Path, jobs: list[tuple],
              workers: int) -> Iterator[dict[str, Any]]:
    """Yield records of ``jobs`` ((split, index[, options]), see `_work`) as they finish (order
    depends on scheduling)."""
    if workers <= 1 or len(jobs) <= 1:
        with _torch_threads(1), IsolatedSynthesizer() as synth:
            for job in jobs:
                yield make_utterance(config, job[0], job[1], corpus_dir, synth, **(job[2] if len(job) > 2 else {}))
        return
    methods = mp.get_all_start_methods()
    context = mp.get_context("fork" if "fork" in methods else "spawn")
    pool = context.Pool(workers, initializer=_init_worker, initargs=(config, corpus_dir))
    try:
        yield from pool.imap_unordered(_work, jobs, chunksize=4)
    except BaseException:  # error, interrupt, or the consumer stopped early
        pool.terminate()  # their espeak servers see EOF and exit on their own
        pool.join()
        raise
    pool.close()  # let workers exit normally, closing their espeak servers
    pool.join()


# ---------------------------------------------------------------- progress
class _Progress:
    """A rich progress bar on a terminal, a periodic log line otherwise."""

    def __init__(self, total: int, done: int, description: str, enabled: bool | None):
        self.total, self.done = total, done
        self.description = description
        self._bar = None
        self._next_log = 0.0
        self._start = time.monotonic()
        interactive = sys.stderr.isatty() if enabled is None else enabled
        if interactive:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
            self._bar.start()
            self._task = self._bar.add_task(description, total=total, completed=done)
        else:
            log.info("%s: %d/%d utterances already done", description, done, total)

    def advance(self) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
            return
        now = time.monotonic()
        if now >= self._next_log or self.done == self.total:
            self._next_log = now + 10.0
            log.info("%s: %d/%d utterances (%.0f s)", self.description, self.done, self.total,
                     now - self._start)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


# ---------------------------------------------------------------- corpus
def default_root() -> Path:
    """``$ASR_PE_CACHE`` or ``~/.cache/asr_pe``."""
    return Path(os.environ.get("ASR_PE_CACHE") or Path.home() / ".cache" / "asr_pe").expanduser()


def corpus_dir_for(config: SynthConfig, root: str | os.PathLike | None = None) -> Path:
    base = Path(root).expanduser() if root is not None else default_root()
    return base / "synth" / config.digest()


@contextlib.contextmanager
def _build_lock(corpus_dir: Path) -> Iterator[None]:
    """Serialise builders of the same corpus (e.g. several ranks calling prepare)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, builds are still atomic per file
        yield
        return
    with open(corpus_dir / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_journal(corpus_dir: Path, config: SynthConfig) -> dict[tuple[str, int], dict]:
    """Records of utterances finished by an earlier, interrupted build."""
    done: dict[tuple[str, int], dict] = {}
    path = corpus_dir / JOURNAL
    if not path.exists():
        return done
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
                key = (record["split"], int(record["index"]))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by the kill
            if (key[0] in SPLITS and 0 <= key[1] < config.split_size(key[0])
                    and (corpus_dir / record["audio_filepath"]).is_file()):
                done[key] = record
    return done


def _is_complete(corpus_dir: Path) -> bool:
    return (corpus_dir / MARKER).is_file() and all(
        (corpus_dir / f"{split}.jsonl").is_file() for split in SPLITS)


def _write_json_atomic(path: Path, data: Any) -> None:
    atomic_write_json(path, data, sort_keys=True)


def build_synth_corpus(root: str | os.PathLike | None = None, *, workers: int = 2,
                       progress: bool | None = None, **config: Any) -> Path:
    """Build (or reuse) the synthetic corpus; return its folder.

    The folder holds ``train.jsonl``, ``dev.jsonl``, ``test.jsonl`` (audio paths relative
    to it), ``audio/<split>/*.flac``, ``config.json`` and, once complete, ``COMPLETE.json``
    with counts and durations. ``config`` are :class:`SynthConfig` fields; ``workers`` and
    ``progress`` (None: a bar on a terminal, log lines otherwise) do not change the content.
    """
    unknown = sorted(set(config) - {f.name for f in dataclasses.fields(SynthConfig)})
    if unknown:
        raise TypeError(f"unknown synth corpus option(s): {', '.join(unknown)}")
    cfg = SynthConfig(**config)
    corpus_dir = corpus_dir_for(cfg, root)
    if _is_complete(corpus_dir):
        log.info("synth corpus: reusing %s", corpus_dir)
        return corpus_dir
    corpus_dir.mkdir(parents=True, exist_ok=True)
    with _build_lock(corpus_dir):
        if _is_complete(corpus_dir):  # another process finished it while we waited
            return corpus_dir
        _build(cfg, corpus_dir, workers, progress)
    return corpus_dir


def _build(cfg: SynthConfig, corpus_dir: Path, workers: int, progress: bool | None) -> None:
    start = time.monotonic()
    _write_json_atomic(corpus_dir / "config.json",
                       {"generator_version": GENERATOR_VERSION, **cfg.to_dict()})
    done = _read_journal(corpus_dir, cfg)
    # Long test utterances first, so the slowest jobs do not trail at the end.
    jobs = [(split, i) for split in ("test", "train", "dev")
            for i in range(cfg.split_size(split)) if (split, i) not in done]
    total = sum(cfg.split_size(s) for s in SPLITS)
    if done:
        log.info("synth corpus: resuming %s (%d of %d utterances done)",
                 corpus_dir, len(done), total)
    bar = _Progress(total, len(done), f"synth corpus {corpus_dir.name}", progress)
    try:
        with open(corpus_dir / JOURNAL, "a", encoding="utf-8") as journal:
            for record in _run_jobs(cfg, corpus_dir, jobs, workers):
                done[(record["split"], record["index"])] = record
                journal.write(json.dumps(record, sort_keys=True) + "\n")
                journal.flush()
                bar.advance()
    finally:
        bar.close()

    summary: dict[str, Any] = {"generator_version": GENERATOR_VERSION, "config": cfg.to_dict()}
    for split in SPLITS:
        records = [done[(split, i)] for i in range(cfg.split_size(split))]
        write_manifest(
            corpus_dir / f"{split}.jsonl",
            [Utterance(id=r["id"], audio_filepath=str(corpus_dir / r["audio_filepath"]),
                       duration=r["duration"], text=r["text"], speaker=r["speaker"])
             for r in records],
            relative_paths=True,
        )
        durations = [r["duration"] for r in records]
        summary[split] = {
            "count": len(records),
            "hours": math.fsum(durations) / 3600.0,
            "min_duration": min(durations, default=0.0),
            "max_duration": max(durations, default=0.0),
        }
    summary["build_seconds"] = round(time.monotonic() - start, 1)  # informative only
    (corpus_dir / JOURNAL).unlink(missing_ok=True)
    _write_json_atomic(corpus_dir / MARKER, summary)
    log.info("synth corpus: built %s in %.1f s", corpus_dir, summary["build_seconds"])


def manifest_paths(corpus_dir: str | os.PathLike) -> dict[str, str]:
    """``{"train": ..., "dev": ..., "test": ...}`` manifest paths of a corpus folder."""
    return {split: str(Path(corpus_dir) / f"{split}.jsonl") for split in SPLITS}


def prepare_synth(root: str | os.PathLike | None = None, *, workers: int = 2,
                  progress: bool | None = None, longform: dict[str, Any] | None = None,
                  **config: Any) -> dict[str, Any]:
    """Build or reuse the corpus and return its manifest paths (the Hydra ``data=synth`` target).

    ``longform`` (e.g. ``{"durations": [160], "gap_s": 0.5}``) also builds long-form recordings
    from the test split (see `build_synth_longform`); the result's ``test`` is then a mapping
    ``{"test": …, "longform": …}``.
    """
    corpus_dir = build_synth_corpus(root, workers=workers, progress=progress, **config)
    paths: dict[str, Any] = manifest_paths(corpus_dir)
    if longform:
        paths["test"] = {"test": paths["test"], "longform": str(build_synth_longform(corpus_dir, **longform))}
    return paths


def build_synth_longform(corpus_dir: str | os.PathLike, *, durations: Sequence[float] = (160,),
                         gap_s: float = 0.5, tolerance: float = 0.15,
                         max_per_duration: int | None = None) -> Path:
    """Long-form recordings of one speaker each, from the test split (cached beside the corpus).

    The test manifest is ordered by length bucket, so its utterances are first grouped by
    speaker (keeping their order within a speaker) and the builder then joins consecutive
    utterances of each speaker with ``gap_s`` of silence up to each target duration.
    """
    from asr_pe.data.longform_sets import build_longform
    from asr_pe.data.manifest import read_manifest

    key = json.dumps({"durations": [float(d) for d in durations], "gap_s": float(gap_s),
                      "tolerance": float(tolerance), "max": max_per_duration}, sort_keys=True)
    out_dir = Path(corpus_dir) / f"longform_{hashlib.sha1(key.encode()).hexdigest()[:8]}"
    manifest = out_dir / "longform.jsonl"
    done = out_dir / "COMPLETE"
    if done.exists():
        return manifest
    # Concurrent jobs of a sweep (e.g. a SLURM array) may all reach this point: one builds while
    # the others wait on the corpus lock and then find the set complete.
    with _build_lock(Path(corpus_dir)):
        if done.exists():
            return manifest
        test = read_manifest(Path(corpus_dir) / "test.jsonl")
        by_speaker = sorted(test, key=lambda u: u.speaker or "")  # stable: manifest order within a speaker
        out_dir.mkdir(parents=True, exist_ok=True)
        _, report = build_longform(by_speaker, list(durations), out_dir, gap_s=gap_s, tolerance=tolerance,
                                   max_per_duration=max_per_duration, manifest_path=manifest)
        log.info("synth long-form set %s: %s", manifest, report.summary())
        atomic_write_text(done, key + "\n")
    return manifest


def bucket_counts(durations: Sequence[float], edges: Sequence[float]) -> list[int]:
    """How many durations fall in each ``[edges[i], edges[i+1])`` bucket."""
    counts = [0] * (len(edges) - 1)
    for d in durations:
        for i in range(len(edges) - 1):
            if edges[i] <= d < edges[i + 1]:
                counts[i] += 1
                break
    return counts
