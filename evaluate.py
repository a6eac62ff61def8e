"""Evaluate a trained run: ``python evaluate.py run=<run dir> [data.test=…] [decode.method=beam] [device=cuda] [reuse=true]``.

Every ``eval.*`` key not given on the command line takes the run's own setting (its config.yaml;
conf/evaluate.yaml), so this buckets and decodes like the evaluation that followed training.
"""

import hydra
from omegaconf import DictConfig, OmegaConf

from asr_pe.training.cli import friendly_errors, run_hydra_main


def eval_given_on_command_line(cfg: DictConfig) -> dict:
    """The ``eval.*`` keys the command line set (the rest take the run's own values): all of
    ``cfg.eval`` when the whole group was chosen (``eval=<option>``)."""
    from asr_pe.training.hydra_job import EVERYTHING, command_line_keys

    keys = command_line_keys()
    given = OmegaConf.to_container(cfg.eval, resolve=True)
    if keys == EVERYTHING or "eval" in keys:
        return given
    return {k: v for k, v in given.items() if f"eval.{k}" in keys}


@hydra.main(config_path="conf", config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from asr_pe.evaluation.pipeline import evaluate_run
    from asr_pe.evaluation.reuse import Reuse
    from asr_pe.training.config_checks import check_added_keys
    from asr_pe.training.data import resolve_manifests

    with friendly_errors():
        check_added_keys(cfg)  # +decode.beem=3: one line, not a setting silently ignored
        if cfg.get("threads"):
            import torch

            torch.set_num_threads(int(cfg.threads))
        overrides = {"decode": cfg.decode, "eval": eval_given_on_command_line(cfg), "data": cfg.data}
        reuse = Reuse() if cfg.reuse else None
        evaluate_run(cfg.run, overrides, device=cfg.device, corpus_manifests=resolve_manifests, reuse=reuse)
        if reuse is not None:
            print(f"[asr_pe] {reuse.summary()}: {' '.join(reuse.reused) or 'none'} reused")


if __name__ == "__main__":
    run_hydra_main(main)
