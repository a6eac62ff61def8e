"""Tiny end-to-end fixtures: a generated corpus of a few dozen utterances and a config composer."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

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


@pytest.fixture(scope="session")
def tiny_synth_root(tmp_path_factory) -> Path:
    """Cache root holding a tiny synth corpus (built once per test session)."""
    from asr_pe.data.synth import prepare_synth

    root = tmp_path_factory.mktemp("synth_cache")
    prepare_synth(root=root, progress=False, **TINY_SYNTH)
    return root


TINY_SYNTH = {"num_train": 32, "num_dev": 4, "test_bucket_edges": [0, 2, 4, 8], "test_per_bucket": 2,
              "num_speakers": 3}


def synth_overrides(root: Path) -> list[str]:
    return [f"data.corpus.root={root}", "data.corpus.num_train=32", "data.corpus.num_dev=4",
            "data.corpus.test_bucket_edges=[0,2,4,8]", "data.corpus.test_per_bucket=2",
            "data.corpus.num_speakers=3", "data.max_batch_seconds=20", "data.num_buckets=2"]


def compose_train(overrides: list[str]):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("train", overrides=overrides)
