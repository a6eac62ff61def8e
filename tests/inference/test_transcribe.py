"""transcribe.py and eval.mode on a hand-made run directory (random weights: the transcript is
noise, but full-context, blocked and chunked encodings must agree where they should, and the
entry point must print the transcript, time and memory)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from asr_pe.data.features import FbankExtractor, GlobalCMVN
from asr_pe.data.manifest import Utterance, write_manifest
from asr_pe.data.tokenizer import build_tokenizer
from asr_pe.inference.run_loading import model_config
from asr_pe.inference.transcribe import (
    features_in_chunks,
    make_encode_fn,
    transcribe_file,
)
from asr_pe.models.asr import build_asr_model, model_kwargs

ROOT = Path(__file__).resolve().parents[2]
TINY = ["frontend.channels=8", "encoder.d_model=32", "encoder.n_heads=4", "encoder.n_layers=2",
        "encoder.ffn_dim=64", "encoder.dropout=0.0", "pe=relative", "loss=ctc"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=TINY)
    OmegaConf.save(cfg, run / "config.yaml")
    tok = build_tokenizer("char", ["hello world", "the quick brown fox"], run)
    torch.manual_seed(0)
    model = build_asr_model(**model_kwargs(model_config(cfg), tok.vocab_size))
    (run / "checkpoints").mkdir()
    torch.save({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}}, run / "checkpoints" / "best.ckpt")
    n_mel = int(cfg.data.features.num_mel_bins)
    GlobalCMVN(torch.zeros(n_mel), torch.ones(n_mel)).save(run / "cmvn.json")
    return run


@pytest.fixture(scope="module")
def audio(tmp_path_factory):
    import soundfile as sf

    g = torch.Generator().manual_seed(0)
    wave = (0.1 * torch.randn(16000 * 12, generator=g)).clamp(-1, 1).numpy()  # 12 s of noise
    path = tmp_path_factory.mktemp("audio") / "long.wav"
    sf.write(str(path), wave, 16000)
    return path


def test_features_in_chunks_equal_whole_file():
    ex = FbankExtractor()
    wave = torch.randn(16000 * 3 + 123) * 0.1
    whole = ex(wave)
    for chunk in (7, 100, 299):
        torch.testing.assert_close(features_in_chunks(ex, wave, chunk_frames=chunk), whole, atol=1e-5, rtol=1e-5)


def test_full_blocked_and_covering_chunk_agree(run_dir, audio):
    full = transcribe_file(run_dir, audio, mode="full", block_size=None)
    blocked = transcribe_file(run_dir, audio, mode="full", block_size=16)
    chunked = transcribe_file(run_dir, audio, mode="chunked", chunk_s=30.0, overlap_s=1.0)  # one chunk
    # 12 s: 1 + (192000 − 400)//160 = 1198 fbank frames -> ((1198 − 3)//2 + 1 − 3)//2 + 1 = 298
    assert full["encoder_frames"] == blocked["encoder_frames"] == chunked["encoder_frames"] == 298
    assert full["text"] == blocked["text"] == chunked["text"]
    assert blocked["block_size"] == 16 and full["block_size"] is None
    assert full["peak_memory_mb"] > 0 and full["time_encode_s"] >= 0 and full["seconds_audio"] == 12.0


def test_small_chunks_run_and_keep_the_frame_count(run_dir, audio):
    out = transcribe_file(run_dir, audio, mode="chunked", chunk_s=2.0, overlap_s=0.5)
    assert out["encoder_frames"] == 298 and out["mode"] == "chunked" and out["chunk_s"] == 2.0


def test_a_remedy_applies_to_one_recording_and_is_reported(run_dir, audio):
    """remedy=window (12 s recording, training length 2 s): the model is remedied for the call
    only, the result names the remedy, and a plain call afterwards gives the plain transcript."""
    from asr_pe.inference.remedies import RemedyError

    plain = transcribe_file(run_dir, audio, block_size=None)
    windowed = transcribe_file(run_dir, audio, block_size=None, remedy="window:0.5", train_length_s=2.0)
    assert windowed["remedy"] == "window:0.5" and plain["remedy"] == ""
    assert transcribe_file(run_dir, audio, block_size=None)["text"] == plain["text"]
    with pytest.raises(RemedyError, match="train_length_s"):
        transcribe_file(run_dir, audio, remedy="logit_scale")  # this run has no run_info.json


def test_bad_mode_and_block_size_are_clear_errors(run_dir):
    model = build_asr_model(vocab_size=5, in_features=80, frontend={"kind": "conv2d"},
                            encoder={"d_model": 16, "n_heads": 2, "n_layers": 1}, pe="none")
    with pytest.raises(ValueError, match="mode"):
        make_encode_fn(model, "streaming")
    with pytest.raises(ValueError, match="block_size"):
        make_encode_fn(model, "full", block_size="huge")


def test_cli_prints_transcript_time_and_memory(run_dir, audio, tmp_path):
    out_json = tmp_path / "t.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "transcribe.py"), f"run={run_dir}", f"audio={audio}", "mode=chunked",
         "chunk_s=4", "overlap_s=1", "threads=1", f"output={out_json}"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out_json.read_text())
    assert proc.stdout.strip().splitlines()[-1] == result["text"].strip() or result["text"] == ""
    assert "[transcribe] 12.0 s of audio, 298 encoder frames, mode=chunked" in proc.stderr
    assert "peak memory" in proc.stderr and "RTF" in proc.stderr
    assert not (tmp_path / "outputs").exists()  # Hydra writes nothing into the working directory


def test_cli_missing_audio_is_one_line(run_dir, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(ROOT / "transcribe.py"), f"run={run_dir}", "audio=/nope.wav"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False)
    assert proc.returncode == 2 and "error:" in proc.stderr and "/nope.wav" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_evaluate_chunked_mode_writes_its_files(run_dir, audio):
    from asr_pe.evaluation.pipeline import evaluate_run

    manifest = Path(audio).parent / "one.jsonl"
    write_manifest(manifest, [Utterance(id="long", audio_filepath=str(audio), duration=12.0, text="hello world")])
    no_corpus = lambda data_cfg: {"train": [], "dev": [], "test": {}}  # noqa: E731
    results = {}
    for mode in ("full", "chunked"):
        over = {"data": {"test": str(manifest)}, "decode": {"method": "greedy"},
                "eval": {"n_boot": 10, "mode": mode, "chunk_s": 30.0, "overlap_s": 1.0}}
        evaluate_run(run_dir, over, corpus_manifests=no_corpus)
        out = run_dir / "eval" / "one"
        rec = json.loads((out / "per_utt.jsonl").read_text().splitlines()[0])
        meta = json.loads((out / "buckets.meta.json").read_text())
        assert meta["mode"] == mode
        results[mode] = rec["hyp"]
    assert results["full"] == results["chunked"]  # one 30 s chunk covers the 12 s utterance
