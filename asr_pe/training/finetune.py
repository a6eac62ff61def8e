"""Fine-tuning from a trained run: ``train.py ... init_from=<run dir | checkpoint>``.

The new run starts from the weights of another run's checkpoint and nothing else: the optimiser,
its schedule (with this config's warmup) and the step counter start fresh, as in the papers that
extend a model's context by a short fine-tune (position interpolation, YaRN). The rest of the new
run is its own config (e.g. joined inputs of up to 40 s, a RoPE rescaling trained in).

* ``init_from``: a run folder (its ``checkpoints/best.ckpt``) or a checkpoint file inside a run's
  ``checkpoints/`` (e.g. ``.../checkpoints/last.ckpt``); the run's ``config.yaml`` beside it says
  what the weights are.
* The model config must be the checkpoint's (`model_differences`: front end, encoder, PE, loss,
  decoder, features, tokenizer), except the keys that change no weight (a PE's name and label and
  a trained RoPE rescaling); otherwise one ``ConfigError`` naming the keys, before any data work.
* The source run's tokenizer and CMVN are copied into the new run (`seed_prepared_files`): the
  weights were trained on those, so they are not made again from this config's data.
* The weights are read with ``weights_only=True`` and loaded strictly; ``run_info.json`` records
  the source (`asr_pe.training.run`: run folder, file name, stored step, SHA-256).
* A fine-tune that is interrupted resumes from its own ``last.ckpt`` like any run; ``init_from``
  only decides the first start.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from asr_pe.errors import ConfigError
from asr_pe.io import atomic_write_json

from asr_pe.run_folder import BEST, CHECKPOINT_SUFFIX, DATA_READY, PREPARED_FILES

from .resume import flattened
from .run_dir import artifacts_key

# The config that decides the weights and how the inputs are made, compared key by key.
MODEL_KEYS = ("frontend", "encoder", "pe", "loss", "decoder", "data.features", "data.tokenizer")
# Keys under those that change no weight: a PE option's name and label, a RoPE rescaling (no
# parameters: the angles only), and how many feature workers load the data.
FREE_KEYS = ("pe.name", "pe.attention.label", "pe.attention.scaling", "pe.input.label")
DEFAULT_CHECKPOINT = f"{BEST}{CHECKPOINT_SUFFIX}"


def resolve_init_from(value: Any) -> tuple[Path, Path]:
    """``init_from`` -> (source run folder, checkpoint file); one ``ConfigError`` otherwise."""
    path = Path(str(value)).expanduser()
    if path.is_dir():
        run_dir, ckpt = path, path / "checkpoints" / DEFAULT_CHECKPOINT
        if not ckpt.is_file():
            raise ConfigError(f"init_from={value}: no checkpoints/{DEFAULT_CHECKPOINT} in that run folder; "
                              "name a checkpoint file instead (init_from=<run>/checkpoints/last.ckpt)")
    elif path.is_file():
        ckpt = path
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    else:
        raise ConfigError(f"init_from={value}: no such run folder or checkpoint file")
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"init_from={value}: no config.yaml in {run_dir}, so what the weights are is unknown; "
                          "give a checkpoint inside a run folder (<run>/checkpoints/<name>.ckpt)")
    return run_dir, ckpt


def _under(key: str, sections: tuple[str, ...]) -> bool:
    return any(key == s or key.startswith(s + ".") for s in sections)


def _model_view(cfg: Any) -> dict[str, Any]:
    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    # a null is an option left at "off" (added later to a config group, absent from older runs)
    return {k: v for k, v in flattened(plain).items()
            if v is not None and _under(k, MODEL_KEYS) and not _under(k, FREE_KEYS)}


def model_differences(source_cfg: Any, cfg: Any) -> dict[str, tuple[Any, Any]]:
    """``{key: (checkpoint's value, this config's)}`` for every model key that differs."""
    a, b = _model_view(source_cfg), _model_view(cfg)
    return {k: (a.get(k), b.get(k)) for k in sorted({*a, *b}) if a.get(k) != b.get(k)}


def check_init_from(cfg: DictConfig) -> tuple[Path, Path] | None:
    """The source (run folder, checkpoint) of a fine-tune, checked against ``cfg``; None without
    ``init_from``. Cheap (two small files): called before any data work."""
    value = cfg.get("init_from")
    if value in (None, ""):
        return None
    run_dir, ckpt = resolve_init_from(value)
    diff = model_differences(OmegaConf.load(run_dir / "config.yaml"), cfg)
    if diff:
        shown = "; ".join(f"{k}: {a!r} in the checkpoint, {b!r} here" for k, (a, b) in list(diff.items())[:6])
        more = f" (and {len(diff) - 6} more)" if len(diff) > 6 else ""
        raise ConfigError(f"init_from={value}: the model config differs from the checkpoint's: {shown}{more}; "
                          "fine-tune with the source run's model settings")
    return run_dir, ckpt


def seed_prepared_files(source_run: Path, run_dir: Path, cfg: DictConfig) -> None:
    """Copy the source run's tokenizer and CMVN into a new run, recorded as prepared for ``cfg``'s
    data (so data preparation reads them instead of making its own)."""
    missing = [name for name in PREPARED_FILES if not (source_run / name).is_file()]
    if missing:
        raise ConfigError(f"init_from: {source_run} lacks {', '.join(missing)}; the weights need the "
                          "tokenizer and CMVN they were trained with")
    for name in PREPARED_FILES:
        shutil.copyfile(source_run / name, run_dir / name)
    # the files' settings for rank 0's check of them; "key" stays unset, so the other DDP ranks keep
    # waiting until rank 0 has prepared the rest (manifests) and writes the marker with its key
    atomic_write_json(run_dir / DATA_READY, {"key": None, "artifacts_key": artifacts_key(cfg),
                                             "error": None, "copied_from": str(source_run)})


def load_init_weights(model: torch.nn.Module, ckpt: Path) -> None:
    """The checkpoint's model weights into ``model`` (strict: every tensor, no other)."""
    from asr_pe.inference.run_loading import load_checkpoint_state

    state = load_checkpoint_state(ckpt)  # weights_only=True
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ConfigError(f"init_from: {ckpt} does not fit this model: missing {missing[:5]}, "
                          f"unexpected {unexpected[:5]}")
