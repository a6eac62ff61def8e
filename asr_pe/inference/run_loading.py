"""Load a trained run: its saved config, tokenizer, CMVN, feature extractor and model.

``load_run(run_dir, checkpoint, device)`` is what evaluation (``asr_pe.evaluation.pipeline``),
``transcribe.py`` and the analysis scripts use to rebuild a model from its run directory. The
model is built with `asr_pe.models.asr.model_kwargs` from the run's own ``config.yaml`` and its
weights are read with ``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

from asr_pe.data.features import FbankExtractor, GlobalCMVN
from asr_pe.errors import ConfigError
from asr_pe.data.tokenizer import load_tokenizer
from asr_pe.models.asr import MODEL_CONFIG_SECTIONS, build_asr_model, frontend_from_config, model_kwargs
from asr_pe.run_folder import CMVN, TOKENIZER, find_checkpoint, read_config

from .device import resolve_device


class CheckpointError(ConfigError):
    """A checkpoint file that torch cannot read (truncated, overwritten, not a checkpoint)."""


def read_checkpoint(path: str | Path, *, hint: str = "delete it or use another checkpoint",
                    mmap: bool = False) -> dict:
    """``torch.load(path, weights_only=True)`` on the CPU; a file that does not load is one
    ``CheckpointError`` naming it (a killed copy, a full disk), not torch's traceback.
    ``mmap=True`` maps the tensors instead of reading them: a cheap check of the file's structure."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as e:  # zipfile, unpickling and storage errors all mean the same here
        reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")
        raise CheckpointError(f"{path}: not a readable checkpoint ({reason[:200]}); {hint}") from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(f"{path}: not a checkpoint (holds a {type(ckpt).__name__}, not a dict); {hint}")
    return ckpt


# what to do about a run's checkpoint that does not load
EVALUATE_ANOTHER = "delete it or evaluate another (eval.checkpoint=best|last, checkpoint=...)"


def load_checkpoint_state(path: Path) -> dict[str, torch.Tensor]:
    """The model's state dict from a Lightning checkpoint, loaded with weights_only=True."""
    ckpt = read_checkpoint(path, hint=EVALUATE_ANOTHER)
    state = ckpt.get("state_dict", ckpt)
    return {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}


def load_run_config(run_dir: str | Path) -> DictConfig:
    """The run's saved ``config.yaml`` (`asr_pe.run_folder.read_config`)."""
    return read_config(run_dir)


def model_config(cfg: DictConfig) -> dict[str, Any]:
    """The sections of a run config that the model and its features are built from
    (`MODEL_CONFIG_SECTIONS`), resolved to plain containers for `model_kwargs`.

    Only those: the rest of a config composed but not resolved (the run name's
    ``${pe_label:…}``) needs resolvers that the training package registers."""
    plain = {}
    for key in MODEL_CONFIG_SECTIONS:
        value = cfg.get(key)
        plain[key] = OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value
    return plain


def encoder_frames_fn(cfg: DictConfig):
    """duration (s) -> encoder frames under the run's features and front end, without loading
    the model: what input checks (too short, past a learned PE's table) need."""
    plain = model_config(cfg)
    kwargs = model_kwargs(plain, vocab_size=1)
    frontend = frontend_from_config(kwargs["frontend"], kwargs["in_features"], kwargs["encoder"]["d_model"])
    features = FbankExtractor(**plain["data"]["features"])

    def frames(duration: float) -> int:
        n = features.num_frames(int(round(duration * features.sample_rate)))
        return max(0, int(frontend.output_lengths(torch.tensor([n]))[0])) if n else 0

    return frames


def load_run(run_dir: str | Path, checkpoint: str = "best", device: str = "cpu"):
    """-> (config, model in eval mode on ``device`` (auto | cpu | cuda[:N]), tokenizer, features, cmvn,
    checkpoint path) of a trained run."""
    run_dir = Path(run_dir)
    cfg = load_run_config(run_dir)
    device = resolve_device(device)
    ckpt = find_checkpoint(run_dir, checkpoint)
    tokenizer = load_tokenizer(run_dir / TOKENIZER)
    plain = model_config(cfg)
    model = build_asr_model(**model_kwargs(plain, tokenizer.vocab_size))
    missing, unexpected = model.load_state_dict(load_checkpoint_state(ckpt), strict=False)
    if missing or unexpected:
        raise RuntimeError(f"{ckpt}: checkpoint does not match the run's config: missing {missing[:5]}, "
                           f"unexpected {unexpected[:5]}")
    model.to(device).eval()
    features = FbankExtractor(**plain["data"]["features"])
    return cfg, model, tokenizer, features, GlobalCMVN.load(run_dir / CMVN), ckpt


__all__ = ["CheckpointError", "encoder_frames_fn", "load_checkpoint_state", "read_checkpoint", "load_run", "load_run_config", "model_config"]
