"""conf/data/{librispeech,tedlium3}.yaml compose with train.yaml and instantiate to the manifests."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from asr_pe.data.librispeech import prepare_librispeech
from asr_pe.data.tedlium import prepare_tedlium

CONF = Path(__file__).resolve().parents[2] / "conf"


def _compose(data: str, manifest_dir: Path, *extra: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", overrides=[f"data={data}", f"data.corpus.manifest_dir={manifest_dir}", *extra])


def test_librispeech_config_instantiates_to_the_prepared_manifests(build, tmp_path):
    build.make_librispeech_tree(tmp_path / "c")
    m = tmp_path / "m"
    prepare_librispeech(tmp_path / "c", m, ["dev-clean", "test-clean"])
    cfg = _compose("librispeech", m, "data.corpus.train=[dev-clean]", "data.corpus.dev=[dev-clean]",
                   "data.corpus.test=[test-clean]")
    assert cfg.data.name == "librispeech"
    assert instantiate(cfg.data.corpus) == {
        "train": [str(m / "dev-clean.jsonl")],
        "dev": [str(m / "dev-clean.jsonl")],
        "test": {"test-clean": str(m / "test-clean.jsonl")},
    }
    with pytest.raises(Exception, match=r"run recipes/librispeech/run.sh --stage 1 --stop_stage 2 first"):
        instantiate(_compose("librispeech", tmp_path / "empty").data.corpus)


def test_tedlium3_config_instantiates_segments_and_full_talks(build, tmp_path):
    build.make_tedlium_tree(tmp_path / "c")
    m = tmp_path / "m"
    prepare_tedlium(tmp_path / "c", m)
    cfg = _compose("tedlium3", m)
    assert cfg.data.name == "tedlium3" and cfg.data.corpus._target_ == "asr_pe.data.tedlium.tedlium_manifests"
    got = instantiate(cfg.data.corpus)
    assert got["train"] == [str(m / "train.jsonl")] and got["dev"] == [str(m / "dev.jsonl")]
    assert got["test"] == {n: str(m / f"{n}.jsonl") for n in ("dev", "test", "dev_talks", "test_talks")}
