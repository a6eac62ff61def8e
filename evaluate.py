"""Evaluate a trained run: ``python evaluate.py run=<run dir> [data.test=…] [decode.method=beam]``."""

import hydra
from omegaconf import DictConfig

from asr_pe.training.cli import friendly_errors


@hydra.main(config_path="conf", config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from asr_pe.training.evaluate import evaluate_run

    with friendly_errors():
        evaluate_run(cfg.run, cfg, device=cfg.device)


if __name__ == "__main__":
    main()
