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


# Spelled audio (``spelled=True``): each character of the transcript is a tone of its own pitch
# (space: a pause), so the audio holds the transcript and a small CTC model can learn to read it
# in a few hundred steps. The smoke runs (run.sh --smoke) must show that a model learns (CER far
# below that of an empty output) through the recipes' real preparation, features and decoding;
# on the plain tones above nothing can be learned, and on real speech nothing small learns fast.
SPELLED_CHARS = "abcdefghijklmnopqrstuvwxyz'"


def _spelled(text: str, num_samples: int, seed: int, lead: float = 0.15) -> np.ndarray:
    """``text`` spelled over ``num_samples``: ``lead`` s of quiet at each end, the characters evenly in between."""
    rng = np.random.default_rng(seed)
    wave = 0.01 * rng.standard_normal(num_samples)
    text = " ".join(text.lower().split())
    start, end = int(lead * SR), num_samples - int(lead * SR)
    step = (end - start) / max(1, len(text))
    for i, ch in enumerate(text):
        k = SPELLED_CHARS.find(ch)
        if k < 0:
            continue  # space or a character outside the alphabet: a pause
        a, b = start + int(i * step), start + int((i + 1) * step)
        t = np.arange(b - a) / SR
        wave[a:b] += 0.3 * np.sin(2 * np.pi * 300.0 * 1.11 ** k * t) * np.hanning(b - a)
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


# A larger layout for the smoke runs (spelled audio): enough dev-clean sentences, pangrams among
# them, for a small model to learn every letter of test-clean, and a third chapter to validate on;
# test-clean has two chapters of
# three utterances, so stage 3 can join each chapter into a long-form recording.
SMOKE_LIBRISPEECH_LAYOUT: dict[str, dict[str, dict[str, list[tuple[int, str]]]]] = {
    "dev-clean": {
        "84": {"121123": list(enumerate([
            "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG", "PACK MY BOX WITH FIVE DOZEN LIQUOR JUGS",
            "SPHINX OF BLACK QUARTZ JUDGE MY VOW", "HOW VEXINGLY QUICK DAFT ZEBRAS JUMP",
            "THE FIVE BOXING WIZARDS JUMP QUICKLY", "JACKDAWS LOVE MY BIG SPHINX OF QUARTZ",
            "WE DON'T KNOW WHAT THEY'RE DOING", "GO DO YOU HEAR"]))},
        "174": {"50561": list(enumerate([
            "FORGOTTEN TOO THE NAME OF GILLIAN", "AND IT'S ALL OVER", "BUT IN LESS THAN FIVE MINUTES",
            "THE STAIRCASE GROANED", "A WIZARD'S JOB IS TO VEX CHUMPS QUICKLY IN FOG",
            "WALTZ BAD NYMPH FOR QUICK JIGS VEX", "SHE SELLS SEA SHELLS BY THE SEA SHORE",
            "PETER PIPER PICKED A PECK OF PICKLED PEPPERS"]))},
        # the chapter the smoke run holds out for validation (recipes/lib/stages.sh `heldout_split`:
        # 10 % of 3 chapters is one, the last in manifest order), so that it still trains on the 16 above
        "251": {"136532": list(enumerate(["THE DOG HOPED FOR A GOOD DINNER", "IT WAS QUITE A JOKE",
                                          "FIVE BOXES OF CARROTS"]))},
    },
    "test-clean": {"1089": {
        "134686": [(0, "HE HOPED THERE WOULD BE STEW FOR DINNER"), (1, "TURNIPS AND CARROTS"),
                   (2, "AND BRUISED POTATOES AND FAT MUTTON PIECES")],
        "134691": [(0, "HELLO BERTIE ANY GOOD IN YOUR MIND"), (1, "THE ANSWER IS QUITE SIMPLE"),
                   (2, "IT WAS A JOKE")],
    }},
}


def make_librispeech_tree(
    root: str | Path, layout=LIBRISPEECH_LAYOUT, *, seconds_per_char: float | None = None, spelled: bool = False
) -> dict[str, list[LsUtt]]:
    """Write ``root/LibriSpeech/<part>/<spk>/<chap>/...``; return {part: expected utterances in order}.

    Clips are 0.3-0.9 s by default (fast to prepare); ``seconds_per_char`` makes each clip
    0.5 s + that much per transcript character, long enough for a CTC model to train on;
    ``spelled`` writes the transcript into the audio (`_spelled`) instead of a plain tone.
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
                    wave = _spelled(text, n, seed) if spelled else _tone(n, seed)
                    sf.write(chap_dir / f"{uid}.flac", wave, SR, format="FLAC", subtype="PCM_16")
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
#
# The STM lines follow the official TED-LIUM 3 files as public loaders read them (lhotse
# recipes/tedlium.py, Kaldi egs/tedlium/s5_r3 local/prepare_data.sh, the Hugging Face / TFDS
# tedlium builders, which split every line into 7 fields and so show the files have no ';;'
# header: Kaldi adds its own for sclite):
#   <talk> 1 <speaker name> <start> <end> <o,f0,male> <transcript>          scored speech
#   <talk> 1 inter_segment_gap <start> <end> <o,,unknown> ignore_time_segment_in_scoring
#   <talk> 1 <speaker name> <start> <end> <label> ignore_time_segment_in_scoring   unscored speech
# The speaker field is the speaker's name, not the talk id (AimeeMullins_2009P 1 AimeeMullins ...);
# times are written like "0", "17.82"; TED-LIUM 3 training STMs also use the label "<NA>".
# legacy/train/{sph,stm}/ holds symbolic links into data/{sph,stm}/ (TFDS: "The legacy/train
# directory contains symlinks to data"); relative ones: Kaldi s5_r3 reads legacy/train right
# after `tar xf`, so they resolve inside the extracted tree.


@dataclass(frozen=True)
class TedSeg:
    id: str
    offset: float
    duration: float
    text: str
    speaker: str


@dataclass(frozen=True)
class TedTalk:
    speaker: str  # the STM speaker field
    label: str  # the label of its speech lines
    seconds: float  # audio length
    # (start, end, kind, raw transcript); kind: "speech" | "gap" | "unscored" (own-speaker ignore line)
    lines: tuple[tuple[float, float, str, str], ...]


def _time(t: float) -> str:
    return f"{t:.2f}".rstrip("0").rstrip(".")


def _stm_line(talk: str, info: TedTalk, start: float, end: float, kind: str, text: str) -> str:
    if kind == "gap":
        return f"{talk} 1 inter_segment_gap {_time(start)} {_time(end)} <o,,unknown> ignore_time_segment_in_scoring\n"
    if kind == "unscored":
        text = "ignore_time_segment_in_scoring"
    return f"{talk} 1 {info.speaker} {_time(start)} {_time(end)} {info.label} {text}\n"


def _gaps_around(seconds: float, rows: list[tuple[float, float, str, str]]) -> tuple:
    """Put an inter_segment_gap line wherever the listed lines leave time uncovered."""
    out, t = [], 0.0
    for row in sorted(rows):
        if row[0] > t + 1e-9:
            out.append((t, row[0], "gap", ""))
        out.append(row)
        t = row[1]
    if seconds > t + 1e-9:
        out.append((t, seconds, "gap", ""))
    return tuple(out)


def _talk(speaker: str, label: str, seconds: float, rows: list[tuple[float, float, str, str]]) -> TedTalk:
    return TedTalk(speaker, label, seconds, _gaps_around(seconds, rows))


# Ten ~8.5 s segments spanning 4.00-92.60 s: the whole-talk entry is longer than 80 s.
_LONG_TALK_TEXT = [
    "when i was a kid i wanted to build robots",
    "my father told me that you need to learn math first",
    "so i spent ten years learning math",
    "and then i built my first robot and it fell over",
    "it turns out walking is very hard",
    "babies take about a year to figure it out",
    "robots took us fifty years",
    "today i want to show you what we have learned",
    "this is our newest robot its name is atlas",
    "thank you very much",
]
_LONG_TALK_TIMES = [(4.0, 12.35), (12.35, 20.9), (21.6, 30.15), (31.0, 39.8), (39.8, 48.42), (49.3, 57.9),
                    (58.55, 67.2), (67.2, 75.64), (76.4, 84.93), (85.5, 92.6)]

# split -> talk id -> TedTalk; every time range the lines leave out becomes an inter_segment_gap line
TEDLIUM_LAYOUT: dict[str, dict[str, TedTalk]] = {
    "dev": {
        # gaps only (some segments contiguous): one full-talk entry 3.10-39.40 s
        "AlexSmith_2009": _talk("AlexSmith", "<o,f0,male>", 42.0, [
            (3.1, 9.8, "speech", "it 's a <unk> truly great honor to be here tonight"),
            (9.8, 15.25, "speech", "we don 't know what(2) they 're doing with the climate"),
            (16.02, 24.5, "speech", "so i want to talk about three things {NOISE}"),
            (25.1, 33.72, "speech", "the first is energy the second is water"),
            (33.72, 39.4, "speech", "and the third one is about all of us"),
        ]),
        # own-speaker unscored speech (a song) inside: the talk is cut into two parts; the
        # <unk>-only segment is dropped from the segments but does not cut the talk
        "MariaLopez_2010": _talk("MariaLopez", "<o,f0,female>", 36.0, [
            (1.5, 8.2, "speech", "i 'm going to talk today about music"),
            (8.9, 12.4, "speech", "<unk>"),
            (12.4, 18.0, "speech", "and about the people who make it"),
            (18.0, 24.3, "unscored", ""),
            (24.3, 30.9, "speech", "that was a song from my grandmother 's village"),
            (31.4, 35.2, "speech", "thank you"),
        ]),
    },
    "test": {
        "DavidChen_2010": _talk("DavidChen", "<o,f0,male>", 96.0, [
            (t0, t1, "speech", text) for (t0, t1), text in zip(_LONG_TALK_TIMES, _LONG_TALK_TEXT)
        ]),
        "SaraJones_2012": _talk("SaraJones", "<o,f0,female>", 20.0, [
            (0.8, 7.45, "speech", "hello world this is a test"),
            (7.45, 13.9, "speech", "of how long talks are read"),
            (14.6, 19.3, "speech", "and that 's it"),
        ]),
    },
    # the training talks hold every letter of dev and test (the tokenizer of a run trained on
    # them must cover the test sets)
    "train": {
        "JohnRoe_2011": _talk("JohnRoe", "<o,f0,male>", 24.0, [
            (0.5, 8.0, "speech", "the quick brown fox jumps over the lazy dog"),
            (8.6, 15.9, "speech", "it 's short but it 's a training talk"),
            (15.9, 23.1, "speech", "pack my box with five dozen liquor jugs"),
        ]),
        "KimLee_2016": _talk("KimLee", "<NA>", 18.0, [
            (1.0, 9.2, "speech", "we 've got questions and a few answers"),
            (9.2, 17.0, "speech", "sphinx of black quartz judge my vow"),
        ]),
    },
}

# The expected normalisation of every transcript above, written out by hand.
TEDLIUM_NORMALISED = {
    "it 's a <unk> truly great honor to be here tonight": "it's a truly great honor to be here tonight",
    "we don 't know what(2) they 're doing with the climate": "we don't know what they're doing with the climate",
    "so i want to talk about three things {NOISE}": "so i want to talk about three things",
    "the first is energy the second is water": "the first is energy the second is water",
    "and the third one is about all of us": "and the third one is about all of us",
    "i 'm going to talk today about music": "i'm going to talk today about music",
    "<unk>": "",
    "and about the people who make it": "and about the people who make it",
    "that was a song from my grandmother 's village": "that was a song from my grandmother's village",
    "thank you": "thank you",
    **{t: t for t in _LONG_TALK_TEXT},
    "hello world this is a test": "hello world this is a test",
    "of how long talks are read": "of how long talks are read",
    "and that 's it": "and that's it",
    "the quick brown fox jumps over the lazy dog": "the quick brown fox jumps over the lazy dog",
    "it 's short but it 's a training talk": "it's short but it's a training talk",
    "pack my box with five dozen liquor jugs": "pack my box with five dozen liquor jugs",
    "we 've got questions and a few answers": "we've got questions and a few answers",
    "sphinx of black quartz judge my vow": "sphinx of black quartz judge my vow",
}

TEDLIUM_README = """This is the TED-LIUM corpus release 3 (a test fixture in the official layout).
"""


def _seg_id(talk: str, start: float, end: float) -> str:
    return f"{talk}-{round(start * 100):07d}-{round(end * 100):07d}"


def _expected_split(talks: dict[str, TedTalk]) -> dict:
    segs, full = [], []
    counts = {"inter_segment_gaps": 0, "unscored_speech_segments": 0, "empty": 0, "talks_split": 0}
    for talk, info in sorted(talks.items()):
        parts: list[list[TedSeg]] = [[]]
        for start, end, kind, text in info.lines:
            if kind == "gap":
                counts["inter_segment_gaps"] += 1
            elif kind == "unscored":  # the fixture's unscored lines lie between scored segments
                counts["unscored_speech_segments"] += 1
                if parts[-1]:
                    parts.append([])
            elif not TEDLIUM_NORMALISED[text]:
                counts["empty"] += 1
            else:
                seg = TedSeg(_seg_id(talk, start, end), start, round(end - start, 6), TEDLIUM_NORMALISED[text], talk)
                segs.append(seg)
                parts[-1].append(seg)
        parts = [p for p in parts if p]
        counts["talks_split"] += len(parts) > 1
        for k, part in enumerate(parts, 1):
            first, last = part[0].offset, part[-1].offset + part[-1].duration
            full.append(TedSeg(talk if len(parts) == 1 else f"{talk}-part{k}", first, round(last - first, 6),
                               " ".join(s.text for s in part), talk))
    return {"segments": segs, "talks": full, **counts}


def make_tedlium_tree(root: str | Path, layout=TEDLIUM_LAYOUT, *, legacy_train_links: bool = True,
                      spelled: bool = False) -> dict:
    """Write ``root/TEDLIUM_release-3/`` as the official archive unpacks; return the expected manifests.

    dev/test go to ``legacy/<split>/{sph,stm}/``; train talks to ``data/{sph,stm}/`` with
    ``legacy/train/{sph,stm}/`` holding relative symbolic links to them (left out with
    ``legacy_train_links=False``, as after an extraction tool that skips links). Returns
    {split: {"segments": [TedSeg...], "talks": [TedSeg...], "inter_segment_gaps": int,
    "unscored_speech_segments": int, "empty": int, "talks_split": int}}. ``spelled``: each scored
    line's normalised transcript is spelled into its time span (`_spelled`); unscored speech is
    spelled from a sentence the reference does not hold.
    """
    corpus = Path(root) / "TEDLIUM_release-3"
    corpus.mkdir(parents=True, exist_ok=True)
    (corpus / "readme.txt").write_text(TEDLIUM_README)
    (corpus / "TEDLIUM.152k.dic").write_text("a ah\nabout ah b aw t\n")
    expected = {}
    seed = 100
    for split, talks in layout.items():
        split_dir = corpus / "data" if split == "train" else corpus / "legacy" / split
        for sub in ("sph", "stm"):
            (split_dir / sub).mkdir(parents=True, exist_ok=True)
        for talk, info in sorted(talks.items()):
            seed += 1
            wave = _tone(int(info.seconds * SR), seed)
            if spelled:
                wave = 0.01 * np.random.default_rng(seed).standard_normal(len(wave)).astype(np.float32)
                for start, end, kind, text in info.lines:
                    words = {"speech": TEDLIUM_NORMALISED.get(text, ""), "unscored": "la la la la la"}.get(kind, "")
                    if words:
                        a, b = int(start * SR), int(end * SR)
                        wave[a:b] = _spelled(words, b - a, seed, lead=0.1)
            sf.write(split_dir / "sph" / f"{talk}.sph", wave, SR, format="NIST", subtype="PCM_16")
            lines = [_stm_line(talk, info, *row) for row in info.lines]
            (split_dir / "stm" / f"{talk}.stm").write_text("".join(lines))
            if split == "train" and legacy_train_links:
                for sub, ext in (("sph", "sph"), ("stm", "stm")):
                    link = corpus / "legacy" / "train" / sub / f"{talk}.{ext}"
                    link.parent.mkdir(parents=True, exist_ok=True)
                    link.symlink_to(Path("..", "..", "..", "data", sub, f"{talk}.{ext}"))
        expected[split] = _expected_split(talks)
    return expected


def make_tedlium_archive(tree_root: str | Path, out_dir: str | Path) -> Path:
    """``<out_dir>/TEDLIUM_release-3.tgz`` holding ``TEDLIUM_release-3/`` (links kept as links)."""
    return make_tar_gz(Path(tree_root) / "TEDLIUM_release-3", Path(out_dir) / "TEDLIUM_release-3.tgz",
                       "TEDLIUM_release-3")
