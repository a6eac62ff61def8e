"""eval.tempo / eval.hop_ms (asr_pe/evaluation/rate.py): the same test set at another speaking rate,
decoded into a folder of its own (never the plain one), recorded in its settings, reused only at
the same rate; the model sees the stretched audio (tempo) or the other frame rate (hop)."""

from __future__ import annotations

import json

import pytest

import asr_pe.evaluation.pipeline as ev
from asr_pe.data.features import FbankExtractor
from asr_pe.data.manifest import read_manifest
from asr_pe.evaluation.rate import Rate, rate_of
from asr_pe.evaluation.reuse import Reuse
from asr_pe.evaluation.settings import EvalSettingsError, eval_settings
from asr_pe.training.data import resolve_manifests

from evaluation.test_evaluate_run import SHORT_DURATIONS, corpus, make_run  # noqa: F401  (a fixture and its helpers)

FAST = {"n_boot": 5}


@pytest.fixture()
def run(corpus, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    make_run(run, corpus)
    return run


def evaluate(run, reuse=None, **eval_keys):
    return ev.evaluate_run(run, {"eval": {**FAST, **eval_keys}, "data": {"test": "test-clean"}},
                           corpus_manifests=resolve_manifests, reuse=reuse)


def frames_seen(monkeypatch):
    """Record the feature lengths of every batch the evaluation decodes, by utterance id."""
    seen = {}
    real = ev.decode_batch

    def spy(model, batch, *args, **kwargs):
        seen.update(zip(batch["ids"], batch["feature_lengths"].tolist()))
        return real(model, batch, *args, **kwargs)
    monkeypatch.setattr(ev, "decode_batch", spy)
    return seen


def meta(folder):
    return json.loads((folder / "buckets.meta.json").read_text())


def test_rate_suffixes_and_records():
    assert Rate().plain and Rate().suffix == "" and Rate().record() == {}
    assert Rate(1.2).suffix == "_tempo1p2" and Rate(0.8, 12.0).suffix == "_tempo0p8_hop12"
    assert Rate(hop_ms=12.5).record() == {"hop_ms": 12.5}
    assert rate_of({"tempo": 1.0, "hop_ms": 10.0}, 10.0) == Rate()          # the run's own hop: plain
    assert rate_of({"tempo": 1.1, "hop_ms": 12}, 10.0) == Rate(1.1, 12.0)
    assert Rate(1.25, 12.5).frames_per_audio_second(10.0) == pytest.approx(0.64)
    for bad, match in (({"tempo": 0}, "eval.tempo 0"), ({"tempo": 5}, "eval.tempo 5"),
                       ({"hop_ms": 100}, "eval.hop_ms=100"), ({"hop_ms": "12"}, "eval.hop_ms='12'")):
        with pytest.raises(EvalSettingsError, match=match):
            eval_settings({}, bad)


def test_a_tempo_result_has_its_own_folder_durations_and_frames(run, corpus, monkeypatch):  # noqa: F811
    seen = frames_seen(monkeypatch)
    evaluate(run)
    plain = run / "eval" / "test-clean"
    plain_bytes = {f: (plain / f).read_bytes() for f in ("per_utt.jsonl", "buckets.csv", "buckets.meta.json")}
    plain_frames = dict(seen)
    fbank = FbankExtractor()
    utts = {u.id: u for u in read_manifest(corpus / "test-clean.jsonl")}
    assert plain_frames == {uid: fbank.num_frames(round(u.duration * 16000)) for uid, u in utts.items()}

    seen.clear()
    rows = evaluate(run, tempo=1.2)
    assert list(rows) == ["test-clean_tempo1p2"]
    fast = run / "eval" / "test-clean_tempo1p2"
    # the plain folder is untouched, byte for byte
    assert {f: (plain / f).read_bytes() for f in plain_bytes} == plain_bytes
    # the model saw N / 1.2 samples of each utterance: 4 utterances, frames of round(N / 1.2)
    assert seen == {uid: fbank.num_frames(round(round(u.duration * 16000) / 1.2)) for uid, u in utts.items()}
    recs = [json.loads(line) for line in (fast / "per_utt.jsonl").read_text().splitlines()]
    assert [r["duration"] for r in recs] == pytest.approx([d / 1.2 for d in SHORT_DURATIONS], abs=1e-5)
    m = meta(fast)
    assert m["tempo"] == 1.2 and m["settings"]["tempo"] == 1.2 and "hop_ms" not in m["settings"]
    assert "tempo" not in meta(plain)["settings"]                       # plain records keep their keys

    # tempo 1.0 is the plain evaluation: the plain folder (reused, same settings), no new folder
    reuse = Reuse()
    rows = evaluate(run, reuse=reuse, tempo=1.0)
    assert list(rows) == ["test-clean"] and reuse.reused == ["test-clean"]
    # the same rate again is reused; another rate is decoded into its own folder
    reuse = Reuse()
    evaluate(run, reuse=reuse, tempo=1.2)
    evaluate(run, reuse=reuse, tempo=0.8, suffix="_x")
    assert reuse.reused == ["test-clean_tempo1p2"] and reuse.decoded == ["test-clean_x_tempo0p8"]
    assert sorted(p.name for p in (run / "eval").iterdir() if p.is_dir()) == [
        "test-clean", "test-clean_tempo1p2", "test-clean_x_tempo0p8"]


def test_another_hop_gives_other_frames_in_its_own_folder(run, corpus, monkeypatch):  # noqa: F811
    seen = frames_seen(monkeypatch)
    utts = read_manifest(corpus / "test-clean.jsonl")
    evaluate(run, hop_ms=10.0)                                           # the run's own hop: plain
    assert (run / "eval" / "test-clean").is_dir() and not (run / "eval" / "test-clean_hop10").exists()
    seen.clear()
    evaluate(run, hop_ms=12.5)
    hop = FbankExtractor(frame_shift_ms=12.5)
    assert hop.window_shift == 200
    # 1.5 s -> 119 frames at 12.5 ms (148 at 10 ms), 11 s -> 879 (1098)
    assert seen == {u.id: hop.num_frames(round(u.duration * 16000)) for u in utts}
    assert seen[utts[0].id] == 119 and seen[utts[-1].id] == 879
    m = meta(run / "eval" / "test-clean_hop12p5")
    assert m["hop_ms"] == 12.5 and m["settings"]["hop_ms"] == 12.5 and "tempo" not in m["settings"]
