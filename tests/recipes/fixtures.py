"""Tiny LibriSpeech / TED-LIUM 3 trees in the exact official on-disk layouts, for offline tests.

Audio is a short sine plus noise with real FLAC / NIST SPHERE headers (written by soundfile),
so the code under test reads durations and segments exactly as it would on the real corpora.
Every builder returns what a correct preparation must produce.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

SR = 16000


def _tone(num_samples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(num_samples) / SR
    wave = 0.3 * np.sin(2 * np.pi * (200 + 20 * seed) * t) + 0.01 * rng.standard_normal(num_samples)
    return wave.astype(np.float32)


@dataclass(frozen=True)
class LsUtt:
    id: str
    text: str  # as a correct prepare writes it (lower case)
    num_samples: int
    speaker: str  # "<speaker>-<chapter>"


# part -> speaker -> chapter -> list of (utterance number, UPPER-CASE transcript)
# Speakers 84 and 174 test numeric (not lexicographic) ordering; utterances of chapter
# 84-121123 are listed out of order in the .trans.txt to test the chapter-order sort.
LIBRISPEECH_LAYOUT: dict[str, dict[str, dict[str, list[tuple[int, str]]]]] = {
    "dev-clean": {
        "84": {
            "121123": [(2, "I DON'T KNOW  SAID HE"), (0, "GO DO YOU HEAR"), (1, "BUT IN LESS THAN FIVE MINUTES")],
            "121550": [(0, "THE STAIRCASE GROANED")],
        },
        "174": {"50561": [(0, "FORGOTTEN TOO THE NAME OF GILLIAN"), (1, "AND IT'S ALL OVER")]},
    },
    "test-clean": {"1089": {"134686": [(0, "HE HOPED THERE WOULD BE STEW FOR DINNER"), (1, "TURNIPS AND CARROTS")]}},
}


def make_librispeech_tree(
    root: str | Path, layout=LIBRISPEECH_LAYOUT, *, seconds_per_char: float | None = None
) -> dict[str, list[LsUtt]]:
    """Write ``root/LibriSpeech/<part>/<spk>/<chap>/...``; return {part: expected utterances in order}.

    Clips are 0.3-0.9 s by default (fast to prepare); ``seconds_per_char`` makes each clip
    0.5 s + that much per transcript character, long enough for a CTC model to train on.
    """
    root = Path(root)
    expected: dict[str, list[LsUtt]] = {}
    seed = 0
    for part, speakers in layout.items():
        rows = []
        for spk, chapters in speakers.items():
            for chap, utts in chapters.items():
                chap_dir = root / "LibriSpeech" / part / spk / chap
                chap_dir.mkdir(parents=True, exist_ok=True)
                lines = []
                for utt, text in utts:
                    uid = f"{spk}-{chap}-{utt:04d}"
                    seed += 1
                    n = 4000 + 800 * seed  # 0.3 s, 0.35 s, ... : all distinct
                    if seconds_per_char is not None:
                        n += int(SR * (0.25 + seconds_per_char * len(text)))
                    sf.write(chap_dir / f"{uid}.flac", _tone(n, seed), SR, format="FLAC", subtype="PCM_16")
                    lines.append(f"{uid} {text}\n")
                    want = LsUtt(uid, " ".join(text.lower().split()), n, f"{spk}-{chap}")
                    rows.append(((int(spk), int(chap), utt), want))
                (chap_dir / f"{spk}-{chap}.trans.txt").write_text("".join(lines))
        expected[part] = [u for _, u in sorted(rows, key=lambda r: r[0])]
    return expected


def make_tar_gz(src: str | Path, archive: str | Path, arcname: str) -> Path:
    """Pack ``src`` as ``arcname`` (e.g. ``LibriSpeech/dev-clean``) into a .tar.gz."""
    archive = Path(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname=arcname)
    return archive


def make_librispeech_archives(tree_root: str | Path, out_dir: str | Path, parts=("dev-clean", "test-clean")) -> dict:
    """Official-style archives ``<part>.tar.gz`` holding ``LibriSpeech/<part>/...``."""
    tree_root, out_dir = Path(tree_root), Path(out_dir)
    return {
        p: make_tar_gz(tree_root / "LibriSpeech" / p, out_dir / f"{p}.tar.gz", f"LibriSpeech/{p}") for p in parts
    }


# ------------------------------------------------------------------------------------ TED-LIUM


@dataclass(frozen=True)
class TedSeg:
    id: str
    offset: float
    duration: float
    text: str
    speaker: str


def _stm(talk: str, start: float, end: float, label: str, text: str) -> str:
    return f"{talk} 1 {talk} {start:.2f} {end:.2f} {label} {text}\n"


# split -> talk -> (audio seconds, [(start, end, label, raw transcript)])
TEDLIUM_LAYOUT = {
    "dev": {
        # ignored segments only at the edges: the full-talk entry exists (1.20 .. 6.00)
        "AlGore_2009": (
            7.0,
            [
                (0.00, 1.20, "<NA>", "ignore_time_segment_in_scoring"),
                (1.20, 3.50, "<o,f0,male>", "it 's a <unk> truly great honor"),
                (3.60, 6.00, "<o,f0,male>", "we don 't know what(2) they 're doing"),
                (6.00, 7.00, "<NA>", "ignore_time_segment_in_scoring"),
            ],
        ),
        # an ignored segment and an <unk>-only segment inside: no full-talk entry
        "BillGates_2010": (
            8.0,
            [
                (0.50, 2.00, "<o,f0,male>", "i 'm going to talk today"),
                (2.00, 3.00, "<NA>", "ignore_time_segment_in_scoring"),
                (3.00, 5.00, "<o,f0,male>", "about energy and climate"),
                (5.00, 5.50, "<o,f0,male>", "<unk>"),
                (5.50, 7.50, "<o,f0,male>", "and that 's it {NOISE}"),
            ],
        ),
    },
    "test": {
        "JaneDoe_2012": (
            5.0,
            [
                (0.30, 2.30, "<o,f0,female>", "hello world"),
                (2.30, 4.90, "<o,f0,female>", "this is a test"),
            ],
        ),
    },
    "train": {
        "JohnRoe_2011": (
            4.0,
            [
                (0.00, 2.00, "<o,f0,male>", "training talk one"),
                (2.00, 3.90, "<o,f0,male>", "it 's short"),
            ],
        ),
    },
}


def _norm(text: str) -> str:
    """The expected normalisation of the layout's transcripts, written out by hand."""
    table = {
        "it 's a <unk> truly great honor": "it's a truly great honor",
        "we don 't know what(2) they 're doing": "we don't know what they're doing",
        "i 'm going to talk today": "i'm going to talk today",
        "about energy and climate": "about energy and climate",
        "and that 's it {NOISE}": "and that's it",
        "hello world": "hello world",
        "this is a test": "this is a test",
        "training talk one": "training talk one",
        "it 's short": "it's short",
    }
    return table[text]


def make_tedlium_tree(root: str | Path, layout=TEDLIUM_LAYOUT, *, base: str = "legacy") -> dict:
    """Write ``root/TEDLIUM_release-3/<base>/<split>/{sph,stm}/``; return the expected manifests.

    Returns {split: {"segments": [TedSeg...], "talks": [TedSeg...], "ignored": int,
    "empty": int, "talks_with_unscored_speech": int}}. With ``base="data"`` the train split
    is written to ``data/{sph,stm}`` (the full 452 h set layout).
    """
    root = Path(root) / "TEDLIUM_release-3"
    expected = {}
    seed = 100
    for split, talks in layout.items():
        split_dir = root / base / split if not (base == "data") else root / "data"
        (split_dir / "sph").mkdir(parents=True, exist_ok=True)
        (split_dir / "stm").mkdir(parents=True, exist_ok=True)
        segs, full, ignored, empty, unscored_inside = [], [], 0, 0, 0
        for talk, (seconds, rows) in sorted(talks.items()):
            seed += 1
            wave = _tone(int(seconds * SR), seed)
            sf.write(split_dir / "sph" / f"{talk}.sph", wave, SR, format="NIST", subtype="PCM_16")
            lines = [";; TED-LIUM style comment line\n"] + [_stm(talk, *r) for r in rows]
            (split_dir / "stm" / f"{talk}.stm").write_text("".join(lines))
            scored, bad = [], []
            for start, end, _label, text in rows:
                if text == "ignore_time_segment_in_scoring":
                    ignored += 1
                    bad.append((start, end))
                elif text == "<unk>":
                    empty += 1
                    bad.append((start, end))
                else:
                    seg_id = f"{talk}-{round(start * 100):07d}-{round(end * 100):07d}"
                    scored.append(TedSeg(seg_id, start, round(end - start, 6), _norm(text), talk))
            segs += scored
            first, last = scored[0].offset, scored[-1].offset + scored[-1].duration
            if any(s < last and e > first for s, e in bad):
                unscored_inside += 1
            else:
                full.append(TedSeg(talk, first, round(last - first, 6), " ".join(s.text for s in scored), talk))
        expected[split] = {
            "segments": segs,
            "talks": full,
            "ignored": ignored,
            "empty": empty,
            "talks_with_unscored_speech": unscored_inside,
        }
    return expected
