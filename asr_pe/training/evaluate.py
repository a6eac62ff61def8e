"""Evaluate a trained run: decode test manifests, write per_utt.jsonl, buckets.csv, buckets.md.

``evaluate_run(run_dir, cfg_overrides)`` loads the run's saved config, tokenizer, CMVN and
checkpoint (``weights_only=True``; `asr_pe.inference.run_loading.load_run`), decodes every
selected test set (`asr_pe.inference.decode.decode_batch`) and writes
``<run_dir>/eval/<test set>/`` atomically. The decoding method is recorded in the files.

Evaluation settings (``eval:``) are resolved the same way for the evaluation that follows
``train.py`` and for ``evaluate.py run=<dir>``: `EVAL_DEFAULTS` (conf/eval/default.yaml), then
the run's own ``config.yaml`` ``eval:`` section, then the caller's values that are not null
(`eval_settings`). ``evaluate.py`` passes only the ``eval`` keys given on its command line, so
a later evaluation buckets, blocks and decodes on the device exactly as the one after
training did unless a key is given.

Every selected test manifest is read before anything is decoded; a missing one or one
without utterances stops the evaluation with one error naming the file (``EmptyTestSetError``),
never a traceback from the sampler, and no set is silently skipped: a result table that lacks a
set it was asked for would be read as complete.

Every utterance of a selected manifest is scored exactly once, whatever launched the process:
the sampler never shards (a process group left over from DDP training would otherwise give this
process a 1/world_size share of the batches), and the scored ids are compared with the
manifest's before anything is written (`asr_pe.evaluation.coverage`). Each result records the
checkpoint it came from (name, training step, SHA-256 of the file;
`asr_pe.evaluation.provenance`), so a result of an older checkpoint can be told and redone.
"""

from __future__ import annotations

import logging
import math
import re
import time
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

from asr_pe.data.dataset import ASRDataset, collate
from asr_pe.data.manifest import ManifestError, Utterance
from asr_pe.data.sampler import DurationBucketSampler
from asr_pe.evaluation.buckets import (
    DOUBLING,
    bucket_table,
    describe_edges,
    format_table,
    resolve_edges,
    write_bucket_files,
    write_per_utt,
)
from asr_pe.evaluation.coverage import check_scored_every_utterance
from asr_pe.evaluation.in_context import in_context_pairs, write_in_context
from asr_pe.evaluation.scoring import score_record
from asr_pe.inference.decode import decode_batch
from asr_pe.inference.device import resolve_device
from asr_pe.inference.long_form import resolve_block_size
from asr_pe.inference.remedies import (
    RemedyError,
    check_remedies,
    one_by_one,
    parse_remedies,
    per_utterance,
    remedies_applied,
    remedy_label,
    remedy_suffix,
    run_train_seconds,
)
from asr_pe.inference.run_loading import load_run, load_run_config
from asr_pe.inference.transcribe import MODES, make_encode_fn

from .config_checks import check_eval_inputs
from .data import read_manifests, resolve_manifests, resolve_test_sets
from .provenance import checkpoint_record
from .run_dir import pe_label

log = logging.getLogger(__name__)

# The evaluation settings when neither the run's config.yaml nor the caller sets them: the one
# definition in conf/eval/default.yaml (the group train.py and evaluate.py compose).
EVAL_DEFAULTS: dict[str, Any] = OmegaConf.to_container(
    OmegaConf.load(Path(__file__).resolve().parents[2] / "conf" / "eval" / "default.yaml"))


class EvalSettingsError(ValueError):
    """A bad ``eval.*`` setting (unknown key, bad edges, block size, mode, suffix or number)."""


class EmptyTestSetError(ManifestError):
    """A selected test manifest holds no utterances; ``str(e) == "<path>: <reason>"``."""

    def __init__(self, path: str | Path, name: str):
        reason = (f"test manifest of test set {name!r} has no utterances; re-run the recipe's prepare "
                  "stage (or leave this set out with data.test=...)")
        # a ManifestError (what the entry points report in one line) about the whole file, line 0
        ValueError.__init__(self, f"{path}: {reason}")
        self.path, self.line, self.reason = str(path), 0, reason


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value


def eval_settings(run_eval: Mapping[str, Any] | None, override_eval: Mapping[str, Any] | None) -> dict[str, Any]:
    """`EVAL_DEFAULTS` < the run's own ``eval:`` (its config.yaml) < the caller's non-null values.

    A null at either level means "not set here" (a run's ``train_length_s: null`` keeps the default). The caller's keys must be known ones (a typo would otherwise be ignored)."""
    run_eval, override_eval = dict(_plain(run_eval) or {}), dict(_plain(override_eval) or {})
    unknown = sorted(set(override_eval) - set(EVAL_DEFAULTS))
    if unknown:
        raise EvalSettingsError(f"unknown eval setting(s) {unknown}; known: {sorted(EVAL_DEFAULTS)}")
    settings = dict(EVAL_DEFAULTS)
    # keys of older run configs that this version no longer has are left out
    for source in (run_eval, override_eval):
        settings.update({k: v for k, v in source.items() if v is not None and k in EVAL_DEFAULTS})
    check_eval_settings(settings)
    return settings


def check_eval_settings(settings: Mapping[str, Any]) -> None:
    """Reject bad settings before any model is loaded or audio decoded (EvalSettingsError)."""
    try:
        resolve_edges(settings["edges"], [])
        resolve_block_size(settings["block_size"], 1, 1)
    except ValueError as e:
        raise EvalSettingsError(f"eval: {e}") from None
    try:
        parse_remedies(settings["remedy"])
    except RemedyError as e:
        raise EvalSettingsError(str(e)) from None
    if settings["train_length_s"] is not None and not (
            isinstance(settings["train_length_s"], (int, float)) and settings["train_length_s"] > 0):
        raise EvalSettingsError(f"eval.train_length_s={settings['train_length_s']!r}: must be a number of seconds > 0")
    if settings["mode"] not in MODES:
        raise EvalSettingsError(f"eval.mode={settings['mode']!r}: choose one of {MODES}")
    # eval.suffix names a folder beside the others (eval/test, eval/test_joint, ...)
    if not re.fullmatch(r"[A-Za-z0-9_.+-]*", str(settings["suffix"])):
        raise EvalSettingsError(f"eval.suffix={settings['suffix']!r}: use letters, digits and _ . + - only "
                                "(it names a folder)")
    for key, low, strict in (("n_boot", 0, False), ("batch_seconds", 0, True), ("chunk_s", 0, True),
                             ("overlap_s", 0, False)):
        value = settings[key]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or value < low or (strict and value == low):
            raise EvalSettingsError(f"eval.{key}={value!r}: must be a number {'>' if strict else '>='} {low}")


def read_test_sets(test_sets: Mapping[str, str]) -> dict[str, list[Utterance]]:
    """Read every selected test manifest (in order); a missing or empty one is one clear error."""
    out = {}
    for name, path in test_sets.items():
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: test manifest of test set {name!r} not found; run the recipe's "
                                    "prepare stage first")
        utts = read_manifests([path])
        if not utts:
            raise EmptyTestSetError(path, name)
        out[name] = utts
    return out


def evaluate_run(run_dir: str | Path, cfg_overrides: Mapping[str, Any] | DictConfig | None = None,
                 device: str | None = None) -> dict[str, list[dict]]:
    """Decode and score the run's test sets; returns {test set + suffix: bucket rows}.

    ``cfg_overrides``: ``decode``, ``eval`` (see `eval_settings`) and ``data.test``;
    ``device`` (auto | cpu | cuda[:N]), when given, wins over ``eval.device``."""
    run_dir = Path(run_dir)
    over = OmegaConf.create(OmegaConf.to_container(cfg_overrides, resolve=True) if isinstance(cfg_overrides, DictConfig)
                            else dict(cfg_overrides or {}))
    cfg = load_run_config(run_dir)
    settings = eval_settings(cfg.get("eval"), over.get("eval"))
    if device is not None:
        settings["device"] = device
    device = resolve_device(settings["device"])
    # eval.suffix keeps several evaluations of one set side by side (eval/test, eval/test_joint,
    # eval/test_chunked20): without it a second decoding method would replace the first's files
    suffix = str(settings["suffix"])
    decode = (OmegaConf.to_container(over.decode, resolve=True) if over.get("decode") is not None
              else {"method": "greedy"})
    data_cfg = cfg.data.copy()
    if over.get("data") is not None and over.data.get("test") is not None:
        data_cfg.test = over.data.test
    test_sets = resolve_test_sets(data_cfg, resolve_manifests(data_cfg))
    test_utts = read_test_sets(test_sets)  # every set checked before the first is decoded
    check_eval_inputs(cfg, decode, test_utts, settings, run_dir)  # decode settings, audio vs manifest, PE table
    cfg, model, tokenizer, features, cmvn, ckpt = load_run(run_dir, settings["checkpoint"], device)
    checkpoint = checkpoint_record(ckpt)  # written into every result of this call
    if decode.get("method", "greedy") in ("greedy", "beam") and model.ctc_head is None:
        decode["method"] = "attention"
        log.info("model has no CTC head: decoding with the attention decoder")
    block_size = settings["block_size"]
    if str(block_size) != "auto":
        # chunked mode runs model.encoder itself: an explicit block size applies there too (auto
        # leaves its chunks, at most chunk_s + 2·overlap_s long, unblocked)
        model.encoder.set_block_size(resolve_block_size(block_size, 1, 1))
    # eval.mode: full (one pass per utterance; front end in exact time chunks for long inputs,
    # attention in query blocks sized from the length with block_size=auto) or chunked (chunk_s
    # pieces with overlap_s context each side); see asr_pe/inference.
    mode = str(settings["mode"])
    encode = make_encode_fn(model, mode, block_size=block_size, chunk_s=float(settings["chunk_s"]),
                            overlap_s=float(settings["overlap_s"]))
    # eval.remedy: switched on around the decoding below, results in eval/<set>_<remedy> unless
    # eval.suffix names the folder
    remedies = parse_remedies(settings["remedy"])
    train_s = None
    if remedies:
        check_remedies(model, remedies, pe_label(cfg.pe))
        train_s = float(settings["train_length_s"] or run_train_seconds(run_dir))
        suffix = suffix or remedy_suffix(remedies)
        if per_utterance(remedies):
            encode = one_by_one(encode)
    edges_spec = settings["edges"]
    remedy_meta = {"remedy": remedy_label(remedies), "train_length_s": train_s} if remedies else {}
    results = {}
    with remedies_applied(model, remedies, train_s):
        for name, path in test_sets.items():
            utts = test_utts[name]
            ds = ASRDataset(utts, None, features, cmvn, None)
            # num_replicas=1, rank=0: this process decodes every batch, even inside a process group
            # (after DDP training the sampler would otherwise take this rank's share only)
            sampler = DurationBucketSampler([u.duration for u in utts], float(settings["batch_seconds"]),
                                            num_buckets=1, shuffle=False, num_replicas=1, rank=0)
            loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate)
            records, t0 = [], time.time()
            for batch in loader:
                hyps = decode_batch(model, batch, tokenizer, decode, device, encode=encode)
                for uid, dur, ref, hyp in zip(batch["ids"], batch["durations"].tolist(), batch["texts"], hyps):
                    records.append(score_record(uid, dur, ref, hyp))
            check_scored_every_utterance([r["id"] for r in records], [u.id for u in utts],
                                         what=f"test set {name!r} ({path})")
            by_id = {u.id: i for i, u in enumerate(utts)}
            records.sort(key=lambda r: by_id[r["id"]])  # manifest order
            # edges from the scored durations themselves (the batch's float32 copies of the manifest's)
            edges = resolve_edges(edges_spec, [r["duration"] for r in records])
            past_last = sum(r["duration"] >= edges[-1] for r in records)
            if past_last:
                log.warning("%s: %d of %d utterances are at or past the last bucket edge %g s and share the open "
                            "bucket; eval.edges=%s gives every length its own bucket", name, past_last, len(records),
                            edges[-1], DOUBLING)
            rows = bucket_table(records, edges, n_boot=int(settings["n_boot"]), seed=0)
            out = run_dir / "eval" / f"{name}{suffix}"
            out.mkdir(parents=True, exist_ok=True)
            meta = {"run": str(run_dir), "pe": pe_label(cfg.pe), "loss": cfg.loss.name, "test_set": name,
                    "manifest": str(path), "utterances": len(records), "checkpoint": checkpoint,
                    "decode": decode, "mode": mode,
                    **({"chunk_s": settings["chunk_s"], "overlap_s": settings["overlap_s"]} if mode == "chunked"
                       else {"block_size": block_size}),
                    "edges": describe_edges(edges_spec, edges), "device": device, **remedy_meta,
                    "seconds": round(time.time() - t0, 1)}
            write_per_utt(records, out / "per_utt.jsonl")
            write_bucket_files(rows, out, meta=meta)
            print(f"\n[asr_pe] {name}: pe={meta['pe']} loss={meta['loss']} decode={decode.get('method')} "
                  f"device={device}" + (f" remedy={remedy_meta['remedy']}" if remedy_meta else ""))
            print(format_table(rows))
            print(f"bucket edges (s): {meta['edges']}; buckets without utterances have no row")
            results[f"{name}{suffix}"] = rows
    # a long-form set evaluated with the set holding its parts: the in-context ratio beside it
    for long, (alone, parts) in in_context_pairs(test_utts, test_sets).items():
        ic = write_in_context(run_dir / "eval" / f"{long}{suffix}", run_dir / "eval" / f"{alone}{suffix}",
                              parts, alone_set=alone, n_boot=int(settings["n_boot"]))
        print(f"[asr_pe] {long}: in-context ratio {ic.ratio:.2f}x [{ic.ci_low:.2f}, {ic.ci_high:.2f}] "
              f"(whole {ic.whole:.2f} % / alone on {alone} {ic.alone:.2f} %, {len(ic.rows)} recordings)")
    return results
