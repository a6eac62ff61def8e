"""Evaluate a trained run on the synthetic length ladder; choose inference settings on its dev pool.

    python scripts/evaluate_ladder.py run=runs/synth_study/rope_ctc_s0 [ladder=DIR] \\
        [candidates=[window:2.5,window:5,window:10,rope_ntk,rope_ntk@10,rope_yarn,chunked:20:4]] \\
        [select_variant=nogap] [select_min_rung=10] [device=cpu] [n_boot=1000] [checkpoint=best|last] \
        [reuse=true]

Without ``ladder`` the default ladder is built (or reused) in the cache (python -m
asr_pe.data.synth.ladder). Writes <run>/eval/<ladder set>[<suffix>]/ for every set decoded and
<run>/eval/ladder/{report.md,choice.json} (asr_pe/evaluation/ladder.py). Every option:
conf/evaluate_ladder.yaml.

Resumable and incremental: a set whose result folder is complete and records the same checkpoint
bytes (name, step, SHA-256) and the same settings (the manifest's SHA-256, decoding, mode,
chunking, block size, remedy, edges, n_boot, batch size, device; asr_pe/evaluation/reuse.py) is
reused, not decoded again; every other set is decoded. Run again after a kill, or with one more
candidate, and only what is missing is decoded; the report and choice equal a fresh evaluation's.
One log line per set says "reused" or "decoding ...: <why>", the last "decoded N sets, reused M".
``reuse=false`` decodes every set.
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig

from asr_pe.errors import ConfigError
from asr_pe.training.cli import friendly_errors, run_hydra_main


@hydra.main(config_path="../conf", config_name="evaluate_ladder", version_base="1.3")
def main(cfg: DictConfig) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with friendly_errors():
        if not (Path(cfg.run) / "config.yaml").is_file():  # before the heavy imports: a typo fails fast
            raise ConfigError(f"run={cfg.run}: not a run directory (no config.yaml)")
        from asr_pe.data.synth.ladder import LadderError, build_ladder
        from asr_pe.evaluation.ladder import evaluate_ladder
        from asr_pe.training.data import resolve_manifests

        try:
            ladder = cfg.ladder or build_ladder()
            choice = evaluate_ladder(cfg.run, ladder, corpus_manifests=resolve_manifests,
                                     candidates=[str(c) for c in cfg.candidates],
                                     select_variant=cfg.select_variant, select_min_rung=float(cfg.select_min_rung),
                                     device=cfg.device, n_boot=int(cfg.n_boot), checkpoint=cfg.checkpoint,
                                     reuse=bool(cfg.reuse))
        except (LadderError, KeyError) as e:  # EvalSettingsError: friendly_errors
            raise ConfigError(str(e)) from None
    print(f"chosen on dev: {choice['chosen']}; report: {Path(cfg.run) / 'eval' / 'ladder' / 'report.md'}")


if __name__ == "__main__":
    run_hydra_main(main)
