"""The run folder's one definition (asr_pe/run_folder.py): labels, checkpoints, the finished
marker, and the readers' errors. That train.py writes this layout is checked on a real run in
tests/integration/test_train_e2e.py::test_ctc_run_learns_and_evaluates."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from asr_pe import run_folder as rf


def _config(**extra):
    cfg = {"pe": {"name": "rope"}, "loss": {"name": "ctc"}, "encoder": {}, "data": {}}
    cfg.update(extra)
    return cfg


def test_one_run_label_for_a_config_and_for_the_run_info_written_from_it():
    remedy = _config(encoder={"position_map": {"kind": "scale", "range": [1, 32]}},
                     data={"concat_max_seconds": 20}, arm="frontend70")
    merged = _config(pe={"input": {"name": "cape"}, "attention": {"name": "rope"}})
    for cfg, label in ((_config(), "rope/ctc"), (remedy, "rope/ctc posscale:1-32+concat:20 [frontend70]"),
                       (merged, "cape+rope/ctc")):
        assert rf.run_label(cfg) == label
        assert rf.run_label(OmegaConf.create(cfg)) == label        # train.py passes its DictConfig
        info = {"pe": rf.pe_label(cfg["pe"]), "loss": cfg["loss"]["name"], "remedy": rf.training_remedy(cfg),
                "label": rf.run_label(cfg)}
        assert rf.run_label(info) == label                         # what the tables read back
    # a record without a label (an external system, an old run) groups by what it records
    assert rf.run_label({"pe": "none", "loss": "ctc"}) == "none/ctc"
    assert rf.run_label({"label": "whisper", "pe": None, "loss": None}) == "whisper"


def test_best_falls_back_to_last_and_a_missing_checkpoint_names_both(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no checkpoint 'best' in .*\['best.ckpt', 'last.ckpt'\]"):
        rf.find_checkpoint(tmp_path, "best")
    rf.checkpoint_dir(tmp_path).mkdir()
    rf.checkpoint_path(tmp_path, rf.LAST).write_bytes(b"x")
    assert rf.find_checkpoint(tmp_path, "best") == tmp_path / "checkpoints" / "last.ckpt"
    rf.checkpoint_path(tmp_path, rf.BEST).write_bytes(b"y")
    assert rf.find_checkpoint(tmp_path, "best") == tmp_path / "checkpoints" / "best.ckpt"
    with pytest.raises(FileNotFoundError, match=r"\['last-v1.ckpt'\]"):
        rf.find_checkpoint(tmp_path, "last-v1")   # only best falls back


def test_a_run_is_finished_only_when_every_marked_set_has_its_files(tmp_path):
    for name in ("test", "longform"):
        rf.result_dir(tmp_path, name).mkdir(parents=True)
        for f in rf.EVAL_FILES:
            (rf.result_dir(tmp_path, name) / f).write_text("x")
    assert not rf.eval_done(tmp_path)                              # no marker yet
    rf.mark_eval_done(tmp_path, ["test", "longform"])
    assert rf.eval_done(tmp_path)
    (rf.result_dir(tmp_path, "longform") / rf.BUCKETS_MD).unlink()
    assert not rf.eval_done(tmp_path)                              # killed in the middle of a set
    rf.clear_eval_done(tmp_path)
    assert not rf.eval_done_path(tmp_path).exists()


def test_result_folders_are_the_set_then_its_suffix(tmp_path):
    assert rf.result_dir(tmp_path, "test", "_window5") == tmp_path / "eval" / "test_window5"
    for name in ("test", "test_window5", "no_buckets"):
        rf.result_dir(tmp_path, name).mkdir(parents=True)
    for name in ("test_window5", "test"):
        (rf.result_dir(tmp_path, name) / rf.BUCKETS_CSV).write_text("x")
    assert rf.result_names(tmp_path) == ["test", "test_window5"]


def test_config_and_run_info_round_trip_and_bad_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a run directory \\(no config.yaml\\)"):
        rf.read_config(tmp_path)
    rf.write_config(tmp_path, OmegaConf.create({"a": 1, "b": "${a}"}))
    assert OmegaConf.to_container(rf.read_config(tmp_path)) == {"a": 1, "b": 1}   # written resolved
    rf.write_run_info(tmp_path, {"pe": "rope", "loss": "ctc"})
    assert rf.read_run_info(tmp_path) == {"pe": "rope", "loss": "ctc"} and rf.is_run_dir(tmp_path)
    rf.run_info_path(tmp_path).write_text('{\n  "pe": rope\n}\n')
    with pytest.raises(KeyError, match=r"run_info.json:2: invalid JSON"):
        rf.read_run_info(tmp_path, error=KeyError)
    rf.run_info_path(tmp_path).write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=r"run_info.json:1: expected a JSON object"):
        rf.read_run_info(tmp_path)
