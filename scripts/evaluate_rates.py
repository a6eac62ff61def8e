"""Decode a run at every rung of a speaking-rate ladder (the CAPE paper's rate axis).

    python scripts/evaluate_rates.py run=<run dir> [axis=tempo|hop_ms] [rungs=[0.8,0.9,1.0,1.1,1.2,1.3]] \\
        [data.test=<set>] [decode.method=...] [device=cpu] [reuse=false]

Each rung is ``evaluate.py run=<dir> eval.<axis>=<value>``: its results in eval/<set>_tempo<f> (or
_hop<ms>; rate 1 and the run's own hop are the plain eval/<set>), complete rungs of the same
checkpoint and settings reused. Then draw the ladder of many runs with scripts/plot_rate_ladder.py.
Every option: conf/evaluate_rates.yaml; the logic: asr_pe/evaluation/rate_ladder.py.
"""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig, OmegaConf

from asr_pe.training.cli import friendly_errors, run_hydra_main


def eval_given_on_command_line(cfg: DictConfig) -> dict:
    """The ``eval.*`` keys the command line set (the rest take the run's own values), as evaluate.py."""
    from asr_pe.training.hydra_job import EVERYTHING, command_line_keys

    keys = command_line_keys()
    given = OmegaConf.to_container(cfg.eval, resolve=True)
    if keys == EVERYTHING or "eval" in keys:
        return given
    return {k: v for k, v in given.items() if f"eval.{k}" in keys}


@hydra.main(config_path="../conf", config_name="evaluate_rates", version_base="1.3")
def main(cfg: DictConfig) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from asr_pe.errors import ConfigError
    from asr_pe.evaluation.rate_ladder import RateLadderError, default_values, evaluate_rates
    from asr_pe.evaluation.reuse import Reuse
    from asr_pe.training.config_checks import check_added_keys
    from asr_pe.training.data import resolve_manifests

    with friendly_errors():
        check_added_keys(cfg)
        if cfg.get("threads"):
            import torch

            torch.set_num_threads(int(cfg.threads))
        try:
            values = [float(v) for v in cfg.rungs] if cfg.rungs is not None else list(default_values(cfg.axis))
        except (TypeError, ValueError, RateLadderError) as e:
            raise ConfigError(f"axis={cfg.axis} rungs={cfg.rungs}: {e}") from None
        overrides = {"decode": cfg.decode, "eval": eval_given_on_command_line(cfg), "data": cfg.data}
        reuse = Reuse(enabled=bool(cfg.reuse))
        results = evaluate_rates(cfg.run, axis=str(cfg.axis), values=values, overrides=overrides,
                                 corpus_manifests=resolve_manifests, device=cfg.device, reuse=reuse)
    for value, sets in results.items():
        alls = ", ".join(f"{name} WER {rows[-1]['wer']:.2f} %" for name, rows in sets.items())
        print(f"[asr_pe] {cfg.axis}={value:g}: {alls}")
    print(f"[asr_pe] {reuse.summary()}")


if __name__ == "__main__":
    run_hydra_main(main)
