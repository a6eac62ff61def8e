"""Batch order across epochs, through real `train(cfg)` runs (Lightning's `Trainer.fit`).

The training batches are a function of the step (`asr_pe.data.sampler.StepBatches`); these tests
watch the batches the training step receives rather than calling the sampler by hand: every epoch
must be a new order of the same utterances, the same for a given seed, and a run interrupted
anywhere (mid-epoch, at an epoch's end, by a SIGTERM, by its max_steps) and resumed must see
exactly the batches of an uninterrupted run and end with its weights.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from asr_pe.training.module import ASRModule
from asr_pe.training.train import train

from e2e_helpers import TINY_MODEL, compose_train, synth_overrides


@pytest.fixture
def record_batches(monkeypatch):
    """Records (epoch of the data, tuple of utterance ids) for every training batch of every run."""
    seen: list[tuple[int, tuple[str, ...]]] = []
    original = ASRModule.training_step

    def recording_step(self, batch, batch_idx):
        seen.append((_data_epoch(self.trainer), tuple(batch["ids"])))
        return original(self, batch, batch_idx)

    monkeypatch.setattr(ASRModule, "training_step", recording_step)
    return seen


def _data_epoch(trainer) -> int:
    """The epoch of the data the trainer's next batch comes from (one process, no accumulation)."""
    return trainer.global_step // trainer.train_dataloader.batch_sampler.batches_per_epoch


def _cfg(root, run, *extra):
    # SpecAugment and dropout on: the resumed run must also draw the masks of an uninterrupted one
    return compose_train(TINY_MODEL + synth_overrides(root) + [
        f"run_dir={run}", "pe=none", "encoder=transformer", "eval_after_train=false", "encoder.dropout=0.1",
        "trainer.check_val_every_n_epoch=1000", *extra])


def assert_same_weights(full, run):
    """The two runs' last.ckpt hold bit-identical weights and optimiser moments, at the same step."""
    a, b = (torch.load(r / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu") for r in (full, run))
    assert a["global_step"] == b["global_step"]
    differ = [k for k in a["state_dict"] if not torch.equal(a["state_dict"][k], b["state_dict"][k])]
    assert not differ, f"{len(differ)} of {len(a['state_dict'])} parameter tensors differ, e.g. {differ[:3]}"
    moments = [(p, k) for p, st in a["optimizer_states"][0]["state"].items() for k, v in st.items()
               if torch.is_tensor(v) and not torch.equal(v, b["optimizer_states"][0]["state"][p][k])]
    assert not moments, f"optimiser state differs: {moments[:3]}"


def _by_epoch(seen):
    epochs: dict[int, list[tuple[str, ...]]] = {}
    for epoch, ids in seen:
        epochs.setdefault(epoch, []).append(ids)
    return epochs


def test_each_epoch_is_a_new_order_of_the_same_utterances(tiny_synth_root, tmp_path, record_batches):
    train(_cfg(tiny_synth_root, tmp_path / "a", "trainer.max_steps=-1", "trainer.max_epochs=3",
               "checkpoint.every_n_train_steps=1000"))
    epochs = _by_epoch(record_batches)
    assert sorted(epochs) == [0, 1, 2]
    counts = [Counter(i for batch in epochs[e] for i in batch) for e in (0, 1, 2)]
    # one process: every utterance exactly once per epoch
    assert counts[0] == counts[1] == counts[2] and set(counts[0].values()) == {1}
    assert len({len(epochs[e]) for e in epochs}) == 1, "the batch count changed between epochs"
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2] and epochs[0] != epochs[2], "an epoch repeated the order"
    # batch membership changes too, not only the order of fixed batches
    assert {frozenset(b) for b in epochs[0]} != {frozenset(b) for b in epochs[1]}

    # same seed, same orders; another seed, another order
    first = list(record_batches)
    record_batches.clear()
    train(_cfg(tiny_synth_root, tmp_path / "b", "trainer.max_steps=-1", "trainer.max_epochs=3",
               "checkpoint.every_n_train_steps=1000"))
    assert record_batches == first
    record_batches.clear()
    train(_cfg(tiny_synth_root, tmp_path / "c", "trainer.max_steps=-1", "trainer.max_epochs=1",
               "checkpoint.every_n_train_steps=1000", "seed=1",
               "trainer.enable_progress_bar=false"))  # no bar callback then (Lightning would refuse one)
    assert [b for _, b in record_batches] != [b for e, b in first if e == 0]


# With loader workers the first batches are drawn when the iterator is created: the restored step
# must already be known then.
@pytest.mark.parametrize("workers", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_resume_mid_epoch_continues_with_the_batches_of_an_uninterrupted_run(
        tiny_synth_root, tmp_path, record_batches, workers):
    train(_cfg(tiny_synth_root, tmp_path / "full", "trainer.max_steps=-1", "trainer.max_epochs=3",
               "checkpoint.every_n_train_steps=1000", f"data.num_workers={workers}"))
    uninterrupted = list(record_batches)
    per_epoch = len(_by_epoch(uninterrupted)[0])
    assert per_epoch >= 3, f"the tiny corpus gives only {per_epoch} batches per epoch"
    stop = per_epoch + 2  # in the middle of the second epoch

    record_batches.clear()
    run = tmp_path / "interrupted"
    train(_cfg(tiny_synth_root, run, f"trainer.max_steps={stop}", "checkpoint.every_n_train_steps=1",
               f"data.num_workers={workers}"))
    assert len(record_batches) == stop
    # resume from last.ckpt (saved after step `stop`) and train to the end of the third epoch
    train(_cfg(tiny_synth_root, run, f"trainer.max_steps={3 * per_epoch}", "checkpoint.every_n_train_steps=1",
               "resume=true", f"data.num_workers={workers}"))
    assert record_batches == uninterrupted
    assert_same_weights(tmp_path / "full", run)


# ~20 s each: the variant without validation (which Lightning resumed right) runs with the slow tests
@pytest.mark.parametrize("validation", [pytest.param([], marks=pytest.mark.slow, id="no-val"),
                                        pytest.param(["trainer.check_val_every_n_epoch=1"], id="val")])
def test_resume_at_an_epoch_boundary_starts_the_next_epoch(tiny_synth_root, tmp_path, record_batches, validation):
    """Stopped at the end of epoch 0, resumed, stopped at the end of epoch 1, resumed again: with a
    validation at each epoch end the second resume used to train epoch 1's batch order a second
    time, when the batch order followed Lightning's epoch counters (Lightning 2.6 starts the epoch
    after such a resume without counting it as started)."""
    train(_cfg(tiny_synth_root, tmp_path / "full", "trainer.max_steps=-1", "trainer.max_epochs=3",
               "checkpoint.every_n_train_steps=1000", *validation))
    uninterrupted = list(record_batches)
    per_epoch = len(_by_epoch(uninterrupted)[0])

    record_batches.clear()
    run = tmp_path / "interrupted"
    train(_cfg(tiny_synth_root, run, f"trainer.max_steps={per_epoch}", "checkpoint.every_n_train_steps=1",
               *validation))
    for epochs in (2, 3):
        train(_cfg(tiny_synth_root, run, f"trainer.max_steps={epochs * per_epoch}",
                   "checkpoint.every_n_train_steps=1", "resume=true", *validation))
    assert record_batches == uninterrupted
    assert _train_rows(run)[0] == _train_rows(tmp_path / "full")[0] == list(range(3 * per_epoch))
    assert_same_weights(tmp_path / "full", run)


def test_a_run_continued_past_its_max_steps_finishes_the_epoch_it_stopped_in(tiny_synth_root, tmp_path, record_batches):
    """max_steps in the middle of an epoch and no step checkpoint there: last.ckpt is saved as the
    fit ends, when Lightning has counted its epoch as completed; continued with more steps, the run
    used to start the next epoch and never train the rest of this one (when the batch order
    followed Lightning's epochs)."""
    train(_cfg(tiny_synth_root, tmp_path / "full", "trainer.max_steps=-1", "trainer.max_epochs=3",
               "checkpoint.every_n_train_steps=1000"))
    uninterrupted = list(record_batches)
    per_epoch = len(_by_epoch(uninterrupted)[0])

    record_batches.clear()
    run = tmp_path / "continued"
    train(_cfg(tiny_synth_root, run, f"trainer.max_steps={per_epoch + 2}", "checkpoint.every_n_train_steps=1000"))
    train(_cfg(tiny_synth_root, run, f"trainer.max_steps={3 * per_epoch}", "checkpoint.every_n_train_steps=1000",
               "resume=true"))
    assert record_batches == uninterrupted
    assert _train_rows(run)[0] == list(range(3 * per_epoch))
    assert_same_weights(tmp_path / "full", run)


# ---------------------------------------------------------------- a SIGTERM between two epochs
def _train_rows(run) -> tuple[list[int], list[int]]:
    """(steps of the training rows, steps of the validation rows) of the run's metrics.csv."""
    import csv

    with open(run / "logs" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return ([int(r["step"]) for r in rows if r.get("train/loss")],
            [int(r["step"]) for r in rows if r.get("val/cer")])


def _stop_then_resume(tiny_synth_root, tmp_path, record_batches, stop, validation: list[str]):
    """An uninterrupted 3-epoch run, then one stopped by ``stop`` (a context manager that makes
    the SIGTERM stop happen) and resumed: (uninterrupted run folder, interrupted run folder), with
    ``record_batches`` holding the interrupted run's batches."""
    from asr_pe.training.stops import TrainingInterrupted

    full = tmp_path / "full"
    train(_cfg(tiny_synth_root, full, "trainer.max_steps=-1", "trainer.max_epochs=3",
               "checkpoint.every_n_train_steps=1000", *validation))
    uninterrupted = list(record_batches)
    per_epoch = len(_by_epoch(uninterrupted)[0])
    record_batches.clear()
    run = tmp_path / "interrupted"
    with stop, pytest.raises(TrainingInterrupted, match=f"at step {per_epoch} "):
        train(_cfg(tiny_synth_root, run, f"trainer.max_steps={3 * per_epoch}", "checkpoint.every_n_train_steps=1000",
                   *validation))
    assert len(record_batches) == per_epoch
    train(_cfg(tiny_synth_root, run, f"trainer.max_steps={3 * per_epoch}", "checkpoint.every_n_train_steps=1000",
               "resume=true", *validation))
    assert record_batches == uninterrupted, "the resumed run did not see the batches of an uninterrupted run"
    assert_same_weights(full, run)
    return full, run


# A SIGTERM during an epoch's last batch or its validation: the stop comes after them (the ranks
# agree at the batch's end and at the validation's end, asr_pe.training.callbacks.SigtermStop; a
# validation is never cut short). When the batch order followed Lightning's epoch counters, such a
# stop (raised between two of its epochs) skipped an epoch's batch order on resume and logged every
# step one late (CI: a resume test lost a row).
@pytest.mark.parametrize("validation,during", [
    pytest.param([], "last batch", marks=pytest.mark.slow, id="no-val"),
    pytest.param(["trainer.check_val_every_n_epoch=1"], "last batch", marks=pytest.mark.slow, id="val-batch"),
    pytest.param(["trainer.check_val_every_n_epoch=1"], "validation", id="val-validation")])
def test_a_sigterm_at_the_end_of_an_epoch_resumes_with_the_next_epochs_batches(
        tiny_synth_root, tmp_path, record_batches, monkeypatch, validation, during):
    import contextlib
    import os
    import signal

    sent = []

    def send_sigterm(trainer) -> None:
        if not sent:
            sent.append(trainer.global_step)
            os.kill(os.getpid(), signal.SIGTERM)  # a real signal, through Lightning's handler

    def during_the_last_batch_of_epoch_0(self, batch, batch_idx):
        if _data_epoch(self.trainer) == 0 and self.trainer.global_step + 1 == \
                self.trainer.train_dataloader.batch_sampler.batches_per_epoch:
            send_sigterm(self.trainer)

    def during_the_validation_after_epoch_0(self, batch, batch_idx, dataloader_idx=0):
        if _data_epoch(self.trainer) == 1:
            send_sigterm(self.trainer)

    @contextlib.contextmanager
    def stop():
        hook, send = (("on_train_batch_start", during_the_last_batch_of_epoch_0) if during == "last batch"
                      else ("on_validation_batch_start", during_the_validation_after_epoch_0))
        with monkeypatch.context() as m:
            m.setattr(ASRModule, hook, send, raising=False)
            yield

    full, run = _stop_then_resume(tiny_synth_root, tmp_path, record_batches, stop(), validation)
    assert len(sent) == 1
    train_steps, val_steps = _train_rows(run)
    assert train_steps == _train_rows(full)[0] == list(range(len(train_steps)))
    assert val_steps == _train_rows(full)[1], "a validation was repeated or lost"
    if validation:
        assert len(val_steps) == 3


def test_the_logs_epoch_column_is_the_epoch_of_the_data(tiny_synth_root, tmp_path, record_batches):
    """Lightning sees one endless epoch; logs/metrics.csv's ``epoch`` is the data's, on training and
    validation rows alike (a validation: the epoch just trained)."""
    import csv

    train(_cfg(tiny_synth_root, tmp_path / "a", "trainer.max_steps=-1", "trainer.max_epochs=3",
               "checkpoint.every_n_train_steps=1000", "trainer.check_val_every_n_epoch=1"))
    per_epoch = len(_by_epoch(record_batches)[0])
    with open(tmp_path / "a" / "logs" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    train_rows = [(int(r["step"]), float(r["epoch"])) for r in rows if r.get("train/loss")]
    val_rows = [(int(r["step"]), float(r["epoch"])) for r in rows if r.get("val/cer")]
    assert train_rows == [(s, s // per_epoch) for s in range(3 * per_epoch)]
    assert val_rows == [((e + 1) * per_epoch - 1, e) for e in range(3)]
