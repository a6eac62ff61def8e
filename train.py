"""Train one ASR model: ``python train.py pe=rope loss=ctc [trainer.max_steps=…] [data.…=…]``."""

import hydra
from omegaconf import DictConfig

from asr_pe.training.cli import friendly_errors, run_hydra_main


@hydra.main(config_path="conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from asr_pe.training.train import train

    with friendly_errors():
        train(cfg)


if __name__ == "__main__":
    run_hydra_main(main)
