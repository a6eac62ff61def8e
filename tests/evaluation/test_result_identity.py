"""A result has an identity (issue 43): its name stands for one manifest, the run is finished only
while its results are the evaluation's that marked it so, an in-context ratio never outlives a
re-decoding of either of its sets, and one process at a time writes a run's ``eval/``.

Each test here failed on the code before the change: ``data.test=<other folder>/test.jsonl``
replaced the run's own ``eval/test``; an ``evaluate.py`` of an older checkpoint that finished after
the evaluation after training left ``done.json`` saying finished; ``in_context.json`` stayed after
its long set was decoded again; an evaluation ran while another process held the run.
"""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import asr_pe.evaluation.pipeline as ev
from asr_pe.data.manifest import Part, Utterance, read_manifest, write_manifest
from asr_pe.errors import ConfigError, UserError
from asr_pe.run_folder import eval_done, mark_eval_done
from asr_pe.run_lock import RunInUseError, hold_run_lock, release_run_lock, run_lock
from asr_pe.training.data import resolve_manifests

from evaluation.test_evaluate_run import corpus, make_run  # noqa: F401  (a fixture and its helper)

ROOT = Path(__file__).resolve().parents[2]
FAST = {"eval": {"n_boot": 5}}


def evaluate(run, test, **kw):
    return ev.evaluate_run(run, {**FAST, "data": {"test": test}}, corpus_manifests=resolve_manifests, **kw)


@pytest.fixture()
def run(corpus, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    make_run(run, corpus)
    return run


def short_sets(corpus, tmp_path):  # noqa: F811
    """Two one-utterance manifests in two folders, both named test-clean.jsonl, other contents."""
    utts = read_manifest(corpus / "test-clean.jsonl")
    a, b = tmp_path / "a" / "test-clean.jsonl", tmp_path / "b" / "test-clean.jsonl"
    for path, utt in ((a, utts[0]), (b, utts[1])):
        path.parent.mkdir()
        write_manifest(path, [utt])
    return a, b


# ----------------------------------------------------------------------------- a name, one manifest


def test_a_manifest_named_like_the_runs_own_test_set_is_refused_not_scored_in_its_place(run, corpus, tmp_path):
    a, b = short_sets(corpus, tmp_path)
    evaluate(run, None)                                       # the run's own test-clean
    own = (run / "eval" / "test-clean" / "per_utt.jsonl").read_text()
    with pytest.raises(ConfigError, match=r"would be scored as test set 'test-clean', which is .*test-clean.jsonl"):
        evaluate(run, [str(a)])
    with pytest.raises(ConfigError, match="would be scored as test set 'test-clean'"):
        evaluate(run, [str(a), str(b)])                       # two of one name: one was never scored
    assert (run / "eval" / "test-clean" / "per_utt.jsonl").read_text() == own
    rows = evaluate(run, {"mine": str(a)})                    # named: its own folder
    assert set(rows) == {"mine"} and (run / "eval" / "test-clean" / "per_utt.jsonl").read_text() == own
    with pytest.raises(ConfigError, match=r"eval/mine holds the results of .*a/test-clean.jsonl"):
        evaluate(run, {"mine": str(b)})                       # another file under a used name
    evaluate(run, {"mine": str(a)})                           # the same file again: replaces its own


def test_done_holds_only_while_the_results_are_the_evaluations_that_marked_it(run, corpus):  # noqa: F811
    both = [str(corpus / "test-clean.jsonl"), str(corpus / "test-clean_long.jsonl")]
    evaluate(run, both)
    record = json.loads((run / "eval" / "test-clean" / "buckets.meta.json").read_text())["checkpoint"]
    sets = ["test-clean", "test-clean_long"]
    mark_eval_done(run, sets, checkpoint=record)
    assert eval_done(run)
    # an evaluation of an older checkpoint finishing later replaces one set's files
    meta_path = run / "eval" / "test-clean_long" / "buckets.meta.json"
    meta = json.loads(meta_path.read_text())
    meta["checkpoint"] = {**record, "global_step": 7, "sha256": "0" * 64}
    meta_path.write_text(json.dumps(meta))
    assert not eval_done(run), "done.json said finished over another checkpoint's numbers"
    evaluate(run, both)                                       # evaluated again from the current one
    assert eval_done(run)


def test_the_in_context_ratio_is_removed_when_either_of_its_sets_is_decoded_again(run, corpus, tmp_path):  # noqa: F811
    utts = read_manifest(corpus / "test-clean.jsonl")[:2]
    parts_path, long_path = tmp_path / "parts.jsonl", tmp_path / "joined.jsonl"
    write_manifest(parts_path, utts)
    # a "recording" whose parts are the two utterances (the audio is the first file: noise either way)
    joined = Utterance(id="joined", audio_filepath=utts[1].audio_filepath, duration=utts[1].duration,
                       text=f"{utts[0].text} {utts[1].text}",
                       parts=(Part(utts[0].id, 0.0, 1.0), Part(utts[1].id, 1.0, 2.0)))
    write_manifest(long_path, [joined])
    test = {"parts": str(parts_path), "joined": str(long_path)}
    evaluate(run, test)
    ic = run / "eval" / "joined" / "in_context.json"
    record = json.loads(ic.read_text())
    assert record["alone_set"] == "parts" and set(record["inputs"]) == {"parts", "joined"}
    assert record["inputs"]["parts"]["checkpoint"]["sha256"]
    evaluate(run, {"joined": str(long_path)}, )               # the long set alone, decoded again
    assert not ic.exists() and not (run / "eval" / "joined" / "in_context.md").exists()
    evaluate(run, test)
    assert ic.exists()
    evaluate(run, {"parts": str(parts_path)})                 # the parts' set alone, decoded again
    assert not ic.exists()
    evaluate(run, {"parts": str(parts_path)}, reuse=ev.Reuse())  # read back, not decoded: nothing to forget
    evaluate(run, test, reuse=ev.Reuse())                     # both reused: the ratio computed again
    assert ic.exists()


# ----------------------------------------------------------------------------- one writer


HOLDER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    from asr_pe.run_lock import hold_run_lock
    hold_run_lock({run!r}, "train.py")
    if os.fork() == 0:          # a DataLoader worker: forked, outlives its parent when that is killed
        time.sleep(60)
        os._exit(0)
    print("held", flush=True)
    time.sleep(60)
""")


def test_the_lock_names_its_holder_and_dies_with_it_not_with_its_forked_children(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=str(ROOT), run=str(run))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunInUseError, match=rf"is in use by another process \(pid {holder.pid} \(train.py\)"):
            with run_lock(run):
                pass
        assert isinstance(RunInUseError("x"), UserError)
    finally:
        holder.kill()                                          # kill -9; its forked child lives on
        holder.wait()
    t0 = time.monotonic()
    with run_lock(run):                                        # at once: the child does not hold it
        pass
    assert time.monotonic() - t0 < 1.0


def test_an_evaluation_is_refused_while_another_process_writes_the_run(run, corpus):  # noqa: F811
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=str(ROOT), run=str(run))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunInUseError, match="in use"):
            evaluate(run, None)
        assert not (run / "eval").exists()
    finally:
        holder.kill()
        holder.wait()
        for _ in range(50):  # its forked child may still be alive; that must not matter
            try:
                os.kill(holder.pid, 0)
            except ProcessLookupError:
                break
    evaluate(run, None)


def test_the_lock_is_reentrant_in_its_process_and_released_by_the_block(tmp_path):
    run = tmp_path / "run"
    hold_run_lock(run)
    with run_lock(run):            # the evaluation inside train.py: already held, a no-op
        pass
    probe = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(ROOT)!r})
        from asr_pe.run_lock import run_lock, RunInUseError
        try:
            with run_lock({str(run)!r}): print("got")
        except RunInUseError: print("refused")""")], capture_output=True, text=True)
    assert probe.stdout.strip() == "refused", "leaving the nested block released the process' lock"
    release_run_lock(run)
    with run_lock(run):
        pass


def test_an_utterance_too_short_for_one_encoder_frame_is_named_not_scored_as_deletions(run, corpus, tmp_path):  # noqa: F811
    utts = read_manifest(corpus / "test-clean.jsonl")[:2]
    blip = Utterance(id="blip", audio_filepath=utts[0].audio_filepath, duration=0.001, text="a word")
    path = tmp_path / "blip.jsonl"
    write_manifest(path, [utts[0], blip, utts[1]])
    with pytest.raises(ConfigError, match=rf"^{path}:2: utterance 'blip' of test set 'blip' lasts 0.001 s, too short "
                                          r"for one encoder frame .*1 of 3 utterances"):
        evaluate(run, [str(path)])
    assert not (run / "eval" / "blip").exists()
