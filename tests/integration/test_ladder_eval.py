"""A tiny trained run evaluated on a tiny length ladder: every ladder set decoded and scored,
a setting chosen on dev by the stated rule and decoded on test once, the report written."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

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


@pytest.fixture(scope="module")
def trained(tiny_synth_root, tmp_path_factory):
    """A 4-step run (never evaluated) and a tiny ladder, built once; tests decode into copies of the run."""
    root = tmp_path_factory.mktemp("ladder_eval")
    run = root / "run"
    train(compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + [
        f"run_dir={run}", "pe=rope", "encoder=transformer", "trainer.max_steps=4", "eval_after_train=false"]))
    ladder = build_ladder(root / "cache", workers=1, progress=False, synth={"seed": 1, "num_speakers": 2},
                          **TINY_LADDER)
    return run, ladder


def copy_run(trained, to: Path) -> Path:
    shutil.copytree(trained[0], to)
    return to


@pytest.mark.slow  # about 15 s on 2 cores: trains 4 steps, builds 12 utterances (once per module), decodes 25 sets
def test_a_run_on_the_ladder_chooses_on_dev_and_decodes_test_once(trained, tmp_path, monkeypatch):
    """A 4-step model decodes nothing (every setting ties), so the rule's pick is forced here to
    the window (the rule itself is tested in tests/evaluation/test_ladder_report.py): what is
    checked is that every set is decoded and scored, each candidate on dev only, and the chosen
    one on test once."""
    import asr_pe.evaluation.ladder as le

    run = copy_run(trained, tmp_path / "run")
    ladder = trained[1]
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


@pytest.mark.slow  # about 25 s on 2 cores: decodes 60 tiny sets (training and ladder shared with the test above)
def test_a_second_call_decodes_only_the_new_candidate_and_equals_a_fresh_one(trained, tmp_path, monkeypatch,
                                                                            caplog):
    """The plain decodings exist (one set killed half-way: no buckets.meta.json); a call with one
    more candidate decodes that candidate (dev, then test: the pick is forced to it, as every
    setting of a 4-step model ties) and the killed set, nothing else: the other sets' files keep
    their inode and time. Its report and choice equal those of a fresh evaluation of a copy, set
    by set the same scores. Other checkpoint bytes decode every set again."""
    import asr_pe.evaluation.ladder as le

    ladder = trained[1]
    run, fresh = copy_run(trained, tmp_path / "resumed" / "run"), copy_run(trained, tmp_path / "fresh" / "run")

    def pick_last(candidates, **rule):
        return list(candidates)[-1], {name: le.whole_rate(res, **rule) for name, res in candidates.items()}

    monkeypatch.setattr(le, "choose_on_dev", pick_last)

    def ladder_eval(run_dir, candidates):
        """-> (sets decoded, sets reused), from the log's one line per set, and the summary line"""
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="asr_pe.evaluation"):
            evaluate_ladder(run_dir, ladder, corpus_manifests=resolve_manifests, candidates=candidates,
                            select_min_rung=4, n_boot=20, checkpoint="last", device="cpu")
        sets = {verb: sorted(Path(m.split()[1].rstrip(":")).name for m in caplog.messages if m.startswith(verb + " "))
                for verb in ("decoding", "reused")}
        summary = [m for m in caplog.messages if m.startswith("ladder: decoded")]
        assert summary == [f"ladder: decoded {len(sets['decoding'])} sets, reused {len(sets['reused'])}"]
        return sets["decoding"], sets["reused"]

    index = ladder_sets(ladder)
    plain = sorted(Path(m).stem for pool in ("dev", "test")
                   for m in [pool_sets(index, pool)[0], *pool_sets(index, pool)[1].values()])
    dev = [n for n in plain if n.startswith("ladder_dev")]
    assert len(plain) == 10 and len(dev) == 5
    assert ladder_eval(run, []) == (plain, [])

    def stamps():
        return {p.parent.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (run / "eval").glob("*/per_utt.jsonl")}

    before = stamps()
    killed = next(n for n in plain if n.startswith("ladder_test") and "alone" not in n)
    (run / "eval" / killed / "buckets.meta.json").unlink()   # what a kill while writing that set leaves
    window = sorted(n + "_window1" for n in plain)
    decoded, reused = ladder_eval(run, ["window:1"])
    assert decoded == sorted(window + [killed]) and reused == sorted(set(plain) - {killed})
    after = stamps()
    assert {n for n in before if after[n] != before[n]} == {killed}

    assert ladder_eval(fresh, ["window:1"]) == (sorted(plain + window), [])
    for name in ("report.md", "choice.json"):
        a, b = (r / "eval" / "ladder" / name for r in (run, fresh))
        if name == "report.md":
            assert a.read_text() == b.read_text()
        else:
            assert {**json.loads(a.read_text()), "run": ""} == {**json.loads(b.read_text()), "run": ""}
    for name in plain + window:
        for f in ("per_utt.jsonl", "buckets.csv", "in_context.json"):
            a, b = (r / "eval" / name / f for r in (run, fresh))
            assert a.is_file() == b.is_file() and (not a.is_file() or a.read_text() == b.read_text()), (name, f)

    ckpt = run / "checkpoints" / "last.ckpt"                 # trained further: other bytes
    state = torch.load(ckpt, weights_only=True)
    first = next(iter(state["state_dict"]))
    state["state_dict"][first] = state["state_dict"][first] + 0.01
    torch.save(state, ckpt)
    assert ladder_eval(run, ["window:1"]) == (sorted(plain + window), [])


@pytest.mark.slow  # about 40 s on 2 cores: trains a 4-step transducer, decodes 25 tiny sets
def test_a_transducer_run_goes_through_the_ladder_as_the_backlog_s_stage_4_runs_it(trained, tiny_synth_root, tmp_path,
                                                                                  monkeypatch):
    """Stage 4 of recipes/synth/study/backlog.sh puts loss=transducer runs of the study's config
    (decode.method greedy) through evaluate_ladder with the window offered on dev: every set of
    both pools is decoded with the transducer's greedy search, every utterance scored once, the
    window decoded on dev and, chosen, on test."""
    import asr_pe.evaluation.ladder as le

    run = tmp_path / "rnnt"
    train(compose_train(TINY_MODEL + synth_overrides(tiny_synth_root) + [
        f"run_dir={run}", "pe=rope", "encoder=transformer", "loss=transducer", "loss.transducer.embed_dim=16",
        "loss.transducer.joiner_dim=24", "decode.method=greedy", "trainer.max_steps=4", "eval_after_train=false"]))
    monkeypatch.setattr(le, "choose_on_dev", lambda candidates, **rule: (
        "window:1", {name: le.whole_rate(res, **rule) for name, res in candidates.items()}))
    choice = evaluate_ladder(run, trained[1], corpus_manifests=resolve_manifests, candidates=["window:1"],
                             select_min_rung=4, n_boot=20, checkpoint="last", device="cpu")
    assert choice["chosen"] == "window:1" and set(choice["dev_rates"]) == {"plain", "window:1"}
    index = ladder_sets(trained[1])
    n_sets = 0
    for pool in ("dev", "test"):
        alone, sets = pool_sets(index, pool)
        for manifest in [alone, *sets.values()]:
            utts = [u.id for u in read_manifest(manifest)]
            for suffix in ("", "_window1"):
                folder = run / "eval" / (Path(manifest).stem + suffix)
                meta = json.loads((folder / "buckets.meta.json").read_text())
                assert meta["decode"]["method"] == "transducer_greedy", folder
                scored = [json.loads(line)["id"] for line in (folder / "per_utt.jsonl").read_text().splitlines()]
                assert scored == utts, folder                           # every one, once
                n_sets += 1
    assert n_sets == 20


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
