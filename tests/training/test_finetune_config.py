"""A fine-tune's source (``init_from``) checked before any data work: which keys must match the
checkpoint's config (and which change no weight), how the source is found, and the one-line
refusal of train.py (exit 2) naming the keys that differ."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import asr_pe.training  # noqa: F401  (registers the pe_label resolver)
from asr_pe.errors import ConfigError
from asr_pe.training.finetune import model_differences, resolve_init_from

REPO = Path(__file__).resolve().parents[2]
TINY = ["frontend.channels=8", "encoder.d_model=32", "encoder.n_heads=4", "encoder.n_layers=2",
        "encoder.ffn_dim=64", "trainer.accelerator=cpu", "data.corpus.longform=null"]


def _compose(*overrides: str):
    with initialize_config_dir(str(REPO / "conf"), version_base="1.3"):
        return compose("train", overrides=[*TINY, *overrides])


def test_only_weight_bearing_keys_must_match():
    source = _compose("experiment=synth_study")
    # the fine-tune's own settings: joined inputs, another corpus size, optimiser, a RoPE rescaling
    same = _compose("experiment=synth_finetune", "pe=rope_yarn", "data.corpus.num_train=10", "optim.lr=1e-4")
    assert model_differences(source, same) == {}
    assert model_differences(source, _compose("experiment=synth_finetune", "pe=rope_pi")) == {}
    diff = model_differences(source, _compose("experiment=synth_finetune", "encoder.n_layers=3",
                                              "data.features.num_mel_bins=40", "frontend.context_kernel=0"))
    assert diff == {"encoder.n_layers": (2, 3), "data.features.num_mel_bins": (80, 40),
                    "frontend.context_kernel": (9, 0)}
    assert "pe.attention.name" in model_differences(source, _compose("experiment=synth_finetune", "pe=sinusoidal"))
    # an option absent from an older run's config.yaml (null: off) is no difference
    old = OmegaConf.to_container(source, resolve=True)
    del old["pe"]["attention"]["scaling"]
    assert model_differences(old, same) == {}


def test_the_source_is_a_run_folder_or_a_checkpoint_inside_one(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match="no checkpoints/best.ckpt"):
        resolve_init_from(run)
    (run / "checkpoints" / "best.ckpt").write_bytes(b"x")
    (run / "checkpoints" / "last.ckpt").write_bytes(b"x")
    with pytest.raises(ConfigError, match="no config.yaml"):
        resolve_init_from(run)
    (run / "config.yaml").write_text("seed: 0\n")
    assert resolve_init_from(run) == (run, run / "checkpoints" / "best.ckpt")
    assert resolve_init_from(run / "checkpoints" / "last.ckpt") == (run, run / "checkpoints" / "last.ckpt")
    with pytest.raises(ConfigError, match="no such run folder"):
        resolve_init_from(tmp_path / "nowhere")


def test_train_refuses_a_different_model_with_one_line(tmp_path):
    source = tmp_path / "source"
    (source / "checkpoints").mkdir(parents=True)
    (source / "config.yaml").write_text(OmegaConf.to_yaml(_compose("experiment=synth_study"), resolve=True))
    (source / "checkpoints" / "best.ckpt").write_bytes(b"never read: refused before")
    run = tmp_path / "ft"
    out = subprocess.run(
        [sys.executable, "train.py", *TINY, "experiment=synth_finetune", f"run_dir={run}", f"init_from={source}",
         f"data.corpus.root={tmp_path / 'no_corpus'}", "pe=rope_pi", "encoder.d_model=48", "encoder.ffn_dim=96"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    last = [line for line in out.stderr.splitlines() if line.strip()][-1]
    assert last.startswith(f"error: init_from={source}: the model config differs")
    assert "encoder.d_model: 32 in the checkpoint, 48 here" in last and "encoder.ffn_dim: 64" in last
    assert "pe." not in last  # the rescaling and the PE option's name change no weight
    assert not (tmp_path / "no_corpus").exists() and not (run / "tokenizer.json").exists()  # no data work
