"""Tiny end-to-end runs of the transducer heads on the generated corpus: loss=transducer trains,
its loss falls, evaluation (greedy, modified beam search, chunked, the window remedy) scores every
test utterance once; a resume continues it and a fine-tune starts from it; loss=hybrid_transducer
(LSTM prediction network) trains both heads and decodes with either. One slow run trains until
the CER is far below 100 %."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from asr_pe.data.manifest import read_manifest
from asr_pe.evaluation.pipeline import evaluate_run as evaluate_with
from asr_pe.training.data import resolve_manifests
from asr_pe.training.train import train

from e2e_helpers import TINY_MODEL, compose_train, synth_overrides

TINY_TRANSDUCER = ["loss.transducer.embed_dim=16", "loss.transducer.joiner_dim=24", "loss.transducer.lstm_hidden=16",
                   "loss.transducer.dropout=0.0", "encoder=transformer", "pe=rope", "data.spec_augment=null", "threads=1"]


def evaluate_run(run_dir, overrides=None, device=None):
    return evaluate_with(run_dir, overrides, device, corpus_manifests=resolve_manifests)


def epoch_means(run_dir: Path, key: str) -> dict[int, float]:
    with open(run_dir / "logs" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get(key)]
    by: dict[int, list[float]] = {}
    for r in rows:
        by.setdefault(int(float(r["epoch"])), []).append(float(r[key]))
    full = len(by[0])
    return {e: sum(v) / len(v) for e, v in by.items() if len(v) == full}  # complete epochs only


def read_manifest_of(run_dir: Path):
    """The run's test manifest (what every evaluation must score once each)."""
    tests = resolve_manifests(OmegaConf.load(run_dir / "config.yaml").data)["test"]
    return read_manifest(tests["test"] if isinstance(tests, dict) else tests)


def manifest_ids(run_dir: Path) -> list[str]:
    return [u.id for u in read_manifest_of(run_dir)]


def assert_every_utterance_scored(out: Path, ids: list[str], method: str) -> list[dict]:
    for name in ("per_utt.jsonl", "buckets.csv", "buckets.md", "buckets.meta.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, f"{out}: missing {name}"
    recs = [json.loads(line) for line in (out / "per_utt.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in recs) == sorted(ids)  # every utterance of the manifest once
    meta = json.loads((out / "buckets.meta.json").read_text())
    assert meta["utterances"] == len(ids) and meta["decode"]["method"] == method
    rows = list(csv.DictReader(open(out / "buckets.csv")))
    assert sum(int(r["utterances"]) for r in rows if r["bucket"] != "all") == len(ids)
    assert [int(r["utterances"]) for r in rows if r["bucket"] == "all"] == [len(ids)]
    return recs


def test_transducer_trains_decodes_resumes_and_fine_tunes(tiny_synth_root, tmp_path):
    run = tmp_path / "rnnt"
    base = TINY_MODEL + synth_overrides(tiny_synth_root) + TINY_TRANSDUCER + [
        "loss=transducer", "checkpoint.every_n_train_steps=1000", "decode.method=transducer_greedy"]
    train(compose_train(base + [f"run_dir={run}", "trainer.max_steps=30"]))
    losses = epoch_means(run, "train/loss")
    assert len(losses) >= 4 and losses[max(losses)] < 0.9 * losses[0], f"transducer loss did not fall: {losses}"
    header = (run / "logs" / "metrics.csv").read_text().splitlines()[0]
    assert "train/transducer" in header and "train/ctc" not in header
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")["state_dict"]
    assert any(k.startswith("model.transducer.predictor.conv") for k in state)  # the stateless predictor
    assert not any(k.startswith("model.ctc_head") or k.startswith("model.decoder") for k in state)
    ids = manifest_ids(run)
    assert len(ids) == 6
    assert_every_utterance_scored(run / "eval" / "test", ids, "transducer_greedy")
    for decode, ev, folder, method in (
        ({"method": "transducer_beam", "beam": 3}, {"suffix": "_beam"}, "test_beam", "transducer_beam"),
        ({"method": "greedy"}, {"suffix": "_plain"}, "test_plain", "transducer_greedy"),  # no CTC head: its own
        ({"method": "transducer_greedy"}, {"mode": "chunked", "chunk_s": 1.0, "overlap_s": 0.5, "suffix": "_chunked"}, "test_chunked",
         "transducer_greedy"),
        ({"method": "transducer_greedy"}, {"remedy": "window:0.5", "train_length_s": 0.5}, "test_window0p5",
         "transducer_greedy"),
    ):
        results = evaluate_run(run, {"decode": decode, "eval": {"n_boot": 10, "checkpoint": "last", **ev}})
        (name,) = results
        assert name == folder, results.keys()
        assert_every_utterance_scored(run / "eval" / name, ids, method)
    # transcribe.py's path decodes one file as the evaluation did (same checkpoint, same search)
    from asr_pe.inference.transcribe import transcribe_file

    first = read_manifest_of(run)[0]
    out = transcribe_file(run, first.audio_filepath, checkpoint="last", device="cpu", decode={"method": "greedy"})
    plain = {r["id"]: r["hyp"] for r in map(json.loads, (run / "eval" / "test_plain" / "per_utt.jsonl").open())}
    assert out["decode"] == "transducer_greedy" and out["text"] == plain[first.id]
    # an attention method on a transducer is one clear error before decoding
    from asr_pe.errors import ConfigError

    with pytest.raises(ConfigError, match="transducer head, not an attention decoder"):
        evaluate_run(run, {"decode": {"method": "joint"}, "eval": {"checkpoint": "last"}})
    # resume: the head is part of the checkpoint like any module
    train(compose_train(base + [f"run_dir={run}", "trainer.max_steps=32", "resume=true", "eval_after_train=false"]))
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")["global_step"] == 32
    # fine-tune from it: the transducer's weights are loaded (init_from checks the loss section too)
    ft = tmp_path / "ft"
    train(compose_train(base + [f"run_dir={ft}", f"init_from={run}/checkpoints/last.ckpt", "trainer.max_steps=2",
                                "eval_after_train=false"]))
    assert json.loads((ft / "run_info.json").read_text())["init_from"]["global_step"] == 32


def test_hybrid_transducer_with_lstm_trains_both_heads(tiny_synth_root, tmp_path):
    run = tmp_path / "hyb"
    train(compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + TINY_TRANSDUCER + [
        "loss=hybrid_transducer", "loss.transducer.predictor=lstm", f"run_dir={run}", "trainer.max_steps=30",
        "checkpoint.every_n_train_steps=1000", "decode.method=transducer_beam", "decode.beam=2"]))
    header = (run / "logs" / "metrics.csv").read_text().splitlines()[0]
    assert "train/transducer" in header and "train/ctc" in header
    losses = epoch_means(run, "train/loss")
    assert losses[max(losses)] < losses[0]
    with open(run / "logs" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("train/loss")]
    r = rows[-1]  # loss = 0.3 CTC + 0.7 transducer
    assert float(r["train/loss"]) == pytest.approx(0.3 * float(r["train/ctc"]) + 0.7 * float(r["train/transducer"]),
                                                   rel=1e-4)
    ids = manifest_ids(run)
    assert_every_utterance_scored(run / "eval" / "test", ids, "transducer_beam")
    evaluate_run(run, {"decode": {"method": "greedy"}, "eval": {"n_boot": 10, "suffix": "_ctc"}})
    assert_every_utterance_scored(run / "eval" / "test_ctc", ids, "greedy")  # the CTC head


@pytest.mark.slow  # ~4-6 min on 2 busy cores (600 steps)
def test_transducer_learns_the_corpus(tiny_synth_root, tmp_path):
    run = tmp_path / "rnnt_long"
    train(compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + TINY_TRANSDUCER + [
        "loss=transducer", f"run_dir={run}", "trainer.max_steps=600", "checkpoint.every_n_train_steps=1000",
        "encoder.d_model=64", "encoder.ffn_dim=128", "loss.transducer.joiner_dim=64", "loss.transducer.embed_dim=32",
        "decode.method=transducer_greedy", "trainer.check_val_every_n_epoch=50",
        "optim.schedule=cosine", "optim.warmup_steps=30", "optim.lr=2e-3"]))
    recs = assert_every_utterance_scored(run / "eval" / "test", manifest_ids(run), "transducer_greedy")
    cer = 100.0 * sum(r["char_errors"] for r in recs) / sum(r["ref_chars"] for r in recs)
    # an empty or untrained output scores ~100 %; 32 training utterances of the tiny corpus take this
    # model to ~53 % on unseen test utterances in 600 steps (a noam schedule there: 82 %)
    assert cer < 65.0, f"transducer test CER {cer:.1f} %"


@pytest.mark.slow  # two processes start Lightning: ~2 min on 2 busy cores
def test_transducer_under_ddp_two_cpu_processes(tiny_synth_root, tmp_path):
    """trainer=ddp (gloo, 2 processes): the transducer head is one more module of the model, its
    gradients all-reduced with the rest; rank 0 writes the checkpoint and scores every utterance."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    run = tmp_path / "ddp"
    r = subprocess.run([sys.executable, "train.py", "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
                        "trainer.precision=32-true", "trainer.max_steps=3", f"run_dir={run}", "loss=transducer",
                        "data.num_workers=0", "decode.method=transducer_greedy",
                        *TINY_MODEL, *synth_overrides(tiny_synth_root), *TINY_TRANSDUCER],
                       cwd=repo, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(repo)})
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    assert ckpt["global_step"] == 3 and any(k.startswith("model.transducer.joiner") for k in ckpt["state_dict"])
    assert_every_utterance_scored(run / "eval" / "test", manifest_ids(run), "transducer_greedy")
