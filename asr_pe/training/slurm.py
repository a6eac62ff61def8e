"""SLURM: a requeued job resumes its run, and only one mechanism requeues.

How a run gets requeued (docs/cluster.md):

* ``hydra/launcher=slurm`` (hydra-submitit-launcher) submits each sweep point with
  ``--signal=USR2@<signal_delay_s>``. On that signal submitit's handler on global rank 0 calls the
  launcher's ``checkpoint()`` (a resubmission of the same sweep point: same overrides, same
  output folder), pickles it over the job's submission file and runs ``scontrol requeue``;
  ``max_num_timeout`` bounds how many time limits it survives.
* A cluster with ``PreemptMode=REQUEUE`` requeues a preempted job itself (SIGTERM first;
  submitit only logs it), and the job starts again from its original submission file.

Either way the restarted job runs the same command line, so it must not depend on the user having
typed ``resume=auto``: SLURM sets ``SLURM_RESTART_COUNT`` in a restarted job, and `requeue_resume`
turns ``resume=false`` into ``auto`` there (continue from ``checkpoints/last.ckpt``, skip a
finished run).

Lightning's own SLURM auto-requeue (``SLURMEnvironment(auto_requeue=True)``, the default) would be a
second mechanism: on its signal (SIGUSR1) it writes ``hpc_ckpt_<n>.ckpt`` into the run folder and
requeues too, and Lightning later loads such a file by itself whenever ``fit`` gets no
``ckpt_path``, beside our ``last.ckpt``. `slurm_plugins` switches it off, so the run folder's
``last.ckpt`` is the one resume point.

Lightning takes world size and ranks from ``SLURM_NTASKS`` / ``SLURM_PROCID`` but picks its strategy
from ``trainer.devices`` / ``num_nodes``, and checks the two against each other only when it starts
the processes itself, which it never does under SLURM. A job of 8 tasks running a one-device
trainer is therefore 8 independent copies of one run, all writing the same folder.
`check_slurm_layout` refuses that.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from asr_pe.errors import UserError

log = logging.getLogger(__name__)

RESTART_COUNT_VAR = "SLURM_RESTART_COUNT"  # set by SLURM in a requeued (restarted) batch job


class SlurmLayoutError(UserError, ValueError):
    """The SLURM job's tasks do not match the trainer's devices x nodes."""


def restart_count(environ: Mapping[str, str] | None = None) -> int:
    """How many times SLURM has restarted this job (0 outside SLURM or on the first start)."""
    raw = (os.environ if environ is None else environ).get(RESTART_COUNT_VAR, "").strip()
    try:
        return int(raw or 0)
    except ValueError:
        raise ValueError(f"environment variable {RESTART_COUNT_VAR}={raw!r} is not a whole number") from None


def requeue_resume(resume: Any, environ: Mapping[str, str] | None = None) -> Any:
    """The ``resume`` value a run should use: ``"auto"`` in a requeued SLURM job launched with
    ``resume=false`` (its first start may have written ``last.ckpt``, which ``false`` refuses),
    else ``resume`` unchanged (``true`` and ``auto`` already continue)."""
    count = restart_count(environ)
    if count > 0 and resume is False:
        log.info("SLURM job restarted %d time(s) (%s): resume=false -> auto", count, RESTART_COUNT_VAR)
        print(f"[asr_pe] requeued SLURM job (restart {count}): resume=auto", flush=True)
        return "auto"
    return resume


def slurm_plugins() -> list:
    """``plugins=`` for ``lightning.Trainer``: under SLURM, the SLURM cluster environment with
    Lightning's auto-requeue off (see the module docstring); elsewhere nothing."""
    from lightning.pytorch.plugins.environments import SLURMEnvironment

    if not SLURMEnvironment.detect():
        return []
    return [SLURMEnvironment(auto_requeue=False)]


def check_slurm_layout(num_devices: int, num_nodes: int, environ: Mapping[str, str] | None = None) -> None:
    """Under SLURM, require ``SLURM_NTASKS == num_devices * num_nodes`` (and, where SLURM sets them,
    ``SLURM_NTASKS_PER_NODE == num_devices``, ``SLURM_NNODES == num_nodes``): one task per device.
    ``num_devices`` / ``num_nodes`` are the trainer's (``trainer.num_devices``, ``trainer.num_nodes``)."""
    env = os.environ if environ is None else environ
    # Lightning's rule (SLURMEnvironment.detect): srun set SLURM_NTASKS, and the job is not an
    # interactive allocation named "bash"/"interactive", where Lightning ignores SLURM
    if "SLURM_NTASKS" not in env or env.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        return
    wanted = {"SLURM_NTASKS": num_devices * num_nodes, "SLURM_NTASKS_PER_NODE": num_devices,
              "SLURM_NNODES": num_nodes}
    for var, value in wanted.items():
        raw = env.get(var)
        if raw is None:
            continue
        try:
            actual = int(raw)
        except ValueError:
            raise SlurmLayoutError(f"environment variable {var}={raw!r} is not a whole number") from None
        if actual != value:
            raise SlurmLayoutError(
                f"this SLURM job has {var}={actual}, but the trainer runs {num_devices} device(s) per node on "
                f"{num_nodes} node(s) ({var} should be {value}): each task would train its own copy of the run. "
                f"Launch with hydra/launcher=slurm (it asks for trainer.devices tasks and GPUs per node on "
                f"trainer.num_nodes nodes), or sbatch/srun with --ntasks-per-node={num_devices} "
                f"--nodes={num_nodes}, or set trainer.devices / trainer.num_nodes to the job's layout"
            )


def check_multirun_ddp(multirun: bool, world_size: int, processes_external: bool) -> None:
    """Refuse DDP inside a local Hydra multirun (``-m``) where Lightning starts the ranks itself.

    Lightning's subprocess launcher starts ranks 1.. by running the same command line again
    (``sys.argv`` with ``-m`` and every sweep value): each rank would run the whole sweep. Under
    SLURM (or torchrun) the ranks exist before Lightning starts, so a multirun is fine there.
    """
    if multirun and world_size > 1 and not processes_external:
        raise SlurmLayoutError(
            f"a {world_size}-process DDP trainer in a local multirun (-m) is not supported: Lightning would start "
            "each extra rank by running the whole sweep again. Run one `python train.py trainer=ddp ...` per "
            "configuration, or launch the sweep with hydra/launcher=slurm (one SLURM task per device)"
        )
