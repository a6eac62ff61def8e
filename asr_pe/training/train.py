"""``train(cfg)``: build data, model and Lightning trainer from a composed config; fit; evaluate."""

from __future__ import annotations

import inspect
import json
import logging
import sys
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from asr_pe.evaluation.provenance import evaluated_checkpoint
from asr_pe.run_folder import (
    LOGS,
    TENSORBOARD,
    RUN_CONTENT,
    checkpoint_path,
    clear_eval_done,
    config_path,
    has_checkpoints,
    mark_eval_done,
    pe_label,
    run_label,
    training_remedy,
    write_config,
    write_run_info,
)

from asr_pe.models.asr import build_asr_model, frontend_from_config, model_kwargs

from .checkpoint_io import RunFolderCheckpointIO
from .checkpoints import remove_partial_writes, run_checkpoints
from .config_checks import check_train_config
from .data import ASRDataModule, prepare_run_data, resolve_manifests
from .finetune import check_init_from, init_record, load_init_weights, seed_prepared_files
from .loader_deadline import end_loader_workers, loader_timeout_error
from .lightning_private import check_lightning
from .logs import conventional_logging
from .metrics_log import merge_metrics, set_aside_metrics
from .resume import command_line_keys, parse_resume, plan_start, record_resume, resumed_config, settings_changed
from .resume_optim import ApplyOptimSettings
from asr_pe.run_lock import hold_run_lock
from .slurm import check_multirun_ddp, check_slurm_layout, requeue_resume, slurm_plugins
from .stops import fit_or_stop, sigterm_stops, stop_callbacks
from .run_dir import artifacts_key, data_key, prepare_on_rank_zero, resolve_run_dir

log = logging.getLogger(__name__)


def _progress_bars(cfg: DictConfig) -> list:
    """rich draws live bars on a terminal; in CI logs a plain bar with sparse refreshes reads better.
    None with ``trainer.enable_progress_bar=false`` (Lightning refuses a bar callback then)."""
    if not cfg.trainer.get("enable_progress_bar", True):
        return []
    return [RichProgressBar() if sys.stdout.isatty() else TQDMProgressBar(refresh_rate=50)]


def _callbacks(cfg: DictConfig, run_dir: Path) -> list:
    # checkpoints/last.ckpt and best.ckpt under fixed names (training/checkpoints.py)
    return [*run_checkpoints(run_dir, int(cfg.checkpoint.every_n_train_steps)), ApplyOptimSettings(),
            *_progress_bars(cfg)]


def _init_from_record(run_dir: Path, source: tuple[Path, Path] | None) -> dict:
    """run_info.json's ``init_from`` (the checkpoint a fine-tune started from): recorded at the
    first start, kept from the run's own run_info.json when it resumes; {} for a run from scratch."""
    if source is not None:
        return {"init_from": init_record(*source)}
    try:
        previous = json.loads((run_dir / "run_info.json").read_text()).get("init_from")
    except (OSError, ValueError):
        previous = None
    return {"init_from": previous} if previous else {}


def _in_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN



def resume_load_kwargs(trainer, ckpt) -> dict:
    """``weights_only=True`` for Lightning's restore of the full training state on resume (its
    default is False): our checkpoints hold tensors and plain containers only, which the
    provenance reader already loads so. Lightning before 2.5 has no such argument of ``fit``."""
    if ckpt is None or "weights_only" not in inspect.signature(trainer.fit).parameters:
        return {}
    return {"weights_only": True}

def train(cfg: DictConfig) -> Path:
    """Train one model as configured; returns its run directory."""
    conventional_logging()
    check_lightning()  # the private Lightning names the resume guarantees rely on: a tested version
    check_train_config(cfg)  # values that cannot work: one line now, not a traceback after data or training
    run_dir = resolve_run_dir(cfg)
    resume = requeue_resume(parse_resume(cfg.get("resume", False)))  # a requeued SLURM job continues its run
    # the run's own config.yaml is the config of a run that has trained (a checkpoint): the config of
    # a first start that failed before training is not replayed (a typo'd option would be, forever)
    saved_cfg = (OmegaConf.load(config_path(run_dir))
                 if resume is not False and config_path(run_dir).exists() and has_checkpoints(run_dir) else None)
    if saved_cfg is not None:  # resuming: the run's own config.yaml is the config
        cfg = resumed_config(cfg, run_dir, command_line_keys())
    run_dir.mkdir(parents=True, exist_ok=True)
    # The trainer first: it knows this process' rank (from the launcher's or SLURM's environment)
    # before any process group exists, and only rank 0 owns (locks and writes) the run folder.
    L.seed_everything(int(cfg.seed), workers=True)
    loggers = [CSVLogger(run_dir, name="", version=LOGS), TensorBoardLogger(run_dir, name="", version=TENSORBOARD)]
    trainer = L.Trainer(
        **OmegaConf.to_container(cfg.trainer, resolve=True),
        default_root_dir=run_dir,
        # + a SIGTERM stop saves last.ckpt and fails; too many non-finite skips fail (stops.py)
        callbacks=_callbacks(cfg, run_dir) + stop_callbacks(cfg, checkpoint_path(run_dir)),
        logger=loggers,
        use_distributed_sampler=False,  # the duration-bucket sampler shards by rank itself
        # under SLURM: its ranks, with submitit (not Lightning) requeuing; checkpoints atomic in the run folder
        plugins=[*slurm_plugins(), RunFolderCheckpointIO()],
    )
    zero = trainer.is_global_zero
    if zero:
        hold_run_lock(run_dir)          # a second train.py on this folder stops here
        remove_partial_writes(run_dir)  # .<file>.*.tmp of a process killed mid-write
    plan = plan_start(run_dir, cfg, resume, owner=zero)
    if plan.skip:
        log.info("run %s is finished (evaluation files exist); skipping", run_dir)
        print(f"[asr_pe] finished run, skipped: {run_dir}")
        return run_dir
    ckpt = plan.checkpoint
    # a fine-tune's source (init_from): checked against this config before any data work; only the
    # first start loads it (a resumed fine-tune continues from its own checkpoint)
    source = check_init_from(cfg) if ckpt is None else None
    check_slurm_layout(trainer.num_devices, trainer.num_nodes)
    check_multirun_ddp(_in_multirun(), trainer.world_size,
                       trainer.strategy.cluster_environment.creates_processes_externally
                       if getattr(trainer.strategy, "cluster_environment", None) is not None else True)
    if cfg.get("eval_after_train", True):
        from asr_pe.inference.device import resolve_device

        resolve_device(cfg.eval.get("device", "auto"))  # eval.device=cuda on a CPU node: fail now, not after training
    if zero:
        print(f"[asr_pe] run directory: {run_dir}")
        if ckpt is not None:
            changed = settings_changed(OmegaConf.to_container(saved_cfg), OmegaConf.to_container(cfg, resolve=True))
            record_resume(run_dir, plan, changed)
            print(f"[asr_pe] resuming from {ckpt.name} (step {plan.step})"
                  + (f"; changed: {', '.join(f'{k} {a} -> {b}' for k, (a, b) in changed.items())}" if changed else ""))
        write_config(run_dir, cfg)
    try:
        return _prepare_fit_evaluate(cfg, run_dir, trainer, plan, source, zero)
    except BaseException as e:
        if zero and ckpt is None and not has_checkpoints(run_dir) and not getattr(trainer, "fit_started", False):
            _forget_first_start(run_dir)
        raise


def _forget_first_start(run_dir: Path) -> None:
    """A first start that failed before training (bad data, a model that cannot be built) leaves
    the folder as it found it, so the corrected command starts it (resume=false or auto) instead
    of being refused by, or replaying, what this start wrote."""
    import shutil

    for name in RUN_CONTENT:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    log.info("the first start of %s failed before training: its files removed", run_dir)


def _prepare_fit_evaluate(cfg: DictConfig, run_dir: Path, trainer, plan, source, zero: bool) -> Path:
    ckpt = plan.checkpoint
    uses_ctc = float(cfg.loss.get("ctc_weight", 1.0)) > 0
    plain_cfg = OmegaConf.to_container(cfg, resolve=True)
    kwargs = model_kwargs(plain_cfg, vocab_size=1)
    frontend = frontend_from_config(kwargs["frontend"], kwargs["in_features"], kwargs["encoder"]["d_model"])
    if source is not None and zero:
        seed_prepared_files(source[0], run_dir, cfg)  # the tokenizer and CMVN the weights were trained on
    data = prepare_on_rank_zero(
        run_dir, data_key(cfg), trainer.global_rank,
        lambda: prepare_run_data(cfg.data, run_dir, frontend=frontend, uses_ctc=uses_ctc), artifacts=artifacts_key(cfg))
    log.info("data: %s", data.report)

    model = build_asr_model(**model_kwargs(plain_cfg, data.tokenizer.vocab_size))
    if source is not None:
        load_init_weights(model, source[1])
    from .module import ASRModule, count_parameters  # after data: keeps import-time errors readable

    total_steps = int(cfg.trainer.max_steps) if int(cfg.trainer.get("max_steps", -1)) > 0 else None
    module = ASRModule(model, data.tokenizer, cfg.loss, cfg.optim, total_steps=total_steps)
    if zero:
        write_run_info(run_dir, {
            "pe": pe_label(cfg.pe),
            "loss": cfg.loss.name,
            "encoder": cfg.encoder.kind,
            "seed": int(cfg.seed),
            "data": cfg.data.name,
            "train_max_duration": data.report["train_max_duration"],
            "train_hours": data.report["train_hours"],
            "parameters": count_parameters(model),
            "remedy": training_remedy(cfg),
            "arm": str(cfg.get("arm") or ""),
            "label": run_label(cfg),
            "data_report": data.report,
            **_init_from_record(run_dir, source),
        })
        print(f"[asr_pe] model: {count_parameters(model) / 1e6:.2f} M parameters, pe={pe_label(cfg.pe)}, "
              f"loss={cfg.loss.name}, train {data.report['train_used']} utts ({data.report['train_hours']:.2f} h)")

    datamodule = ASRDataModule(data, cfg.data, int(cfg.seed))
    if ckpt is not None and zero:
        set_aside_metrics(run_dir, plan.step)
    if zero:
        clear_eval_done(run_dir)  # training (more) makes an earlier evaluation stale
    try:
        # a SIGTERM or a diverged run raises TrainingStopped here: no evaluation, no eval/done.json
        trainer.fit_started = True  # from here a failure leaves what it trained and logged (train() above)
        fit_or_stop(trainer, module, datamodule=datamodule, ckpt_path=str(ckpt) if ckpt is not None else None,
                    **resume_load_kwargs(trainer, ckpt))
    except RuntimeError as e:
        timeout = loader_timeout_error(e, cfg.data)
        if timeout is None:
            raise
        end_loader_workers()  # a stuck worker would hang the exit (multiprocessing joins its children)
        raise timeout from e
    finally:  # also when the fit fails or stops: no metrics part left behind, every part so far merged
        if trainer.is_global_zero:
            merge_metrics(run_dir)
    print(f"[asr_pe] trained {trainer.global_step} steps; skipped non-finite batches: "
          f"{int(module.skipped_batches)}, dropped utterances: {int(module.dropped_utterances)}")

    if cfg.get("eval_after_train", True) and trainer.is_global_zero:
        from asr_pe.evaluation.pipeline import evaluate_run

        stopped = (f"SIGTERM during the evaluation after training: trained to step {trainer.global_step} "
                   "(last.ckpt), not evaluated, the run is not marked done: resume=auto evaluates it")
        with sigterm_stops(stopped):  # a set cut short has no buckets.meta.json: it reads as not evaluated
            results = evaluate_run(run_dir, cfg_overrides={"decode": cfg.decode, "eval": cfg.eval,
                                                           "data": {"test": cfg.data.get("test")}},
                                   corpus_manifests=resolve_manifests)
        mark_eval_done(run_dir, list(results), checkpoint=evaluated_checkpoint(run_dir, list(results)))
    elif cfg.get("eval_after_train", True):
        # evaluate_run scores every utterance in this one process; the others have nothing to add
        print(f"[asr_pe] rank {trainer.global_rank}: training done; rank 0 evaluates")
    print(f"[asr_pe] run directory: {run_dir}")
    return run_dir
