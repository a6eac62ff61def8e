"""A run's identity and its starts (issue 43): fixed at the first start and refused on resume; a
first start that fails before training leaves the folder for the corrected command; every added
``+key`` is a setting something reads; a stop says truthfully what a resume continues from; a
SIGTERM in the evaluation after training ends with one ``error:`` line. Each test failed on the
code before the change (a resume with ``seed=7`` relabelled the run; a failed first start left a
``config.yaml`` that ``resume=false`` refused and ``resume=auto`` replayed; ``+optim.lr_typo=1`` was
accepted; "the last step checkpoint is kept" was printed with no checkpoint on disk)."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from asr_pe.errors import ConfigError, UserError
from asr_pe.run_folder import RUN_CONTENT
from asr_pe.training.config_checks import check_added_keys
from asr_pe.training.run_dir import ResumeConflict, check_resume_compatible
from asr_pe.training.callbacks import SigtermStop
from asr_pe.training.stops import TrainingInterrupted, _what_was_saved, sigterm_stops

from tiny_run import NO_DATA, ROOT, TINY


def composed(*overrides: str):
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        return compose("train", overrides=list(overrides))


@pytest.mark.parametrize("key, expected", [
    ("optim.lr_typo", "did you mean optim.lr"),
    ("encoder.dropout_rate", "did you mean encoder.dropout?"),
    ("decode.beem", "did you mean decode.beam?"),
    ("zzz_unrelated", "the settings of the config are"),
])
def test_an_added_key_nothing_reads_is_one_error_naming_the_closest_setting(key, expected):
    cfg = composed(f"+{key}=1")
    with pytest.raises(ConfigError, match=rf"^\+{key}: not a setting of this config") as e:
        check_added_keys(cfg, added=[key])
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_added_keys_that_are_read_pass():
    cfg = composed("+trainer.limit_val_batches=0")        # checked against lightning.Trainer instead
    check_added_keys(cfg, added=["trainer.limit_val_batches"])
    target = OmegaConf.select(cfg, "data.corpus._target_")
    assert target, "the default corpus is built by a _target_"
    from hydra.utils import get_method
    import inspect

    param = next(iter(inspect.signature(get_method(target)).parameters))
    check_added_keys(cfg, added=[f"data.corpus.{param}"])  # an option of the corpus builder


@pytest.mark.parametrize("key, value", [("seed", 7), ("arm", "conformer")])
def test_a_resume_that_would_relabel_the_run_is_refused(tmp_path, key, value):
    OmegaConf.save(composed(*TINY), tmp_path / "config.yaml")
    check_resume_compatible(tmp_path, composed(*TINY))                 # the same run: fine
    with pytest.raises(ResumeConflict, match=rf"{key}=.*differs from the run's {key}"):
        check_resume_compatible(tmp_path, composed(*TINY, f"{key}={value}"))


def test_a_first_start_that_fails_before_training_leaves_the_folder_as_it_found_it(tmp_path):
    from asr_pe.training.train import train

    run = tmp_path / "run"
    args = [*TINY, f"run_dir={run}", "trainer.enable_progress_bar=false", "eval_after_train=false", NO_DATA]
    for resume in ("false", "false", "auto"):  # the same failure each time: never "already holds a run"
        with pytest.raises(Exception) as e:
            train(composed(*args, f"resume={resume}"))
        assert "already holds a run" not in str(e.value) and "no_such_module" in str(e.value)
        assert not any((run / name).exists() for name in RUN_CONTENT), sorted(p.name for p in run.iterdir())


def test_a_stop_says_what_a_resume_continues_from(tmp_path):
    saver = SigtermStop(tmp_path / "last.ckpt")
    assert "nothing saved, a resume starts again from step 0" in _what_was_saved(saver)
    torch.save({"global_step": 40}, tmp_path / "last.ckpt")
    assert "the last step checkpoint, step 40, is kept" in _what_was_saved(saver)
    saver.saved_step = 57
    assert _what_was_saved(saver) == f"step 57 saved to {tmp_path / 'last.ckpt'}"


def test_sigterm_in_the_evaluation_after_training_is_a_stop_with_its_exit_code():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(TrainingInterrupted, match="not evaluated") as e:
        with sigterm_stops("not evaluated"):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0) if hasattr(signal, "sigtimedwait") else None
    assert isinstance(e.value, UserError) and e.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) == before


def test_run_info_keeps_every_machine_the_run_trained_on(tmp_path):
    """A resume on the same machine adds nothing; one on another machine is appended, the first kept."""
    from asr_pe.run_folder import write_run_info
    from asr_pe.training.run import _machines

    a = {"cpu": "A", "cpu_capability": "AVX512", "torch": "2.14.1", "threads": 1}
    b = {**a, "cpu_capability": "AVX2"}
    assert _machines(tmp_path, a) == [a]                      # no run_info.json yet: a first start
    write_run_info(tmp_path, {"pe": "rope", "machines": [a]})
    assert _machines(tmp_path, a) == [a]
    assert _machines(tmp_path, b) == [a, b]


def test_the_machine_record_names_the_kernels_torch_dispatches_to():
    """ATEN_CPU_CAPABILITY pins torch's vector kernels; the record says which ran (here: the plain ones)."""
    import json
    import os
    import subprocess
    import sys

    code = "import json; from asr_pe.inference.device import machine_record; print(json.dumps(machine_record()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "ATEN_CPU_CAPABILITY": "default"})
    record = json.loads(out.stdout)
    assert record["cpu_capability"] == "DEFAULT" and record["cpu"] and record["threads"] >= 1 and "gpu" not in record
