"""The checks behind the entry points' one-line errors, in-process (the subprocess tests in
test_input_errors.py show that train.py / evaluate.py / transcribe.py print them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from asr_pe.errors import ConfigError
from asr_pe.inference.decode import check_decode_settings
from asr_pe.inference.run_loading import CheckpointError, read_checkpoint
from asr_pe.inference.transcribe import check_mode_settings
from asr_pe.io import unwritable_reason
from asr_pe.training.config_checks import check_optim, check_pe_combination, check_trainer, pe_stage

CONF = Path(__file__).resolve().parents[2] / "conf"
OPTIM = {"lr": 2e-3, "weight_decay": 1e-3, "betas": [0.9, 0.98], "eps": 1e-9, "schedule": "noam",
         "warmup_steps": 500, "min_lr_ratio": 0.0}


@pytest.mark.parametrize("key, value, message", [
    ("lr", -1, "optim.lr=-1: the peak learning rate must be a number > 0"),
    ("lr", 0, "optim.lr=0:"),
    ("lr", float("nan"), "optim.lr=nan:"),
    ("weight_decay", -0.1, "optim.weight_decay=-0.1: must be a number >= 0"),
    ("warmup_steps", 1.5, "optim.warmup_steps=1.5: must be an integer >= 0"),
    ("betas", [0.9, 1.0], "optim.betas=[0.9, 1.0]: must be two numbers in [0, 1)"),
    ("schedule", "linear", "optim.schedule='linear': choose one of noam, inverse_sqrt, cosine, constant"),
])
def test_optim_values_that_cannot_train(key, value, message):
    check_optim(OPTIM)
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        check_optim({**OPTIM, key: value})


def test_trainer_keys_are_checked_against_lightning_trainer():
    check_trainer({"accelerator": "cpu", "devices": 1, "max_steps": 5, "gradient_clip_val": 5.0})
    with pytest.raises(ConfigError, match=r"^trainer\.max_step: not an option of lightning\.Trainer; did you mean "
                                          r"trainer\.max_steps\?$"):
        check_trainer({"max_step": 5})
    with pytest.raises(ConfigError, match=r"^trainer\.frobnicate: not an option of lightning\.Trainer$"):
        check_trainer({"frobnicate": 1})
    with pytest.raises(ConfigError, match=r"^trainer\.callbacks: set by train\.py itself"):
        check_trainer({"callbacks": []})
    with pytest.raises(ConfigError, match=r"^trainer\.max_steps=0: must be an integer > 0 \(or -1"):
        check_trainer({"max_steps": 0})
    with pytest.raises(ConfigError, match=r"^trainer\.accelerator=gpux: choose one of auto, cpu, cuda, gpu, mps"):
        check_trainer({"accelerator": "gpux"})
    with pytest.raises(ConfigError, match=r"^trainer\.precision='bf17': choose one of .*'bf16-mixed'"):
        check_trainer({"precision": "bf17"})
    check_trainer({"precision": "bf16-mixed", "accelerator": "cpu"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("accelerator", ["gpu", "cuda", "GPU"])
def test_gpu_accelerator_without_a_gpu(accelerator):
    with pytest.raises(ConfigError, match=rf"^trainer\.accelerator={accelerator.lower()}: torch sees no CUDA GPU"):
        check_trainer({"accelerator": accelerator})


def test_pe_stages_come_from_the_yaml_files():
    assert [pe_stage(CONF, p) for p in ("cape", "rope", "learned_wrap", "sinusoidal_sqrtd", "t5", "none")] == [
        "input", "attention", "input", "input", "attention", None]
    check_pe_combination(["cape", "rope"], CONF)
    check_pe_combination(["rope", "learned_wrap"], CONF)  # order does not matter
    with pytest.raises(ConfigError, match=r"'rope' and 'relative' are both attention-stage PEs; only one input-stage "
                                          r"plus one attention-stage PE combine"):
        check_pe_combination(["rope", "relative"], CONF)
    with pytest.raises(ConfigError, match=r"'sinusoidal' and 'cape' are both input-stage"):
        check_pe_combination(["sinusoidal", "cape"], CONF)
    with pytest.raises(ConfigError, match=r"'none' is no positional encoding"):
        check_pe_combination(["learned", "none"], CONF)


@pytest.mark.parametrize("decode, ctc_weight, message", [
    ({"method": "bogus"}, 1.0, r"decode\.method='bogus': choose one of greedy, beam, attention, joint"),
    ({"method": "attention"}, 1.0, r"decode\.method=attention: this model has no attention decoder"),
    ({"method": "joint"}, 1.0, r"decode\.method=joint: this model has no attention decoder"),
    ({"method": "joint"}, 0.0, r"decode\.method=joint: this model has no CTC head"),
    ({"method": "beam", "beam": 0}, 1.0, r"decode\.beam=0: must be an integer >= 1"),
    ({"method": "joint", "ctc_weight": 1.5}, 0.3, r"decode\.ctc_weight=1\.5: must be a number in \[0, 1\]"),
    ({"method": "attention", "max_len_ratio": 0}, 0.0, r"decode\.max_len_ratio=0: must be a number > 0"),
])
def test_decode_settings_against_the_loss(decode, ctc_weight, message):
    with pytest.raises(ConfigError, match=f"^{message}"):
        check_decode_settings(decode, ctc_weight=ctc_weight)


@pytest.mark.parametrize("decode, ctc_weight", [
    ({"method": "greedy"}, 1.0), ({"method": "beam", "beam": 4}, 1.0), ({"method": "joint", "ctc_weight": 0.3}, 0.3),
    ({"method": "attention"}, 0.0),
    ({"method": "greedy"}, 0.0),  # no CTC head: evaluation falls back to the attention decoder and says so
])
def test_decode_settings_that_work(decode, ctc_weight):
    check_decode_settings(decode, ctc_weight=ctc_weight)


@pytest.mark.parametrize("decode, ctc_weight, transducer, message", [
    ({"method": "transducer_greedy"}, 1.0, False, r"decode\.method=transducer_greedy: this model has no transducer head"),
    ({"method": "transducer_beam"}, 0.0, False, r"decode\.method=transducer_beam: this model has no transducer head"),
    ({"method": "attention"}, 0.0, True, r"decode\.method=attention: this model has a transducer head, not an attention "
                                         r"decoder; use decode\.method=transducer_greedy or transducer_beam$"),
    ({"method": "joint"}, 0.3, True, r"decode\.method=joint: .* \(or greedy / beam for its CTC head\)"),
    ({"method": "transducer_greedy", "max_symbols_per_frame": 0}, 0.0, True,
     r"decode\.max_symbols_per_frame=0: must be an integer >= 1"),
])
def test_decode_settings_against_a_transducer(decode, ctc_weight, transducer, message):
    with pytest.raises(ConfigError, match=f"^{message}"):
        check_decode_settings(decode, ctc_weight=ctc_weight, transducer=transducer)


@pytest.mark.parametrize("decode, ctc_weight", [
    ({"method": "transducer_greedy", "max_symbols_per_frame": 2}, 0.0), ({"method": "transducer_beam", "beam": 4}, 0.0),
    ({"method": "greedy"}, 0.0),  # loss=transducer: its own greedy search
    ({"method": "beam"}, 0.3),  # hybrid_transducer: the CTC head's prefix beam search
])
def test_transducer_decode_settings_that_work(decode, ctc_weight):
    check_decode_settings(decode, ctc_weight=ctc_weight, transducer=True)


def test_greedy_and_beam_on_a_model_without_ctc_head():
    from asr_pe.inference.decode import effective_method

    assert effective_method("greedy", has_ctc=False, has_transducer=True) == "transducer_greedy"
    assert effective_method("beam", has_ctc=False, has_transducer=True) == "transducer_beam"
    assert effective_method("beam", has_ctc=False, has_transducer=False) == "attention"
    assert effective_method("greedy", has_ctc=True, has_transducer=True) == "greedy"  # hybrid_transducer's CTC head


def test_transcribe_mode_settings():
    check_mode_settings("chunked", 20.0, 0, "auto")
    for args, message in [(("stream", 20.0, 4.0, "auto"), r"^mode='stream': choose one of full, chunked"),
                          (("chunked", 0, 4.0, "auto"), r"^chunk_s=0: must be a number of seconds > 0"),
                          (("chunked", 20.0, -1, "auto"), r"^overlap_s=-1: must be a number of seconds >= 0"),
                          (("full", 20.0, 4.0, "huge"), r"^block_size='huge':")]:
        with pytest.raises(ConfigError, match=message):
            check_mode_settings(*args)


def test_unwritable_output_paths(tmp_path):
    assert unwritable_reason(tmp_path / "new" / "deeper" / "out.json") is None  # folders are made
    assert unwritable_reason(tmp_path) == "is a folder; name a file"
    (tmp_path / "f").write_text("x")
    assert unwritable_reason(tmp_path / "f" / "out.json") == f"{tmp_path / 'f'} is a file, not a folder"


def test_unreadable_checkpoints_are_one_error_naming_the_file(tmp_path):
    good = tmp_path / "good.ckpt"
    torch.save({"state_dict": {"model.w": torch.ones(3)}, "global_step": 4}, good)
    assert read_checkpoint(good, mmap=True)["global_step"] == 4
    cut = tmp_path / "last.ckpt"
    cut.write_bytes(good.read_bytes()[:200])  # a copy killed halfway
    with pytest.raises(CheckpointError, match=rf"^{cut}: not a readable checkpoint \(.+\); delete it"):
        read_checkpoint(cut, mmap=True)
    listed = tmp_path / "list.ckpt"
    torch.save([1, 2], listed)
    with pytest.raises(CheckpointError, match=r"not a checkpoint \(holds a list, not a dict\)"):
        read_checkpoint(listed)


def test_a_run_that_never_ends_or_validates_by_a_fraction_is_refused_before_anything_runs():
    with pytest.raises(ConfigError, match="never end"):
        check_trainer({"max_steps": -1, "max_epochs": -1})
    with pytest.raises(ConfigError, match=r"val_check_interval=0\.5 with trainer\.check_val_every_n_epoch=1"):
        check_trainer({"max_steps": 10, "check_val_every_n_epoch": 1, "val_check_interval": 0.5})
    check_trainer({"max_steps": -1, "max_epochs": 2, "check_val_every_n_epoch": None, "val_check_interval": 5})
