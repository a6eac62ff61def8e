"""A tiny trained run evaluated on a tiny length ladder: every ladder set decoded and scored,
a setting chosen on dev by the stated rule and decoded on test once, the report written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from asr_pe.data.manifest import read_manifest
from asr_pe.data.synth.ladder import build_ladder, ladder_sets
from asr_pe.evaluation.ladder_report import pool_sets
from asr_pe.evaluation.ladder import evaluate_ladder
from asr_pe.training.data import resolve_manifests
from asr_pe.training.train import train

from e2e_helpers import TINY_MODEL, compose_train, synth_overrides

REPO = Path(__file__).resolve().parents[2]
TINY_LADDER = dict(rungs=(2, 4), min_duration=0.8, max_duration=1.2, test_recordings=2, dev_recordings=1,
                   gaps=(0.5, 0.0))


@pytest.mark.slow  # about 1.5 min on 2 cores: trains 4 steps, builds 12 utterances, decodes 25 sets
def test_a_run_on_the_ladder_chooses_on_dev_and_decodes_test_once(tiny_synth_root, tmp_path, monkeypatch):
    """A 4-step model decodes nothing (every setting ties), so the rule's pick is forced here to
    the window (the rule itself is tested in tests/evaluation/test_ladder_report.py): what is
    checked is that every set is decoded and scored, each candidate on dev only, and the chosen
    one on test once."""
    import asr_pe.evaluation.ladder as le

    run = tmp_path / "run"
    train(compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + [
        f"run_dir={run}", "pe=rope", "encoder=transformer", "trainer.max_steps=4", "eval_after_train=false"]))
    ladder = build_ladder(tmp_path / "cache", workers=1, progress=False, synth={"seed": 1, "num_speakers": 2},
                          **TINY_LADDER)
    seen = {}

    def pick_window(candidates, **rule):
        seen.update(rule, names=list(candidates))
        return "window:1", {name: le.whole_rate(res, **rule) for name, res in candidates.items()}

    monkeypatch.setattr(le, "choose_on_dev", pick_window)
    choice = evaluate_ladder(run, ladder, corpus_manifests=resolve_manifests, candidates=["window:1", "chunked:2:0.5"], select_min_rung=4,
                             n_boot=20, checkpoint="last", device="cpu")
    assert seen == {"variant": "nogap", "min_rung": 4.0, "names": ["", "window:1", "chunked:2:0.5"]}
    index = ladder_sets(ladder)
    decoded = {p.name for p in (run / "eval").iterdir() if (p / "per_utt.jsonl").is_file()}
    expected = set()
    for pool, suffixes in (("dev", ["", "_window1", "_chunked2o0.5"]), ("test", ["", "_window1"])):
        alone, sets = pool_sets(index, pool)
        for manifest in [alone, *sets.values()]:
            utts = [u.id for u in read_manifest(manifest)]
            for suffix in suffixes:
                name = Path(manifest).stem + suffix
                expected.add(name)
                scored = [json.loads(line)["id"] for line in
                          (run / "eval" / name / "per_utt.jsonl").read_text().splitlines()]
                assert scored == utts                                  # every one, once
    assert decoded == expected                   # no candidate but the chosen one touched test
    # evaluate.py itself wrote the in-context ratio beside every recordings set (its parts' set was
    # decoded in the same call)
    for name in expected - {n for n in expected if "_alone" in n}:
        saved = json.loads((run / "eval" / name / "in_context.json").read_text())
        assert saved["alone_set"] == name.split("_")[0] + "_" + name.split("_")[1] + "_alone"
        assert len(saved["rows"]) == len(read_manifest(
            next(p for p in [*pool_sets(index, "dev")[1].values(), *pool_sets(index, "test")[1].values()]
                 if Path(p).stem == name.removesuffix("_window1").removesuffix("_chunked2o0.5"))))
    assert set(choice["dev_rates"]) == {"plain", "window:1", "chunked:2:0.5"} and choice["chosen"] == "window:1"
    assert choice["test_rate_chosen"] is not None and choice["test_rate_plain"] is not None
    report = (run / "eval" / "ladder" / "report.md").read_text()
    for section in ("## dev pool, plain decoding", "## test pool, plain decoding",
                    "## test pool, window:1 (chosen on dev)", "Chosen: **window:1**"):
        assert section in report
    assert json.loads((run / "eval" / "ladder" / "choice.json").read_text()) == choice


def test_cli_refuses_a_missing_run(tmp_path):
    r = subprocess.run([sys.executable, "scripts/evaluate_ladder.py", f"run={tmp_path / 'nope'}"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "no config.yaml" in r.stderr


def test_candidates_map_to_eval_settings_with_their_own_folders():
    from asr_pe.evaluation.ladder import candidate_settings
    from asr_pe.evaluation.settings import EvalSettingsError

    assert candidate_settings("window:2.5") == {"remedy": "window:2.5"}
    assert candidate_settings("chunked:20:4") == {"mode": "chunked", "chunk_s": 20.0, "overlap_s": 4.0,
                                                  "suffix": "_chunked20o4"}
    assert candidate_settings("rope_ntk@10") == {"remedy": "rope_ntk", "train_length_s": 10.0,
                                                 "suffix": "_rope_ntk_t10"}
    assert candidate_settings("rope_yarn+window:5@2.5")["suffix"] == "_rope_yarn_window5_t2p5"
    for bad in ("chunked:20", "rope_ntk@0", "rope_ntk@x"):
        with pytest.raises(EvalSettingsError, match="candidate"):
            candidate_settings(bad)
