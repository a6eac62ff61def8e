"""prepare_run_data's errors name what is wrong: the empty manifest files, the option that
dropped every utterance."""

import json

import pytest
from omegaconf import OmegaConf

from asr_pe.training import data as run_data


def corpus_with(monkeypatch, train_files):
    monkeypatch.setattr(run_data, "resolve_manifests",
                        lambda cfg: {"train": [str(p) for p in train_files], "dev": [], "test": {}})


def test_empty_training_manifests_are_named(tmp_path, monkeypatch):
    empty = tmp_path / "train.jsonl"
    empty.write_text("\n")
    corpus_with(monkeypatch, [empty])
    cfg = OmegaConf.create({"name": "fixture"})
    with pytest.raises(ValueError, match=rf"training manifests hold no utterances \({empty}\); prepare"):
        run_data.prepare_run_data(cfg, tmp_path, frontend=None, uses_ctc=False)


def test_a_duration_limit_that_drops_everything_names_the_option(tmp_path, monkeypatch):
    wav = tmp_path / "a.wav"
    wav.write_bytes(b"")
    manifest = tmp_path / "train.jsonl"
    manifest.write_text(json.dumps({"id": "u1", "audio_filepath": str(wav), "duration": 7.5, "text": "hello"}) + "\n")
    corpus_with(monkeypatch, [manifest])
    cfg = OmegaConf.create({"name": "fixture", "train_max_duration": 5.0})
    with pytest.raises(ValueError, match=r"data.train_max_duration=5.0 \(all 1 are longer"):
        run_data.prepare_run_data(cfg, tmp_path, frontend=None, uses_ctc=False)


def _tone_file(path, seconds, rate=16000):
    import numpy as np
    import soundfile as sf

    sf.write(str(path), (0.2 * np.sin(np.arange(int(seconds * rate)) * 0.05)).astype(np.float32), rate)
    return path


def test_training_audio_is_checked_against_its_manifest_before_anything_is_built(tmp_path, monkeypatch):
    from asr_pe.data.audio import AudioError

    good = _tone_file(tmp_path / "good.wav", 2.0)
    short = _tone_file(tmp_path / "short.wav", 1.0)
    manifest = tmp_path / "train.jsonl"
    manifest.write_text(json.dumps({"id": "g", "audio_filepath": str(good), "duration": 2.0, "text": "hello"}) + "\n"
                        + json.dumps({"id": "s", "audio_filepath": str(short), "duration": 2.5, "text": "hi"}) + "\n")
    corpus_with(monkeypatch, [manifest])
    cfg = OmegaConf.create({"name": "fixture", "features": {"sample_rate": 16000}})
    with pytest.raises(AudioError, match=rf"^{manifest}:2: {short} holds 1\.000s of audio but the manifest's segment "
                                         r"ends at 2\.500s .*1 of 2 utterances of set 'train'"):
        run_data.prepare_run_data(cfg, tmp_path, frontend=None, uses_ctc=False)
    assert not (tmp_path / "tokenizer.json").exists()  # stopped before the tokenizer and CMVN


def test_training_audio_report_counts_resampled_files(tmp_path, monkeypatch):
    files = [_tone_file(tmp_path / "a.wav", 1.0), _tone_file(tmp_path / "b.wav", 1.0, rate=8000)]
    manifest = tmp_path / "train.jsonl"
    manifest.write_text("".join(json.dumps({"id": f.stem, "audio_filepath": str(f), "duration": 1.0, "text": "hello"})
                                + "\n" for f in files))
    corpus_with(monkeypatch, [manifest])
    cfg = OmegaConf.create({"name": "fixture", "features": {"sample_rate": 16000, "num_mel_bins": 80},
                            "tokenizer": {"kind": "char"}})
    data = run_data.prepare_run_data(cfg, tmp_path, frontend=None, uses_ctc=False)
    assert data.report["audio"]["train"]["resampled_files"] == {8000: 1}
    assert data.report["audio"]["train"]["files"] == 2 and "dev" not in data.report["audio"]
