"""Resuming and run folders through the real entry point (``train.py`` in subprocesses, tiny
models, signals sent with os.kill): which checkpoint a run continues from and with which config,
what a folder in use or already used refuses, what a killed run leaves behind."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from asr_pe.training.resume import resume_checkpoint
from asr_pe.training.schedules import lr_multiplier

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
QUICK = ["trainer.enable_progress_bar=false", "data.num_workers=0", "eval_after_train=false"]


def base(corpus: Path) -> list[str]:
    from integration.e2e_helpers import TINY_MODEL, synth_overrides

    return [*TINY_MODEL, *synth_overrides(corpus), "pe=none", "encoder=transformer", "encoder.n_layers=1", *QUICK]


def train_py(*args, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "train.py"), *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def start_train_py(*args, cwd: Path, log: Path) -> subprocess.Popen:
    out = open(log, "w")
    return subprocess.Popen([sys.executable, str(REPO / "train.py"), *args], cwd=cwd, env=ENV,
                            stdout=out, stderr=subprocess.STDOUT)


def step_of(ckpt: Path) -> int:
    return int(torch.load(ckpt, map_location="cpu", weights_only=True)["global_step"])


def train_rows(run: Path) -> list[dict]:
    with open(run / "logs" / "metrics.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r.get("train/loss")]


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended (rc {proc.returncode}) before {what}: "
                                 + (log.read_text()[-3000:] if log else ""))
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def one_line_error(r: subprocess.CompletedProcess, text: str) -> None:
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-3000:]
    assert f"error: " in r.stderr and text in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]


# --------------------------------------------------------------------------- refusals

def bad_starts(tmp_path: Path) -> tuple[dict, subprocess.Popen]:
    """Five folders/arguments a start must refuse: {case: (overrides, message)}, and the
    process holding the lock of the fifth folder as a live train.py holds it."""
    empty = tmp_path / "empty"
    orphan = tmp_path / "orphan"           # a checkpoint whose config.yaml is gone
    (orphan / "checkpoints").mkdir(parents=True)
    torch.save({"global_step": 3}, orphan / "checkpoints" / "last.ckpt")
    used = tmp_path / "used"               # a half-made run: config and tokenizer, no checkpoint
    used.mkdir()
    (used / "config.yaml").write_text("seed: 0\n")
    (used / "tokenizer.json").write_text("{}")
    busy = tmp_path / "busy"
    busy.mkdir()
    # held by another process, as a live train.py holds it (a record lock: this process' own would
    # not conflict with the train() called in it)
    lock = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(busy / '.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
        "os.write(fd, b'pid 1 on the test\\n'); fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "print('held', flush=True); time.sleep(600)")], stdout=subprocess.PIPE, text=True)
    assert lock.stdout.readline().strip() == "held"
    return {
        "no": (["resume=no", f"run_dir={tmp_path / 'never'}"], "resume='no' is not one of true, false, auto"),
        "true_empty": (["resume=true", f"run_dir={empty}"], "holds no checkpoint to continue from"),
        "orphan": (["resume=auto", f"run_dir={orphan}"], "no config.yaml"),
        "used": ([f"run_dir={used}"], "already holds a run (config.yaml, tokenizer.json); pass resume=true"),
        "busy": (["resume=auto", f"run_dir={busy}"], "is in use by another process (pid 1 on the test)"),
    }, lock


def assert_untouched(tmp_path: Path) -> None:
    assert not (tmp_path / "never" / "config.yaml").exists()
    assert not (tmp_path / "empty" / "config.yaml").exists() and not (tmp_path / "orphan" / "config.yaml").exists()
    assert (tmp_path / "used" / "config.yaml").read_text() == "seed: 0\n"      # the refused start wrote nothing
    assert not (tmp_path / "busy" / "config.yaml").exists()


def test_bad_starts_are_refused_before_any_work(tmp_path):
    """resume accepts only true/false/auto; resume=true needs a checkpoint; a checkpoint without
    config.yaml is not resumed; a folder holding a run is not started into; a folder in use by
    another process is not touched. (train() in this process; the command line below.)"""
    from asr_pe.training.train import train
    from integration.e2e_helpers import compose_train

    cases, lock = bad_starts(tmp_path)
    try:
        for name, (args, text) in cases.items():
            with pytest.raises(Exception, match=re.escape(text)):
                train(compose_train([*args, *QUICK]))
    finally:
        lock.kill()
        lock.wait()
    assert_untouched(tmp_path)


@pytest.mark.slow  # five train.py processes: ~1 min on 2 idle cores, 3 on busy ones
def test_bad_starts_are_one_line_errors_of_train_py(tmp_path):
    """The same refusals from the command line: `error: ...`, exit code 2, no traceback."""
    cases, lock = bad_starts(tmp_path)
    procs = {k: subprocess.Popen([sys.executable, str(REPO / "train.py"), *args, *QUICK], cwd=tmp_path, env=ENV,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k, (args, _) in cases.items()}
    try:
        for k, (_, text) in cases.items():
            out, err = procs[k].communicate(timeout=300)
            one_line_error(subprocess.CompletedProcess([], procs[k].returncode, out, err), text)
    finally:
        lock.kill()
        lock.wait()
    assert_untouched(tmp_path)
    # a refused start writes nothing: not Hydra's record, its log, nor the lock file (issue 43)
    assert not (tmp_path / "never").exists()
    for name in ("empty", "used", "busy"):
        left = sorted(p.name for p in (tmp_path / name).iterdir()) if (tmp_path / name).exists() else []
        assert not {".hydra", "train.log"} & set(left), (name, left)
    assert ".lock" not in os.listdir(tmp_path / "used")


def test_run_folder_names_hold_the_seed():
    """Two runs started in the same second with different seeds get different folders."""
    from integration.e2e_helpers import compose_train

    folders = {compose_train([f"seed={s}"]).run_dir for s in (0, 1)}
    assert len(folders) == 2 and all(f.endswith(f"_s{s}") for f, s in zip(sorted(folders), (0, 1)))


def test_lightning_restores_a_resumed_state_with_weights_only(tmp_path):
    # Lightning's full-state restore defaults to weights_only=False; a run's fit asks for True
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from asr_pe.training.resume import StartPlan
    from asr_pe.training.run import Job, Run

    from asr_pe.training.schedules import StepSchedule

    class Trainer:
        is_global_zero, global_step, received_sigterm, callbacks = True, 3, False, []
        fit_loop = SimpleNamespace(max_epochs=3, epoch_loop=SimpleNamespace(max_steps=-1))
        check_val_every_n_epoch, val_check_interval = 1, None

        def fit(self, module, **kwargs):
            self.kwargs = kwargs

    run = Run(OmegaConf.create({}), tmp_path, Trainer(), StartPlan(checkpoint=tmp_path / "last.ckpt", step=3),
              saved_cfg=None, source=None)
    run.fit(Job(SimpleNamespace(skipped_batches=0, dropped_utterances=0), datamodule=None,
                schedule=StepSchedule(max_steps=21, val_every=7, batches_per_epoch=7)))
    assert run.trainer.kwargs == {"datamodule": None, "ckpt_path": str(tmp_path / "last.ckpt"), "weights_only": True}
    # the trainer counts the run in steps: one endless epoch, the end and the validations in steps
    t = run.trainer
    assert (t.fit_loop.max_epochs, t.fit_loop.epoch_loop.max_steps, t.check_val_every_n_epoch,
            t.val_check_interval) == (-1, 21, None, 7)


def test_the_newest_checkpoint_is_chosen_by_its_step(tmp_path):
    """Folders written by older versions hold last.ckpt and Lightning's last-v<k>.ckpt: the resume
    point is the one with the highest stored step; an unreadable one is skipped."""
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    for name, step in (("last.ckpt", 35), ("last-v1.ckpt", 40), ("last-v2.ckpt", 21)):
        torch.save({"global_step": step}, ckpts / name)
    (ckpts / "last-v3.ckpt").write_bytes(b"truncated")
    assert resume_checkpoint(tmp_path) == (ckpts / "last-v1.ckpt", 40)
    torch.save({"global_step": 40}, ckpts / "last.ckpt")
    assert resume_checkpoint(tmp_path) == (ckpts / "last.ckpt", 40)   # a tie goes to last.ckpt


# --------------------------------------------------------------------------- end to end (slow)

@pytest.mark.slow  # two tiny trainings, ~1.5 min on 2 busy cores
def test_a_copied_run_resumes_from_its_folder_alone(tiny_corpus, tmp_path):
    """40 steps with checkpoints every 7 leave step-40 weights (here 8 and 3); the copied folder
    resumes with `train.py run_dir=<copy> resume=true` and only the keys that change: no last-v1,
    .hydra of the first start untouched, the new optimiser settings applied and recorded, the best
    checkpoint still the best over both launches, every step logged once."""
    run = tmp_path / "run"
    r = train_py(*base(tiny_corpus), f"run_dir={run}", "trainer.max_steps=8", "checkpoint.every_n_train_steps=3",
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "trained 8 steps" in r.stdout and step_of(run / "checkpoints" / "last.ckpt") == 8

    copy = tmp_path / "moved" / "copy"
    shutil.copytree(run, copy)
    shutil.rmtree(run)  # the copy must not need the original
    first_start = {p.name: p.read_bytes() for p in (copy / ".hydra").glob("*.yaml")}
    r = train_py(f"run_dir={copy}", "resume=true", "trainer.max_steps=13", "checkpoint.every_n_train_steps=4",
                 "optim.lr=1e-3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resuming from last.ckpt (step 8)" in r.stdout and "trained 13 steps" in r.stdout
    assert sorted(p.name for p in (copy / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    assert step_of(copy / "checkpoints" / "last.ckpt") == 13
    # the run's own config: model unchanged, the given keys replaced; Hydra's record of the first start kept
    cfg = yaml.safe_load((copy / "config.yaml").read_text())
    assert cfg["pe"]["name"] == "none" and cfg["encoder"]["n_layers"] == 1 and cfg["encoder"]["d_model"] == 32
    assert cfg["optim"]["lr"] == 1e-3 and cfg["trainer"]["max_steps"] == 13 and cfg["run_dir"] == str(copy)
    assert {p.name: p.read_bytes() for p in (copy / ".hydra").glob("*.yaml")} == first_start
    assert len(list((copy / ".hydra").glob("start-*/overrides.yaml"))) == 1
    resumes = json.loads((copy / "resumes.json").read_text())
    assert [(e["step"], e["changed"]["optim.lr"]) for e in resumes] == [(8, [3e-3, 1e-3])]
    # the learning rate trained with is the new one at every resumed step (noam, warm-up 5)
    rows = train_rows(copy)
    assert [int(r["step"]) for r in rows] == list(range(13))
    for row in rows:
        step, peak = int(row["step"]), (3e-3 if int(row["step"]) < 8 else 1e-3)
        assert float(row["train/lr"]) == pytest.approx(peak * lr_multiplier(step, kind="noam", warmup_steps=5),
                                                       rel=1e-5), step
    # best.ckpt holds the lowest validation CER over both launches, not the first one after the copy
    # (saved by the validation that first reached the lowest CER: a validation logged at step s
    # ran after s + 1 training steps)
    with open(copy / "logs" / "metrics.csv", newline="") as f:
        vals = [(int(r["step"]), float(r["val/cer"])) for r in csv.DictReader(f) if r.get("val/cer")]
    assert len(vals) >= 2 and vals[0][0] < 8 <= vals[-1][0], vals
    first_best = min(vals, key=lambda v: (v[1], v[0]))
    best = torch.load(copy / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)
    assert float(best["callbacks"]["asr_pe.BestCheckpoint"]["best_model_score"]) == pytest.approx(first_best[1])
    assert best["global_step"] == first_best[0] + 1, (best["global_step"], vals)


@pytest.mark.slow  # three tiny trainings, ~2.5 min on 2 busy cores
def test_a_killed_run_resumes_alone_and_logs_each_step_once(tiny_corpus, tmp_path):
    """A second train.py on a folder in use is refused; after kill -9 the next start removes the
    killed process' partial writes and continues from the newest checkpoint; a resume that fails
    (SIGTERM) leaves no metrics part behind; every step is in metrics.csv exactly once."""
    run = tmp_path / "run"
    args = [*base(tiny_corpus), f"run_dir={run}", "checkpoint.every_n_train_steps=2", "trainer.max_steps=400"]
    log1 = tmp_path / "first.log"
    first = start_train_py(*args, cwd=tmp_path, log=log1)
    last = run / "checkpoints" / "last.ckpt"
    try:
        wait_for(lambda: last.exists() and step_of(last) >= 4, 300, "a checkpoint at step 4", first, log1)
        r = train_py(*args[:-1], "trainer.max_steps=12", "resume=true", cwd=tmp_path)
        one_line_error(r, "is in use by another process (pid %d (train.py)" % first.pid)
    finally:
        first.kill()  # kill -9: no handler runs
        first.wait()
    killed_at = step_of(last)
    partial = run / "checkpoints" / ".last.ckpt.k1ll3d.tmp"   # what a kill during torch.save leaves
    partial.write_bytes(os.urandom(1 << 20))

    # a resume stopped by SIGTERM once it trains
    log2 = tmp_path / "second.log"
    second = start_train_py(*args[:-1], "trainer.max_steps=400", "resume=true", cwd=tmp_path, log=log2)
    try:
        wait_for(lambda: last.exists() and step_of(last) >= killed_at + 2, 300, "a checkpoint after the resume",
                 second, log2)
        os.kill(second.pid, signal.SIGTERM)
        second.wait(timeout=120)
    finally:
        if second.poll() is None:
            second.kill()
    assert not partial.exists()
    assert "resuming from last.ckpt (step %d)" % killed_at in log2.read_text()
    assert not list((run / "logs").glob("metrics.part*.csv")), "a stopped resume left its metrics part"

    final_steps = step_of(last) + 3
    r = train_py(*args[:-1], f"trainer.max_steps={final_steps}", "resume=true", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert step_of(last) == final_steps
    assert [int(row["step"]) for row in train_rows(run)] == list(range(final_steps))
    assert not list((run / "logs").glob("metrics.part*.csv"))


@pytest.mark.slow  # ~1 min each
@pytest.mark.parametrize("stop_after_s, extra", [
    pytest.param(0.0, [], id="at-start"),
    # no validation: the one worker is always a batch or two ahead of training when it stops
    pytest.param(2.0, ["trainer.check_val_every_n_epoch=1000"], id="after-prefetch")])
def test_a_stuck_loader_worker_stops_training_instead_of_hanging(tiny_corpus, tmp_path, stop_after_s, extra):
    """A DataLoader worker that stops for good (SIGSTOP, as one stuck in a system call or a C call
    that holds its GIL) ends training after data.loader_timeout_s, with a non-zero exit and no help
    from outside, instead of hanging at its step. Stopped at once, the worker has usually queued
    nothing (PyTorch's own timeout); stopped after 2 s it has queued batches whose tensors the
    training process must still fetch from it (CI once hung there for good: `DeadlineLoader`)."""
    run = tmp_path / "run"
    args = [a for a in base(tiny_corpus) if not a.startswith("data.num_workers")]
    log = tmp_path / "train.log"
    proc = start_train_py(*args, f"run_dir={run}", "trainer.max_steps=400", "data.num_workers=1",
                          "data.loader_timeout_s=5", *extra, cwd=tmp_path, log=log)
    seen: dict[int, float] = {}
    stopped: set[int] = set()
    started = time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - started < 240:
            now = time.monotonic()
            for child in children(proc.pid):
                seen.setdefault(child, now)
                if child not in stopped and now - seen[child] >= stop_after_s:
                    os.kill(child, signal.SIGSTOP)
                    stopped.add(child)
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        for child in stopped:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
    proc.wait()
    text = log.read_text()
    assert stopped, "no loader worker was started"
    assert "DataLoader timed out after 5.0 seconds: a loader worker delivered no batch within " \
           "data.loader_timeout_s=5" in text, text[-3000:]
    assert proc.returncode not in (0, -signal.SIGKILL), f"rc {proc.returncode}: " + text[-3000:]
    assert "killing DataLoader worker" in text  # the stopped worker, which would hang the exit


def children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


@pytest.mark.slow  # ~1.5 min
def test_prepared_files_are_used_only_with_the_settings_they_were_made_for(tiny_corpus, tmp_path):
    """A folder left half-made (tokenizer and CMVN written, preparation never finished) under a
    char tokenizer gets a SentencePiece tokenizer when the config asks for one; files whose
    recorded settings differ from the config's are refused."""
    run = tmp_path / "run"
    r = train_py(*base(tiny_corpus), f"run_dir={run}", "trainer.max_steps=1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((run / "tokenizer.json").read_text())["kind"] == "char"
    spm = ["data/tokenizer=sentencepiece", "data.tokenizer.vocab_size=40"]

    # recorded for the char settings, no checkpoint, no config (as a run killed before training):
    # refused under sentencepiece, whatever resume says
    for name in ("checkpoints", "logs", "tb"):
        shutil.rmtree(run / name)
    for name in ("config.yaml", "run_info.json"):
        (run / name).unlink()
    r = train_py(*base(tiny_corpus), *spm, f"run_dir={run}", "resume=auto", "trainer.max_steps=1", cwd=tmp_path)
    one_line_error(r, "were prepared for other data settings")

    # preparation never finished (no record): the files are made again for this config
    (run / ".data_ready.json").unlink()
    r = train_py(*base(tiny_corpus), *spm, f"run_dir={run}", "resume=auto", "trainer.max_steps=1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "of an unfinished data preparation removed" in r.stdout
    tok = json.loads((run / "tokenizer.json").read_text())
    assert tok["kind"] == "sentencepiece"


def test_a_resumed_config_is_the_saved_one_with_the_command_lines_keys(tmp_path):
    """`resumed_config`: sections the command line did not name come from config.yaml (even where
    the defaults differ), named keys from the command line, deleted keys are gone; an option added
    to a non-model section since the run was saved gets its default. (The slow test above runs it
    through train.py, where Hydra lists the keys.)"""
    from omegaconf import OmegaConf

    from asr_pe.training.resume import EVERYTHING, resumed_config
    from integration.e2e_helpers import compose_train

    saved = OmegaConf.to_container(compose_train(["pe=rope", "trainer.max_steps=7", "optim.lr=1e-3", "seed=3"]),
                                   resolve=True)
    del saved["eval"]["remedy"]   # as if the option did not exist when the run was saved
    (tmp_path / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    now = compose_train(["trainer.max_steps=20", f"run_dir={tmp_path}", "resume=true", "~trainer.gradient_clip_val"])
    out = resumed_config(now, tmp_path, {"trainer.max_steps", "run_dir", "resume", "trainer.gradient_clip_val"})
    assert out.pe.name == "rope" and out.seed == 3 and out.optim.lr == 1e-3 and out.name == saved["name"]
    assert out.trainer.max_steps == 20 and "gradient_clip_val" not in out.trainer
    assert out.run_dir == str(tmp_path) and out.resume is True and out.eval.remedy == now.eval.remedy
    assert resumed_config(now, tmp_path, EVERYTHING) is now
