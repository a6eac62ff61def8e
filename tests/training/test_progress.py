"""The step line (asr_pe/training/progress.py): global step out of max_steps, loss, lr and an ETA;
plain lines every N steps in a log, one line rewritten on a terminal; rank 0 only."""

import io
from types import SimpleNamespace

import torch

from asr_pe.training.progress import StepProgress, format_duration


def trainer(step, max_steps=1000, rank0=True, loss=1.5, lr=1.2e-3):
    opt = SimpleNamespace(param_groups=[{"lr": lr}])
    return SimpleNamespace(global_step=step, max_steps=max_steps, is_global_zero=rank0, sanity_checking=False,
                           callback_metrics={"train/loss": torch.tensor(loss, dtype=torch.float64), "val/cer": torch.tensor(0.25)},
                           optimizers=[opt])


def run_steps(bar, steps, **kw):
    for s in steps:
        bar.on_train_batch_end(trainer(s, **kw), None, None, None, 0)


def test_a_log_gets_a_plain_line_every_n_steps_and_at_the_last():
    out = io.StringIO()
    bar = StepProgress(every_n_steps=100, stream=out, tty=False)
    run_steps(bar, range(1, 251), max_steps=250)
    lines = out.getvalue().splitlines()
    assert [line.split()[2] for line in lines] == ["100/250", "200/250", "250/250"]
    assert "\r" not in out.getvalue()
    assert lines[-1].startswith("[asr_pe] step 250/250 (100%)  loss 1.500  lr 1.20e-03  ")
    assert "s/step" in lines[0] and "ETA" in lines[0]


def test_a_terminal_gets_one_line_rewritten_and_only_rank_zero_prints():
    out = io.StringIO()
    bar = StepProgress(stream=out, tty=True)
    run_steps(bar, range(1, 11), max_steps=10)
    bar.on_train_end(None, None)
    text = out.getvalue()
    assert text.startswith("\r[asr_pe] step ") and text.endswith("\n") and text.count("\n") == 1
    quiet = io.StringIO()
    run_steps(StepProgress(stream=quiet, tty=False, every_n_steps=1), range(1, 5), rank0=False)
    assert quiet.getvalue() == ""


def test_validation_prints_its_metrics_and_the_eta_counts_the_remaining_steps():
    out = io.StringIO()
    bar = StepProgress(stream=out, tty=False)
    bar.on_validation_end(trainer(40), None)
    assert out.getvalue() == "[asr_pe] step 40 validation: val/cer 0.25\n"
    bar._t0, bar._step0 = 0.0, 0
    import time
    bar._t0 = time.monotonic() - 10.0            # 10 s for 100 steps: 0.1 s/step, 900 steps left
    line = bar.line(trainer(100, max_steps=1000))
    assert "0.10 s/step" in line and "ETA 1m30s" in line
    assert format_duration(3725) == "1h02m" and format_duration(float("nan")) == "?"


def test_a_busy_machine_gets_the_threads_hint_and_an_idle_one_none():
    from asr_pe.training.run import busy_machine_hint

    assert busy_machine_hint(load=0.4, cores=2) is None and busy_machine_hint(load=1.0, cores=2) is None
    hint = busy_machine_hint(load=3.7, cores=2)
    assert hint.startswith("[asr_pe] this machine is busy (load 3.7 on 2 cores)") and "threads=1" in hint
