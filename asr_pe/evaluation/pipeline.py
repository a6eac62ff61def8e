"""Evaluate a trained run: decode test manifests, write per_utt.jsonl, buckets.csv, buckets.md.

``evaluate_run(run_dir, cfg_overrides, corpus_manifests=...)`` is the one evaluation of a run
folder: ``evaluate.py``, the evaluation after ``train.py``, the length ladder
(`asr_pe.evaluation.ladder`) and the recipes' evaluation stage (through ``evaluate.py``) all call
it. It loads the run's saved config, tokenizer, CMVN and checkpoint (``weights_only=True``;
`asr_pe.inference.run_loading.load_run`), decodes every selected test set
(`asr_pe.inference.decode.decode_batch`) and writes ``<run_dir>/eval/<test set><suffix>/``
(`asr_pe.run_folder.result_dir`) atomically. The decoding method is recorded in the files.

Where the run's corpus is comes from its config's ``data.corpus`` (a ``_target_`` that builds or
finds the corpus): the caller passes ``corpus_manifests(data_cfg)``, which the entry layer
implements with Hydra's ``instantiate`` (`asr_pe.training.data.resolve_manifests`), so nothing
here knows Hydra or Lightning.

Evaluation settings (``eval:``) are resolved by `asr_pe.evaluation.settings.eval_settings`:
defaults < the run's own ``config.yaml`` < the caller's values that are not null.

Every selected test manifest is read before anything is decoded; a missing one or one
without utterances stops the evaluation with one error naming the file (``EmptyTestSetError``),
never a traceback from the sampler, and no set is silently skipped: a result table that lacks a
set it was asked for would be read as complete.

Every utterance of a selected manifest is scored exactly once, whatever launched the process:
the sampler never shards (a process group left over from DDP training would otherwise give this
process a 1/world_size share of the batches), and the scored ids are compared with the
manifest's before anything is written (`check_scored_every_utterance`). Each result records the
checkpoint it came from (name, training step, SHA-256 of the file;
`asr_pe.evaluation.provenance`), so a result of an older checkpoint can be told and redone, and
the settings its numbers follow from (``settings``; `asr_pe.evaluation.reuse.decoding_settings`).
With ``reuse`` (the length ladder) a set whose folder is complete and records the same checkpoint
bytes and settings is read back instead of decoded (`asr_pe.evaluation.reuse.stale_reason`).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Callable, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from asr_pe.errors import ConfigError, MissingFileError
from asr_pe.data.audio_checks import scan_audio
from asr_pe.data.dataset import ASRDataset, collate
from asr_pe.data.features import FbankExtractor
from asr_pe.data.manifest import ManifestError, Utterance, read_manifest
from asr_pe.data.sampler import DurationBucketSampler
from asr_pe.evaluation.buckets import (
    DOUBLING,
    bucket_table,
    describe_edges,
    format_table,
    read_bucket_csv,
    resolve_edges,
    write_bucket_files,
    write_per_utt,
)
from asr_pe.evaluation.in_context import in_context_pairs, write_in_context
from asr_pe.evaluation.provenance import checkpoint_record, read_meta
from asr_pe.evaluation.rate import Rate, rate_of
from asr_pe.evaluation.reuse import SETTINGS, Reuse, decoding_settings, stale_reason
from asr_pe.evaluation.scoring import score_record
from asr_pe.evaluation.settings import _plain, eval_settings
from asr_pe.inference.decode import check_decode_settings, decode_batch, effective_method
from asr_pe.inference.device import resolve_device
from asr_pe.inference.full_context import resolve_block_size
from asr_pe.inference.remedies import (
    check_remedies,
    one_by_one,
    parse_remedies,
    per_utterance,
    remedies_applied,
    remedy_label,
    remedy_suffix,
    run_train_seconds,
)
from asr_pe.inference.run_loading import EVALUATE_ANOTHER, encoder_frames_fn, load_run, load_run_config
from asr_pe.inference.transcribe import make_encode_fn
from asr_pe.run_lock import run_lock
from asr_pe.run_folder import (BUCKETS_CSV, BUCKETS_META, PER_UTT, config_path, eval_dir, find_checkpoint, pe_label,
                               result_dir, result_name)

log = logging.getLogger(__name__)

# data_cfg -> {"train": [paths], "dev": [paths], "test": {name: path}}: the run's corpus, located
# by the entry layer (Hydra's instantiate of data.corpus; asr_pe.training.data.resolve_manifests)
CorpusManifests = Callable[[DictConfig], Mapping[str, Any]]


class EmptyTestSetError(ManifestError):
    """A selected test manifest holds no utterances; ``str(e) == "<path>: <reason>"``."""

    def __init__(self, path: str | Path, name: str):
        reason = (f"test manifest of test set {name!r} has no utterances; re-run the recipe's prepare "
                  "stage (or leave this set out with data.test=...)")
        # a ManifestError (what the entry points report in one line) about the whole file, line 0
        ValueError.__init__(self, f"{path}: {reason}")
        self.path, self.line, self.reason = str(path), 0, reason


def resolve_test_sets(data_cfg: DictConfig, manifests: Mapping[str, Any]) -> dict[str, str]:
    """``data.test``: null (every test set of the corpus), a name, a path, or a list/mapping.

    A set's results live in ``eval/<name>``, so a name stands for one manifest: a path is named
    by its file stem, and a stem that is already the name of another file (another selected
    manifest, or one of the corpus's test sets) is refused rather than let one set's results
    replace the other's; ``data.test={name: path}`` names it."""
    sel, corpus = data_cfg.get("test"), dict(manifests["test"])
    if sel is None:
        return corpus
    if isinstance(sel, (DictConfig, Mapping)):
        chosen = [(str(k), str(v)) for k, v in sel.items()]
    else:
        chosen = []
        for item in [sel] if isinstance(sel, str) else list(sel):
            if item in corpus:
                chosen.append((item, corpus[item]))
            elif Path(item).exists():
                chosen.append((Path(item).stem, str(item)))
            else:
                raise MissingFileError(
                    f"data.test={item!r} is neither a test set of this corpus "
                    f"({sorted(corpus)}) nor an existing manifest file"
                )
    out: dict[str, str] = {}
    for name, path in chosen:
        other = out.get(name) or corpus.get(name)
        if other is not None and not _same_file(other, path):
            raise ConfigError(
                f"data.test: {path} would be scored as test set {name!r}, which is {other}; results are "
                f"kept per name (eval/{name}), so give it another: data.test={{my_{name}:{path}}}")
        out[name] = path
    return out


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve() or Path(a).samefile(b)
    except OSError:
        return False


def read_test_sets(test_sets: Mapping[str, str]) -> dict[str, list[Utterance]]:
    """Read every selected test manifest (in order); a missing or empty one is one clear error."""
    out = {}
    for name, path in test_sets.items():
        if not Path(path).is_file():
            raise MissingFileError(f"{path}: test manifest of test set {name!r} not found; run the recipe's "
                                    "prepare stage first")
        utts = read_manifest(path)
        if not utts:
            raise EmptyTestSetError(path, name)
        out[name] = utts
    return out


# ----------------------------------------------------------------------------- every utterance once
# A result table over part of a test set reads like one over all of it (a WER is a WER), and the
# part that goes missing is rarely random: a sharded sampler or a crashed batch drops whole batches,
# and the bucket sampler groups utterances by length, so the longest are what disappears. Every
# evaluation therefore compares the ids it scored with the manifest's before writing anything.

class IncompleteScoringError(RuntimeError):
    """The scored utterances are not exactly the manifest's (some missing, repeated or foreign)."""


def _some(ids: Iterable[str], n: int = 5) -> str:
    ids = sorted(ids)
    return ", ".join(ids[:n]) + (f", ... ({len(ids)} in all)" if len(ids) > n else "")


def check_scored_every_utterance(scored_ids: Iterable[str], manifest_ids: Iterable[str], *, what: str) -> None:
    """Raise `IncompleteScoringError` unless ``scored_ids`` holds each of ``manifest_ids`` exactly once
    and nothing else. ``what`` names the test set and its manifest in the message."""
    scored, wanted = Counter(scored_ids), Counter(manifest_ids)
    if scored == wanted:
        return
    missing = set(wanted) - set(scored)
    repeated = {i for i, c in scored.items() if c > 1}
    foreign = set(scored) - set(wanted)
    parts = [f"scored {sum(scored.values())} utterances, the manifest has {sum(wanted.values())}"]
    if missing:
        parts.append(f"missing: {_some(missing)}")
    if repeated:
        parts.append(f"scored more than once: {_some(repeated)}")
    if foreign:
        parts.append(f"not in the manifest: {_some(foreign)}")
    raise IncompleteScoringError(f"{what}: {'; '.join(parts)}; no result written")


# ----------------------------------------------------------------------------- a result's identity
# A result folder eval/<set><suffix>/ is the scoring of one manifest, decoded from one checkpoint
# with one set of settings; its buckets.meta.json records all three: "manifest" (the path) with
# settings.manifest_sha256 (its bytes), "checkpoint" (name, step, SHA-256; asr_pe.evaluation.provenance)
# and "settings" (asr_pe.evaluation.reuse.decoding_settings). Whether a folder can be reused is
# asr_pe.evaluation.reuse.stale_reason; whether the run is finished is derived from these records
# too (asr_pe.run_folder.eval_done).

IN_CONTEXT_FILES = ("in_context.json", "in_context.md")


def result_identity(folder: str | Path) -> dict[str, Any] | None:
    """``{"checkpoint", "settings"}`` as the folder's ``buckets.meta.json`` records them (None
    without a record): what every number computed from its per-utterance scores depends on."""
    meta = read_meta(folder)
    if meta is None:
        return None
    return {"checkpoint": meta.get("checkpoint"), "settings": meta.get("settings")}


def check_result_owner(folder: str | Path, manifest: str | Path, settings: Mapping[str, Any]) -> None:
    """Refuse to decode ``manifest`` into ``folder`` when the folder holds another manifest's results
    (its recorded path and bytes both differ): that would leave its name on another set's numbers.
    The same file regenerated (same path) or moved (same bytes) replaces it. ``settings`` is this
    decoding's settings record."""
    meta = read_meta(folder)
    if meta is None or not meta.get("manifest"):
        return
    recorded = meta.get("settings") if isinstance(meta.get("settings"), dict) else {}
    same_path = Path(str(meta["manifest"])).resolve() == Path(manifest).resolve()
    same_bytes = recorded.get("manifest_sha256") == settings.get("manifest_sha256")
    if not same_path and not same_bytes:
        raise ConfigError(
            f"{folder} holds the results of {meta['manifest']}, another manifest than {manifest}; "
            f"give this set another name (data.test={{<name>:{manifest}}}) or eval.suffix, or remove "
            f"{folder} to replace it")


def forget_in_context(run_dir: str | Path, result: str) -> None:
    """Remove the in-context files computed from result folder ``result`` (``eval/<result>``), as
    the long set or as the set of its parts alone: an in-context ratio records the identities of
    its two result folders, and is not left beside numbers it was not computed from."""
    for path in sorted(eval_dir(run_dir).glob("*/in_context.json")):
        folder = path.parent
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = {}
        record = record if isinstance(record, dict) else {}
        # files written before "inputs" was recorded name the alone set only
        depends = set(record["inputs"]) if isinstance(record.get("inputs"), dict) else {record.get("alone_set")}
        if folder.name == result or result in depends:
            for name in IN_CONTEXT_FILES:
                (folder / name).unlink(missing_ok=True)


# ----------------------------------------------------------------------------- input checks
# Checked before the model is loaded or anything decoded, so that an input that cannot work is one
# line naming the file and what to do (ConfigError) instead of a traceback in the middle of an
# evaluation.

def check_learned_pe_table(run_cfg: DictConfig, test_utts: Mapping[str, list[Utterance]],
                           settings: Mapping[str, Any], run_dir: str | Path) -> None:
    """A learned PE with ``policy: error`` stops at the first input past its table; say so
    before decoding, naming the longest such utterance and the keys that change it."""
    pe = _plain(run_cfg.get("pe")) or {}
    spec = pe.get("input") or {}
    if spec.get("name") != "learned" or spec.get("policy", "error") != "error":
        return
    max_len = int(spec.get("max_len", 2048))
    frames = encoder_frames_fn(run_cfg)
    window_s = None
    if settings.get("mode") == "chunked":
        window_s = float(settings["chunk_s"]) + 2 * float(settings["overlap_s"])  # what one pass sees
    # eval.tempo / eval.hop_ms: a slower tempo or a shorter hop gives more frames per recorded second
    run_hop = float(((_plain(run_cfg.get("data")) or {}).get("features") or {}).get("frame_shift_ms", 10.0))
    scale = rate_of(settings, run_hop).frames_per_audio_second(run_hop)
    for name, utts in test_utts.items():
        longest = max(utts, key=lambda u: u.duration)
        heard_s = longest.duration * scale
        seen_s = heard_s if window_s is None else min(heard_s, window_s)
        n = frames(seen_s)
        if n > max_len:
            where = longest.source or f"utterance {longest.id!r}"
            limit_s = 60.0 * max_len / frames(60.0)  # the table's length in seconds
            raise ConfigError(
                f"{where}: utterance {longest.id!r} of test set {name!r} ({seen_s:.1f} s = {n} encoder frames) is past "
                f"the run's learned PE table (pe.input.max_len={max_len}, about {limit_s:.3g} s, pe.input.policy=error); "
                f"leave the set out (data.test=...), use eval.mode=chunked with chunk_s + 2*overlap_s under "
                f"{limit_s:.3g} s, or set pe.input.policy=clamp or wrap in {config_path(run_dir)}")


def check_eval_inputs(run_cfg: DictConfig, decode: Mapping[str, Any], test_utts: Mapping[str, list[Utterance]],
                      settings: Mapping[str, Any], run_dir: str | Path) -> None:
    """Before the model is loaded: the decoding settings against the run's loss, each test set's
    audio against its manifest (`scan_audio`: one summary per set), no utterance too short for one
    encoder frame, a learned PE's table against the longest utterance."""
    check_decode_settings(decode, ctc_weight=float(run_cfg.loss.get("ctc_weight", 1.0)),
                          transducer=bool(run_cfg.loss.get("transducer")))
    sample_rate = int(run_cfg.data.features.sample_rate)
    for name, utts in test_utts.items():
        scan_audio(utts, sample_rate=sample_rate, name=name)
    # an utterance too short to give the encoder one frame (under one 25 ms feature window, or under
    # the front end's subsampling) is decoded as nothing and scored as all deletions without a word
    frames = encoder_frames_fn(run_cfg)
    for name, utts in test_utts.items():
        short = [u for u in utts if u.duration < 1.0 and frames(u.duration) < 1]  # frames: a torch call each
        if short:
            first = short[0]
            need = next((s / 1000 for s in range(1, 10001) if frames(s / 1000) >= 1), None)
            raise ConfigError(
                f"{first.source or first.audio_filepath}: utterance {first.id!r} of test set {name!r} lasts "
                f"{first.duration:g} s, too short for one encoder frame (this model needs at least {need:g} s); "
                f"{len(short)} of {len(utts)} utterances of the set are: remove them from the manifest")
    check_learned_pe_table(run_cfg, test_utts, settings, run_dir)


def evaluate_run(run_dir: str | Path, cfg_overrides: Mapping[str, Any] | DictConfig | None = None,
                 device: str | None = None, *, corpus_manifests: CorpusManifests,
                 reuse: Reuse | None = None) -> dict[str, list[dict]]:
    """Decode and score the run's test sets; returns {test set + suffix: bucket rows}.

    ``cfg_overrides``: ``decode``, ``eval`` (see `eval_settings`) and ``data.test``;
    ``device`` (auto | cpu | cuda[:N]), when given, wins over ``eval.device``;
    ``corpus_manifests``: the run's corpus from its ``data`` config (`CorpusManifests`);
    ``reuse``: when given, a set whose result folder is complete and records the same checkpoint
    bytes and settings is not decoded again (`asr_pe.evaluation.reuse`; its rows are read back),
    and the names decoded and reused are added to it; without it every set is decoded.

    The whole evaluation holds the run folder's lock (`asr_pe.run_lock`): one writer of
    ``eval/`` at a time, so an ``evaluate.py`` started during training is refused instead of
    replacing, later, the evaluation that followed training with an older checkpoint's."""
    run_dir = Path(run_dir)
    with run_lock(run_dir):
        return _evaluate_run(run_dir, cfg_overrides, device, corpus_manifests=corpus_manifests, reuse=reuse)


def _evaluate_run(run_dir: Path, cfg_overrides, device, *, corpus_manifests: CorpusManifests,
                  reuse: Reuse | None) -> dict[str, list[dict]]:
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
    test_sets = resolve_test_sets(data_cfg, corpus_manifests(data_cfg))
    test_utts = read_test_sets(test_sets)  # every set checked before the first is decoded
    check_eval_inputs(cfg, decode, test_utts, settings, run_dir)  # decode settings, audio vs manifest, PE table
    # eval.remedy: switched on around the decoding below, results in eval/<set>_<remedy> unless
    # eval.suffix names the folder
    remedies = parse_remedies(settings["remedy"])
    train_s = float(settings["train_length_s"] or run_train_seconds(run_dir)) if remedies else None
    if remedies:
        suffix = suffix or remedy_suffix(remedies)
    # eval.tempo / eval.hop_ms (asr_pe/evaluation/rate.py): another speaking rate is another result,
    # in eval/<set><suffix>_tempo<f>_hop<ms> whatever the suffix is otherwise, never the plain folder
    rate = rate_of(settings, float(cfg.data.features.frame_shift_ms))
    suffix += rate.suffix
    ckpt = find_checkpoint(run_dir, settings["checkpoint"])
    checkpoint = checkpoint_record(ckpt, hint=EVALUATE_ANOTHER)  # written into every result of this call
    # what each set's numbers follow from besides the checkpoint: written beside them, and
    # compared before a result is reused
    recorded = {name: decoding_settings(manifest=path, settings=settings, decode=decode,
                                        remedy=remedy_label(remedies), train_length_s=train_s,
                                        device=device, rate=rate.record())
                for name, path in test_sets.items()}
    for name, path in test_sets.items():  # every set checked before the first is decoded
        check_result_owner(result_dir(run_dir, name, suffix), path, recorded[name])
    to_decode = list(test_sets)
    results = {}
    if reuse is not None:
        to_decode = []
        for name in test_sets:
            out = result_dir(run_dir, name, suffix)
            reason = stale_reason(out, checkpoint, recorded[name]) if reuse.enabled else "reuse switched off"
            if reason is None:
                log.info("reused %s: complete, same checkpoint (%s step %s) and settings", out,
                         checkpoint["name"], checkpoint["global_step"])
                reuse.reused.append(result_name(name, suffix))
                results[result_name(name, suffix)] = read_bucket_csv(out / BUCKETS_CSV)
            else:
                log.info("decoding %s: %s", out, reason)
                to_decode.append(name)
    if to_decode:
        results.update(_decode_sets(run_dir, cfg, settings, decode, device, ckpt, checkpoint, remedies, train_s,
                                    suffix, {name: test_sets[name] for name in to_decode}, test_utts, recorded,
                                    rate))
        if reuse is not None:
            reuse.decoded += [result_name(name, suffix) for name in to_decode]
    # a long-form set evaluated with the set holding its parts: the in-context ratio beside it,
    # computed again from both sets' per_utt.jsonl (reused or not: it is cheap, and a kill between a
    # set's decoding and this step would otherwise leave the ratio of its earlier decoding)
    for long, (alone, parts) in in_context_pairs(test_utts, test_sets).items():
        ic = write_in_context(result_dir(run_dir, long, suffix), result_dir(run_dir, alone, suffix),
                              parts, alone_set=alone, n_boot=int(settings["n_boot"]),
                              inputs={result_name(s, suffix): result_identity(result_dir(run_dir, s, suffix))
                                      for s in (long, alone)})
        print(f"[asr_pe] {long}: in-context ratio {ic.ratio:.2f}x [{ic.ci_low:.2f}, {ic.ci_high:.2f}] "
              f"(whole {ic.whole:.2f} % / alone on {alone} {ic.alone:.2f} %, {len(ic.rows)} recordings)")
    return {name: results[name] for name in (result_name(n, suffix) for n in test_sets)}


def _decode_sets(run_dir: Path, cfg: DictConfig, settings: Mapping[str, Any], decode: dict, device: str,
                 ckpt: Path, checkpoint: dict, remedies: list, train_s: float | None, suffix: str,
                 test_sets: Mapping[str, str], test_utts: Mapping[str, list[Utterance]],
                 recorded: Mapping[str, dict], rate: Rate = Rate()) -> dict[str, list[dict]]:
    """Load the model and decode ``test_sets``, writing each one's result folder; {name: rows}."""
    cfg, model, tokenizer, features, cmvn, loaded = load_run(run_dir, settings["checkpoint"], device)
    if rate.hop_ms is not None:
        # eval.hop_ms: the run's filterbank with another frame shift (window, bins, rate kept); its
        # CMVN statistics are per bin, so they apply unchanged
        features = FbankExtractor(num_mel_bins=features.num_mel_bins, sample_rate=features.sample_rate,
                                  frame_length_ms=features.frame_length_ms, frame_shift_ms=rate.hop_ms,
                                  dither=features.dither)
    if loaded != ckpt:  # best.ckpt written since it was looked for: record what was loaded
        checkpoint = checkpoint_record(loaded, hint=EVALUATE_ANOTHER)
    method = decode.get("method", "greedy")
    decode["method"] = effective_method(method, has_ctc=model.ctc_head is not None,
                                        has_transducer=model.transducer is not None)
    if decode["method"] != method:
        log.info("model has no CTC head: decode.method=%s decodes with %s", method, decode["method"])
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
    if remedies:
        check_remedies(model, remedies, pe_label(cfg.pe))
        if per_utterance(remedies):
            encode = one_by_one(encode)
    edges_spec = settings["edges"]
    remedy_meta = {"remedy": remedy_label(remedies), "train_length_s": train_s} if remedies else {}
    results = {}
    with remedies_applied(model, remedies, train_s):
        for name, path in test_sets.items():
            utts = test_utts[name]
            # eval.tempo: each wave stretched before its features; records carry the stretched durations
            ds = ASRDataset(utts, None, features, cmvn, None, tempo=rate.tempo)
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
            out = result_dir(run_dir, name, suffix)
            out.mkdir(parents=True, exist_ok=True)
            # an in-context ratio computed from this set's earlier result is no longer right: gone
            # until both of its sets are evaluated together again
            forget_in_context(run_dir, result_name(name, suffix))
            # buckets.meta.json is written last: until then the folder reads as incomplete, so a
            # kill while the other files are replaced never leaves the earlier record beside them
            (out / BUCKETS_META).unlink(missing_ok=True)
            meta = {"run": str(run_dir), "pe": pe_label(cfg.pe), "loss": cfg.loss.name, "test_set": name,
                    "manifest": str(path), "utterances": len(records), "checkpoint": checkpoint,
                    "decode": decode, "mode": mode,
                    **({"chunk_s": settings["chunk_s"], "overlap_s": settings["overlap_s"]} if mode == "chunked"
                       else {"block_size": block_size}),
                    "edges": describe_edges(edges_spec, edges), "device": device, **remedy_meta, **rate.record(),
                    SETTINGS: recorded[name], "seconds": round(time.time() - t0, 1)}
            write_per_utt(records, out / PER_UTT)
            write_bucket_files(rows, out, meta=meta)
            print(f"\n[asr_pe] {name}: pe={meta['pe']} loss={meta['loss']} decode={decode.get('method')} "
                  f"device={device}" + (f" remedy={remedy_meta['remedy']}" if remedy_meta else "")
                  + "".join(f" {k}={v:g}" for k, v in rate.record().items()))
            print(format_table(rows))
            print(f"bucket edges (s): {meta['edges']}; buckets without utterances have no row")
            results[result_name(name, suffix)] = rows
    return results


__all__ = ["CorpusManifests", "EmptyTestSetError", "IncompleteScoringError", "check_eval_inputs", "check_result_owner",
           "check_scored_every_utterance", "evaluate_run", "forget_in_context", "read_test_sets", "resolve_test_sets",
           "result_identity"]
