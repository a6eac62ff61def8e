"""Tiny end-to-end runs of the attention heads: loss=seq2seq and loss=hybrid.

Each composes ``conf/train.yaml`` with Hydra's compose API, trains a very small model for a
few epochs on a tiny generated synth corpus (built once per module), and checks that the
training and validation losses go down and that evaluation with the attention decoders
(``decode.method=attention``, and ``joint`` for hybrid) writes per_utt.jsonl, buckets.csv,
buckets.md and records the method in buckets.meta.json.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip("lightning")
hydra = pytest.importorskip("hydra")

from hydra import compose, initialize_config_dir  # noqa: E402

from asr_pe.evaluation.pipeline import evaluate_run as evaluate_with  # noqa: E402
from asr_pe.training.data import resolve_manifests  # noqa: E402
from asr_pe.training.train import train  # noqa: E402


def evaluate_run(run_dir, overrides=None, device=None):
    """The evaluation as evaluate.py and train.py call it: the run's corpus located by Hydra."""
    return evaluate_with(run_dir, overrides, device, corpus_manifests=resolve_manifests)


CONF = Path(__file__).resolve().parents[2] / "conf"
STEPS = 40  # 4 epochs of 10 batches


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory):
    return tmp_path_factory.mktemp("synth_cache")


def tiny_overrides(loss: str, run_dir: Path, corpus_root: Path, method: str) -> list[str]:
    return [
        f"loss={loss}", f"run_dir={run_dir}", "trainer.accelerator=cpu", f"trainer.max_steps={STEPS}",
        "trainer.log_every_n_steps=1", "checkpoint.every_n_train_steps=1000",
        f"data.corpus.root={corpus_root}", "data.corpus.num_train=40", "data.corpus.num_dev=6",
        "data.corpus.train_max_duration=2.0", "data.corpus.test_bucket_edges=[0,2,4]",
        "data.corpus.test_per_bucket=2", "data.corpus.num_speakers=2", "data.corpus.workers=1",
        "data.max_batch_seconds=20", "data.features.num_mel_bins=20",
        "encoder=transformer", "encoder.d_model=32", "encoder.n_heads=2", "encoder.n_layers=1",
        "encoder.ffn_dim=64", "frontend.channels=8",
        "decoder.n_layers=1", "decoder.n_heads=2", "decoder.ffn_dim=64",
        "optim.warmup_steps=5", "optim.lr=3e-3",
        f"decode.method={method}", "decode.beam=2", "eval.n_boot=20", "eval.edges=[0,2,4]",
    ]


def run_tiny(loss: str, run_dir: Path, corpus_root: Path, method: str) -> Path:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("train", overrides=tiny_overrides(loss, run_dir, corpus_root, method))
    assert cfg.loss.name == loss
    return train(cfg)


def losses_by_epoch(run_dir: Path, key: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = defaultdict(list)
    with open(run_dir / "logs" / "metrics.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row.get(key):
                out[int(float(row["epoch"]))].append(float(row[key]))
    return dict(out)


def assert_loss_decreases(run_dir: Path) -> None:
    train_loss = losses_by_epoch(run_dir, "train/loss")
    assert len(train_loss) >= 3, f"expected several epochs, got {sorted(train_loss)}"
    first, last = train_loss[min(train_loss)], train_loss[max(train_loss)]
    # an epoch visits the same utterances, so epoch means are comparable (single batches are not)
    assert sum(last) / len(last) < sum(first) / len(first)
    val = losses_by_epoch(run_dir, "val/loss")
    assert val[max(val)][0] < val[min(val)][0]


def assert_eval_files(run_dir: Path, method: str, loss: str) -> None:
    out = run_dir / "eval" / "test"
    for name in ("per_utt.jsonl", "buckets.csv", "buckets.md", "buckets.meta.json"):
        assert (out / name).is_file(), f"missing {name}"
    records = [json.loads(line) for line in (out / "per_utt.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all({"id", "ref", "hyp", "errors"} <= set(r) for r in records)
    meta = json.loads((out / "buckets.meta.json").read_text())
    assert meta["decode"]["method"] == method
    assert meta["loss"] == loss
    assert "bucket" in (out / "buckets.csv").read_text().splitlines()[0]


@pytest.mark.slow  # ~1.5 min each on 2 cores: .ci/run runs them after make test
def test_seq2seq_trains_and_decodes_with_attention(tmp_path, corpus_root):
    run_dir = run_tiny("seq2seq", tmp_path / "s2s", corpus_root, "attention")
    assert_loss_decreases(run_dir)
    header = (run_dir / "logs" / "metrics.csv").read_text().splitlines()[0]
    assert "train/att" in header and "train/ctc" not in header  # no CTC head, no CTC loss
    assert_eval_files(run_dir, "attention", "seq2seq")


@pytest.mark.slow  # ~1.5 min each on 2 cores: .ci/run runs them after make test
def test_hybrid_trains_and_decodes_joint_and_attention(tmp_path, corpus_root):
    run_dir = run_tiny("hybrid", tmp_path / "hyb", corpus_root, "joint")
    assert_loss_decreases(run_dir)
    header = (run_dir / "logs" / "metrics.csv").read_text().splitlines()[0]
    assert "train/att" in header and "train/ctc" in header
    assert_eval_files(run_dir, "joint", "hybrid")
    evaluate_run(run_dir, {"decode": {"method": "attention", "beam": 2, "ctc_weight": 0.3, "length_penalty": 1.0,
                                      "max_len_ratio": 1.0},
                           "eval": {"n_boot": 20, "edges": [0, 2, 4]}})
    assert_eval_files(run_dir, "attention", "hybrid")
