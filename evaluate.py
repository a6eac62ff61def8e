"""Evaluate a trained run: ``python evaluate.py run=<run dir> [data.test=…] [decode.method=beam] [device=cuda]``.

Every ``eval.*`` key left unset takes the run's own setting (conf/evaluate.yaml), so this
buckets and decodes like the evaluation that followed training.
"""

import os
import sys

import hydra
from omegaconf import DictConfig

from asr_pe.training.cli import friendly_errors


@hydra.main(config_path="conf", config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from asr_pe.inference.device import DeviceError
    from asr_pe.training.evaluate import EvalSettingsError, evaluate_run

    with friendly_errors():
        try:
            evaluate_run(cfg.run, cfg, device=cfg.device)
        except (DeviceError, EvalSettingsError) as e:  # bad settings: one line, like friendly_errors
            if os.environ.get("ASR_PE_DEBUG"):
                raise
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)


if __name__ == "__main__":
    main()
