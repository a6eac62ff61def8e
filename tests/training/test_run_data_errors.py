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
