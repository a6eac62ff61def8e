"""SLURM launch (hydra/launcher=slurm): the job's tasks match the trainer, Lightning reads the ranks
from the SLURM environment, only submitit requeues, and a requeued job resumes its run.

No SLURM here: the launcher is instantiated the way Hydra does it, Lightning sees a monkeypatched
SLURM environment, and the end-to-end tests launch through the real Hydra + submitit code against
the fake sbatch/srun/scontrol/sacct of tests/fake_slurm.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.plugins import Plugins
from omegaconf import OmegaConf

import asr_pe.training  # noqa: F401  (registers the pe_label resolver)
import fake_slurm
from asr_pe.training.slurm import (
    SlurmLayoutError,
    check_slurm_layout,
    requeue_resume,
    restart_count,
    slurm_plugins,
)

try:
    import hydra_plugins.hydra_submitit_launcher  # noqa: F401
except ImportError as e:  # the launcher is an optional extra of the package, but these tests need it
    raise ImportError("tests/test_slurm.py needs hydra-submitit-launcher: pip install -e '.[slurm]'") from e

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CONF = REPO / "conf"
PROBE = HERE / "slurm_probe.py"


def compose_with_launcher(overrides: list[str]):
    with initialize_config_dir(str(CONF), version_base="1.3", job_name="train"):
        return compose("train", overrides=["hydra/launcher=slurm", *overrides], return_hydra_config=True)


def instantiate_launcher(cfg):
    """As Hydra does before a multirun (Plugins.instantiate_launcher, minus setup())."""
    return Plugins.instance()._instantiate(cfg.hydra.launcher)


# --- the launcher asks SLURM for what the trainer runs ----------------------------------------

LAYOUTS = [
    # overrides, (nodes, tasks per node = GPUs per node)
    (["experiment=cape_librispeech"], (1, 1)),                       # trainer=gpu: one GPU
    (["experiment=cape_tedlium3"], (1, 1)),
    (["experiment=conformer_librispeech", "trainer=ddp"], (1, 8)),   # ddp preset: 8-GPU node
    (["experiment=cape_librispeech", "trainer=ddp", "trainer.devices=8", "trainer.num_nodes=2"], (2, 8)),
    (["experiment=cape_librispeech", "trainer=ddp", "trainer.devices=4", "trainer.num_nodes=3"], (3, 4)),
]


@pytest.mark.parametrize("overrides,layout", LAYOUTS, ids=[" ".join(o) for o, _ in LAYOUTS])
def test_launcher_tasks_gpus_nodes_equal_the_trainer(overrides, layout):
    cfg = compose_with_launcher(overrides)
    launcher = instantiate_launcher(cfg)
    nodes, per_node = layout
    assert (cfg.trainer.num_nodes, cfg.trainer.devices) == (nodes, per_node)
    assert launcher.params["nodes"] == nodes
    assert launcher.params["tasks_per_node"] == per_node
    assert launcher.params["gpus_per_node"] == per_node
    # a time-limited job must be allowed to come back (the plugin's default of 0 never requeues it)
    assert launcher.params["max_num_timeout"] >= 1 and launcher.params["signal_delay_s"] > 0


def test_a_device_count_that_is_not_a_number_is_refused_naming_the_launcher_key():
    cfg = compose_with_launcher(["trainer.devices=auto"])
    with pytest.raises(Exception, match=r"tasks_per_node|gpus_per_node") as err:
        instantiate_launcher(cfg)
    assert "auto" in str(err.value)


# --- Lightning under a SLURM environment --------------------------------------------------------

def slurm_env(monkeypatch, *, ntasks, per_node, nnodes, procid, localid, nodeid, job_name="train",
              job_id="4242", nodelist="gpu[07-08]"):
    for var in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK",
                "SLURM_RESTART_COUNT", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        monkeypatch.delenv(var, raising=False)
    env = {"SLURM_NTASKS": ntasks, "SLURM_NTASKS_PER_NODE": per_node, "SLURM_NNODES": nnodes,
           "SLURM_JOB_NUM_NODES": nnodes, "SLURM_PROCID": procid, "SLURM_LOCALID": localid,
           "SLURM_NODEID": nodeid, "SLURM_JOB_NAME": job_name, "SLURM_JOB_ID": job_id,
           "SLURM_NODELIST": nodelist, "SLURM_JOB_NODELIST": nodelist}
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    return env


def trainer_from(cfg, **kwargs):
    """lightning.Trainer as train() builds it: the composed trainer section, on CPU here."""
    import lightning as L

    trainer_cfg = OmegaConf.to_container(cfg.trainer, resolve=True)
    trainer_cfg.update(accelerator="cpu", precision="32-true", enable_progress_bar=False,
                       enable_model_summary=False)
    return L.Trainer(**trainer_cfg, logger=False, enable_checkpointing=False, **kwargs)


@pytest.mark.parametrize("procid,localid,nodeid", [(0, 0, 0), (11, 3, 1), (15, 7, 1)])
def test_lightning_takes_ranks_and_world_size_from_slurm(monkeypatch, procid, localid, nodeid):
    from lightning.pytorch.plugins.environments import SLURMEnvironment

    cfg = compose_with_launcher(["experiment=cape_librispeech", "trainer=ddp", "trainer.devices=8",
                                 "trainer.num_nodes=2"])
    launcher = instantiate_launcher(cfg)
    slurm_env(monkeypatch, ntasks=launcher.params["nodes"] * launcher.params["tasks_per_node"],
              per_node=launcher.params["tasks_per_node"], nnodes=launcher.params["nodes"],
              procid=procid, localid=localid, nodeid=nodeid)
    trainer = trainer_from(cfg, plugins=slurm_plugins())
    env = trainer.strategy.cluster_environment
    assert isinstance(env, SLURMEnvironment) and env.auto_requeue is False
    assert (trainer.global_rank, trainer.local_rank, trainer.node_rank) == (procid, localid, nodeid)
    assert trainer.world_size == 16 and trainer.num_devices == 8 and trainer.num_nodes == 2
    assert env.main_address == "gpu07"               # first host of SLURM_NODELIST
    assert env.main_port == 15000 + 4242             # Lightning's port from the job id
    check_slurm_layout(trainer.num_devices, trainer.num_nodes)   # the layout matches: no error


def test_one_gpu_job_is_rank_zero_of_one(monkeypatch):
    cfg = compose_with_launcher(["experiment=cape_librispeech"])
    slurm_env(monkeypatch, ntasks=1, per_node=1, nnodes=1, procid=0, localid=0, nodeid=0, nodelist="gpu07")
    trainer = trainer_from(cfg, plugins=slurm_plugins())
    assert (trainer.global_rank, trainer.world_size, trainer.num_devices) == (0, 1, 1)
    check_slurm_layout(trainer.num_devices, trainer.num_nodes)


def test_eight_tasks_for_a_one_gpu_trainer_are_refused(monkeypatch):
    """The old preset (8 tasks per node) with experiment=cape_librispeech (trainer=gpu, devices=1):
    Lightning itself runs each task as a world of one, 8 copies of the run; the check refuses it."""
    cfg = compose_with_launcher(["experiment=cape_librispeech"])
    slurm_env(monkeypatch, ntasks=8, per_node=8, nnodes=1, procid=5, localid=5, nodeid=0, nodelist="gpu07")
    trainer = trainer_from(cfg, plugins=slurm_plugins())
    assert trainer.world_size == 1 and trainer.global_rank == 0    # what Lightning makes of it
    with pytest.raises(SlurmLayoutError, match=r"SLURM_NTASKS=8.*--ntasks-per-node=1 --nodes=1"):
        check_slurm_layout(trainer.num_devices, trainer.num_nodes)


def test_layout_check_reads_nodes_and_ignores_interactive_and_non_slurm_processes():
    two_nodes = {"SLURM_NTASKS": "16", "SLURM_NTASKS_PER_NODE": "8", "SLURM_NNODES": "2", "SLURM_JOB_NAME": "x"}
    check_slurm_layout(8, 2, two_nodes)
    with pytest.raises(SlurmLayoutError, match="SLURM_NTASKS=16"):
        check_slurm_layout(8, 1, two_nodes)
    with pytest.raises(SlurmLayoutError, match="SLURM_NNODES=2"):
        check_slurm_layout(8, 1, {**two_nodes, "SLURM_NTASKS": "8"})
    check_slurm_layout(8, 1, {**two_nodes, "SLURM_JOB_NAME": "interactive"})   # Lightning ignores SLURM there
    check_slurm_layout(8, 1, {})
    with pytest.raises(SlurmLayoutError, match="SLURM_NTASKS='8x'"):
        check_slurm_layout(8, 1, {"SLURM_NTASKS": "8x"})


def test_no_slurm_plugin_outside_slurm(monkeypatch):
    monkeypatch.delenv("SLURM_NTASKS", raising=False)
    assert slurm_plugins() == []


# --- exactly one requeue mechanism: submitit's ------------------------------------------------

@pytest.fixture()
def restore_signal_handlers():
    signums = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGCONT)
    saved = {s: signal.getsignal(s) for s in signums}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def install_submitit_handlers(tmp_path):
    """What submitit's job entry point (submitit.core.submission.process_job) does first."""
    from submitit.core.utils import DelayedSubmission, JobPaths
    from submitit.slurm.slurm import SlurmJobEnvironment

    env = SlurmJobEnvironment()
    env._handle_signals(JobPaths(tmp_path, job_id="4242", task_id=0), DelayedSubmission(print))
    return signal.getsignal(signal.SIGUSR2)


def test_submitit_handles_the_time_limit_signal_and_lightning_does_not_requeue(
        monkeypatch, tmp_path, restore_signal_handlers):
    from submitit.core.job_environment import SignalHandler
    from submitit.slurm.slurm import _make_sbatch_string

    # submitit asks SLURM for USR2 before the limit (what hydra/launcher=slurm's sbatch gets)
    launcher = instantiate_launcher(compose_with_launcher(["experiment=cape_librispeech"]))
    sbatch = _make_sbatch_string(command="x", folder=tmp_path, signal_delay_s=launcher.params["signal_delay_s"])
    assert f"#SBATCH --signal=USR2@{launcher.params['signal_delay_s']}" in sbatch.splitlines()

    cfg = compose_with_launcher(["experiment=cape_librispeech"])
    slurm_env(monkeypatch, ntasks=1, per_node=1, nnodes=1, procid=0, localid=0, nodeid=0, nodelist="gpu07")
    submitit_usr2 = install_submitit_handlers(tmp_path)
    assert getattr(submitit_usr2, "__func__", None) is SignalHandler.checkpoint_and_try_requeue
    usr1_before = signal.getsignal(signal.SIGUSR1)

    trainer = trainer_from(cfg, plugins=slurm_plugins())
    trainer._signal_connector.register_signal_handlers()   # what fit() does
    try:
        assert signal.getsignal(signal.SIGUSR2) is submitit_usr2      # submitit still owns USR2
        assert signal.getsignal(signal.SIGUSR1) is usr1_before        # no Lightning requeue handler
    finally:
        trainer._signal_connector.teardown()

    # Lightning's default (auto_requeue=True) would put its own requeue + hpc_ckpt handler on USR1
    default_trainer = trainer_from(cfg)
    assert default_trainer._accelerator_connector.cluster_environment.auto_requeue is True
    default_trainer._signal_connector.register_signal_handlers()
    try:
        assert signal.getsignal(signal.SIGUSR1) is not usr1_before
        assert signal.getsignal(signal.SIGUSR2) is submitit_usr2
    finally:
        default_trainer._signal_connector.teardown()


def test_launcher_checkpoint_resubmits_the_same_sweep_point():
    cfg = compose_with_launcher(["experiment=cape_librispeech"])
    launcher = instantiate_launcher(cfg)
    args = (["pe=rope", "seed=1"], "hydra.sweep.dir", 3, "job_id_for_3", {})
    again = launcher.checkpoint(*args)
    assert again.function is launcher and again.args == args and again.kwargs == {}


def test_requeue_resume_turns_false_into_auto_only_in_a_restarted_job():
    assert restart_count({}) == 0
    assert requeue_resume(False, {}) is False
    assert requeue_resume(False, {"SLURM_RESTART_COUNT": "0"}) is False
    assert requeue_resume(False, {"SLURM_RESTART_COUNT": "2"}) == "auto"
    assert requeue_resume(True, {"SLURM_RESTART_COUNT": "1"}) is True
    assert requeue_resume("auto", {"SLURM_RESTART_COUNT": "1"}) == "auto"
    with pytest.raises(ValueError, match="SLURM_RESTART_COUNT='two'"):
        requeue_resume(False, {"SLURM_RESTART_COUNT": "two"})


# --- end to end through Hydra + submitit, on the fake SLURM -------------------------------------

def launch(tmp_path, overrides, mode="record", timeout=240):
    bin_dir = fake_slurm.install(tmp_path / "bin")
    state = tmp_path / "slurm"
    work = tmp_path / "work"
    work.mkdir()
    env = fake_slurm.environment(bin_dir, state, PROBE_MODE=mode, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = str(REPO)
    try:
        result = subprocess.run([sys.executable, str(PROBE), "-m", "hydra/launcher=slurm", *overrides],
                                cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    finally:
        fake_slurm.stop_jobs(state)
    logs = "\n".join(p.read_text(errors="replace") for p in sorted(work.rglob("*_log.*")))
    return result, state, work, logs


def sweep_dirs(work):
    (sweep,) = (work / "runs" / "multirun").glob("*/*")   # the default ${now:...} sweep folder
    return sweep


def test_sweep_on_slurm_timed_out_jobs_are_requeued_into_the_same_run_with_resume_auto(tmp_path):
    limit_min = 1   # so that submitit counts the signal as the time limit (not a preemption)
    result, state, work, logs = launch(tmp_path, ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
                                                  "pe=none,rope", f"hydra.launcher.timeout_min={limit_min}"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + logs[-5000:]

    # one array job, sized from the trainer
    (script,) = sorted(state.glob("sbatch_*.sh"))
    lines = script.read_text().splitlines()
    for flag in ("--array=0-1%2", "--nodes=1", "--ntasks-per-node=2", "--gpus-per-node=2",
                 "--signal=USR2@120", f"--time={limit_min}"):
        assert f"#SBATCH {flag}" in lines, flag

    # rank 0 of each array task requeued it once (the other rank only logged the signal)
    assert sorted((state / "requeued").read_text().split()) == ["4200_0", "4200_1"]
    max_num_timeout = instantiate_launcher(compose_with_launcher([])).params["max_num_timeout"]
    for job in ("4200_0", "4200_1"):
        assert f"Requeued job {job} ({max_num_timeout - 1} remaining timeouts)" in logs
    assert "Not checkpointing nor requeuing since I am a slave (procid=1)" in logs

    sweep = sweep_dirs(work)
    for pe in ("none", "rope"):
        run = sweep / f"{pe}_ctc_conformer_seed0"
        starts = {(s, r): json.loads((run / f"start{s}_rank{r}.json").read_text()) for s in (0, 1) for r in (0, 1)}
        for (s, r), rec in starts.items():
            assert rec["output_dir"] == str(run)             # the requeued job writes into the same run
            assert rec["overrides"] == starts[0, 0]["overrides"] and f"pe={pe}" in rec["overrides"]
            assert rec["trainer"]["devices"] == int(rec["slurm"]["SLURM_NTASKS_PER_NODE"]) == 2
            assert int(rec["slurm"]["SLURM_NTASKS"]) == 2 and int(rec["slurm"]["SLURM_PROCID"]) == r
            assert rec["resume"] is False
            assert rec["resume_used"] == (False if s == 0 else "auto")


def test_preempted_job_is_requeued_without_using_a_timeout_into_the_recipe_run_folder(tmp_path):
    """The command of docs/cluster.md and the recipe README: one one-GPU job per PE, run folders
    <sweep dir>/<pe> as run.sh's stages 5-6 expect them; the signal comes early in the 24 h limit."""
    runs = tmp_path / "work" / "exp" / "runs"
    result, state, work, logs = launch(tmp_path, ["experiment=cape_librispeech", "pe=cape", f"hydra.sweep.dir={runs}",
                                                  'hydra.sweep.subdir="${pe_label:${pe}}"'])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + logs[-5000:]
    lines = (state / "sbatch_0.sh").read_text().splitlines()
    for flag in ("--nodes=1", "--ntasks-per-node=1", "--gpus-per-node=1", "--time=1440"):
        assert f"#SBATCH {flag}" in lines, flag
    max_num_timeout = instantiate_launcher(compose_with_launcher([])).params["max_num_timeout"]
    assert "this job is preempted" in logs
    assert f"Requeued job 4200 ({max_num_timeout} remaining timeouts)" in logs   # no timeout used up
    first, again = (json.loads((runs / "cape" / f"start{s}_rank0.json").read_text()) for s in (0, 1))
    assert first["resume_used"] is False and again["resume_used"] == "auto"
    assert again["trainer"]["accelerator"] == "gpu" and again["trainer"]["devices"] == 1


def test_without_timeouts_left_a_timed_out_job_is_not_requeued(tmp_path):
    """The plugin's own default, max_num_timeout=0: the job ends at its first time limit."""
    result, state, work, logs = launch(tmp_path, ["trainer=cpu", "hydra.launcher.timeout_min=1",
                                                  "hydra.launcher.max_num_timeout=0"])
    assert result.returncode != 0
    assert "Job not requeued because: timed-out too many times" in logs
    assert not (state / "requeued").exists()


@pytest.mark.slow
def test_requeued_training_resumes_from_last_ckpt_and_finishes(tmp_path, tiny_synth_root_for_slurm):
    """The real train(): the time-limit signal arrives once checkpoints/last.ckpt exists; the requeued
    job (same command line, resume=false) continues from that checkpoint to max_steps and evaluates."""
    from integration.e2e_helpers import TINY_MODEL, synth_overrides

    import torch

    max_steps = 32   # a multiple of checkpoint.every_n_train_steps: last.ckpt is written at the end
    overrides = [*TINY_MODEL, *synth_overrides(tiny_synth_root_for_slurm), "trainer=cpu",
                 f"trainer.max_steps={max_steps}", "checkpoint.every_n_train_steps=4", "data.num_workers=0",
                 "hydra.launcher.timeout_min=1"]
    result, state, work, logs = launch(tmp_path, overrides, mode="train", timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + logs[-8000:]
    assert (state / "requeued").read_text().split() == ["4200"]
    run = sweep_dirs(work) / "sinusoidal_ctc_conformer_seed0"
    first, second = (json.loads((run / f"start{s}.json").read_text()) for s in (0, 1))
    assert first["last_ckpt_step"] is None and first["resume"] is False
    assert second["resume"] is False and 4 <= second["last_ckpt_step"] < max_steps
    assert "requeued SLURM job (restart 1): resume=auto" in logs
    assert "Restoring states from the checkpoint path at " + str(run / "checkpoints" / "last.ckpt") in logs
    final = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert final["global_step"] == max_steps
    assert (run / "eval" / "done.json").exists()


@pytest.fixture(scope="module")
def tiny_synth_root_for_slurm(tmp_path_factory):
    from asr_pe.data.synth import prepare_synth
    from integration.e2e_helpers import TINY_SYNTH

    root = tmp_path_factory.mktemp("synth_slurm")
    prepare_synth(root=root, progress=False, **TINY_SYNTH)
    return root


def test_ddp_in_a_local_multirun_is_refused_but_allowed_where_the_ranks_exist_already():
    from asr_pe.training.slurm import SlurmLayoutError, check_multirun_ddp

    with pytest.raises(SlurmLayoutError, match="local multirun"):
        check_multirun_ddp(multirun=True, world_size=2, processes_external=False)
    check_multirun_ddp(multirun=True, world_size=8, processes_external=True)   # SLURM / torchrun
    check_multirun_ddp(multirun=False, world_size=8, processes_external=False)  # one run, Lightning's launcher
    check_multirun_ddp(multirun=True, world_size=1, processes_external=False)   # the synth study's sweeps
