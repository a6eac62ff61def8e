"""A length ladder with matched content: the same short utterances joined into recordings of
5, 10, 20, 40, 80 and 160 s, from a test pool and from a disjoint dev pool.

Why: a long-form set built from a test set's utterances of every length holds other content
than a short bucket, so the ratio of their error rates mixes length with content. Here every
rung is made of the *same* utterances, and each recording's utterances are also decoded alone
(the pool is a test set of its own), so the in-context ratio
(`asr_pe.evaluation.in_context`) at each rung measures length alone; plotted against the rung it
is the dose-response curve of length.

Pools. Two new splits of the synthetic corpus's generator, ``ladder_test`` and ``ladder_dev``:
utterance i of a pool derives from (corpus seed, split, i) like every synthetic utterance
(`corpus.make_utterance`), so neither pool touches the corpus's train/dev/test splits (nor its
folder name) and the two pools share no utterance. Every utterance lasts
``[min_duration, max_duration]`` seconds (default 2-3 s, inside the training lengths), and the
speaker is fixed per block of ``n_top`` consecutive utterances (the longest rung's count), so that
each block is one speaker's recording at the top of the ladder.

Rungs. A rung of D seconds holds ``n = D / ((min_duration + max_duration) / 2)`` utterances
(2, 4, ..., 64 for the defaults); recording j of a rung is the pool's utterances
``[j·n, (j + 1)·n)``, so the rungs are nested partitions of the same pool: every rung holds exactly
the same utterances, in the same order, one speaker per recording. A rung's duration is its
speech; the D of a recording lies within ``[n·min_duration, n·max_duration]`` (±20 % for the
defaults, tighter for longer rungs, as the durations average out).

Joins, two variants of every rung (`asr_pe.data.longform_sets.join_recording`):

- ``gap500ms``: 0.5 s between utterances, filled with their background (the builder's public
  path, `estimate_background`, estimated once per pool: a recording of two utterances may hold
  no pause of its own, and a per-recording estimate would then differ between rungs). The
  synthetic corpus's background is digital silence: espeak-ng pauses are exact zeros, so the
  fill is zeros. Training never shows such a pause: of 600 training utterances the longest zero
  run inside one is 0.38 s, 1.2 % hold one of 0.25 s or more, none 0.5 s; a long recording gets one
  at every join, a regular segmentation cue outside the training distribution.
- ``nogap``: the utterances abut, sample after sample; no cue beyond what one utterance's end and
  the next one's start hold (espeak leaves at most ~10-50 ms of silence at either end).

Comparing the two variants, per rung and PE, says whether the gap changes the curve.

Layout: ``<root>/synth_ladder/<hash>/`` (hash of the ladder options and of the corpus options
that shape an utterance: seed, speakers, jitter, sample rate, generator version), holding
``audio/`` (pool utterances), ``recordings/<set>/`` (one folder per ladder set) and the manifests
``ladder_<pool>_alone.jsonl`` (the pool, decoded alone) and ``ladder_<pool>_<variant>_<rung>.jsonl``
(recordings with ``parts``), plus ``ladder.json`` (the index of every set) and ``COMPLETE``.
Manifest stems are unique, so ``evaluate.py run=<dir> data.test=[<manifests>]`` names each result
folder after its set. Building is deterministic and resumable (a journal of finished
utterances), and a complete ladder is reused.

Composition. The curves need only what each recording is made of (its parts' ids, in order), not
the 1.3 GB of audio: `write_composition` archives a ladder's index and build options and, per
set and recording, its manifest row without the audio path and text (id, duration, speaker,
parts with id/start/end) as one xz JSON-lines file (``--composition OUT``; the length study
commits ``recipes/synth/study/ladder/ladder_composition.jsonl.xz``). `ladder_sets` takes that
file wherever it takes a ladder folder: it is written out once, as the ladder's ``ladder.json``
and manifests (without audio), to ``<cache>/ladder_composition/<hash>/``, so the curves read the
same files either way. Only scoring reads it: decoding needs the ladder itself.

    python -m asr_pe.data.synth.ladder [--root DIR] [--test-recordings 20] [--dev-recordings 10] \\
        [--rungs 5 10 20 40 80 160] [--gaps 0.5 0] [--min-duration 2] [--max-duration 3] [--workers 2] \\
        [--composition recipes/synth/study/ladder/ladder_composition.jsonl.xz]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import lzma
import math
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from asr_pe.errors import UserError
from asr_pe.data.audio import load_audio
from asr_pe.data.longform_sets import estimate_background, join_recording
from asr_pe.data.manifest import Utterance, write_manifest
from asr_pe.data.synth.corpus import (GENERATOR_VERSION, SynthConfig, _build_lock, _Progress, _run_jobs,
                                      default_root, utterance_id)
from asr_pe.io import atomic_write_bytes, atomic_write_json, atomic_write_text, read_jsonl, unwritable_reason

__all__ = ["LadderConfig", "LadderError", "POOLS", "build_ladder", "ladder_sets", "write_composition",
           "variant_name", "main"]

log = logging.getLogger(__name__)

POOLS = {"test": "ladder_test", "dev": "ladder_dev"}      # pool -> the generator's split name
JOURNAL = "progress.jsonl"
MARKER = "COMPLETE"
INDEX = "ladder.json"
BUILD = "config.json"
COMPOSITION_MARKER = "COMPOSITION"       # a folder written out from a composition file (no audio)
# what a composition leaves out of a manifest row: the audio (1.3 GB for the default ladder) and
# the words (every score carries its reference)
_NOT_COMPOSITION = ("audio_filepath", "text")
# the pool's background is estimated on its first utterances (as many as the default top rung
# holds, four times): enough pauses, and the same estimate whatever the pool's size
BACKGROUND_UTTERANCES = 256
# the corpus options that shape an utterance of a pool (the rest size the corpus's own splits)
_UTTERANCE_FIELDS = ("seed", "num_speakers", "rate_jitter", "pitch_jitter", "sample_rate")


class LadderError(UserError, ValueError):
    """The ladder cannot be built as asked (rungs that do not nest, bad sizes)."""


def variant_name(gap_s: float) -> str:
    """``0.5 -> "gap500ms"``, ``0 -> "nogap"``: the join variant in set names."""
    return "nogap" if gap_s == 0 else f"gap{round(gap_s * 1000)}ms"


@dataclass(frozen=True)
class LadderConfig:
    """What decides a ladder's content (hashed into its folder name), see the module docstring."""
    rungs: tuple[float, ...] = (5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
    min_duration: float = 2.0
    max_duration: float = 3.0
    test_recordings: int = 20          # recordings of the longest rung from the test pool
    dev_recordings: int = 10           # ... from the dev pool
    gaps: tuple[float, ...] = (0.5, 0.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rungs", tuple(float(r) for r in self.rungs))
        object.__setattr__(self, "gaps", tuple(float(g) for g in self.gaps))
        for name in ("min_duration", "max_duration"):
            object.__setattr__(self, name, float(getattr(self, name)))
        for name in ("test_recordings", "dev_recordings"):
            object.__setattr__(self, name, int(getattr(self, name)))
        if not 0 < self.min_duration < self.max_duration:
            raise LadderError(f"need 0 < min_duration < max_duration, got {self.min_duration}, {self.max_duration}")
        if not self.rungs or list(self.rungs) != sorted(set(self.rungs)):
            raise LadderError(f"rungs must be increasing seconds, got {list(self.rungs)}")
        if not self.gaps or len(set(self.gaps)) != len(self.gaps) or min(self.gaps) < 0:
            raise LadderError(f"gaps must be distinct seconds >= 0, got {list(self.gaps)}")
        if min(self.test_recordings, self.dev_recordings) < 1:
            raise LadderError("test_recordings and dev_recordings must be >= 1")
        counts = self.counts
        top = counts[-1]
        for rung, n in zip(self.rungs, counts):
            if n < 1 or not math.isclose(n * self.mean_duration, rung, rel_tol=1e-9):
                raise LadderError(f"rung {rung:g} s is not a whole number of {self.mean_duration:g} s utterances "
                                  f"(the mean of min_duration and max_duration)")
            if top % n:
                raise LadderError(f"rung {rung:g} s ({n} utterances) does not divide the longest rung "
                                  f"({top} utterances): the rungs would not hold the same utterances")

    @property
    def mean_duration(self) -> float:
        return (self.min_duration + self.max_duration) / 2

    @property
    def counts(self) -> list[int]:
        """Utterances per recording of each rung."""
        return [round(r / self.mean_duration) for r in self.rungs]

    def pool_size(self, pool: str) -> int:
        return self.counts[-1] * (self.test_recordings if pool == "test" else self.dev_recordings)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["rungs"], d["gaps"] = list(self.rungs), list(self.gaps)
        return d


def _digest(cfg: LadderConfig, synth: SynthConfig) -> str:
    payload = {"generator_version": GENERATOR_VERSION, "ladder": cfg.to_dict(),
               "utterance": {k: getattr(synth, k) for k in _UTTERANCE_FIELDS}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def _set_name(pool: str, what: str, rung: float | None = None) -> str:
    return f"ladder_{pool}_{what}" + ("" if rung is None else f"_{rung:g}")


def _manifest_names(index: dict[str, Any]) -> list[str]:
    """Every manifest an index names (per pool: the alone set, then each variant's rungs)."""
    return [name for entry in index["sets"].values()
            for name in [entry["alone"], *(m for rungs in entry["recordings"].values() for m in rungs.values())]]


def write_composition(ladder_dir: str | Path, out: str | Path) -> Path:
    """Archive what a complete ladder is made of, without audio or texts, as ``out`` (xz JSON
    lines, atomically; the same ladder gives the same bytes): a first row ``{"kind": "ladder",
    "folder", "build", "index"}`` (the folder's name, ``config.json`` and ``ladder.json``), then
    per manifest of the index and row of it ``{"set": <manifest stem>, "id", "duration",
    "speaker", "parts"?}``. Returns ``out``."""
    ladder_dir = Path(ladder_dir)
    if not (ladder_dir / MARKER).is_file():
        raise LadderError(f"{ladder_dir}: not a complete ladder (no {MARKER}); build it with "
                          f"python -m asr_pe.data.synth.ladder")
    index = json.loads((ladder_dir / INDEX).read_text(encoding="utf-8"))
    build = json.loads((ladder_dir / BUILD).read_text(encoding="utf-8"))
    lines = [json.dumps({"kind": "ladder", "folder": ladder_dir.name, "build": build, "index": index})]
    for name in _manifest_names(index):
        for _, row in read_jsonl(ladder_dir / name, LadderError):
            lines.append(json.dumps({"set": Path(name).stem,
                                     **{k: v for k, v in row.items() if k not in _NOT_COMPOSITION}}))
    # xz: the rungs repeat the same part ids megabytes apart (preset 6: asr_pe.results_table.XZ_PRESET)
    atomic_write_bytes(out, lzma.compress(("\n".join(lines) + "\n").encode("utf-8"), format=lzma.FORMAT_XZ, preset=6))
    return Path(out)


def _composition_folder(path: Path) -> Path:
    """The folder a composition file is written out to (``ladder.json``, its manifests without
    audio, `COMPOSITION_MARKER`): ``<cache>/ladder_composition/<hash of the file>/``, written
    once (in a temporary folder renamed into place, so a second process finds it whole)."""
    data = path.read_bytes()
    base = default_root() / "ladder_composition"
    folder = base / hashlib.sha256(data).hexdigest()[:16]
    if (folder / COMPOSITION_MARKER).is_file():
        return folder
    try:
        rows = [json.loads(line) for line in lzma.decompress(data).decode("utf-8").splitlines()]
        head = rows[0]
        index, build = head["index"], head["build"]
        names = {Path(n).stem: n for n in _manifest_names(index)}
        if head.get("kind") != "ladder" or any(r["set"] not in names for r in rows[1:]):
            raise ValueError("rows of sets its index does not name")
    except (lzma.LZMAError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise LadderError(f"{path}: not a ladder composition ({type(e).__name__}: {e}); write one with "
                          f"python -m asr_pe.data.synth.ladder --composition <file>") from None
    manifests: dict[str, list[str]] = {stem: [] for stem in names}
    for r in rows[1:]:
        manifests[r.pop("set")].append(json.dumps(r))
    empty = sorted(stem for stem, lines in manifests.items() if not lines)
    if empty:
        raise LadderError(f"{path}: not a ladder composition (no rows for {', '.join(empty)})")
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=base, prefix=f".{folder.name}."))
    try:
        for stem, lines in manifests.items():
            (tmp / names[stem]).write_text("\n".join(lines) + "\n", encoding="utf-8")
        (tmp / INDEX).write_text(json.dumps(index, indent=1), encoding="utf-8")
        (tmp / BUILD).write_text(json.dumps(build, indent=2), encoding="utf-8")
        (tmp / COMPOSITION_MARKER).write_text(json.dumps({"folder": head.get("folder"), "from": str(path)}) + "\n")
        os.rename(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (folder / COMPOSITION_MARKER).is_file():     # else another process wrote it first
            raise
    return folder


def ladder_sets(ladder_dir: str | Path) -> dict[str, Any]:
    """The index of a complete ladder (``ladder.json``): per pool, the ``alone`` manifest and per
    variant and rung the recordings' manifest, paths absolute. ``ladder_dir`` is the ladder's
    folder or its composition file (`write_composition`), whose manifests have no audio."""
    ladder_dir = Path(ladder_dir)
    if ladder_dir.is_file():
        ladder_dir = _composition_folder(ladder_dir)
    index = json.loads((ladder_dir / INDEX).read_text(encoding="utf-8"))
    for pool in index["sets"].values():
        pool["alone"] = str(ladder_dir / pool["alone"])
        for variant in pool["recordings"].values():
            for rung in variant:
                variant[rung] = str(ladder_dir / variant[rung])
    return index


def _synthesize_pools(cfg: LadderConfig, synth: SynthConfig, ladder_dir: Path, workers: int,
                      progress: bool | None) -> dict[str, list[Utterance]]:
    """Pool utterances (resumed from the journal), in index order per pool."""
    n_top = cfg.counts[-1]
    window = (cfg.min_duration, cfg.max_duration)
    done: dict[tuple[str, int], dict] = {}
    journal = ladder_dir / JOURNAL
    if journal.exists():
        for line in journal.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                key = (rec["split"], int(rec["index"]))
            except (ValueError, KeyError, TypeError):
                continue                                 # a line cut short by a kill
            if (ladder_dir / rec["audio_filepath"]).is_file():
                done[key] = rec
    jobs = [(split, i, {"window": window, "speaker_index": i // n_top})
            for pool, split in POOLS.items() for i in range(cfg.pool_size(pool)) if (split, i) not in done]
    bar = _Progress(sum(cfg.pool_size(p) for p in POOLS), len(done), f"ladder {ladder_dir.name}", progress)
    try:
        with open(journal, "a", encoding="utf-8") as f:
            for rec in _run_jobs(synth, ladder_dir, jobs, workers):
                done[(rec["split"], rec["index"])] = rec
                f.write(json.dumps(rec, sort_keys=True) + "\n")
                f.flush()
                bar.advance()
    finally:
        bar.close()
    pools = {}
    for pool, split in POOLS.items():
        records = [done[(split, i)] for i in range(cfg.pool_size(pool))]
        assert all(r["id"] == utterance_id(split, i) for i, r in enumerate(records)), "journal out of order"
        pools[pool] = [Utterance(id=r["id"], audio_filepath=str(ladder_dir / r["audio_filepath"]),
                                 duration=r["duration"], text=r["text"], speaker=r["speaker"]) for r in records]
    return pools


def build_ladder(root: str | Path | None = None, *, workers: int = 2, progress: bool | None = None,
                 synth: dict[str, Any] | None = None, **ladder: Any) -> Path:
    """Build (or reuse) the ladder; return its folder (see the module docstring).

    ``ladder``: `LadderConfig` fields; ``synth``: `SynthConfig` fields of the corpus whose voices
    the pools use (default: the default corpus's); ``workers``/``progress`` do not change the
    content."""
    unknown = sorted(set(ladder) - {f.name for f in dataclasses.fields(LadderConfig)})
    if unknown:
        raise TypeError(f"unknown ladder option(s): {', '.join(unknown)}")
    cfg = LadderConfig(**ladder)
    synth_cfg = SynthConfig(**(synth or {}))
    base = Path(root).expanduser() if root is not None else default_root()
    ladder_dir = base / "synth_ladder" / _digest(cfg, synth_cfg)
    if (ladder_dir / MARKER).is_file():
        log.info("synth ladder: reusing %s", ladder_dir)
        return ladder_dir
    ladder_dir.mkdir(parents=True, exist_ok=True)
    with _build_lock(ladder_dir):
        if (ladder_dir / MARKER).is_file():
            return ladder_dir
        atomic_write_json(ladder_dir / BUILD, {"ladder": cfg.to_dict(), "synth": synth_cfg.to_dict(),
                                                      "generator_version": GENERATOR_VERSION}, indent=2)
        pools = _synthesize_pools(cfg, synth_cfg, ladder_dir, workers, progress)
        index: dict[str, Any] = {"config": cfg.to_dict(), "sets": {}}
        for pool, utts in pools.items():
            # one background for the whole pool: a recording of two 2-3 s utterances may hold no
            # pause at all, and its own estimate would then be a noise floor where the longer
            # rungs get digital silence (a difference between rungs that is not length)
            fill = estimate_background([load_audio(u.audio_filepath, sample_rate=synth_cfg.sample_rate).numpy()
                                        for u in utts[:BACKGROUND_UTTERANCES]], synth_cfg.sample_rate)
            alone = _set_name(pool, "alone")
            write_manifest(ladder_dir / f"{alone}.jsonl", utts, relative_paths=True)
            entry: dict[str, Any] = {"alone": f"{alone}.jsonl", "recordings": {},
                                     "background": "digital silence" if fill.digital_silence
                                     else f"noise floor {fill.level_dbfs:.1f} dBFS"}
            for gap in cfg.gaps:
                variant = variant_name(gap)
                entry["recordings"][variant] = {}
                for rung, n in zip(cfg.rungs, cfg.counts):
                    name = _set_name(pool, variant, rung)
                    out = ladder_dir / "recordings" / name
                    out.mkdir(parents=True, exist_ok=True)
                    recs = [join_recording(f"{name}_{j:04d}", utts[j * n:(j + 1) * n], out, gap_s=gap,
                                           sample_rate=synth_cfg.sample_rate, seed=synth_cfg.seed, fill=fill)[0]
                            for j in range(len(utts) // n)]
                    write_manifest(ladder_dir / f"{name}.jsonl", recs, relative_paths=True)
                    entry["recordings"][variant][f"{rung:g}"] = f"{name}.jsonl"
                    log.info("synth ladder: %s: %d recordings of %d utterances", name, len(recs), n)
            index["sets"][pool] = entry
        test_texts = {u.text for u in pools["test"]}
        index["shared_texts_dev_test"] = sum(u.text in test_texts for u in pools["dev"])
        atomic_write_json(ladder_dir / INDEX, index, indent=1)
        (ladder_dir / JOURNAL).unlink(missing_ok=True)
        atomic_write_text(ladder_dir / MARKER, json.dumps(cfg.to_dict(), sort_keys=True) + "\n")
    return ladder_dir


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m asr_pe.data.synth.ladder",
                                description="Build the synthetic length ladder (test and dev pools).")
    defaults = LadderConfig()
    p.add_argument("--root", default=None, help="cache root (default $ASR_PE_CACHE or ~/.cache/asr_pe)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--rungs", type=float, nargs="+", default=list(defaults.rungs))
    p.add_argument("--gaps", type=float, nargs="+", default=list(defaults.gaps))
    p.add_argument("--min-duration", type=float, default=defaults.min_duration)
    p.add_argument("--max-duration", type=float, default=defaults.max_duration)
    p.add_argument("--test-recordings", type=int, default=defaults.test_recordings)
    p.add_argument("--dev-recordings", type=int, default=defaults.dev_recordings)
    p.add_argument("--seed", type=int, default=SynthConfig().seed, help="the corpus seed (voices and draws)")
    p.add_argument("--num-speakers", type=int, default=SynthConfig().num_speakers)
    p.add_argument("--composition", default=None, metavar="OUT",
                   help="also write the ladder's composition (index, and per recording its parts; no audio, no "
                        "texts) to OUT, an xz JSON-lines file that scripts/plot_dose_response.py --ladder takes")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    reason = unwritable_reason(args.composition) if args.composition else None
    if reason:                                   # before the build, which can take an hour
        print(f"error: --composition {args.composition}: {reason}", file=sys.stderr)
        return 2
    try:
        ladder_dir = build_ladder(args.root, workers=args.workers, progress=False if args.no_progress else None,
                                  synth={"seed": args.seed, "num_speakers": args.num_speakers},
                                  rungs=args.rungs, gaps=args.gaps, min_duration=args.min_duration,
                                  max_duration=args.max_duration, test_recordings=args.test_recordings,
                                  dev_recordings=args.dev_recordings)
    except (LadderError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    index = ladder_sets(ladder_dir)
    print(f"ladder: {ladder_dir}")
    for pool, entry in index["sets"].items():
        print(f"{pool}: alone {entry['alone']}")
        for variant, rungs in entry["recordings"].items():
            print(f"  {variant}: " + ", ".join(f"{r} s" for r in rungs))
    print(f"texts shared between the dev and test pools: {index['shared_texts_dev_test']}")
    if args.composition:
        try:
            out = write_composition(ladder_dir, args.composition)
        except (LadderError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"composition: {out} ({out.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
