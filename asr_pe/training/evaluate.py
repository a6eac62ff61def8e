"""Evaluate a trained run: decode test manifests, write per_utt.jsonl, buckets.csv, buckets.md.

``evaluate_run(run_dir, cfg_overrides)`` loads the run's saved config, tokenizer, CMVN and
checkpoint (``weights_only=True``), decodes every selected test set and writes
``<run_dir>/eval/<test set>/`` atomically. The decoding method is recorded in the files.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from asr_pe.data.dataset import ASRDataset, collate
from asr_pe.data.features import GlobalCMVN
from asr_pe.data.sampler import DurationBucketSampler
from asr_pe.data.tokenizer import load_tokenizer
from asr_pe.decoding.ctc import ctc_beam_batch, ctc_greedy
from asr_pe.evaluation.buckets import bucket_table, format_table, write_bucket_files, write_per_utt
from asr_pe.evaluation.scoring import score_record
from asr_pe.models.asr import ASRModel, build_asr_model

from .data import feature_extractor, read_manifests, resolve_manifests, resolve_test_sets
from .run_dir import pe_label

log = logging.getLogger(__name__)

DECODE_METHODS = ("greedy", "beam", "attention", "joint")


def load_checkpoint_state(path: Path) -> dict[str, torch.Tensor]:
    """The model's state dict from a Lightning checkpoint, loaded with weights_only=True."""
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    state = ckpt.get("state_dict", ckpt)
    return {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}


def load_run(run_dir: str | Path, checkpoint: str = "best", device: str = "cpu"):
    """-> (config, model in eval mode, tokenizer, features, cmvn) of a trained run."""
    run_dir = Path(run_dir)
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    cfg = OmegaConf.load(cfg_path)
    ckpt_dir = run_dir / "checkpoints"
    candidates = [ckpt_dir / f"{checkpoint}.ckpt"] + ([ckpt_dir / "last.ckpt"] if checkpoint == "best" else [])
    ckpt = next((p for p in candidates if p.exists()), None)
    if ckpt is None:
        raise FileNotFoundError(f"no checkpoint {checkpoint!r} in {ckpt_dir} (looked for {[p.name for p in candidates]})")
    tokenizer = load_tokenizer(run_dir / "tokenizer.json")
    from .train import model_kwargs

    model = build_asr_model(**model_kwargs(cfg, tokenizer.vocab_size))
    missing, unexpected = model.load_state_dict(load_checkpoint_state(ckpt), strict=False)
    if missing or unexpected:
        raise RuntimeError(f"{ckpt}: checkpoint does not match the run's config: missing {missing[:5]}, "
                           f"unexpected {unexpected[:5]}")
    model.to(device).eval()
    return cfg, model, tokenizer, feature_extractor(cfg.data), GlobalCMVN.load(run_dir / "cmvn.json"), ckpt


@torch.no_grad()
def decode_batch(model: ASRModel, batch: dict, tokenizer, decode: Mapping[str, Any], device: str,
                 encode=None) -> list[str]:
    """``encode(features, lengths) -> (enc, enc_lengths)`` replaces ``model.encode`` (e.g. the
    full-context or chunked long-form encoders of ``asr_pe.inference``)."""
    method = decode.get("method", "greedy")
    if model.ctc_head is None and method in ("greedy", "beam"):
        raise ValueError("this model has no CTC head; use decode.method=attention")
    feats = batch["features"].to(device)
    lengths = batch["feature_lengths"].to(device)
    enc, enc_lengths = (encode or model.encode)(feats, lengths)
    if method == "greedy":
        hyps = ctc_greedy(model.ctc_log_probs(enc), enc_lengths, blank=tokenizer.blank_id)
    elif method == "beam":
        nbest = ctc_beam_batch(model.ctc_log_probs(enc).cpu(), enc_lengths.cpu(), beam=int(decode.get("beam", 10)),
                               blank=tokenizer.blank_id)
        hyps = [n[0][0] if n else [] for n in nbest]
    elif method in ("attention", "joint"):
        from asr_pe.decoding.attention import attention_decode  # seq2seq / hybrid heads

        hyps = attention_decode(model, enc, enc_lengths, tokenizer, decode)
    else:
        raise ValueError(f"decode.method={method!r}; choose one of {DECODE_METHODS}")
    return [tokenizer.decode(h) for h in hyps]


def evaluate_run(run_dir: str | Path, cfg_overrides: Mapping[str, Any] | DictConfig | None = None,
                 device: str = "cpu") -> dict[str, list[dict]]:
    """Decode and score the run's test sets; returns {test set: bucket rows}."""
    run_dir = Path(run_dir)
    over = OmegaConf.create(OmegaConf.to_container(cfg_overrides, resolve=True) if isinstance(cfg_overrides, DictConfig)
                            else dict(cfg_overrides or {}))
    eval_cfg = over.get("eval") or {}
    # eval.suffix keeps several evaluations of one set side by side (eval/test, eval/test_joint,
    # eval/test_chunked20): without it a second decoding method would replace the first's files
    suffix = str(eval_cfg.get("suffix") or "")
    if not re.fullmatch(r"[A-Za-z0-9_.+-]*", suffix):
        raise ValueError(f"eval.suffix={suffix!r}: use letters, digits and _ . + - only (it names a folder)")
    decode = (OmegaConf.to_container(over.decode, resolve=True) if over.get("decode") is not None
              else {"method": "greedy"})
    cfg, model, tokenizer, features, cmvn, ckpt = load_run(run_dir, eval_cfg.get("checkpoint", "best"), device)
    if decode.get("method", "greedy") in ("greedy", "beam") and model.ctc_head is None:
        decode["method"] = "attention"
        log.info("model has no CTC head: decoding with the attention decoder")
    if eval_cfg.get("block_size") and str(eval_cfg["block_size"]) != "auto":
        model.encoder.set_block_size(int(eval_cfg["block_size"]))
    # eval.mode: full (one pass per utterance; front end in exact time chunks for long inputs)
    # or chunked (chunk_s pieces with overlap_s context each side); see asr_pe/inference.
    from asr_pe.inference.transcribe import make_encode_fn

    mode = str(eval_cfg.get("mode", "full"))
    encode = make_encode_fn(model, mode, block_size=eval_cfg.get("block_size"),
                            chunk_s=float(eval_cfg.get("chunk_s", 20.0)), overlap_s=float(eval_cfg.get("overlap_s", 4.0)))
    data_cfg = cfg.data.copy()
    if over.get("data") is not None and over.data.get("test") is not None:
        data_cfg.test = over.data.test
    test_sets = resolve_test_sets(data_cfg, resolve_manifests(data_cfg))
    edges = list(eval_cfg.get("edges", [0, 2, 4, 8, 16, 32, 64]))
    results = {}
    for name, path in test_sets.items():
        utts = read_manifests([path])
        ds = ASRDataset(utts, None, features, cmvn, None)
        sampler = DurationBucketSampler([u.duration for u in utts], float(eval_cfg.get("batch_seconds", 300)),
                                        num_buckets=1, shuffle=False)
        loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate)
        records, t0 = [], time.time()
        for batch in loader:
            hyps = decode_batch(model, batch, tokenizer, decode, device, encode=encode)
            for uid, dur, ref, hyp in zip(batch["ids"], batch["durations"].tolist(), batch["texts"], hyps):
                records.append(score_record(uid, dur, ref, hyp))
        by_id = {u.id: i for i, u in enumerate(utts)}
        records.sort(key=lambda r: by_id[r["id"]])  # manifest order
        rows = bucket_table(records, edges, n_boot=int(eval_cfg.get("n_boot", 1000)), seed=0)
        out = run_dir / "eval" / f"{name}{suffix}"
        out.mkdir(parents=True, exist_ok=True)
        meta = {"run": str(run_dir), "pe": pe_label(cfg.pe), "loss": cfg.loss.name, "test_set": name,
                "manifest": str(path), "checkpoint": ckpt.name, "decode": decode, "mode": mode,
                **({"chunk_s": eval_cfg.get("chunk_s", 20.0), "overlap_s": eval_cfg.get("overlap_s", 4.0)}
                   if mode == "chunked" else {}),
                "seconds": round(time.time() - t0, 1)}
        write_per_utt(records, out / "per_utt.jsonl")
        write_bucket_files(rows, out, meta=meta)
        print(f"\n[asr_pe] {name}: pe={meta['pe']} loss={meta['loss']} decode={decode.get('method')}")
        print(format_table(rows))
        results[f"{name}{suffix}"] = rows
    return results
