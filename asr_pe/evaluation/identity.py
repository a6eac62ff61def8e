"""A result's identity, and what may replace or depend on it.

A result folder ``eval/<set><suffix>/`` is the scoring of one manifest, decoded from one
checkpoint with one set of settings. Its ``buckets.meta.json`` records all three: ``manifest``
(the path) with ``settings.manifest_sha256`` (its bytes), ``checkpoint`` (name, step, SHA-256;
`asr_pe.evaluation.provenance`) and ``settings`` (`asr_pe.evaluation.reuse.decoding_settings`).
Whether a folder can be reused is `asr_pe.evaluation.reuse.stale_reason`; whether the run is
finished is derived from these records too (`asr_pe.run_folder.eval_done`). Here:

- `check_result_owner`: a folder holds the results of one manifest. Decoding another file (other
  path *and* other bytes) into it would leave its name on another set's numbers, so it is
  refused; the same file regenerated (same path) or moved (same bytes) replaces it as before;
- `result_identity`: the part of the record a number computed from the folder depends on;
- `forget_in_context`: an in-context ratio (``in_context.json``) is computed from two result
  folders and records their identities; when either is decoded again the ratio is removed, not
  left beside numbers it was not computed from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from asr_pe.errors import ConfigError
from asr_pe.run_folder import BUCKETS_META, eval_dir

IN_CONTEXT_FILES = ("in_context.json", "in_context.md")


def _meta(folder: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((Path(folder) / BUCKETS_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def result_identity(folder: str | Path) -> dict[str, Any] | None:
    """``{"checkpoint", "settings"}`` as the folder's ``buckets.meta.json`` records them (None
    without a record): what every number computed from its per-utterance scores depends on."""
    meta = _meta(Path(folder))
    if meta is None:
        return None
    return {"checkpoint": meta.get("checkpoint"), "settings": meta.get("settings")}


def check_result_owner(folder: str | Path, manifest: str | Path, settings: Mapping[str, Any]) -> None:
    """Refuse to decode ``manifest`` into ``folder`` when the folder holds another manifest's results
    (its recorded path and bytes both differ); ``settings`` is this decoding's settings record."""
    meta = _meta(Path(folder))
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


def forget_in_context(run_dir: str | Path, result: str) -> list[Path]:
    """Remove the in-context files computed from result folder ``result`` (``eval/<result>``), as
    the long set or as the set of its parts alone; returns the folders they were removed from."""
    removed = []
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
            removed.append(folder)
    return removed


__all__ = ["check_result_owner", "forget_in_context", "result_identity"]
