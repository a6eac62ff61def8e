"""Batch order across epochs, through real `train(cfg)` runs (Lightning's `Trainer.fit`).

Lightning 2.6 calls ``set_epoch`` on ``loader.sampler`` and ``loader.batch_sampler.sampler``
only, never on a batch sampler, so these tests watch the batches the training step receives
rather than calling the sampler by hand: every epoch must be a new order of the same
utterances, the same for a given seed, and a run interrupted mid-epoch and resumed must see
exactly the batches of an uninterrupted run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from asr_pe.training.module import ASRModule
from asr_pe.training.train import train

from e2e_helpers import TINY_MODEL, compose_train, synth_overrides


@pytest.fixture
def record_batches(monkeypatch):
    """Records (epoch, tuple of utterance ids) for every training batch of every run."""
    seen: list[tuple[int, tuple[str, ...]]] = []
    original = ASRModule.training_step

    def recording_step(self, batch, batch_idx):
        seen.append((int(self.current_epoch), tuple(batch["ids"])))
        return original(self, batch, batch_idx)

    monkeypatch.setattr(ASRModule, "training_step", recording_step)
    return seen


def _cfg(root, run, *extra):
    return compose_train(TINY_MODEL + synth_overrides(root) + [
        f"run_dir={run}", "pe=none", "encoder=transformer", "eval_after_train=false",
        "data.spec_augment=null", "trainer.check_val_every_n_epoch=1000", *extra])


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


# With loader workers the first batches are drawn when the iterator is created, before
# Lightning's set_epoch: the epoch must already be right then.
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


def test_resume_at_an_epoch_boundary_starts_the_next_epoch(tiny_synth_root, tmp_path, record_batches):
    train(_cfg(tiny_synth_root, tmp_path / "full", "trainer.max_steps=-1", "trainer.max_epochs=2",
               "checkpoint.every_n_train_steps=1000"))
    uninterrupted = list(record_batches)
    per_epoch = len(_by_epoch(uninterrupted)[0])

    record_batches.clear()
    run = tmp_path / "interrupted"
    train(_cfg(tiny_synth_root, run, f"trainer.max_steps={per_epoch}", "checkpoint.every_n_train_steps=1"))
    train(_cfg(tiny_synth_root, run, f"trainer.max_steps={2 * per_epoch}", "checkpoint.every_n_train_steps=1",
               "resume=true"))
    assert record_batches == uninterrupted
