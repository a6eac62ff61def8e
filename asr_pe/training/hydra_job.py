"""What the Hydra job of this process says about its start, read in one place.

Every part of a run that asks Hydra something (the run folder, the command line's overrides, the
config folder, single run or sweep, where Hydra records a start) asks here; without a Hydra job
(``train(cfg)`` called directly: a test, a notebook) each answer is the neutral one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode

from asr_pe.run_folder import CONFIG, HYDRA

EVERYTHING = "*"   # a command line whose keys cannot be listed (a global-package group such as experiment=)


def job() -> Any | None:
    """Hydra's config of this job (``hydra.*``), or None outside a Hydra job."""
    return HydraConfig.get() if HydraConfig.initialized() else None


def overrides() -> list:
    """The command line's parsed overrides (``hydra.*`` ones left out); [] outside a Hydra job."""
    hc = job()
    if hc is None:
        return []
    return [o for o in OverridesParser.create().parse_overrides(list(hc.overrides.task))
            if not o.key_or_group.startswith("hydra")]


def output_dir() -> Path | None:
    """The job's output folder (the run folder; a sweep's job folder), or None."""
    hc = job()
    return Path(hc.runtime.output_dir) if hc is not None else None


def in_multirun() -> bool:
    hc = job()
    return hc is not None and hc.mode == RunMode.MULTIRUN


def conf_dir() -> Path | None:
    """The primary config folder (``conf/``) the job was composed from."""
    hc = job()
    for source in hc.runtime.config_sources if hc is not None else []:
        if source.get("provider") == "main" and source.get("schema") == "file":
            return Path(source["path"])
    return None


def start_files(run_dir: Path) -> tuple[Path | None, Path | None]:
    """What Hydra writes into ``run_dir`` for this start: its record folder (``.hydra`` or
    ``.hydra/start-<time>``, `output_subdir`) and the job's log file; (None, None) outside Hydra."""
    hc = job()
    if hc is None:
        return None, None
    return (run_dir / str(hc.output_subdir) if hc.output_subdir else None), run_dir / f"{hc.job.name}.log"


def added_keys() -> list[str]:
    """The keys the command line added with ``+key=value`` (Hydra refuses a plain override of a key
    the config lacks, so ``+`` is how a typo gets in)."""
    return [o.key_or_group for o in overrides() if o.is_add()]


def pe_list() -> list[str] | None:
    """The options of a ``pe=[a,b]`` override (not a sweep), or None."""
    for o in overrides():
        if o.key_or_group == "pe" and not o.is_sweep_override() and isinstance(o.value(), list):
            return [str(v) for v in o.value()]
    return None


def command_line_keys() -> set[str] | str:
    """The config keys the command line set: ``{"trainer.max_steps", "pe", ...}``, or `EVERYTHING`
    when a group of the global package was chosen or the config did not come from Hydra's command
    line (``train(cfg)`` called directly: the caller composed the whole config)."""
    hc = job()
    if hc is None:
        return EVERYTHING
    choices = dict(hc.runtime.choices)
    keys: set[str] = set()
    for o in overrides():
        key = o.key_or_group
        if key not in choices:
            keys.add(key)
            continue
        # a config group: the section it fills (its package), or everything
        package = o.package if o.package is not None else _group_package(hc, key, choices[key])
        if package in ("_global_", ""):
            return EVERYTHING
        keys.add(package)
    return keys


def _group_package(hc, group: str, option: Any) -> str:
    """The package a group option's file declares (``# @package _global_``), else the group path."""
    for source in hc.runtime.config_sources:
        path = Path(str(source["path"])) / group / f"{option}.yaml"
        if source.get("schema") == "file" and path.exists():
            for line in path.read_text().splitlines()[:5]:
                if line.startswith("# @package") and line.split("@package", 1)[1].strip() == "_global_":
                    return "_global_"
    return group.replace("/", ".")


_OUTPUT_SUBDIRS: dict[str, str] = {}  # output_dir -> the subdir this process' start was given


def output_subdir(output_dir: str) -> str:
    """Where Hydra saves a start's config, overrides and its own config in the run folder (the
    ``hydra_output_subdir`` resolver of ``conf/train.yaml``): ``.hydra`` the first time,
    ``.hydra/start-<date>_<time>`` on a later start into the same folder (a resume), so the record
    of how the run was first launched is never overwritten. Answered once per folder and process:
    asked again after Hydra wrote there, it names the same subdir (what a refused start takes back,
    `asr_pe.training.run`)."""
    if output_dir in _OUTPUT_SUBDIRS:
        return _OUTPUT_SUBDIRS[output_dir]
    first = Path(output_dir) / HYDRA
    sub = HYDRA
    if (first / CONFIG).exists():
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        name, k = f"start-{stamp}", 1
        while (first / name).exists():
            name, k = f"start-{stamp}-{k}", k + 1
        sub = f"{HYDRA}/{name}"
    _OUTPUT_SUBDIRS[output_dir] = sub
    return sub
