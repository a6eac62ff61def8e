"""What the corpus modules share about their manifests: audio durations and prepared sets by name.

A corpus module (``librispeech.py``, ``tedlium.py``) prepares manifests into one folder and
hands the data config the paths of the sets it names (its ``<corpus>_manifests``, the
``corpus._target_`` of ``conf/data/<corpus>.yaml``). Two steps do not depend on the corpus:

- ``audio_seconds``: a file's duration from its header (soundfile; no decoding and no torch
  import, so the recipes' data stages stay light), with the corpus's own error class;
- ``prepared_manifests``: set names (manifest stems in the folder, or ``.jsonl`` paths) to the
  ``{"train", "dev", "test"}`` paths, every missing file named in one error with the recipe
  command that makes it.

The download and command-line parts they share are in ``corpus_cli.py``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import soundfile as sf

from asr_pe.errors import MissingFileError

__all__ = ["audio_seconds", "prepared_manifests"]


def audio_seconds(path: Path, error: type[Exception]) -> float:
    """Duration from the file header (soundfile; no decoding, no torch import for the CLI)."""
    try:
        info = sf.info(str(path))
    except (sf.SoundFileError, RuntimeError, OSError, ValueError) as e:
        raise error(f"{path}: unreadable audio ({e})") from None
    if info.frames <= 0 or info.samplerate <= 0:
        raise error(f"{path}: empty audio file (0 samples)")
    return info.frames / info.samplerate


def _as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [os.fspath(v) for v in value]


def prepared_manifests(
    manifest_dir: str | os.PathLike,
    train,
    dev,
    test,
    *,
    hint: str,
) -> dict:
    """``{"train": [paths], "dev": [paths], "test": {name: path}}`` from the names of prepared sets.

    A name is a manifest stem in ``manifest_dir`` (``"dev-clean"`` -> ``dev-clean.jsonl``) or a
    path to a ``.jsonl`` file; ``test`` may also be a mapping {name: stem or path}. Every file must
    exist: a missing one raises FileNotFoundError with ``hint`` (the recipe command that makes it).
    """
    manifest_dir = Path(manifest_dir)
    missing: list[str] = []

    def resolve(name: str) -> str:
        p = Path(os.path.expanduser(name))
        if p.suffix != ".jsonl":
            p = manifest_dir / f"{name}.jsonl"
        elif not p.is_absolute() and not p.exists():
            p = manifest_dir / p
        if not p.is_file():
            missing.append(str(p))
        return str(p)

    result = {"train": [resolve(n) for n in _as_list(train)], "dev": [resolve(n) for n in _as_list(dev)]}
    if hasattr(test, "items"):  # dict or an OmegaConf DictConfig
        result["test"] = {str(k): resolve(os.fspath(v)) for k, v in test.items()}
    else:
        result["test"] = {Path(n).name.removesuffix(".jsonl"): resolve(n) for n in _as_list(test)}
    if missing:
        if all(Path(m).parent == manifest_dir for m in missing):
            listed = f"in {manifest_dir}: " + ", ".join(Path(m).name for m in missing)
        else:
            listed = ", ".join(missing)
        raise MissingFileError(f"manifest(s) not found {listed}; {hint}")
    return result
