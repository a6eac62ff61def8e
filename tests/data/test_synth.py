"""The embedded synthetic corpus: vocabulary, sentence generator, espeak-ng binding, builder.

Corpora here are tiny (a dozen utterances) so the whole file runs in seconds; the default
corpus is exercised by `python -m asr_pe.data.synth`, not by tests.
"""

import hashlib
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr_pe.data.manifest import read_manifest
from asr_pe.data.synth import corpus as C
from asr_pe.data.synth import sentences as S
from asr_pe.data.synth import vocab as V
from asr_pe.data.synth.espeak import EspeakEngine, EspeakError, IsolatedSynthesizer, get_engine

# Train/dev in [1, 3] s; test has one bucket like training and one up to 3x longer.
TINY = dict(seed=7, num_train=6, num_dev=2, min_duration=1.0, train_max_duration=3.0,
            test_bucket_edges=(0.0, 3.0, 9.0), test_per_bucket=2, num_speakers=3)
MANIFEST_KEYS = {"id", "audio_filepath", "duration", "text", "speaker"}


def _tree_digest(corpus_dir: Path) -> dict[str, str]:
    """sha256 of every manifest and audio file, keyed by path relative to the corpus."""
    files = sorted(corpus_dir.glob("*.jsonl")) + sorted(corpus_dir.glob("audio/*/*.flac"))
    return {p.relative_to(corpus_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in files}


def _records(corpus_dir: Path, split: str) -> list[dict]:
    return [json.loads(line) for line in (corpus_dir / f"{split}.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("root_a")
    return C.build_synth_corpus(root, workers=2, progress=False, **TINY)


# ---------------------------------------------------------------- vocabulary / text
def test_vocabulary_size_and_alphabet():
    words = V.vocabulary()
    assert 500 <= len(words) <= 1000
    assert len(set(words)) == len(words)
    assert all(re.fullmatch(r"[a-z']+", w) for w in words)
    # homographs whose pronunciation espeak-ng cannot know from the spelling
    for trap in ("read", "lead", "live", "close", "wind", "tear", "record", "minute", "present"):
        assert trap not in words, trap


def test_generator_is_deterministic_and_stays_in_vocabulary():
    vocabulary = set(V.vocabulary())
    texts = [S.generate_text(random.Random(3), 40) for _ in range(2)]
    assert texts[0] == texts[1]
    assert texts[0] != S.generate_text(random.Random(4), 40)
    rng = random.Random(0)
    for n in list(range(1, 30)) + [80, 250]:
        sentences = S.generate_sentences(rng, n)
        text = S.transcript(sentences)
        words = text.split()
        assert set(words) <= vocabulary, set(words) - vocabulary
        assert S.normalize_text(text) == text
        # roughly n words: never under by more than one, over by at most a short sentence
        assert n - 1 <= len(words) <= max(n, 2) + 8, (n, len(words))
        # the spoken text is the transcript plus sentence punctuation, one mark per sentence
        spoken = S.spoken_text(sentences)
        assert S.normalize_text(spoken) == text
        assert spoken.count(".") + spoken.count("?") == len(sentences)
    long_sentences = S.generate_sentences(random.Random(1), 200)
    assert len(long_sentences) >= 5
    assert any(s.question for s in long_sentences) and any(not s.question for s in long_sentences)


def test_articles_agree_with_the_next_word():
    rng = random.Random(5)
    pairs = []
    for _ in range(500):
        words = S.generate_text(rng, 12).split()
        pairs += [(a, b) for a, b in zip(words, words[1:]) if a in ("a", "an")]
    assert {a for a, _ in pairs} == {"a", "an"}
    for article, word in pairs:
        vowel_sound = word[0] in "aeiou" and word not in ("one", "useful")
        assert article == ("an" if vowel_sound else "a"), (article, word)


def test_normalize_text():
    assert S.normalize_text("  Hello, World!\tIt's  ") == "hello world it's"
    assert S.normalize_text("'quoted' route 66 caf\u00e9") == "quoted route caf"
    assert S.normalize_text("don't -- 'em") == "don't em"
    assert S.normalize_text("...") == ""


# ---------------------------------------------------------------- espeak-ng
def test_espeak_speaks_longer_for_more_words_and_repeats_exactly():
    short = "the old man reads"
    long = S.generate_text(random.Random(2), 30)
    with IsolatedSynthesizer() as synth:
        a, sr = synth.synthesize(short, voice="en-us+f3", rate=170, pitch=60, seed=1)
        b, _ = synth.synthesize(long, voice="en-us+f3", rate=170, pitch=60, seed=1)
        again, _ = synth.synthesize(short, voice="en-us+f3", rate=170, pitch=60, seed=1)
        faster, _ = synth.synthesize(long, voice="en-us+f3", rate=340, pitch=60, seed=1)
    assert sr == 22050 and a.dtype == np.int16
    for wave in (a, b):
        assert np.sqrt(np.mean(wave.astype(np.float64) ** 2)) > 300  # not silence
    assert len(b) > 4 * len(a)  # 30 words vs 4
    assert len(faster) < 0.75 * len(b)  # twice the words/min
    # the same request after other speech gives the same bytes
    assert np.array_equal(a, again)


def test_espeak_errors_are_clear():
    with IsolatedSynthesizer() as synth:
        with pytest.raises(EspeakError, match="unknown espeak-ng voice 'xx-nope'"):
            synth.synthesize("hello", voice="xx-nope")
        with pytest.raises(ValueError, match="rate must be in"):
            synth.synthesize("hello", rate=10)
        with pytest.raises(ValueError, match="empty"):
            synth.synthesize("   ")
        # the server survives a bad request
        wave, _ = synth.synthesize("hello there")
        assert len(wave) > 0


def test_missing_library_is_a_clear_error(tmp_path):
    with pytest.raises(EspeakError, match="cannot load libespeak-ng from .*nope.so"):
        EspeakEngine(library_path=str(tmp_path / "nope.so"), data_path=str(tmp_path))


def test_in_process_engine_speaks_every_configured_voice():
    engine = get_engine()
    assert engine.sample_rate == 22050
    for speaker in C.SPEAKERS:
        wave, _ = engine.synthesize("is the dog asleep", voice=speaker.voice,
                                    rate=speaker.rate, pitch=speaker.pitch)
        assert np.abs(wave).max() > 1000, speaker


# ---------------------------------------------------------------- corpus
def test_config_validation_and_hash(monkeypatch, tmp_path):
    base = C.SynthConfig(**TINY)
    monkeypatch.setenv("ASR_PE_CACHE", str(tmp_path))
    assert C.corpus_dir_for(base) == tmp_path / "synth" / base.digest()
    assert base.digest() == C.SynthConfig(**{**TINY, "test_bucket_edges": [0, 3, 9]}).digest()
    assert base.digest() != C.SynthConfig(**{**TINY, "seed": 8}).digest()
    for bad in (dict(train_max_duration=0.5), dict(test_bucket_edges=(0, 4, 2)),
                dict(num_speakers=99), dict(num_train=-1), dict(test_bucket_edges=(0, 0.5, 4))):
        with pytest.raises(ValueError):
            C.SynthConfig(**{**TINY, **bad})
    with pytest.raises(TypeError, match="unknown synth corpus option"):
        C.build_synth_corpus("/nonexistent", num_trian=3)


def test_corpus_layout_manifests_and_audio(tiny_corpus):
    cfg = C.SynthConfig(**TINY)
    assert tiny_corpus.name == cfg.digest() and tiny_corpus.parent.name == "synth"
    assert (tiny_corpus / C.MARKER).is_file() and not (tiny_corpus / C.JOURNAL).exists()
    vocabulary = set(V.vocabulary())
    speaker_ids = {s.id for s in C.SPEAKERS[: TINY["num_speakers"]]}
    for split, expected in (("train", 6), ("dev", 2), ("test", 4)):
        records = _records(tiny_corpus, split)
        assert len(records) == expected
        assert [r["id"] for r in records] == [C.utterance_id(split, i) for i in range(expected)]
        for r in records:
            assert set(r) == MANIFEST_KEYS
            assert r["speaker"] in speaker_ids
            assert r["text"] == S.normalize_text(r["text"]) and set(r["text"].split()) <= vocabulary
            assert not Path(r["audio_filepath"]).is_absolute()
            info = sf.info(tiny_corpus / r["audio_filepath"])
            assert (info.samplerate, info.channels, info.format, info.subtype) == \
                (16000, 1, "FLAC", "PCM_16")
            assert info.frames == round(r["duration"] * 16000)
        # the manifest reader of the package accepts it and resolves the audio paths
        utterances = read_manifest(tiny_corpus / f"{split}.jsonl")
        assert [u.id for u in utterances] == [r["id"] for r in records]
        assert all(Path(u.audio_filepath).is_file() for u in utterances)
    summary = json.loads((tiny_corpus / C.MARKER).read_text())
    assert summary["train"]["count"] == 6 and summary["config"]["seed"] == TINY["seed"]


def test_durations_respect_train_window_and_test_buckets(tiny_corpus):
    for split in ("train", "dev"):
        for r in _records(tiny_corpus, split):
            assert 1.0 <= r["duration"] <= 3.0, r
    test = _records(tiny_corpus, "test")
    edges = TINY["test_bucket_edges"]
    for i, r in enumerate(test):
        bucket = i // TINY["test_per_bucket"]
        assert max(edges[bucket], 1.0) <= r["duration"] < edges[bucket + 1], r
    assert C.bucket_counts([r["duration"] for r in test], edges) == [2, 2]
    assert max(r["duration"] for r in test) > TINY["train_max_duration"]
    # longer audio carries more words
    assert len(test[-1]["text"].split()) > max(len(r["text"].split())
                                               for r in _records(tiny_corpus, "train"))


def test_build_is_deterministic_across_roots_and_worker_counts(tiny_corpus, tmp_path):
    other = C.build_synth_corpus(tmp_path, workers=1, progress=False, **TINY)
    assert other != tiny_corpus and other.name == tiny_corpus.name
    assert _tree_digest(other) == _tree_digest(tiny_corpus)
    assert len(_tree_digest(other)) == 3 + 12  # 3 manifests, 12 audio files


def test_complete_corpus_is_reused_without_rebuilding(tiny_corpus, monkeypatch):
    before = {p: p.stat().st_mtime_ns for p in tiny_corpus.rglob("*") if p.is_file()}

    def no_synthesis(*args, **kwargs):
        raise AssertionError("a complete corpus must not be rebuilt")

    monkeypatch.setattr(C, "_run_jobs", no_synthesis)
    paths = C.prepare_synth(root=tiny_corpus.parent.parent, progress=False, **TINY)
    assert paths == {s: str(tiny_corpus / f"{s}.jsonl") for s in ("train", "dev", "test")}
    after = {p: p.stat().st_mtime_ns for p in tiny_corpus.rglob("*") if p.is_file()}
    assert after == before


def test_interrupted_build_resumes_and_matches(tiny_corpus, tmp_path, monkeypatch):
    real_run_jobs, real_make = C._run_jobs, C.make_utterance

    def killed_after_five(*args, **kwargs):
        jobs = real_run_jobs(*args, **kwargs)
        try:
            for n, record in enumerate(jobs):
                if n == 5:
                    raise RuntimeError("simulated kill")
                yield record
        finally:
            jobs.close()

    monkeypatch.setattr(C, "_run_jobs", killed_after_five)
    with pytest.raises(RuntimeError, match="simulated kill"):
        C.build_synth_corpus(tmp_path, workers=1, progress=False, **TINY)
    corpus_dir = C.corpus_dir_for(C.SynthConfig(**TINY), tmp_path)
    assert not (corpus_dir / C.MARKER).exists()
    assert len((corpus_dir / C.JOURNAL).read_text().splitlines()) == 5

    calls = []

    def counting_make(*args, **kwargs):
        calls.append(args[1:3])
        return real_make(*args, **kwargs)

    monkeypatch.setattr(C, "_run_jobs", real_run_jobs)
    monkeypatch.setattr(C, "make_utterance", counting_make)
    assert C.build_synth_corpus(tmp_path, workers=1, progress=False, **TINY) == corpus_dir
    assert len(calls) == 12 - 5  # only the missing utterances are synthesized
    assert _tree_digest(corpus_dir) == _tree_digest(tiny_corpus)
