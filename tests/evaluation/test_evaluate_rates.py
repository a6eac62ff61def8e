"""asr_pe.evaluation.rate_ladder.evaluate_rates / scripts/evaluate_rates.py: one run decoded at every
rung of a rate ladder, each rung in its own folder (the plain rung the plain folder), resumable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asr_pe.evaluation.rate_ladder import RateLadderError, evaluate_rates, rung_rate
from asr_pe.evaluation.reuse import Reuse
from asr_pe.plots.rate_ladder import rate_ladder
from asr_pe.training.data import resolve_manifests

from evaluation.test_evaluate_run import corpus, make_run  # noqa: F401  (a fixture and its helper)

ROOT = Path(__file__).resolve().parents[2]
FAST = {"eval": {"n_boot": 5}, "data": {"test": "test-clean"}}


@pytest.fixture()
def run(corpus, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    make_run(run, corpus)
    return run


def test_every_rung_once_in_its_own_folder_and_a_second_pass_reuses_them(run):
    reuse = Reuse()
    got = evaluate_rates(run, axis="tempo", values=[0.9, 1.0, 1.2], overrides=FAST,
                         corpus_manifests=resolve_manifests, reuse=reuse)
    assert {v: list(sets) for v, sets in got.items()} == {
        0.9: ["test-clean_tempo0p9"], 1.0: ["test-clean"], 1.2: ["test-clean_tempo1p2"]}
    assert reuse.decoded == ["test-clean_tempo0p9", "test-clean", "test-clean_tempo1p2"] and reuse.reused == []
    for name, tempo in (("test-clean_tempo0p9", 0.9), ("test-clean_tempo1p2", 1.2)):
        meta = json.loads((run / "eval" / name / "buckets.meta.json").read_text())
        assert meta["tempo"] == tempo and meta["utterances"] == 4
    again = Reuse()
    evaluate_rates(run, axis="tempo", values=[0.9, 1.0, 1.2], overrides=FAST, corpus_manifests=resolve_manifests,
                   reuse=again)
    assert again.decoded == [] and len(again.reused) == 3
    # the decoded rungs make a ladder: 4 utterances at each of the 3 rungs, the plain one its own reference
    (run / "run_info.json").write_text(json.dumps({"pe": "relative", "loss": "ctc", "seed": 0}))
    (ladder,) = rate_ladder([run], "test-clean", values=[0.9, 1.0, 1.2], n_boot=10)
    assert [r.utterances for r in ladder.rungs["wer"].values()] == [4, 4, 4]
    assert ladder.rungs["wer"][1.0].ratio == 1.0
    with pytest.raises(RateLadderError, match="axis 'speed'"):
        evaluate_rates(run, axis="speed", values=[1.1], corpus_manifests=resolve_manifests)
    assert rung_rate("hop_ms", 10.0, 10.0).plain and rung_rate("hop_ms", 12.0, 10.0).suffix == "_hop12"


def test_the_script_decodes_a_hop_ladder(run, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate_rates.py"), f"run={run}", "axis=hop_ms",
                           "rungs=[10,12]", "data.test=test-clean", "eval.n_boot=5"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in (run / "eval").iterdir() if p.is_dir()) == ["test-clean", "test-clean_hop12"]
    assert "[asr_pe] hop_ms=12: test-clean_hop12 WER " in proc.stdout and "decoded 2 sets, reused 0" in proc.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate_rates.py"), f"run={run}", "axis=speed"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: ")


def test_run_hop_ms_reads_the_config_once_per_version_of_the_file(tmp_path):
    from asr_pe.evaluation.rate_ladder import run_hop_ms
    from asr_pe.errors import UserError

    config = tmp_path / "config.yaml"
    config.write_text("data:\n  features:\n    frame_shift_ms: 10.0\n")
    assert run_hop_ms(tmp_path) == 10.0
    config.write_text("data:\n  features:\n    frame_shift_ms: 12.5\n")   # another size: read again
    assert run_hop_ms(tmp_path) == 12.5
    config.write_text("data:\n  features:\n    frame_shift_ms: 11.5\n")   # the same size
    os.utime(config, ns=(1, 1))                                            # another mtime
    assert run_hop_ms(tmp_path) == 11.5
    config.unlink()
    with pytest.raises((UserError, FileNotFoundError), match="not a run directory"):
        run_hop_ms(tmp_path)
