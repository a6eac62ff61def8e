"""Shared constants and helpers of the end-to-end tests (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

import asr_pe.training  # noqa: F401  (registers the pe_label resolver)

CONF = Path(__file__).resolve().parents[2] / "conf"

# A tiny, fast model: enough to watch a CTC loss fall within a few dozen steps.
TINY_MODEL = [
    "frontend.channels=8",
    "encoder.d_model=32",
    "encoder.n_heads=4",
    "encoder.n_layers=2",
    "encoder.ffn_dim=64",
    "decoder.n_layers=1",
    "decoder.ffn_dim=64",
    "optim.warmup_steps=5",
    "optim.lr=3e-3",
    "trainer.accelerator=cpu",
    "trainer.log_every_n_steps=1",
    "trainer.enable_model_summary=false",
    "eval.n_boot=50",
]

TINY_SYNTH = {"num_train": 32, "num_dev": 4, "test_bucket_edges": [0, 2, 4, 8], "test_per_bucket": 2,
              "num_speakers": 3}


def synth_overrides(root: Path) -> list[str]:
    """Hydra overrides that select the tiny corpus in ``root`` (the one `TINY_SYNTH` builds)."""
    corpus = [f"data.corpus.{k}={v}".replace(" ", "") for k, v in TINY_SYNTH.items()]
    return [f"data.corpus.root={root}", *corpus, "data.max_batch_seconds=20", "data.num_buckets=2"]


def compose_train(overrides: list[str]):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("train", overrides=overrides)
