"""Duration-bucketed batch sampler capped by total seconds of audio per batch.

Utterances are sorted by duration and split into ``num_buckets`` buckets of equal count
(similar durations, so little padding); batches are packed inside each bucket under
``max_batch_seconds`` (and ``max_batch_size``). An utterance longer than the cap forms a
batch of its own.

Epochs and ``len``: the number of batches never changes between epochs, because training
loops (Lightning included) read ``len`` once and would otherwise cut an epoch short. The
packing of each bucket is computed once (durations in sorted order, next-fit). With
``shuffle=True`` each epoch (``numpy`` generator seeded with ``seed + epoch``) mixes the
contents of each bucket's batches by random swaps of two utterances between two batches,
accepted only when both batches stay under the seconds cap, so batch membership changes
from epoch to epoch while the batch count (and each batch's size) stays fixed; then the
order of all batches is shuffled. ``shuffle=False`` yields the fixed packing, shortest
bucket first.

Distributed training: with ``num_replicas``/``rank`` (by default read from an initialised
``torch.distributed`` process group) each rank takes every ``num_replicas``-th batch of
the epoch's list, a disjoint share of equal size. When the batch count is not divisible by
``num_replicas`` the list is padded by repeating its first batches, so a few utterances are
seen twice in that epoch (the same policy as ``DistributedSampler``).

Training as a function of the step (`StepBatches`): a training run does not iterate epochs; it
draws the batches of its optimizer steps. ``StepBatches`` yields this rank's batches from a start
position on, epoch after epoch without end: position ``p`` is batch ``p % len(sampler)`` of epoch
``p // len(sampler)``. A trainer that starts it at ``global_step x accumulation`` (the batches the
restored weights have trained on) continues a stopped run with exactly the batches an
uninterrupted run sees next, whatever the trainer's own epoch counters say.

Augmentation seeds: with ``augment_seeds=True`` (training) each batch is a list of
``(index, seed)`` pairs, the seed a function of the run's seed, the epoch and the index
(`augment_seed`); the datasets draw that item's SpecAugment masks from it. An item's masks are
then fixed by what it is, not by the process or the moment that computes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

# Random swap proposals per utterance and epoch: with about half accepted, few utterances
# keep their batch (about exp(-4)).
SWAP_ATTEMPTS_PER_ITEM = 4


def pack_greedy(
    indices: Sequence[int],
    durations: np.ndarray,
    max_batch_seconds: float,
    max_batch_size: int | None,
) -> list[list[int]]:
    """Next-fit: fill batches in the given order, closing one when the next item breaks a cap.

    An item longer than the cap always ends up alone.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    total = 0.0
    for i in indices:
        d = float(durations[i])
        full = max_batch_size is not None and len(current) >= max_batch_size
        if current and (full or total + d > max_batch_seconds):
            batches.append(current)
            current, total = [], 0.0
        current.append(int(i))
        total += d
    if current:
        batches.append(current)
    return batches


def augment_seed(seed: int, epoch: int, index: int) -> int:
    """The seed of item ``index``'s augmentation in ``epoch`` of a run seeded with ``seed``."""
    return int(np.random.SeedSequence([int(seed), int(epoch), int(index)]).generate_state(1)[0])


class DurationBucketSampler(torch.utils.data.Sampler[list[int]]):
    """Yields lists of dataset indices (``(index, seed)`` pairs with ``augment_seeds``); pass as
    ``batch_sampler=`` to a ``DataLoader``."""

    def __init__(
        self,
        durations: Sequence[float],
        max_batch_seconds: float,
        *,
        num_buckets: int = 10,
        shuffle: bool = True,
        seed: int = 0,
        max_batch_size: int | None = None,
        num_replicas: int | None = None,
        rank: int | None = None,
        augment_seeds: bool = False,
    ):
        durations = np.asarray(durations, dtype=np.float64)
        if durations.ndim != 1 or durations.size == 0:
            raise ValueError(
                f"DurationBucketSampler needs a non-empty 1-D list of durations, got shape {durations.shape}"
                " (is the manifest empty?)"
            )
        if not np.isfinite(durations).all() or (durations <= 0).any():
            bad = int(np.flatnonzero(~np.isfinite(durations) | (durations <= 0))[0])
            raise ValueError(f"durations must be finite and > 0; index {bad} is {durations[bad]!r}")
        if not max_batch_seconds > 0:
            raise ValueError(f"max_batch_seconds must be > 0, got {max_batch_seconds!r}")
        if num_buckets < 1:
            raise ValueError(f"num_buckets must be >= 1, got {num_buckets!r}")
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1 or None, got {max_batch_size!r}")
        if num_replicas is None or rank is None:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
                rank = dist.get_rank() if rank is None else rank
            else:
                num_replicas = 1 if num_replicas is None else num_replicas
                rank = 0 if rank is None else rank
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"need num_replicas >= 1 and 0 <= rank < num_replicas, got {num_replicas}, {rank}")

        self.durations = durations
        self.max_batch_seconds = float(max_batch_seconds)
        self.max_batch_size = max_batch_size
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.augment_seeds = bool(augment_seeds)
        self.epoch = 0

        order = np.argsort(durations, kind="stable")
        self.buckets = [b for b in np.array_split(order, min(num_buckets, len(order))) if len(b)]
        self._reference = [
            pack_greedy(b, durations, self.max_batch_seconds, max_batch_size) for b in self.buckets
        ]
        self.total_batches = sum(len(p) for p in self._reference)
        self._cache: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        """Batches this rank yields per epoch (the same for every epoch)."""
        return math.ceil(self.total_batches / self.num_replicas)

    def is_padding(self, position: int) -> bool:
        """Whether this rank's ``position``-th batch of an epoch repeats a batch of another rank.

        Batches are dealt out round-robin, so this rank's ``p``-th batch is the epoch's
        ``rank + p * num_replicas``-th; past the real batch count it is a repeat (see ``__iter__``).
        """
        return self.rank + int(position) * self.num_replicas >= self.total_batches

    def _mixed_packing(self, bucket_index: int, rng: np.random.Generator) -> list[list[int]]:
        """The bucket's packing with contents mixed by cap-preserving random swaps."""
        reference = self._reference[bucket_index]
        if len(reference) < 2:
            return [[int(i) for i in rng.permutation(b)] for b in reference]
        items = np.concatenate(reference).tolist()  # (n,) dataset index at each slot
        batch_of = np.repeat(np.arange(len(reference)), [len(b) for b in reference]).tolist()  # (n,) slot -> batch
        totals = [float(self.durations[b].sum()) for b in reference]
        durations = self.durations[items].tolist()
        # A hair under the cap so that rounding in the running totals can never cross it.
        limit = self.max_batch_seconds - 1e-9 * max(1.0, self.max_batch_seconds)
        n = len(items)
        for a, b in rng.integers(0, n, size=(SWAP_ATTEMPTS_PER_ITEM * n, 2)).tolist():
            ba, bb = batch_of[a], batch_of[b]
            if ba == bb:
                continue
            da, db = durations[a], durations[b]
            if da != db:
                new_a, new_b = totals[ba] - da + db, totals[bb] - db + da
                if new_a > limit or new_b > limit:
                    continue
                totals[ba], totals[bb] = new_a, new_b
                durations[a], durations[b] = db, da
            items[a], items[b] = items[b], items[a]
        bounds = np.cumsum([0] + [len(b) for b in reference]).tolist()
        return [items[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]

    def epoch_batches(self, epoch: int | None = None) -> list[list[int]]:
        """All batches of ``epoch`` (every rank's), in the order they are dealt out."""
        epoch = self.epoch if epoch is None else int(epoch)
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        if not self.shuffle:
            batches = [list(b) for packing in self._reference for b in packing]
        else:
            rng = np.random.default_rng(self.seed + epoch)
            batches = [b for k in range(len(self.buckets)) for b in self._mixed_packing(k, rng)]
            batches = [batches[j] for j in rng.permutation(len(batches))]
        assert len(batches) == self.total_batches, "packing changed the batch count"
        self._cache = (epoch, batches)
        return batches

    def rank_batches(self, epoch: int, skip: int = 0) -> Iterator[list[int]]:
        """This rank's batches of ``epoch`` after its first ``skip``."""
        batches = self.epoch_batches(epoch)
        per_rank = len(self)
        padded = per_rank * self.num_replicas
        if padded > len(batches):
            # Repeat from the start (cyclically when there are fewer batches than ranks).
            batches = batches + [batches[j % len(batches)] for j in range(padded - len(batches))]
        mine = batches[self.rank : padded : self.num_replicas]  # (per_rank,) this rank's share, in order
        if self.augment_seeds:
            yield from ([(int(i), augment_seed(self.seed, epoch, i)) for i in b] for b in mine[skip:])
        else:
            yield from (list(b) for b in mine[skip:])

    def __iter__(self) -> Iterator[list[int]]:
        return self.rank_batches(self.epoch)


class StepBatches:
    """A training loader's ``batch_sampler``: this rank's batches from position ``start()`` on, without end.

    ``start`` is read each time an iteration begins (a loader creates its iterator when training
    starts, and again if a trainer starts another epoch of its own): the number of batches this
    rank has trained on, ``global_step x accumulation`` for a trainer. The batch at position ``p`` is
    a function of ``p`` alone (``epochs``' epoch ``p // len(epochs)``, batch ``p % len(epochs)``), so a
    run stopped anywhere and restored at its step goes on with the batches an uninterrupted run
    sees next. It has no ``len``: for a loader it is an endless stream, and the trainer stops at its
    step count."""

    def __init__(self, epochs: DurationBucketSampler, start: Callable[[], int]):
        self.epochs = epochs
        self.start = start

    @property
    def batches_per_epoch(self) -> int:
        return len(self.epochs)

    def __iter__(self) -> Iterator[list[int]]:
        position = int(self.start())
        assert position >= 0, f"a training position must be >= 0, got {position}"
        per_epoch = len(self.epochs)
        while True:
            epoch, skip = divmod(position, per_epoch)
            yield from self.epochs.rank_batches(epoch, skip)
            position = (epoch + 1) * per_epoch
