"""Every experiment composes and trains one step; every PE trains one step with CTC.

Model sizes are shrunk by overrides (the experiment files keep their real sizes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from asr_pe.data.manifest import read_manifest, write_manifest
from asr_pe.training.train import train

from e2e_helpers import CONF, TINY_MODEL, compose_train, synth_overrides

PES = sorted(p.stem for p in (CONF / "pe").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
ONE_STEP = ["trainer.max_steps=1", "eval_after_train=false", "trainer=cpu", "trainer.precision=32-true",
            "encoder.n_layers=1"]


@pytest.fixture(scope="module")
def public_corpora(tiny_synth_root, tmp_path_factory):
    """Manifests named as the LibriSpeech / TED-LIUM 3 recipes write them, over the tiny synth
    audio (the recipes' prepare stages are tested on fixture trees in tests/recipes; their
    sub-second fixture clips are too short to train CTC on)."""
    root = tmp_path_factory.mktemp("corpora")
    split = {s: read_manifest(next(Path(tiny_synth_root).glob(f"synth/*/{s}.jsonl"))) for s in ("train", "dev", "test")}
    for name, src in {"train-clean-100": "train", "dev-clean": "dev", "test-clean": "test"}.items():
        write_manifest(root / "ls" / f"{name}.jsonl", split[src])
    # the TED-LIUM smoke experiment trains on dev_fit and validates on dev_heldout (recipes' stage 4 split)
    for name, src in {"train": "train", "dev": "dev", "test": "test", "dev_fit": "train", "dev_heldout": "dev"}.items():
        write_manifest(root / "tl" / f"{name}.jsonl", split[src])
    return {
        "librispeech": [f"data.corpus.manifest_dir={root / 'ls'}", "data.corpus.train=[train-clean-100]",
                        "data.corpus.dev=[dev-clean]", "data.corpus.test=[test-clean]"],
        "tedlium3": [f"data.corpus.manifest_dir={root / 'tl'}", "data.corpus.test=[test]"],
    }


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_trains_one_step(experiment, tiny_synth_root, public_corpora, tmp_path):
    cfg = compose_train([f"experiment={experiment}"])
    data = cfg.data.name
    tiny = [o for o in TINY_MODEL if cfg.frontend.kind == "conv2d" or not o.startswith("frontend.")]
    overrides = [f"experiment={experiment}", f"run_dir={tmp_path / 'run'}"] + tiny + ONE_STEP
    if data == "synth":
        overrides += synth_overrides(tiny_synth_root) + ["data.corpus.longform=null"]
    else:
        overrides += public_corpora[data] + ["data.max_batch_seconds=30", "data.num_workers=0"]
        if cfg.data.tokenizer.kind == "sentencepiece":
            # fixture transcripts are far too small for a 256-piece model
            overrides.append("data.tokenizer.vocab_size=40")
    run = train(compose_train(overrides))
    assert (run / "checkpoints" / "last.ckpt").exists()


@pytest.mark.parametrize("pe", PES)
def test_every_pe_trains_one_step_with_ctc(pe, tiny_synth_root, tmp_path):
    run = train(compose_train(TINY_MODEL + ONE_STEP + synth_overrides(tiny_synth_root) + [
        f"pe={pe}", "loss=ctc", f"run_dir={tmp_path / 'run'}"]))
    assert (run / "checkpoints" / "last.ckpt").exists()


@pytest.mark.parametrize("encoder", ["conformer", "transformer"])
@pytest.mark.parametrize("loss", ["ctc", "seq2seq", "hybrid"])
def test_every_pe_composes_with_every_encoder_and_loss(encoder, loss):
    from omegaconf import OmegaConf

    from asr_pe.models.asr import build_asr_model, model_kwargs

    for pe in PES:
        cfg = compose_train([f"pe={pe}", f"encoder={encoder}", f"loss={loss}", "encoder.n_layers=1",
                             "encoder.d_model=32", "decoder.n_layers=1"])
        build_asr_model(**model_kwargs(OmegaConf.to_container(cfg, resolve=True), vocab_size=12))
