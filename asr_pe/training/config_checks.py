"""Config values and input files checked before any expensive work.

``train.py`` calls these first, so that a value that cannot work is one
line naming the key and what to do (``ConfigError``, printed by ``friendly_errors``, exit 2)
instead of a traceback after the corpus was prepared, the model loaded or hours of training
ran (a bad ``decode.method`` used to surface only in the evaluation after training):

- `check_train_config`: the PE combination given on the command line, ``optim.*``,
  ``trainer.*`` (keys against ``lightning.Trainer``'s signature, a GPU accelerator without a
  GPU), ``decode.*`` against the loss, ``eval.*``.

That the checkpoint a resumed run would load is a readable file is checked where the start is
planned (`asr_pe.training.resume.plan_start`).

The evaluation's own checks (its inputs, its settings) are `asr_pe.evaluation.pipeline` and
`asr_pe.evaluation.settings`.
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

from asr_pe.errors import ConfigError
from asr_pe.inference.decode import check_decode_settings

from . import hydra_job
from .schedules import step_schedule

# trainer keys that train() sets itself: given in trainer.* they would collide
TRAINER_KEYS_SET_BY_TRAIN = ("default_root_dir", "callbacks", "logger", "use_distributed_sampler", "plugins")
GPU_ACCELERATORS = ("gpu", "cuda")
OPTIM_SCHEDULES = ("noam", "inverse_sqrt", "cosine", "constant")


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ---------------------------------------------------------------------------------------------
# training


def pe_stage(conf_dir: Path, option: str) -> str | None:
    """"input", "attention" or None (``none``) for a ``conf/pe/<option>.yaml``."""
    path = conf_dir / "pe" / f"{option}.yaml"
    if not path.is_file():
        return None  # Hydra itself refuses an unknown option before train() runs
    spec = OmegaConf.load(path)
    return next((stage for stage in ("input", "attention") if spec.get(stage)), None)


def check_pe_combination(options: list[str], conf_dir: Path) -> None:
    """``pe=[a,b]`` merges the YAMLs; only one input-stage plus one attention-stage PE combine.

    Two PEs of one stage would merge into one mapping (the second's name with both option
    sets), and ``none`` in a list would label an input PE as "none": both silently train
    something else than asked."""
    stages = {option: pe_stage(conf_dir, option) for option in options}
    seen: dict[str, str] = {}
    for option, stage in stages.items():
        if stage is None:
            raise ConfigError(f"pe=[{','.join(options)}]: '{option}' is no positional encoding and combines with "
                              "nothing; only one input-stage plus one attention-stage PE combine (e.g. pe=[cape,rope])")
        if stage in seen:
            raise ConfigError(f"pe=[{','.join(options)}]: '{seen[stage]}' and '{option}' are both {stage}-stage PEs; "
                              "only one input-stage plus one attention-stage PE combine (e.g. pe=[cape,rope])")
        seen[stage] = option
    if len(options) > 2:
        raise ConfigError(f"pe=[{','.join(options)}]: at most two PEs combine (one input-stage, one attention-stage)")


def check_optim(optim: Mapping[str, Any]) -> None:
    lr = optim.get("lr")
    if not _is_number(lr) or lr <= 0:
        raise ConfigError(f"optim.lr={lr!r}: the peak learning rate must be a number > 0 (e.g. optim.lr=2e-3)")
    for key, ok, need in (
        ("weight_decay", lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        ("eps", lambda v: _is_number(v) and v > 0, "a number > 0"),
        ("warmup_steps", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
        ("min_lr_ratio", lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]"),
        ("betas", lambda v: isinstance(v, (list, tuple)) and len(v) == 2 and all(_is_number(b) and 0 <= b < 1 for b in v),
         "two numbers in [0, 1)"),
    ):
        if key in optim and not ok(optim[key]):
            raise ConfigError(f"optim.{key}={optim[key]!r}: must be {need}")
    schedule = optim.get("schedule", "noam")
    if schedule not in OPTIM_SCHEDULES:
        raise ConfigError(f"optim.schedule={schedule!r}: choose one of {', '.join(OPTIM_SCHEDULES)}")


def check_trainer(trainer: Mapping[str, Any]) -> None:
    """trainer.* is passed verbatim to ``lightning.Trainer``: check its keys against the
    signature (a misspelt key is a TypeError deep in Lightning otherwise) and that a GPU
    accelerator has a GPU (otherwise a 22-line MisconfigurationException)."""
    import lightning as L

    known = [p for p in inspect.signature(L.Trainer.__init__).parameters if p != "self"]
    for key in trainer:
        if key in TRAINER_KEYS_SET_BY_TRAIN:
            raise ConfigError(f"trainer.{key}: set by train.py itself; remove it from the trainer config")
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean trainer.{close[0]}?" if close else ""
            raise ConfigError(f"trainer.{key}: not an option of lightning.Trainer{hint}")
    accelerator = str(trainer.get("accelerator", "auto")).lower()
    from lightning.pytorch.accelerators import AcceleratorRegistry

    accelerators = sorted({"auto", "gpu", *AcceleratorRegistry.available_accelerators()})
    if accelerator not in accelerators:
        raise ConfigError(f"trainer.accelerator={accelerator}: choose one of {', '.join(accelerators)}")
    if "precision" in trainer:
        # Lightning's own list of precision flags (a private helper, fenced in lightning_private.py)
        from .lightning_private import precision_flag_error

        allowed = precision_flag_error(trainer["precision"])
        if allowed is not None:
            raise ConfigError(f"trainer.precision={trainer['precision']!r}: choose one of {allowed}")
    if accelerator in GPU_ACCELERATORS and not torch.cuda.is_available():
        raise ConfigError(f"trainer.accelerator={accelerator}: torch sees no CUDA GPU (torch.cuda.is_available() is "
                          "False); use trainer.accelerator=cpu (or trainer=cpu) or auto")
    devices = trainer.get("devices", "auto")
    if accelerator in GPU_ACCELERATORS and isinstance(devices, int) and not isinstance(devices, bool) \
            and devices > torch.cuda.device_count():
        raise ConfigError(f"trainer.devices={devices}: only {torch.cuda.device_count()} CUDA GPU(s) visible; "
                          "lower trainer.devices")
    max_steps = trainer.get("max_steps", -1)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or not (max_steps == -1 or max_steps > 0):
        raise ConfigError(f"trainer.max_steps={max_steps!r}: must be an integer > 0 (or -1: no limit)")
    if "max_steps" in trainer or "max_epochs" in trainer:  # (a run's config has both: conf/trainer/default.yaml)
        step_schedule(trainer, batches_per_epoch=1)  # an end and a validation interval with a meaning in steps


def check_train_config(cfg: DictConfig) -> None:
    """Every check of the training config that needs neither data nor model (``ConfigError``,
    ``EvalSettingsError``); called first thing by ``train()``."""
    from asr_pe.evaluation.settings import eval_settings

    pe_list, conf_dir = hydra_job.pe_list(), hydra_job.conf_dir()
    if pe_list is not None and conf_dir is not None:
        check_pe_combination(pe_list, conf_dir)
    check_added_keys(cfg)
    threads = cfg.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"threads={threads!r}: a whole number >= 1, or null (torch's default, one per core)")
    check_optim(_plain(cfg.optim))
    check_trainer(_plain(cfg.trainer))
    check_decode_settings(_plain(cfg.get("decode")) or {}, ctc_weight=float(cfg.loss.get("ctc_weight", 1.0)),
                          transducer=bool(cfg.loss.get("transducer")))
    if cfg.get("eval_after_train", True):
        eval_settings(None, cfg.get("eval"))  # eval.mode=bogus: now, not after training


def _flat_keys(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, Mapping):
        out = []
        for k, v in node.items():
            out += [f"{prefix}{k}", *_flat_keys(v, f"{prefix}{k}.")]
        return out
    return []


def _target_params(cfg: DictConfig, section: str) -> set[str]:
    """The keyword names the ``_target_`` of ``section`` takes (a corpus builder's options)."""
    target = OmegaConf.select(cfg, f"{section}._target_", default=None)
    if not target:
        return set()
    try:
        from hydra.utils import get_method

        return set(inspect.signature(get_method(str(target))).parameters)
    except Exception:  # an unresolvable target is instantiate's error to report, later
        return set()


def check_added_keys(cfg: DictConfig, added: list[str] | None = None) -> None:
    """Every ``+key`` of the command line must be a setting something reads: ``trainer.*`` keys
    are checked against ``lightning.Trainer`` (`check_trainer`), a ``_target_``'s section (the
    corpus: ``data.corpus.*``) against its signature; any other added key is unknown to every
    part of the toolkit and would be accepted silently (``+optim.lr_typo=1``), so it is one error
    naming it and the closest setting of the composed config."""
    added = hydra_job.added_keys() if added is None else added
    known = [k for k in _flat_keys(_plain(cfg)) if k not in added]
    for key in added:
        section, _, leaf = key.rpartition(".")
        if section == "trainer" or (section and leaf in _target_params(cfg, section)):
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        prefix = f"{section}." if section else ""
        options = sorted(k for k in known if k.startswith(prefix) and "." not in k[len(prefix):])
        hint = (f"did you mean {close[0]}?" if close
                else f"the settings of {section or 'the config'} are {', '.join(options) or 'none'}")
        raise ConfigError(f"+{key}: not a setting of this config (nothing would read it); {hint}")


__all__ = ["check_added_keys", "check_optim", "check_pe_combination", "check_train_config", "check_trainer",
           "pe_stage"]
