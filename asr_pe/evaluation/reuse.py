"""Whether a set's result folder can stand for decoding it again, so that a long evaluation (the
length ladder: dozens of sets, each candidate setting decoded again) resumes where it stopped and
adds a candidate without decoding the others again.

A result folder ``eval/<set><suffix>/`` is reused only when it is complete and was decoded from
the same checkpoint bytes with the same settings; `stale_reason` says why not, else None:

- complete: every file `asr_pe.evaluation.pipeline.evaluate_run` writes for a set is there
  (`asr_pe.run_folder.EVAL_FILES` and ``buckets.meta.json``). The pipeline removes a folder's
  ``buckets.meta.json`` before it replaces the folder's files and writes it last, so a set killed
  half-way has none and is decoded again, never read as the earlier decoding it partly overwrote;
- the checkpoint record (`asr_pe.evaluation.provenance.checkpoint_record`: file name, step,
  SHA-256) equals the one of the file the evaluation loads now: a retrained or resumed run, or
  ``eval.checkpoint=best`` where last was decoded (and best is another file), decodes again;
- the settings record (`decoding_settings`, ``buckets.meta.json``'s ``settings``) equals the
  one of this evaluation: everything a set's numbers follow from besides the checkpoint: the
  manifest's bytes (the ladder itself; its path is not compared, so a moved cache still counts),
  decoding method, mode, chunking, block size, remedy and its training length, bucket edges,
  bootstrap draws, batch size, device and, when not the plain one, the speaking rate (``tempo``,
  ``hop_ms``). A folder written before the record existed has none
  and is decoded again: its settings are unknown.

Reused results are read back as written, so what is built on them (the ladder's report and
choice) is what a fresh evaluation gives.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from asr_pe.evaluation.provenance import file_sha256
from asr_pe.run_folder import BUCKETS_META, EVAL_FILES

__all__ = ["SETTINGS", "Reuse", "decoding_settings", "stale_reason"]

log = logging.getLogger(__name__)

SETTINGS = "settings"      # the key of the settings record in buckets.meta.json
REQUIRED_FILES = (*EVAL_FILES, BUCKETS_META)


def _plain(value: Any) -> Any:
    """JSON's view of a value: what a record read back from buckets.meta.json compares equal to
    (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


# the decode keys each method reads (asr_pe.inference.decode.decode_batch); the attention and joint
# decoders read the whole section but the transducer's own keys
DECODE_KEYS = {"greedy": (), "beam": ("beam",), "transducer_greedy": ("max_symbols_per_frame",),
               "transducer_beam": ("beam",)}
TRANSDUCER_KEYS = ("max_symbols_per_frame",)


def decode_record(decode: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a ``decode:`` section the decoding depends on: greedy decoding with the
    default beam width recorded is the same decoding as greedy decoding without it."""
    decode = dict(decode)
    method = decode.get("method", "greedy")
    if method not in DECODE_KEYS:
        return {k: v for k, v in decode.items() if k not in TRANSDUCER_KEYS}
    return {"method": method, **{k: decode[k] for k in DECODE_KEYS[method] if k in decode}}


def decoding_settings(*, manifest: str | Path, settings: Mapping[str, Any], decode: Mapping[str, Any],
                      remedy: str, train_length_s: float | None, device: str,
                      rate: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The record of what one set's result follows from besides the checkpoint: ``settings`` are
    the resolved ``eval`` settings (`asr_pe.evaluation.settings.eval_settings`), ``decode`` the
    decoding asked for, ``remedy`` the remedies' label ("" for none) with the training length
    they scale by, ``device`` the resolved device (decodings on CPU and GPU may differ in the
    last digits), ``rate`` the speaking rate's keys (`asr_pe.evaluation.rate.Rate.record`: ``tempo``
    and ``hop_ms`` where they are not the plain ones; absent otherwise, so the records of plain
    results written before the rate existed still match)."""
    return _plain({
        "manifest_sha256": file_sha256(manifest),
        "decode": decode_record(decode),
        "mode": settings["mode"],
        "block_size": settings["block_size"],
        "chunk_s": float(settings["chunk_s"]),
        "overlap_s": float(settings["overlap_s"]),
        "remedy": remedy,
        "train_length_s": train_length_s,
        "edges": settings["edges"],
        "n_boot": int(settings["n_boot"]),
        "batch_seconds": float(settings["batch_seconds"]),
        "device": device,
        **dict(rate or {}),
    })


def stale_reason(folder: str | Path, checkpoint: Mapping[str, Any], settings: Mapping[str, Any]) -> str | None:
    """None when ``folder`` holds a complete result of ``checkpoint`` (its record now) decoded
    with ``settings`` (`decoding_settings`); else why it must be decoded (again), in a few words."""
    folder = Path(folder)
    if not folder.is_dir():
        return "no result yet"
    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    if missing:
        return f"incomplete (no {', '.join(missing)})"
    try:
        meta = json.loads((folder / BUCKETS_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"unreadable {BUCKETS_META}"
    if not isinstance(meta, dict) or not isinstance(meta.get(SETTINGS), dict):
        return "its settings are not recorded (written before they were)"
    if meta.get("checkpoint") != _plain(dict(checkpoint)):
        recorded = meta.get("checkpoint")
        if not isinstance(recorded, dict):
            return "its checkpoint is not recorded"
        return (f"checkpoint changed (recorded {recorded.get('name')} step {recorded.get('global_step')} "
                f"sha256 {str(recorded.get('sha256'))[:12]}, now {checkpoint['name']} step "
                f"{checkpoint['global_step']} sha256 {checkpoint['sha256'][:12]})")
    recorded, now = dict(meta[SETTINGS]), _plain(dict(settings))
    for both in (recorded, now):  # a record written before decode_record existed holds every key
        if isinstance(both.get("decode"), dict):
            both["decode"] = decode_record(both["decode"])
    differ = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
    if differ:
        return "settings differ: " + ", ".join(f"{k} {recorded.get(k)!r} -> {now.get(k)!r}" for k in differ)
    return None


@dataclass
class Reuse:
    """Passed to `evaluate_run` to reuse complete results (`stale_reason`); collects the names of
    the result folders it decoded and those it reused, over every call it is passed to.
    ``enabled=False`` decodes every set, still one log line per set and counted."""

    enabled: bool = True
    decoded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"decoded {len(self.decoded)} sets, reused {len(self.reused)}"
