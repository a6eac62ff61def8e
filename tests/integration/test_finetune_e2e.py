"""Fine-tuning a trained run (``init_from``, ``experiment=synth_finetune``) end to end on the tiny
corpus: the weights at the start are the checkpoint's, the source is recorded, the tokenizer and
CMVN are the source's, plain / PI / YaRN each fine-tune (the rescaling in training and in the
evaluation), and the loss falls. (A model config that differs is refused: tests/training/test_finetune_config.py.)
Slow (a source run and four fine-tunes, ~2 min of CPU): ``pytest -m slow``."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from asr_pe.inference.run_loading import load_run
from asr_pe.models.positional.rope import RoPE
from asr_pe.evaluation.pipeline import evaluate_run as evaluate_with
from asr_pe.evaluation.provenance import file_sha256, weights_sha256
from asr_pe.training.data import resolve_manifests
from asr_pe.training.train import train

from e2e_helpers import TINY_MODEL, compose_train, synth_overrides

pytestmark = pytest.mark.slow
# the study's recipe (front end, no dropout) on the tiny model; short joined inputs, few steps
SOURCE = ["experiment=synth_study", "data.corpus.longform=null", "trainer.enable_progress_bar=false", "data.spec_augment=null"]
FINETUNE = ["experiment=synth_finetune", "data.corpus.longform=null", "trainer.enable_progress_bar=false", "data.spec_augment=null",
            "data.concat_max_seconds=8", "eval_after_train=false", "optim.warmup_steps=2"]


def _losses(run_dir: Path) -> list[float]:
    with open(run_dir / "logs" / "metrics.csv") as f:
        return [float(r["train/loss"]) for r in csv.DictReader(f) if r.get("train/loss")]


def _first_and_last_epoch(run_dir: Path) -> tuple[float, float]:
    """Mean loss of the first and of the last complete epoch: the same inputs in another order
    (a batch's loss grows with its length, so single steps are not comparable)."""
    with open(run_dir / "logs" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("train/loss")]
    by_epoch: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        by_epoch[int(float(r["epoch"]))].append(float(r["train/loss"]))
    last = max(e for e in by_epoch if len(by_epoch[e]) == len(by_epoch[0]))
    assert last >= 2, f"too few complete epochs to compare: {dict(by_epoch)}"
    return tuple(sum(by_epoch[e]) / len(by_epoch[e]) for e in (0, last))


def _model_state(ckpt: Path) -> dict[str, torch.Tensor]:
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    return {k: v for k, v in state.items() if k.startswith("model.")}


@pytest.fixture(scope="module")
def source_run(tiny_synth_root, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("source") / "rope_ctc_s0"
    train(compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + SOURCE + [
        f"run_dir={run}", "trainer.max_steps=48", "optim.schedule=noam", "eval_after_train=false"]))
    assert (run / "checkpoints" / "best.ckpt").is_file()
    return run


def _finetune(root, run: Path, source: Path, pe: str, *extra: str) -> Path:
    train(compose_train(TINY_MODEL + synth_overrides(root) + FINETUNE + [
        f"run_dir={run}", f"init_from={source}", f"pe={pe}", *extra]))
    return run


def test_the_source_run_learned(source_run):
    assert len(_losses(source_run)) == 48
    first, last = _first_and_last_epoch(source_run)
    assert last < 0.92 * first, f"the tiny source run did not learn: epoch mean {first:.1f} -> {last:.1f}"


def test_starts_from_the_checkpoint_weights_and_records_it(tiny_synth_root, source_run, tmp_path):
    # lr 1e-30 (0 is refused): the weights move by ~1e-30, so the fine-tune's checkpoint holds its
    # starting weights to within that (a weight at exactly 0 becomes ~1e-30)
    run = _finetune(tiny_synth_root, tmp_path / "ft", source_run, "rope", "optim.lr=1e-30", "trainer.max_steps=3")
    src, start = _model_state(source_run / "checkpoints" / "best.ckpt"), _model_state(run / "checkpoints" / "last.ckpt")
    assert src.keys() == start.keys()
    for k in src:
        torch.testing.assert_close(start[k], src[k], rtol=1e-6, atol=1e-20, msg=k)
    best = source_run / "checkpoints" / "best.ckpt"
    info = json.loads((run / "run_info.json").read_text())
    assert info["init_from"] == {"run": str(source_run), "name": "best.ckpt", "sha256": file_sha256(best),
                                 "weights_sha256": weights_sha256(best),
                                 "global_step": torch.load(best, weights_only=True)["global_step"]}
    assert info["init_from"]["global_step"] > 0
    assert info["remedy"] == "finetune+concat:8" and info["train_max_duration"] > 5.0
    assert "init_from:" in (run / "config.yaml").read_text()
    for name in ("tokenizer.json", "cmvn.json"):
        assert (run / name).read_bytes() == (source_run / name).read_bytes(), name
    # a fresh optimiser and schedule: step 0 at the warmup's first lr, step count from 0
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 3
    # the same start from random weights (same seed, same batches) has a far larger first loss
    scratch = tmp_path / "scratch"
    train(compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + FINETUNE + [
        f"run_dir={scratch}", "pe=rope", "optim.lr=1e-30", "trainer.max_steps=3"]))
    assert _losses(run)[0] < _losses(scratch)[0]


@pytest.mark.parametrize("pe, kind", [("rope", None), ("rope_pi", "pi"), ("rope_yarn", "yarn")])
def test_plain_pi_yarn_fine_tune_and_keep_the_rescaling_in_evaluation(tiny_synth_root, source_run, tmp_path, pe, kind):
    run = _finetune(tiny_synth_root, tmp_path / pe, source_run, pe, "optim.lr=3e-3", "trainer.max_steps=24")
    losses = _losses(run)
    assert len(losses) == 24 and all(loss == loss for loss in losses)
    first, last = _first_and_last_epoch(run)
    assert last < first, f"{pe}: the fine-tune's loss did not fall: epoch mean {first:.1f} -> {last:.1f}"
    _, model, *_ = load_run(run, "last")
    hooks = [h for h in model.encoder.pe.attention if isinstance(h, RoPE)]
    assert hooks
    for h in hooks:  # the rescaling is part of the model the evaluation loads
        assert (h.scaling.kind, h.scaling.factor) == (kind, 8.0) if kind else h.scaling is None
    results = evaluate_with(run, {"eval": {"n_boot": 10, "checkpoint": "last"}, "data": {"test": "test"}},
                            corpus_manifests=resolve_manifests)
    assert list(results) == ["test"]
    assert len((run / "eval" / "test" / "per_utt.jsonl").read_text().splitlines()) == 6


def test_a_fine_tune_of_the_exported_weights_is_the_fine_tune_of_the_source_run(tiny_synth_root, source_run, tmp_path):
    """Stage 7 archives each source's weights alone (recipes/synth/study/backlog.py export-source) and a
    later session fine-tunes a copy of that folder: the same fine-tune to the bit as from the run itself,
    the same weights digest recorded, and the copy decodes as the run does."""
    import importlib.util
    import shutil
    import sys

    name = "asr_pe_synth_backlog"
    if name not in sys.modules:     # loaded by path: recipes/ is no package
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[2] / "recipes/synth/study/backlog.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    export = tmp_path / "sources" / source_run.name
    export.parent.mkdir()
    sys.modules[name].export_source(source_run, export)
    copy = tmp_path / "work" / source_run.name
    shutil.copytree(export, copy)
    steps = ("optim.lr=3e-3", "trainer.max_steps=4")
    a = _finetune(tiny_synth_root, tmp_path / "from_run", source_run, "rope", *steps)
    b = _finetune(tiny_synth_root, tmp_path / "from_copy", copy, "rope", *steps)
    wa, wb = _model_state(a / "checkpoints" / "last.ckpt"), _model_state(b / "checkpoints" / "last.ckpt")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    ia, ib = (json.loads((r / "run_info.json").read_text())["init_from"] for r in (a, b))
    assert ia["weights_sha256"] == ib["weights_sha256"] and ia["global_step"] == ib["global_step"] > 0
    assert ia["sha256"] != ib["sha256"]   # the file itself is another: no optimiser, no callbacks
    hyps = {}
    for run in (source_run, copy):
        evaluate_with(run, {"eval": {"n_boot": 10}, "data": {"test": "test"}}, corpus_manifests=resolve_manifests)
        hyps[run] = [json.loads(line)["hyp"] for line in (run / "eval" / "test" / "per_utt.jsonl").read_text().splitlines()]
    assert len(hyps[copy]) == 6 and hyps[copy] == hyps[source_run]
