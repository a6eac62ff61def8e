"""`Run`: the one owner of a run folder's life, in the order that keeps its guarantees.

    with Run.open(cfg) as run:     # lock, plan (fresh / resume / skip), identity, config.yaml
        if not run.finished:
            with run.first_start():    # a failure before training leaves the folder as it was
                job = run.prepare()    # data, model, run_info.json
            run.fit(job)               # train; a stop or divergence raises (exit 143 / 3)
            run.evaluate()             # every test set, then eval/done.json
                                   # leaving the block gives the lock back

What each step owns:

- **open** refuses a start before it writes anything of the run (a bad ``resume``, a folder that
  holds a run, a folder in use, a resume that changes the model, data, seed or arm), and a
  refused start takes back the files Hydra and the lock wrote for it; then it holds the folder's
  lock (`asr_pe.run_lock`; only global rank 0), removes the partial writes of a killed process,
  records the resume (``resumes.json``) and writes ``config.yaml``. A run that has trained (it has
  a checkpoint) is resumed with its own ``config.yaml``; a folder that never trained has no
  identity yet and starts from the command line's config.
- **first_start**: a first start that fails before training removes what it wrote, so the
  corrected command starts the folder instead of being refused by it or replaying its config.
- **prepare** builds data (rank 0 first), model (a fine-tune's weights loaded) and Lightning
  module, and writes ``run_info.json``, whose identity keys the result tables group by.
- **fit** clears ``eval/done.json`` (training more makes an evaluation stale), trains, and merges
  the metric log whatever happens; a stuck loader worker is a one-line error.
- **evaluate** scores every test set once with the newest checkpoint under the run's lock and
  marks the run done with the checkpoint those results record (a SIGTERM there is exit 143 with
  one line; the run stays unfinished).
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from asr_pe.evaluation.provenance import checkpoint_record, evaluated_checkpoint, weights_sha256
from asr_pe.inference.device import machine_record
from asr_pe.io import atomic_write_text
from asr_pe.models.asr import build_asr_model, frontend_from_config, model_kwargs
from asr_pe.run_folder import (
    CONFIG,
    LOCK,
    LOGS,
    METRICS,
    RUN_CONTENT,
    RUN_INFO,
    TENSORBOARD,
    clear_eval_done,
    config_path,
    has_checkpoints,
    logs_dir,
    mark_eval_done,
    pe_label,
    read_run_info,
    run_label,
    training_remedy,
    write_config,
    write_run_info,
)
from asr_pe.run_lock import hold_run_lock, release_run_lock

from . import hydra_job
from .callbacks import RunFolderCheckpointIO, run_callbacks
from .config_checks import check_train_config
from .data import ASRDataModule, prepare_run_data, resolve_manifests
from .finetune import check_init_from, load_init_weights, seed_prepared_files
from .lightning_private import check_lightning, count_in_steps
from .loader_deadline import end_loader_workers, loader_timeout_error
from .resume import (StartPlan, parse_resume, plan_start, record_resume, remove_partial_writes,
                     resumed_config, settings_changed)
from .run_dir import artifacts_key, data_key, prepare_on_rank_zero
from .schedules import StepSchedule, step_schedule
from .slurm import check_multirun_ddp, check_slurm_layout, requeue_resume, slurm_plugins
from .stops import fit_or_stop, sigterm_stops

log = logging.getLogger(__name__)


@dataclass
class Job:
    """What `Run.prepare` builds for `Run.fit`."""
    module: Any       # asr_pe.training.module.ASRModule
    datamodule: ASRDataModule
    schedule: StepSchedule


@dataclass
class Run:
    cfg: DictConfig
    dir: Path
    trainer: L.Trainer
    plan: StartPlan
    saved_cfg: DictConfig | None      # the run's config.yaml before this start (a resume)
    source: tuple[Path, Path] | None  # a fine-tune's source run and checkpoint (first start only)
    found: frozenset[str] = frozenset()  # the run files the folder held before this start

    # ------------------------------------------------------------------ open

    @classmethod
    def open(cls, cfg: DictConfig) -> "Run":
        run_dir = hydra_job.output_dir() or Path(cfg.run_dir)  # Hydra's output folder (sweeps too), or run_dir
        before = _StartFiles.before(run_dir)
        try:
            check_lightning()  # the private Lightning names the resume guarantees rely on: a tested version
            check_train_config(cfg)  # values that cannot work: one line now, not a traceback after hours
            return cls._open(cfg, run_dir)
        except BaseException:
            before.take_back()  # a refused start writes nothing
            raise

    @classmethod
    def _open(cls, cfg: DictConfig, run_dir: Path) -> "Run":
        resume = requeue_resume(parse_resume(cfg.get("resume", False)))  # a requeued SLURM job continues
        # the run's own config.yaml is the config of a run that has trained (a checkpoint); a first
        # start that failed before training has no identity to keep
        saved_cfg = (OmegaConf.load(config_path(run_dir))
                     if resume is not False and config_path(run_dir).exists() and has_checkpoints(run_dir) else None)
        if saved_cfg is not None:
            cfg = resumed_config(cfg, run_dir, hydra_job.command_line_keys())
        run_dir.mkdir(parents=True, exist_ok=True)
        if cfg.get("threads"):
            torch.set_num_threads(int(cfg.threads))
        elif hint := busy_machine_hint():
            print(hint, flush=True)
        # The trainer first: it knows this process' rank (from the launcher's or SLURM's environment)
        # before any process group exists, and only rank 0 owns (locks and writes) the run folder.
        L.seed_everything(int(cfg.seed), workers=True)
        trainer = _trainer(cfg, run_dir)
        if trainer.is_global_zero:
            hold_run_lock(run_dir)          # a second writer of this folder stops here
            remove_partial_writes(run_dir)  # .<file>.*.tmp of a process killed mid-write
        plan = plan_start(run_dir, cfg, resume, owner=trainer.is_global_zero)
        found = frozenset(name for name in RUN_CONTENT if (run_dir / name).exists())
        run = cls(cfg, run_dir, trainer, plan, saved_cfg, source=None, found=found)
        if plan.skip:
            return run
        # a fine-tune's source: checked before any data work; only the first start loads it
        run.source = check_init_from(cfg) if plan.checkpoint is None else None
        check_slurm_layout(trainer.num_devices, trainer.num_nodes)
        env = getattr(trainer.strategy, "cluster_environment", None)
        check_multirun_ddp(hydra_job.in_multirun(), trainer.world_size,
                           env.creates_processes_externally if env is not None else True)
        if cfg.get("eval_after_train", True):
            from asr_pe.inference.device import resolve_device

            resolve_device(cfg.eval.get("device", "auto"))  # eval.device=cuda on a CPU node: now, not after training
        if run.owner:
            run._record_start()
        return run

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        # the folder is written by this process until train() returns (also in a process that goes
        # on: a notebook, a test, a sweep's next job), not until the process ends
        if self.owner:
            release_run_lock(self.dir)

    @property
    def owner(self) -> bool:
        return self.trainer.is_global_zero

    @property
    def finished(self) -> bool:
        return self.plan.skip

    def _record_start(self) -> None:
        print(f"[asr_pe] run directory: {self.dir}")
        ckpt = self.plan.checkpoint
        if ckpt is not None:
            changed = settings_changed(OmegaConf.to_container(self.saved_cfg),
                                       OmegaConf.to_container(self.cfg, resolve=True))
            record_resume(self.dir, self.plan, changed)
            print(f"[asr_pe] resuming from {ckpt.name} (step {self.plan.step})"
                  + (f"; changed: {', '.join(f'{k} {a} -> {b}' for k, (a, b) in changed.items())}" if changed else ""))
            # Lightning's CSV logger warns that it deletes earlier logs; _set_aside_metrics keeps them
            print(f"[asr_pe] logs/metrics.csv keeps the rows of steps before {self.plan.step}; those at or after it "
                  "(trained after that checkpoint) are logged again by this start")
        write_config(self.dir, self.cfg)

    @contextlib.contextmanager
    def first_start(self) -> Iterator[None]:
        """Around `prepare`: a first start that fails there takes back the files it wrote."""
        try:
            yield
        except BaseException:
            if self.owner and self.plan.checkpoint is None and not has_checkpoints(self.dir):
                _forget_first_start(self.dir, self.found)
            raise

    # ------------------------------------------------------------------ prepare

    def prepare(self) -> Job:
        cfg, run_dir, zero = self.cfg, self.dir, self.owner
        uses_ctc = float(cfg.loss.get("ctc_weight", 1.0)) > 0
        plain_cfg = OmegaConf.to_container(cfg, resolve=True)
        kwargs = model_kwargs(plain_cfg, vocab_size=1)
        frontend = frontend_from_config(kwargs["frontend"], kwargs["in_features"], kwargs["encoder"]["d_model"])
        if self.source is not None and zero:
            seed_prepared_files(self.source[0], run_dir, cfg)  # the tokenizer and CMVN the weights were trained on
        data = prepare_on_rank_zero(
            run_dir, data_key(cfg), self.trainer.global_rank,
            lambda: prepare_run_data(cfg.data, run_dir, frontend=frontend, uses_ctc=uses_ctc),
            artifacts=artifacts_key(cfg))
        log.info("data: %s", data.report)
        model = build_asr_model(**model_kwargs(plain_cfg, data.tokenizer.vocab_size))
        if self.source is not None:
            load_init_weights(model, self.source[1])
        from .module import ASRModule, count_parameters  # after data: keeps import-time errors readable

        datamodule = ASRDataModule(data, cfg.data, int(cfg.seed))
        schedule = step_schedule(cfg.trainer, datamodule.train_batches_per_epoch(self.trainer.world_size))
        module = ASRModule(model, data.tokenizer, cfg.loss, cfg.optim, total_steps=schedule.max_steps,
                           batches_per_epoch=schedule.batches_per_epoch)
        if zero:
            write_run_info(run_dir, {
                "pe": pe_label(cfg.pe), "loss": cfg.loss.name, "encoder": cfg.encoder.kind, "seed": int(cfg.seed),
                "data": cfg.data.name, "train_max_duration": data.report["train_max_duration"],
                "train_hours": data.report["train_hours"], "parameters": count_parameters(model),
                "remedy": training_remedy(cfg), "arm": str(cfg.get("arm") or ""), "label": run_label(cfg),
                "data_report": data.report, **_init_from_record(run_dir, self.source),
                "machines": _machines(run_dir, machine_record(self.trainer.strategy.root_device)),
            })
            print(f"[asr_pe] model: {count_parameters(model) / 1e6:.2f} M parameters, pe={pe_label(cfg.pe)}, "
                  f"loss={cfg.loss.name}, train {data.report['train_used']} utts ({data.report['train_hours']:.2f} h)")
        return Job(module, datamodule, schedule)

    # ------------------------------------------------------------------ fit

    def fit(self, job: Job) -> None:
        trainer, ckpt = self.trainer, self.plan.checkpoint
        if self.owner:
            if ckpt is not None:
                _set_aside_metrics(self.dir, self.plan.step)
            clear_eval_done(self.dir)  # training (more) makes an earlier evaluation stale
        count_in_steps(trainer, job.schedule)
        try:
            # a SIGTERM or a diverged run raises TrainingStopped here: no evaluation, no eval/done.json
            fit_or_stop(trainer, job.module, datamodule=job.datamodule,
                        ckpt_path=str(ckpt) if ckpt is not None else None,
                        # the full training state restored with torch.load(weights_only=True) (Lightning's
                        # default is False): our checkpoints hold tensors and plain containers only
                        weights_only=True)
        except RuntimeError as e:
            timeout = loader_timeout_error(e, self.cfg.data)
            if timeout is None:
                raise
            end_loader_workers()  # a stuck worker would hang the exit (multiprocessing joins its children)
            raise timeout from e
        finally:  # also when the fit fails or stops: no metrics part left behind, every part so far merged
            if self.owner:
                _merge_metrics(self.dir)
        print(f"[asr_pe] trained {trainer.global_step} steps; skipped non-finite batches: "
              f"{int(job.module.skipped_batches)}, dropped utterances: {int(job.module.dropped_utterances)}")

    # ------------------------------------------------------------------ evaluate

    def evaluate(self) -> None:
        cfg = self.cfg
        if not cfg.get("eval_after_train", True):
            return
        if not self.owner:  # evaluate_run scores every utterance in one process; the others have nothing to add
            print(f"[asr_pe] rank {self.trainer.global_rank}: training done; rank 0 evaluates")
            return
        from asr_pe.evaluation.pipeline import evaluate_run

        stopped = (f"SIGTERM during the evaluation after training: trained to step {self.trainer.global_step} "
                   "(last.ckpt), not evaluated, the run is not marked done: resume=auto evaluates it")
        with sigterm_stops(stopped):  # a set cut short has no buckets.meta.json: it reads as not evaluated
            results = evaluate_run(self.dir, cfg_overrides={"decode": cfg.decode, "eval": cfg.eval,
                                                            "data": {"test": cfg.data.get("test")}},
                                   corpus_manifests=resolve_manifests)
        # done.json names the checkpoint its sets record: eval_done holds only while they still do
        mark_eval_done(self.dir, list(results), checkpoint=evaluated_checkpoint(self.dir, list(results)))


# ---------------------------------------------------------------------- pieces


def _trainer(cfg: DictConfig, run_dir: Path) -> L.Trainer:
    loggers = [CSVLogger(run_dir, name="", version=LOGS), TensorBoardLogger(run_dir, name="", version=TENSORBOARD)]
    return L.Trainer(
        **OmegaConf.to_container(cfg.trainer, resolve=True),
        default_root_dir=run_dir,
        callbacks=run_callbacks(cfg, run_dir),  # checkpoints, stops, optimiser settings, progress
        logger=loggers,
        use_distributed_sampler=False,  # the duration-bucket sampler shards by rank itself
        # under SLURM: its ranks, with submitit (not Lightning) requeuing; checkpoints atomic in the run folder
        plugins=[*slurm_plugins(), RunFolderCheckpointIO()],
    )


def _init_from_record(run_dir: Path, source: tuple[Path, Path] | None) -> dict:
    """run_info.json's ``init_from`` (the checkpoint a fine-tune started from): recorded at the
    first start, kept from the run's own run_info.json when it resumes; {} for a run from scratch."""
    if source is not None:  # {"run", "name", "global_step", "sha256", "weights_sha256"}
        return {"init_from": {"run": str(source[0]), **checkpoint_record(source[1]),
                              "weights_sha256": weights_sha256(source[1])}}
    previous = _recorded(run_dir, "init_from")
    return {"init_from": previous} if previous else {}


def _machines(run_dir: Path, this: dict) -> list[dict]:
    """run_info.json's ``machines``: every machine the run has trained on (`machine_record`), in
    the order of its starts, kept across resumes: what a retrain elsewhere cannot give back bit for bit."""
    seen = _recorded(run_dir, "machines") or []
    return seen + ([this] if this not in seen else [])


def _recorded(run_dir: Path, key: str) -> Any:
    """``key`` of the run's own run_info.json from an earlier start; None without one."""
    try:
        return read_run_info(run_dir).get(key)
    except (OSError, ValueError):
        return None


# ``logs/metrics.csv`` across resumes: every step once, in order, whatever ended a launch.
# Lightning's CSV logger deletes ``metrics.csv`` when a fit starts logging, so before a resumed fit
# the earlier rows are set aside as ``logs/metrics.part0.csv`` and joined back afterwards; the join
# runs however the fit ends (`Run.fit`'s ``finally``), and a start that finds parts left by a process
# killed outright (``kill -9``: no ``finally``) joins them first. Rows of steps at or after the
# checkpoint being resumed from are dropped when they are set aside: that launch trained them after
# its last checkpoint, and the resumed one trains (and logs) those steps again.


def _set_aside_metrics(run_dir: Path, resume_step: int) -> None:
    """Before a resumed fit: the rows so far (every part and ``metrics.csv``), less those of steps
    ``>= resume_step``, become ``logs/metrics.part0.csv``; ``metrics.csv`` is left for the fit."""
    _join_metrics(logs_dir(run_dir), "metrics.part0.csv", keep=lambda row: _step(row) < resume_step)


def _merge_metrics(run_dir: Path) -> None:
    """Write ``logs/metrics.csv`` as all parts in order (union of columns), atomically."""
    if _metric_parts(logs_dir(run_dir)):
        _join_metrics(logs_dir(run_dir), METRICS)


def _metric_parts(logs: Path) -> list[Path]:
    return sorted(logs.glob("metrics.part*.csv"), key=lambda p: int(p.stem.split("part")[1]))


def _join_metrics(logs: Path, into: str, keep=lambda row: True) -> None:
    """The kept rows of every part and ``metrics.csv`` (in that order) as ``logs/<into>``; the
    files read are then deleted, but for ``into`` itself."""
    files = _metric_parts(logs) + ([logs / METRICS] if (logs / METRICS).exists() else [])
    if not files:
        return
    rows, columns = [], []
    for f in files:
        with open(f, newline="") as fh:
            reader = csv.DictReader(fh)
            columns += [c for c in reader.fieldnames or [] if c not in columns]
            rows += [row for row in reader if keep(row)]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(logs / into, buf.getvalue())
    for f in files:
        if f.name != into:
            f.unlink()


def _step(row: dict) -> float:
    try:
        return float(row.get("step") or 0)
    except ValueError:
        return 0.0


def busy_machine_hint(load: float | None = None, cores: int | None = None) -> str | None:
    """A line for a run on torch's default threads (one per core) on a machine already busy (1-minute
    load average above half its cores): threads=1 is then several times faster (make demo on 2
    cores with two other jobs running: 3.5 s/step with threads=1, 15.4 with the default), as
    icefall and ESPnet train with one. None otherwise, or where the load is unknown."""
    try:
        load = os.getloadavg()[0] if load is None else load
    except OSError:
        return None
    cores = cores or os.cpu_count() or 1
    if load <= cores / 2:
        return None
    return (f"[asr_pe] this machine is busy (load {load:.1f} on {cores} cores) and torch uses one thread per core: "
            "threads=1 is usually several times faster here (conf/train.yaml)")


def _forget_first_start(run_dir: Path, found: frozenset[str]) -> None:
    """What a first start that failed before training wrote into the folder, removed: what was not
    there before it (``found``), and the config and record of a run that never trained (a resume
    must not replay them). Prepared files found there stay: their own record decides their reuse."""
    for name in RUN_CONTENT:
        if name in found and name not in (CONFIG, RUN_INFO):
            continue
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    log.info("the first start of %s failed before training: its files removed", run_dir)


@dataclass
class _StartFiles:
    """What Hydra and the lock write into a run folder before the run decides to start: taken back
    when the start is refused (``resume=false`` on a folder holding a run, a folder in use, ...),
    so a refused start leaves the folder as it found it."""
    run_dir: Path
    lock_existed: bool
    job_log: Path | None
    log_size: int  # the job log's size before this start (0: it did not exist)
    hydra_subdir: Path | None

    @classmethod
    def before(cls, run_dir: Path) -> "_StartFiles":
        hydra_subdir, job_log = hydra_job.start_files(run_dir)
        size = job_log.stat().st_size if job_log is not None and job_log.exists() else 0
        return cls(run_dir, (run_dir / LOCK).exists(), job_log, size, hydra_subdir)

    def take_back(self) -> None:
        # only rank 0 takes anything back (another rank's failure must not touch the folder rank 0
        # writes), and the lock file only when it took the lock for this start. Before a trainer
        # exists to say so, the launcher's environment names the rank (torchrun / Lightning's own
        # launcher set RANK and LOCAL_RANK, SLURM SLURM_PROCID; none of them: rank 0)
        held = release_run_lock(self.run_dir)
        if not held and any(os.environ.get(var, "0") != "0" for var in ("RANK", "LOCAL_RANK", "SLURM_PROCID")):
            return
        if held and not self.lock_existed:
            (self.run_dir / LOCK).unlink(missing_ok=True)
        if self.hydra_subdir is not None:  # .hydra (Hydra's first start here) or .hydra/start-<time>
            shutil.rmtree(self.hydra_subdir, ignore_errors=True)
        if self.job_log is not None:
            with contextlib.suppress(OSError):
                if self.log_size == 0:
                    self.job_log.unlink(missing_ok=True)
                elif self.job_log.exists():
                    with open(self.job_log, "r+b") as f:
                        f.truncate(self.log_size)
        if self.hydra_subdir is not None:
            with contextlib.suppress(OSError):
                self.run_dir.rmdir()  # Hydra made it for this start, which left nothing in it
