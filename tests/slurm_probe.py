"""A Hydra app over the project's conf/ for tests/test_slurm.py, launched with -m hydra/launcher=slurm
under the fake SLURM of tests/fake_slurm.py. Each SLURM task (one per rank) of each start of a job:

* ``PROBE_MODE=record``: writes ``start<restart>_rank<rank>.json`` into the job's output
  folder (what the job saw: overrides, resume, trainer sizes, SLURM variables), then on the first
  start sends itself SIGUSR2, the signal SLURM sends ``signal_delay_s`` before the time limit
  (submitit's handler on rank 0 requeues the job and exits; other ranks go on and return).
* ``PROBE_MODE=train``: runs the real ``train(cfg)`` as train.py does; on the first start a
  thread sends SIGUSR2 once ``checkpoints/last.ckpt`` exists, i.e. in the middle of training.
  Before training it writes ``start<restart>.json`` with the step of the ``last.ckpt`` it finds.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import asr_pe.training  # noqa: F401  (registers the pe_label resolver the configs use)
from asr_pe.training.slurm import requeue_resume, restart_count

CONF = str(Path(__file__).resolve().parents[1] / "conf")


def _send_timeout_signal_once(path: Path, timeout_s: float = 300.0) -> None:
    start = time.monotonic()
    while not path.exists():
        if time.monotonic() - start > timeout_s:
            return
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGUSR2)


@hydra.main(config_path=CONF, config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> str:
    out = Path(HydraConfig.get().runtime.output_dir)
    restart = restart_count()
    rank = int(os.environ["SLURM_PROCID"])
    if os.environ["PROBE_MODE"] == "record":
        record = {
            "output_dir": str(out),
            "overrides": list(HydraConfig.get().overrides.task),
            "resume": cfg.resume,
            "resume_used": requeue_resume(cfg.resume),
            "trainer": OmegaConf.to_container(cfg.trainer, resolve=True),
            "slurm": {k: v for k, v in os.environ.items() if k.startswith("SLURM_")},
        }
        (out / f"start{restart}_rank{rank}.json").write_text(json.dumps(record))
        if restart == 0:
            os.kill(os.getpid(), signal.SIGUSR2)
            if rank == 0:
                raise AssertionError("submitit's USR2 handler should have requeued the job and exited")
        return "done"

    from asr_pe.training.cli import friendly_errors
    from asr_pe.training.train import train

    last = out / "checkpoints" / "last.ckpt"
    found_step = None
    if last.exists():
        import torch

        found_step = int(torch.load(last, map_location="cpu", weights_only=True)["global_step"])
    (out / f"start{restart}.json").write_text(json.dumps({"last_ckpt_step": found_step, "resume": cfg.resume}))
    if restart == 0:
        threading.Thread(target=_send_timeout_signal_once, args=(last,), daemon=True).start()
    with friendly_errors():
        train(cfg)
    return "trained"


if __name__ == "__main__":
    main()
