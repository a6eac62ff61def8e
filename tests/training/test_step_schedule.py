"""`step_schedule`: an epoch count in the config, in the steps it means for the run's data."""

import pytest

from asr_pe.errors import ConfigError
from asr_pe.training.schedules import step_schedule


def test_epochs_become_steps_and_the_earlier_end_wins():
    assert step_schedule({"max_steps": 100, "max_epochs": -1}, 7).max_steps == 100
    assert step_schedule({"max_steps": -1, "max_epochs": 3}, 7).max_steps == 21
    assert step_schedule({"max_steps": 15, "max_epochs": 3}, 7).max_steps == 15
    assert step_schedule({"max_steps": 100, "max_epochs": 3}, 7).max_steps == 21
    # an epoch of 7 batches with 2 batches per optimizer step is 4 steps (Lightning steps on an epoch's last batch)
    assert step_schedule({"max_steps": -1, "max_epochs": 3, "accumulate_grad_batches": 2}, 7).max_steps == 12
    with pytest.raises(ConfigError, match="never end"):
        step_schedule({"max_steps": -1, "max_epochs": -1}, 7)


def test_validation_every_k_epochs_is_every_k_epochs_of_batches():
    assert step_schedule({"max_steps": 50, "check_val_every_n_epoch": 1}, 7).val_every == 7
    assert step_schedule({"max_steps": 50, "check_val_every_n_epoch": 3}, 7).val_every == 21
    assert step_schedule({"max_steps": 50, "check_val_every_n_epoch": 2, "val_check_interval": 1.0}, 7).val_every == 14
    # in batches over the whole run, or a time, as Lightning takes them with check_val_every_n_epoch=null
    assert step_schedule({"max_steps": 50, "check_val_every_n_epoch": None, "val_check_interval": 5}, 7).val_every == 5
    assert step_schedule({"max_steps": 50, "check_val_every_n_epoch": None,
                          "val_check_interval": "00:00:10:00"}, 7).val_every == "00:00:10:00"


@pytest.mark.parametrize("trainer", [{"check_val_every_n_epoch": None},
                                     {"check_val_every_n_epoch": None, "val_check_interval": 0.5},
                                     {"check_val_every_n_epoch": 1, "val_check_interval": 0.25},
                                     {"check_val_every_n_epoch": 2, "val_check_interval": 3}])
def test_a_validation_setting_that_has_no_meaning_in_steps_is_one_error(trainer):
    with pytest.raises(ConfigError, match="val_check_interval"):
        step_schedule({"max_steps": 50, **trainer}, 7)


def test_a_fraction_of_an_endless_epoch_is_one_error():
    with pytest.raises(ConfigError, match="limit_train_batches=0.1"):
        step_schedule({"max_steps": 50, "limit_train_batches": 0.1}, 7)
    step_schedule({"max_steps": 50, "limit_train_batches": 1.0}, 7)
