"""Run-level data wiring: manifests from the corpus config, tokenizer, CMVN, DataModule.

The corpus config's ``_target_`` returns ``{"train": path(s), "dev": path(s), "test": path or
{name: path}}``; everything else here is independent of the corpus.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import lightning as L
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from asr_pe.data.audio_checks import scan_audio
from asr_pe.data.concat import ConcatDataset, pack_groups
from asr_pe.data.dataset import ASRDataset, collate, compute_cmvn, filter_for_ctc
from asr_pe.data.features import FbankExtractor, GlobalCMVN, SpecAugment
from asr_pe.data.manifest import Utterance, read_manifest
from asr_pe.data.sampler import DurationBucketSampler, StepBatches
from asr_pe.data.tokenizer import Tokenizer, build_tokenizer, load_tokenizer
from asr_pe.run_folder import CMVN, TOKENIZER

from .loader_deadline import DEFAULT_LOADER_TIMEOUT_S, DeadlineLoader

log = logging.getLogger(__name__)



def _as_list(x: Any) -> list[str]:
    return [str(x)] if isinstance(x, (str, Path)) else [str(p) for p in x or []]


def normalise_manifests(m: Mapping[str, Any]) -> dict[str, Any]:
    """-> {"train": [paths], "dev": [paths], "test": {name: path}} (a test set unnamed: its file's stem)."""
    test = m.get("test")
    tests = ({str(k): str(v) for k, v in test.items()} if isinstance(test, Mapping)
             else {Path(p).stem: p for p in _as_list(test)})
    return {"train": _as_list(m.get("train")), "dev": _as_list(m.get("dev")), "test": tests}


def resolve_manifests(data_cfg: DictConfig) -> dict[str, Any]:
    """Build/locate the corpus (may take a while the first time) and return its manifests."""
    try:
        corpus = instantiate(data_cfg.corpus)
    except InstantiationException as e:
        # Hydra wraps the corpus' own clear error (e.g. "run the recipe's prepare stage first")
        if e.__cause__ is not None:
            raise e.__cause__ from None
        raise
    return normalise_manifests(corpus)


def read_manifests(paths: list[str]) -> list[Utterance]:
    return [u for p in paths for u in read_manifest(p)]


@dataclass
class RunData:
    manifests: dict[str, Any]
    train: list[Utterance]
    dev: list[Utterance]
    tokenizer: Tokenizer
    features: FbankExtractor
    cmvn: GlobalCMVN
    report: dict[str, Any] = field(default_factory=dict)
    groups: list[list[int]] | None = None  # training inputs: utterances joined (data.concat_max_seconds)


def prepare_run_data(data_cfg: DictConfig, run_dir: Path, *, frontend: torch.nn.Module | None,
                     uses_ctc: bool) -> RunData:
    """Manifests, tokenizer (trained once, stored in the run) and CMVN (likewise).

    ``frontend`` (with ``output_lengths`` and ``frame_shift_s``) tells how many encoder frames
    an utterance gets, which decides whether CTC can align its transcript."""
    manifests = resolve_manifests(data_cfg)
    if not manifests["train"]:
        raise ValueError(f"data={data_cfg.name}: the corpus returned no training manifest")
    train = read_manifests(manifests["train"])
    if not train:
        raise ValueError(f"the training manifests hold no utterances ({', '.join(map(str, manifests['train']))}); "
                         f"prepare the corpus again (the recipe's preparation stage)")
    dev = read_manifests(manifests["dev"])
    report: dict[str, Any] = {"train_read": len(train), "dev_read": len(dev)}
    max_dur = data_cfg.get("train_max_duration")
    if max_dur is not None:
        before = len(train)
        train = [u for u in train if u.duration <= max_dur]
        report["train_over_max_duration"] = before - len(train)
        if before - len(train):
            log.info("dropped %d training utterances longer than %.1f s", before - len(train), max_dur)
    if not train:
        raise ValueError(f"no training utterances left after data.train_max_duration={max_dur} "
                         f"(all {report['train_read']} are longer; raise it or leave it unset)")
    # every file's header against the manifest before anything is computed from the audio
    report["audio"] = {split: scan_audio(utts, sample_rate=int(data_cfg.features.sample_rate), name=split).summary()
                       for split, utts in (("train", train), ("dev", dev)) if utts}

    tok_path = run_dir / TOKENIZER
    if tok_path.exists():
        tokenizer = load_tokenizer(tok_path)
    else:
        tok_opts = OmegaConf.to_container(data_cfg.tokenizer, resolve=True)
        kind = tok_opts.pop("kind")
        tokenizer = build_tokenizer(kind, [u.text for u in train], run_dir, **tok_opts)
        tokenizer.save(tok_path)

    features = FbankExtractor(**OmegaConf.to_container(data_cfg.features, resolve=True))
    cmvn_path = run_dir / CMVN
    if cmvn_path.exists():
        cmvn = GlobalCMVN.load(cmvn_path)
    else:
        cmvn = compute_cmvn(train, features, max_utterances=data_cfg.get("cmvn_max_utterances"))
        cmvn.save(cmvn_path)

    if uses_ctc:
        assert frontend is not None, "CTC training needs the front end to count encoder frames"

        def encoder_frames(duration: float) -> int:
            n = features.num_frames(int(round(duration * features.sample_rate)))
            return int(frontend.output_lengths(torch.tensor([n]))[0])

        n_read = len(train)
        train, rep = filter_for_ctc(train, tokenizer, 1.0 / frontend.frame_shift_s, encoder_frames=encoder_frames)
        report["train_ctc_infeasible"] = rep["dropped"]
        if not train:
            raise ValueError(
                f"none of the {n_read} training utterances is long enough for its transcript under CTC at "
                f"{frontend.frame_shift_s * 1000:.0f} ms encoder frames (e.g. {rep['ids'][:3]})"
            )
    report["train_used"] = len(train)
    report["train_hours"] = sum(u.duration for u in train) / 3600
    report["train_max_duration"] = max(u.duration for u in train)
    concat_s = data_cfg.get("concat_max_seconds")
    groups = None
    if concat_s:
        # training inputs of up to concat_max_seconds, utterances joined (asr_pe/data/concat.py); the
        # longest training *input* is what the model's positions have seen (the remedies' L_tr, the
        # plots' training-length marker)
        groups = pack_groups([u.duration for u in train], float(concat_s), seed=int(data_cfg.get("concat_seed", 0)))
        report["train_max_utterance"] = report["train_max_duration"]
        report["train_inputs"] = len(groups)
        report["train_max_duration"] = max(sum(train[i].duration for i in g) for g in groups)
    return RunData(manifests, train, dev, tokenizer, features, cmvn, report, groups)


class ASRDataModule(L.LightningDataModule):
    """Duration-bucketed train/dev loaders over prepared data (features cached in memory).

    The train loader is an endless stream of batches indexed by the trainer's step
    (`asr_pe.data.sampler.StepBatches`): training is counted in steps, and a resumed run draws
    the batches of the steps it has not trained yet. `train_batches_per_epoch` is what an epoch
    of this rank's data is in steps (`asr_pe.training.schedules.step_schedule`)."""

    def __init__(self, data: RunData, data_cfg: DictConfig, seed: int):
        super().__init__()
        self.data, self.cfg, self.seed = data, data_cfg, seed
        sa = data_cfg.get("spec_augment")
        self.spec_augment = SpecAugment(**OmegaConf.to_container(sa, resolve=True)) if sa else None
        durations = [u.duration for u in data.train]
        self.train_durations = durations if data.groups is None else [sum(durations[i] for i in g) for g in data.groups]
        self.train_set = self.dev_set = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        cache = bool(self.cfg.get("cache_features", True))
        d = self.data
        self.train_set = ASRDataset(d.train, d.tokenizer, d.features, d.cmvn, self.spec_augment, cache_features=cache)
        if d.groups is not None:
            self.train_set = ConcatDataset(self.train_set, d.groups)
        self.dev_set = ASRDataset(d.dev, d.tokenizer, d.features, d.cmvn, None, cache_features=cache) if d.dev else None

    def _sampler(self, durations: list[float], shuffle: bool, ranks: tuple[int, int] | None = None
                 ) -> DurationBucketSampler:
        # training (shuffle): each item's SpecAugment masks from its own seed (asr_pe/data/sampler.py)
        world, rank = ranks or ((self.trainer.world_size, self.trainer.global_rank) if self.trainer else (1, 0))
        return DurationBucketSampler(
            durations, self.cfg.max_batch_seconds, num_buckets=self.cfg.num_buckets,
            shuffle=shuffle, seed=self.seed, max_batch_size=self.cfg.get("max_batch_size"),
            num_replicas=world, rank=rank, augment_seeds=shuffle,
        )

    def train_batches_per_epoch(self, world_size: int) -> int:
        """Training batches one rank draws per epoch of the data when ``world_size`` ranks train."""
        return len(self._sampler(self.train_durations, shuffle=True, ranks=(world_size, 0)))  # the sampler's own count

    def _batches_trained(self) -> int:
        """Batches this rank has trained on: the restored step's, on a resume (the trainer's step count is
        restored before the loader's iterator starts)."""
        return self.trainer.global_step * self.trainer.accumulate_grad_batches

    def _loader(self, dataset, batch_sampler) -> DeadlineLoader:
        """With workers, a ``timeout=``: a worker that cannot deliver (e.g. it cannot write its
        shared memory) would otherwise leave training waiting at its step forever, deaf to SIGTERM
        (Lightning acts on it between batches). PyTorch allows it only with workers;
        `DeadlineLoader` extends it to the transfer of the batch's tensors."""
        workers = self.cfg.num_workers
        timeout = {"timeout": float(self.cfg.get("loader_timeout_s", DEFAULT_LOADER_TIMEOUT_S))} if workers > 0 else {}
        return DeadlineLoader(dataset, batch_sampler=batch_sampler, collate_fn=collate, num_workers=workers,
                              persistent_workers=workers > 0, **timeout)

    def train_dataloader(self):
        return self._loader(self.train_set, StepBatches(self._sampler(self.train_durations, shuffle=True),
                                                        start=self._batches_trained))

    def val_dataloader(self):
        if self.dev_set is None:
            return []
        return self._loader(self.dev_set, self._sampler(self.dev_set.durations, shuffle=False))
