"""Long-form builder: tolerance, order, exact audio, no speaker mixing, determinism, full mode,
joins filled with the sources' background (digital silence or their noise floor)."""

import json

import numpy as np
import pytest
import soundfile as sf
import torch

from asr_pe.data.audio import load_audio
from asr_pe.data.features import FbankExtractor
from asr_pe.data.longform_sets import (DIGITAL_SILENCE_MIN_FRAMES, LongformError, _write_flac, build_longform,
                                  estimate_background, plan_windows)
from asr_pe.data.manifest import Utterance, read_manifest, write_manifest

SR = 16000
GAP = 0.5


def make_corpus(root, spec):
    """spec: list of (speaker, duration s). Each utterance is a constant tone of its own level."""
    root.mkdir(parents=True, exist_ok=True)
    utts = []
    for i, (spk, dur) in enumerate(spec):
        path = root / f"u{i:03d}.wav"
        level = (i + 1) / 64.0                       # exactly representable in int16
        sf.write(path, np.full(int(round(dur * SR)), level, dtype=np.float32), SR, subtype="PCM_16")
        utts.append(Utterance(id=f"u{i:03d}", audio_filepath=str(path), duration=dur,
                              text=f"word{i} w{i}", speaker=spk))
    return utts


SPEC = ([("A", d) for d in (1.2, 0.8, 2.0, 1.5, 0.9, 3.1, 1.0, 1.7, 2.2, 0.6, 1.4)]
        + [("B", d) for d in (2.5, 1.1, 0.7, 1.9, 2.8, 1.3)])


@pytest.fixture()
def corpus(tmp_path):
    return make_corpus(tmp_path / "src", SPEC)


def frames(path):
    return sf.info(str(path)).frames


def test_windows_within_tolerance_and_non_overlapping():
    rng = np.random.default_rng(0)
    for _ in range(50):
        durs = list(rng.uniform(0.3, 4.0, size=40))
        target, tol = float(rng.uniform(2, 20)), 0.15
        windows = plan_windows(durs, target, gap_s=GAP, tolerance=tol)
        last_stop = 0
        for a, b in windows:
            assert a >= last_stop and b > a                 # ordered, non-overlapping
            span = sum(durs[a:b]) + GAP * (b - a - 1)
            assert target * (1 - tol) <= span <= target * (1 + tol) + 1e-9
            last_stop = b


def test_recordings_meet_targets_and_join_transcripts_in_order(tmp_path, corpus):
    out, report = build_longform(corpus, [3, 6], tmp_path / "lf", gap_s=GAP, tolerance=0.15)
    by_id = {u.id: u for u in corpus}
    order = {u.id: i for i, u in enumerate(corpus)}
    sources = json.loads((tmp_path / "lf" / "sources.json").read_text())
    assert report.made == {"3": sum(u.id.startswith("lf3_") for u in out),
                           "6": sum(u.id.startswith("lf6_") for u in out)}
    assert report.made["3"] >= 3 and report.made["6"] >= 2
    for u in out:
        target = float(u.id[2:].split("_")[0])
        assert target * 0.85 <= u.duration <= target * 1.15
        parts = [by_id[s] for s in sources[u.id]]
        idx = [order[p.id] for p in parts]
        assert idx == list(range(idx[0], idx[0] + len(idx)))          # consecutive in the manifest
        assert u.text == " ".join(p.text for p in parts)              # joined in order
        assert {p.speaker for p in parts} == {u.speaker}               # never mixed
        assert u.id.split("_")[1] == u.speaker
    # recordings of one target never share a source utterance
    for t in ("lf3_", "lf6_"):
        used = [s for uid, src in sources.items() if uid.startswith(t) for s in src]
        assert len(used) == len(set(used))


def test_audio_is_parts_and_background_gaps(tmp_path, corpus):
    # each part of this corpus is a constant (pure DC, no noise): the quietest part's constant is
    # the background, so every gap holds exactly that level and the parts are copied untouched
    out, report = build_longform(corpus, [6], tmp_path / "lf", gap_s=GAP)
    sources = json.loads((tmp_path / "lf" / "sources.json").read_text())
    by_id = {u.id: u for u in corpus}
    gap = int(GAP * SR)
    assert report.noise_joins["6"] == len(out) and report.silent_joins.get("6", 0) == 0
    for u in out:
        parts = [by_id[s] for s in sources[u.id]]
        n_parts = [frames(p.audio_filepath) for p in parts]
        wave, sr = sf.read(u.audio_filepath, dtype="float32")
        assert sr == SR and sf.info(u.audio_filepath).format == "FLAC"
        assert len(wave) == sum(n_parts) + gap * (len(parts) - 1)
        assert u.duration == pytest.approx(len(wave) / SR)
        quietest = min((int(p.id[1:]) + 1) / 64.0 for p in parts)
        pos = 0
        for k, (p, n) in enumerate(zip(parts, n_parts)):
            if k:
                np.testing.assert_array_equal(wave[pos:pos + gap], np.float32(quietest))
                pos += gap
            level = (int(p.id[1:]) + 1) / 64.0
            np.testing.assert_allclose(wave[pos:pos + n], level, atol=1 / 32768)
            pos += n


def test_manifest_round_trip_with_relative_paths(tmp_path, corpus):
    out_manifest = tmp_path / "sets" / "long.jsonl"
    out, _ = build_longform(corpus, [3], tmp_path / "sets" / "long", manifest_path=out_manifest)
    back = read_manifest(out_manifest)
    assert [(u.id, u.text, u.speaker, u.audio_filepath) for u in back] == \
        [(u.id, u.text, u.speaker, u.audio_filepath) for u in out]
    first = json.loads(out_manifest.read_text().splitlines()[0])
    assert not first["audio_filepath"].startswith("/")


def test_segments_with_offsets_in_one_file(tmp_path):
    # TED-LIUM style: one file per talk, utterances are (offset, duration) segments
    path = tmp_path / "talk.wav"
    wave = np.concatenate([np.full(SR * 2, (k + 1) / 64.0, np.float32) for k in range(5)])
    sf.write(path, wave, SR, subtype="PCM_16")
    utts = [Utterance(id=f"t_{k}", audio_filepath=str(path), duration=2.0, offset=2.0 * k,
                      text=f"s{k}", speaker="talk") for k in range(5)]
    out, _ = build_longform(utts, [4.5], tmp_path / "lf", gap_s=GAP)
    assert [u.text for u in out] == ["s0 s1", "s2 s3"]
    got, _ = sf.read(out[1].audio_filepath, dtype="float32")
    np.testing.assert_allclose(got[:2 * SR], 3 / 64.0, atol=1 / 32768)
    np.testing.assert_allclose(got[-2 * SR:], 4 / 64.0, atol=1 / 32768)


def test_target_needing_two_speakers_is_an_error_unless_allowed(tmp_path, corpus):
    # A holds 16.4 s + gaps, B 10.3 s + gaps: 25 s needs both
    with pytest.raises(LongformError, match="allow_mixed_speakers=True"):
        build_longform(corpus, [25], tmp_path / "lf", tolerance=0.1)
    out, _ = build_longform(corpus, [25], tmp_path / "lf", tolerance=0.1, allow_mixed_speakers=True)
    assert len(out) == 1 and out[0].speaker == "A+B" and out[0].id == "lf25_mix_0"


def test_missing_speaker_is_an_error_unless_allowed(tmp_path, corpus):
    corpus[4] = Utterance(id=corpus[4].id, audio_filepath=corpus[4].audio_filepath,
                          duration=corpus[4].duration, text=corpus[4].text, speaker=None)
    with pytest.raises(LongformError, match=r"entry 5 \(id 'u004'\) has no speaker"):
        build_longform(corpus, [3], tmp_path / "lf")
    out, _ = build_longform(corpus, [3], tmp_path / "lf", allow_mixed_speakers=True)
    assert out


def test_group_key_callable_and_returning_groups(tmp_path):
    # speaker A comes back after B: separate groups, ids keep counting, stay unique
    utts = make_corpus(tmp_path / "src", [("A", 2.0), ("A", 2.0), ("B", 2.0), ("B", 2.0),
                                          ("A", 2.0), ("A", 2.0)])
    out, report = build_longform(utts, [4.5], tmp_path / "lf", gap_s=GAP)
    assert [u.id for u in out] == ["lf4.5_A_0", "lf4.5_B_0", "lf4.5_A_1"] and report.groups == 3
    out2, report2 = build_longform(utts, ["full"], tmp_path / "lf2", group_key=lambda u: "all")
    assert report2.groups == 1 and len(out2) == 1 and out2[0].speaker == "A+B"


def test_deterministic_bytes(tmp_path, corpus):
    a, _ = build_longform(corpus, [3, 6], tmp_path / "a" / "lf", manifest_path=tmp_path / "a" / "m.jsonl")
    b, _ = build_longform(corpus, [3, 6], tmp_path / "b" / "lf", manifest_path=tmp_path / "b" / "m.jsonl")
    assert (tmp_path / "a" / "m.jsonl").read_bytes() == (tmp_path / "b" / "m.jsonl").read_bytes()
    for ua, ub in zip(a, b):
        assert ua.id == ub.id
        with open(ua.audio_filepath, "rb") as fa, open(ub.audio_filepath, "rb") as fb:
            assert fa.read() == fb.read()


def test_full_mode_one_recording_per_group(tmp_path, corpus):
    out, report = build_longform(corpus, ["full", 3], tmp_path / "lf", gap_s=GAP)
    full = [u for u in out if u.id.startswith("lffull_")]
    assert [u.id for u in full] == ["lffull_A_0", "lffull_B_0"] and report.made["full"] == 2
    for u, spk in zip(full, "AB"):
        members = [c for c in corpus if c.speaker == spk]
        assert u.text == " ".join(c.text for c in members)
        n = sum(frames(c.audio_filepath) for c in members) + int(GAP * SR) * (len(members) - 1)
        assert frames(u.audio_filepath) == n


def test_report_and_cap(tmp_path, corpus):
    # 12 s: A (16.4 s + gaps) gives one, B (10.3 s + 2.5 s of gaps = 12.8 s) cannot fit a window
    out, report = build_longform(corpus, [12], tmp_path / "lf", tolerance=0.05)
    assert report.made["12"] == len(out) >= 1
    assert report.too_short["12"] + report.no_fit["12"] == 1
    out1, report1 = build_longform(corpus, [2], tmp_path / "c1", max_per_duration=2, seed=0)
    full_count = len(build_longform(corpus, [2], tmp_path / "c0")[0])
    assert len(out1) == 2 and report1.capped["2"] == full_count - 2
    again, _ = build_longform(corpus, [2], tmp_path / "c2", max_per_duration=2, seed=0)
    assert [u.id for u in again] == [u.id for u in out1]
    assert "12" in report.summary()


def test_bad_targets(tmp_path, corpus):
    with pytest.raises(LongformError, match="neither a number"):
        build_longform(corpus, ["long"], tmp_path / "lf")
    with pytest.raises(LongformError, match="> 0"):
        build_longform(corpus, [0], tmp_path / "lf")
    with pytest.raises(LongformError, match="drop this target"):
        build_longform(corpus, [500], tmp_path / "lf", allow_mixed_speakers=True)


def test_make_longform_script(tmp_path, corpus, capsys):
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "make_longform.py"
    spec = importlib.util.spec_from_file_location("make_longform", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = tmp_path / "test.jsonl"
    write_manifest(src, corpus)
    out = tmp_path / "sets" / "test_long.jsonl"
    assert mod.main(["--manifest", str(src), "--out", str(out), "--durations", "3", "full", "--gap-s", "0.5"]) == 0
    made = read_manifest(out)
    assert {u.id.split("_")[0] for u in made} == {"lf3", "lffull"}
    assert all(Path(u.audio_filepath).parent == tmp_path / "sets" / "test_long" for u in made)
    assert "full" in capsys.readouterr().out
    # mixing needed and not allowed: one error line naming the manifest, exit code 2
    assert mod.main(["--manifest", str(src), "--out", str(out), "--durations", "25", "--tolerance", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {src}: ") and "allow_mixed_speakers" in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit) as stop:  # an unknown flag: argparse's usage error
        mod.main(["--manifest", str(src), "--out", str(out), f"in={src}"])
    assert stop.value.code == 2 and "error: unrecognized arguments: in=" in capsys.readouterr().err


# ----------------------------------------------------------------- joins: the sources' background

def room_noise(num_samples, rng, level_dbfs):
    """A microphone's background: noise falling 3 dB per octave above 100 Hz plus 50 Hz hum, at
    ``level_dbfs`` RMS (LibriVox and TED recordings sit around -70 to -50 dBFS)."""
    spectrum = np.fft.rfft(rng.standard_normal(num_samples))
    freqs = np.fft.rfftfreq(num_samples, 1 / SR)
    spectrum[0] = 0.0
    spectrum[1:] /= np.sqrt(np.maximum(freqs[1:], 100.0) / 100.0)
    noise = np.fft.irfft(spectrum, num_samples)
    noise += 0.3 * noise.std() * np.sin(2 * np.pi * 50 * np.arange(num_samples) / SR)
    return noise * 10 ** (level_dbfs / 20) / np.sqrt(np.mean(noise ** 2))


def speech_like(seconds, rng, level_dbfs):
    """Words (harmonic bursts, some with a fricative) over ``room_noise``, with pauses between
    them and 0.1-0.3 s of background at the start and 0.15 s or more at the end."""
    n = int(seconds * SR)
    wave = room_noise(n, rng, level_dbfs)
    pos = int(rng.uniform(0.1, 0.3) * SR)
    while True:
        m = int(rng.uniform(0.15, 0.4) * SR)
        if pos + m > n - int(0.15 * SR):
            break
        t = np.arange(m) / SR
        f0 = rng.uniform(100, 220)
        word = sum(np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 2 * np.pi)) / k
                   for k in range(1, 40) if k * f0 < 7000)
        word *= 10 ** (rng.uniform(-14, -8) / 20) / np.abs(word).max()
        if rng.random() < 0.4:
            hiss = np.fft.rfft(rng.standard_normal(m))
            hiss[np.fft.rfftfreq(m, 1 / SR) < 3000] = 0.0
            word += 0.05 * np.fft.irfft(hiss, m)
        wave[pos:pos + m] += word * np.hanning(m)
        pos += m + int(rng.uniform(0.03, 0.25) * SR)
    return wave.astype(np.float32)


def librispeech_chapter(root, rng, levels_dbfs, seconds=(2.0, 4.0)):
    """One LibriSpeech-style chapter: ``<spk>-<chapter>-<utt>.flac`` (16-bit FLAC, 16 kHz)."""
    chapter = root / "LibriSpeech" / "test-clean" / "1089" / "134686"
    chapter.mkdir(parents=True)
    utts = []
    for i, level in enumerate(levels_dbfs):
        path = chapter / f"1089-134686-{i:04d}.flac"
        wave = speech_like(rng.uniform(*seconds), rng, level)
        sf.write(path, wave, SR, format="FLAC", subtype="PCM_16")
        utts.append(Utterance(id=path.stem, audio_filepath=str(path), duration=len(wave) / SR,
                              text=f"words {i}", speaker="1089-134686"))
    return utts


def tedlium_talk(root, rng, levels_dbfs, seconds=(2.0, 4.0)):
    """One TED-LIUM-style talk: a NIST SPHERE file, utterances are (offset, duration) segments of it
    with background between them (as the STM cuts them)."""
    (root / "sph").mkdir(parents=True)
    path = root / "sph" / "JaneDoe_2012.sph"
    pieces, utts, pos = [], [], 0
    for i, level in enumerate(levels_dbfs):
        between = room_noise(int(0.4 * SR), rng, level).astype(np.float32)
        seg = speech_like(rng.uniform(*seconds), rng, level)
        pieces += [between, seg]
        pos += len(between)
        utts.append(Utterance(id=f"JaneDoe_2012-{i:03d}", audio_filepath=str(path), offset=pos / SR,
                              duration=len(seg) / SR, text=f"words {i}", speaker="JaneDoe_2012"))
        pos += len(seg)
    sf.write(path, np.concatenate(pieces), SR, format="NIST", subtype="PCM_16")
    return utts


def gap_ranges(part_lengths, gap):
    """[start, stop) sample ranges of the gaps in a recording of parts of ``part_lengths``."""
    ranges, pos = [], 0
    for k, n in enumerate(part_lengths):
        if k:
            ranges.append((pos, pos + gap))
            pos += gap
        pos += n
    return ranges


@pytest.mark.parametrize("layout", [librispeech_chapter, tedlium_talk], ids=["librispeech-flac", "tedlium-sph"])
@pytest.mark.parametrize("levels", [[-60] * 6, [-68, -55, -62, -70, -50, -58]], ids=["one-floor", "varied-floors"])
def test_join_features_stay_in_the_range_of_the_sources(tmp_path, layout, levels):
    rng = np.random.default_rng(-sum(levels))
    utts = layout(tmp_path / "corpus", rng, levels)
    out, report = build_longform(utts, ["full"], tmp_path / "lf", gap_s=GAP)
    assert len(out) == 1 and report.noise_joins["full"] == 1 and report.silent_joins.get("full", 0) == 0
    lo, hi = report.floor_dbfs["full"]
    assert min(levels) - 4 <= lo == hi <= min(levels) + 1      # the quietest source's floor, a little under
    fbank = FbankExtractor()                                      # the recipes' features, dither off
    parts = [load_audio(u.audio_filepath, offset=u.offset, duration=u.duration) for u in utts]
    source = torch.cat([fbank(p) for p in parts]).numpy()        # (frames of all parts, 80)
    wave, _ = sf.read(out[0].audio_filepath, dtype="float32")
    joined = fbank(torch.from_numpy(wave)).numpy()
    ranges = gap_ranges([len(p) for p in parts], int(GAP * SR))
    in_gap = [i for i in range(len(joined))
              if any(a <= i * fbank.window_shift and i * fbank.window_shift + fbank.window_size <= b
                     for a, b in ranges)]
    gap_feats = joined[in_gap]                                    # (frames wholly inside a join, 80)
    assert 47 * len(ranges) <= len(gap_feats) <= 48 * len(ranges)  # 0.5 s holds 47-48 whole frames

    # what zero joins gave: every value at the floor (log of float eps), far under all the sources
    floor = fbank(torch.zeros(int(GAP * SR))).numpy()
    assert np.all(floor == floor.flat[0]) and floor.flat[0] < source.min() - 5
    # the joins now: no value near the floor ...
    assert gap_feats.min() > floor.flat[0] + 10
    # ... every frame's mean log-mel between the quietest source frame's (less 0.5) and the median ...
    source_means, gap_means = source.mean(axis=1), gap_feats.mean(axis=1)
    assert gap_means.min() >= source_means.min() - 0.5
    assert gap_means.max() <= np.median(source_means)
    # ... and coloured like the sources' pauses: in every mel bin the joins' median is within 1.5
    # (natural log, 6.5 dB) of the median of the sources' quietest 10 % of frames (white noise of
    # the same power misses by 2.5 or more in some bin on these recordings)
    quiet = source[np.argsort(source_means)[:len(source) // 10]]
    assert np.abs(np.median(gap_feats, axis=0) - np.median(quiet, axis=0)).max() < 1.5


def test_fill_follows_the_background_spectrum_and_level():
    # background: noise low-passed at 2 kHz, -55 dBFS; speech-like bursts above it
    rng = np.random.default_rng(3)
    parts = []
    for _ in range(3):
        n = 3 * SR
        spectrum = np.fft.rfft(rng.standard_normal(n))
        spectrum[np.fft.rfftfreq(n, 1 / SR) > 2000] = 0.0
        noise = np.fft.irfft(spectrum, n)
        wave = noise * 10 ** (-55 / 20) / np.sqrt(np.mean(noise ** 2))
        wave[SR // 2:SR // 2 + SR] += 0.1 * np.sin(2 * np.pi * 440 * np.arange(SR) / SR)
        parts.append(wave.astype(np.float32))
    fill = estimate_background(parts, SR)
    # the quietest frames of stationary noise sit a little under its mean power: about 1 dB
    assert not fill.digital_silence and -56.5 < fill.level_dbfs < -55
    gap = fill.make(SR, np.random.default_rng(0)).astype(np.float64)
    assert 10 * np.log10(np.mean(gap ** 2)) == pytest.approx(fill.level_dbfs, abs=1e-3)
    power = np.abs(np.fft.rfft(gap)) ** 2
    freqs = np.fft.rfftfreq(len(gap), 1 / SR)
    assert power[freqs > 2500].sum() < 1e-3 * power[freqs < 2000].sum()   # coloured like the floor


def synth_like_parts(rng, count, residue):
    """Tone bursts separated by digital silence (zeros, or +-1 LSB rounding residue when
    ``residue``), like the embedded synthetic corpus' audio."""
    parts = []
    for _ in range(count):
        bursts = []
        for _ in range(3):
            m = int(rng.uniform(0.3, 0.6) * SR)
            bursts.append(0.2 * np.sin(2 * np.pi * rng.uniform(150, 300) * np.arange(m) / SR) * np.hanning(m))
            pause = np.zeros(int(rng.uniform(0.06, 0.12) * SR))
            if residue:
                pause = rng.integers(-1, 2, size=len(pause)) / 32768
            bursts.append(pause)
        parts.append(np.round(np.concatenate(bursts) * 32768).astype(np.float32) / 32768)
    return parts


@pytest.mark.parametrize("residue", [False, True], ids=["zeros", "one-lsb-residue"])
def test_digital_silence_background_gives_the_zero_joins_byte_for_byte(tmp_path, residue):
    rng = np.random.default_rng(5)
    parts = synth_like_parts(rng, 4, residue)
    assert estimate_background(parts, SR).digital_silence
    utts = []
    for i, wave in enumerate(parts):
        sf.write(tmp_path / f"s{i}.flac", wave, SR, format="FLAC", subtype="PCM_16")
        utts.append(Utterance(id=f"s{i}", audio_filepath=str(tmp_path / f"s{i}.flac"),
                              duration=len(wave) / SR, text=f"t{i}", speaker="spk00"))
    out, report = build_longform(utts, ["full"], tmp_path / "lf", gap_s=GAP)
    assert report.silent_joins == {"full": 1} and report.noise_joins == {}
    zeros = np.zeros(int(GAP * SR), np.float32)
    expected = np.concatenate([parts[0]] + [x for p in parts[1:] for x in (zeros, p)])   # part, 0s, part, ...
    _write_flac(tmp_path / "expected.flac", expected, SR)
    assert (tmp_path / "lf" / f"{out[0].id}.flac").read_bytes() == (tmp_path / "expected.flac").read_bytes()


def test_a_short_dropout_does_not_make_the_background_digital_silence():
    rng = np.random.default_rng(6)
    parts = [speech_like(3.0, rng, -62) for _ in range(3)]
    frame, hop = int(0.025 * SR), int(0.010 * SR)
    # zeros covering DIGITAL_SILENCE_MIN_FRAMES - 1 whole frames: a dropout, not a silent background
    parts[1][:frame + hop * (DIGITAL_SILENCE_MIN_FRAMES - 2)] = 0.0
    fill = estimate_background(parts, SR)
    assert not fill.digital_silence and -67 < fill.level_dbfs < -61
    parts[1][:frame + hop * (DIGITAL_SILENCE_MIN_FRAMES - 1)] = 0.0       # one frame more: silent
    assert estimate_background(parts, SR).digital_silence


def test_parts_shorter_than_the_smoothing_window():
    # 3 frames, 1 frame and less than one frame: ranked and cut out like any other
    rng = np.random.default_rng(8)
    parts = [room_noise(n, rng, -60).astype(np.float32) for n in (720, 400, 200)]
    fill = estimate_background(parts, SR)
    assert not fill.digital_silence and -63 < fill.level_dbfs < -57
    assert estimate_background([parts[2]], SR).digital_silence       # no whole frame: nothing to match


def test_join_noise_is_seeded_per_recording(tmp_path):
    rng = np.random.default_rng(7)
    utts = librispeech_chapter(tmp_path / "corpus", rng, [-60] * 6, seconds=(1.5, 2.0))
    samples = {u.id: int(round(u.duration * SR)) for u in utts}
    gap = int(GAP * SR)

    def build(name, durations, seed):
        """{id: (wave, [(start, stop) of each gap])}"""
        out, _ = build_longform(utts, durations, tmp_path / name, gap_s=GAP, seed=seed)
        sources = json.loads((tmp_path / name / "sources.json").read_text())
        return {u.id: (sf.read(u.audio_filepath, dtype="float32")[0],
                       gap_ranges([samples[s] for s in sources[u.id]], gap)) for u in out}

    a, b, other_seed = build("a", [4], 0), build("b", ["full", 4], 0), build("c", [4], 1)
    assert a.keys() == other_seed.keys() and set(a) < set(b) and len(a) >= 2
    for uid, (wave, gaps) in a.items():
        assert gaps
        np.testing.assert_array_equal(wave, b[uid][0])            # the same whatever else is built
        other = other_seed[uid][0]
        in_gap = np.zeros(len(wave), bool)
        for start, stop in gaps:
            in_gap[start:stop] = True
            assert not np.array_equal(wave[start:stop], other[start:stop])   # another seed, other noise
        np.testing.assert_array_equal(wave[~in_gap], other[~in_gap])        # the parts are untouched
    full, gaps = b["lffull_1089-134686_0"]
    (s1, e1), (s2, e2) = gaps[:2]
    assert np.std(full[s1:e1]) > 0 and not np.array_equal(full[s1:e1], full[s2:e2])  # fresh noise per join


def test_bad_seed(tmp_path, corpus):
    with pytest.raises(LongformError, match="seed must be an integer >= 0"):
        build_longform(corpus, [3], tmp_path / "lf", seed=-1)


def _noise_corpus(root, spec, seed=0):
    """Like make_corpus, but each utterance is its own random wave (int16 steps), so a part found
    at the wrong sample offset cannot match."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    utts = []
    for i, (spk, dur) in enumerate(spec):
        path = root / f"n{i:03d}.wav"
        wave = rng.integers(-8000, 8000, size=int(round(dur * SR))).astype(np.float32) / 32768
        sf.write(path, wave, SR, subtype="PCM_16")
        utts.append(Utterance(id=f"n{i:03d}", audio_filepath=str(path), duration=dur,
                              text=f"word{i}", speaker=spk))
    return utts


@pytest.mark.parametrize("gap_s", [GAP, 0.0])
def test_parts_record_where_each_source_lies(tmp_path, gap_s):
    """Every recording's ``parts`` name its sources in order, and the samples in [start, end) are
    the source's samples exactly; with gap_s = 0 the parts abut (each starts where the last ends)."""
    corpus = _noise_corpus(tmp_path / "src", SPEC)
    by_id = {u.id: u for u in corpus}
    out, _ = build_longform(corpus, [6], tmp_path / "lf", gap_s=gap_s)
    sources = json.loads((tmp_path / "lf" / "sources.json").read_text())
    assert out and all(u.parts is not None for u in out)
    for u in out:
        assert [p.id for p in u.parts] == sources[u.id]
        wave, _ = sf.read(u.audio_filepath, dtype="float32")
        for k, part in enumerate(u.parts):
            a, b = round(part.start * SR), round(part.end * SR)
            assert (a, b) == (part.start * SR, part.end * SR)          # on the sample grid
            src, _ = sf.read(by_id[part.id].audio_filepath, dtype="float32")
            np.testing.assert_array_equal(wave[a:b], src)
            if k:
                assert a - round(u.parts[k - 1].end * SR) == round(gap_s * SR)
        assert u.parts[0].start == 0 and u.parts[-1].end == pytest.approx(u.duration)
        if gap_s == 0:
            assert len(wave) == sum(frames(by_id[p.id].audio_filepath) for p in u.parts)
    # the manifest on disk carries the same parts
    assert [u.parts for u in read_manifest(tmp_path / "lf" / "longform.jsonl")] == [u.parts for u in out]
