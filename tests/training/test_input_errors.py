"""Bad settings and bad input files through the real entry points: each is exit status 2 and
one ``error:`` line naming the key or file and what to do, before the expensive work.

"Before" is shown by construction, not by timing: a training run points at a corpus module that
does not exist (reaching data preparation would be exit 1 with a traceback), and the evaluation
and transcription cases that must stop before the model loads use a run whose checkpoint is
garbage (loading it first would name the checkpoint instead)."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch

from tiny_run import NO_DATA, TINY, make_run, one_error_line, run_entry

GARBAGE = np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    audio = root / "two_s.wav"
    sf.write(str(audio), (0.1 * np.random.default_rng(1).standard_normal(32000)).astype(np.float32), 16000)
    (root / "test.jsonl").write_text(f'{{"id": "two", "audio_filepath": "{audio}", "duration": 2.0, "text": "hello"}}\n')
    return {
        "root": root, "audio": audio, "manifest": root / "test.jsonl",
        # garbage weights: every check below must fire before the checkpoint is read
        "unloadable": make_run(root / "unloadable", checkpoint=GARBAGE),
        # a learned table of 8 frames (0.32 s at 40 ms) and a 2 s utterance
        "learned": make_run(root / "learned", ["pe=learned", "pe.input.max_len=8"], checkpoint=GARBAGE),
        "good": make_run(root / "good"),
    }


# A Python process with Lightning imported costs about 10 s of CPU: the default run keeps one case
# per kind of check, the others are marked slow (make test-all).
SLOW = pytest.mark.slow

TRAIN_CASES = [
    ("optim.lr=-1", ["optim.lr=-1"], ["optim.lr=-1", "must be a number > 0"]),
    pytest.param("decode.method", ["decode.method=bogus"], ["decode.method='bogus'", "greedy, beam, attention, joint"],
                 marks=SLOW, id="decode.method"),
    pytest.param("decode needs a decoder", ["decode.method=joint"], ["decode.method=joint", "no attention decoder"],
                 marks=SLOW, id="decode needs a decoder"),
    ("trainer key", ["+trainer.max_step=5"], ["trainer.max_step: not an option of lightning.Trainer",
                                               "did you mean trainer.max_steps?"]),
    ("two attention PEs", ["pe=[rope,relative]"], ["pe=[rope,relative]", "both attention-stage",
                                                    "only one input-stage plus one attention-stage PE combine"]),
    pytest.param("eval.mode", ["eval.mode=bogus"], ["eval.mode='bogus'"], marks=SLOW, id="eval.mode"),
    pytest.param("gpu without a GPU", ["trainer.accelerator=gpu"],
                 ["trainer.accelerator=gpu: torch sees no CUDA GPU", "trainer.accelerator=cpu"],
                 marks=[SLOW, pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")],
                 id="gpu without a GPU"),
]


@pytest.mark.parametrize("case, overrides, expected", TRAIN_CASES,
                         ids=[c[0] if isinstance(c, tuple) else c.id for c in TRAIN_CASES])
def test_train_config_errors_stop_before_data_preparation(runs, tmp_path, case, overrides, expected):
    proc = run_entry("train.py", f"run_dir={tmp_path / 'run'}", NO_DATA, *TINY, *overrides, cwd=tmp_path)
    line = one_error_line(proc)
    for text in expected:
        assert text in line, line
    assert not (tmp_path / "run" / "config.yaml").exists()  # stopped before writing anything of the run


def test_a_corrupt_last_checkpoint_is_named_before_data_preparation(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(GARBAGE[:1000])  # a killed copy
    proc = run_entry("train.py", f"run_dir={run}", NO_DATA, *TINY, "resume=true", cwd=tmp_path)
    line = one_error_line(proc)
    assert line.startswith(f"error: {run / 'checkpoints' / 'last.ckpt'}: not a readable checkpoint (")
    assert "delete it" in line and "resume from another checkpoint" in line


@SLOW
def test_evaluate_bad_decode_method_is_named_before_the_model_loads(runs, tmp_path):
    proc = run_entry("evaluate.py", f"run={runs['unloadable']}", f"data.test={runs['manifest']}",
                     "decode.method=bogus", cwd=tmp_path)
    assert "decode.method='bogus'" in one_error_line(proc)


def test_evaluate_past_a_learned_pe_table_names_the_keys_and_the_utterance(runs, tmp_path):
    proc = run_entry("evaluate.py", f"run={runs['learned']}", f"data.test={runs['manifest']}", cwd=tmp_path)
    line = one_error_line(proc)
    assert f"{runs['manifest']}:1: utterance 'two' of test set 'test' (2.0 s = 48 encoder frames)" in line
    assert "pe.input.max_len=8, about 0.32 s" in line and "pe.input.policy=clamp or wrap" in line
    assert "eval.mode=chunked with chunk_s + 2*overlap_s under 0.32 s" in line


@pytest.mark.slow
def test_evaluate_chunks_within_a_learned_pe_table_pass_the_check(runs, tmp_path):
    # a chunked evaluation whose pieces fit the table passes the check (and then meets the garbage checkpoint)
    proc = run_entry("evaluate.py", f"run={runs['learned']}", f"data.test={runs['manifest']}", "eval.mode=chunked",
                     "eval.chunk_s=0.2", "eval.overlap_s=0", cwd=tmp_path)
    assert "best.ckpt: not a readable checkpoint" in one_error_line(proc)


@SLOW
def test_evaluate_corrupt_checkpoint_is_one_line(runs, tmp_path):
    proc = run_entry("evaluate.py", f"run={runs['unloadable']}", f"data.test={runs['manifest']}", cwd=tmp_path)
    line = one_error_line(proc)
    assert line.startswith(f"error: {runs['unloadable'] / 'checkpoints' / 'best.ckpt'}: not a readable checkpoint")
    assert "eval.checkpoint=best|last" in line


@pytest.mark.parametrize("args, expected", [
    (["mode=bogus"], "mode='bogus': choose one of full, chunked"),
    pytest.param(["mode=chunked", "chunk_s=0"], "chunk_s=0: must be a number of seconds > 0", marks=SLOW, id="chunk_s"),
    pytest.param(["mode=chunked", "overlap_s=-1"], "overlap_s=-1: must be a number of seconds >= 0", marks=SLOW,
                 id="overlap_s"),
    pytest.param(["decode.method=bogus"], "decode.method='bogus'", marks=SLOW, id="decode.method"),
], ids=["mode", "chunk_s", "overlap_s", "decode.method"])
def test_transcribe_settings_are_named_before_the_model_loads(runs, tmp_path, args, expected):
    proc = run_entry("transcribe.py", f"run={runs['unloadable']}", f"audio={runs['audio']}", *args, cwd=tmp_path)
    assert expected in one_error_line(proc)


@SLOW
def test_transcribe_too_short_audio_is_named_before_the_model_loads(runs, tmp_path):
    short = tmp_path / "click.wav"
    sf.write(str(short), np.zeros(320, dtype=np.float32), 16000)  # 20 ms: less than one 25 ms fbank window
    proc = run_entry("transcribe.py", f"run={runs['unloadable']}", f"audio={short}", cwd=tmp_path)
    line = one_error_line(proc)
    assert f"{short}: 0.020 s of audio is too short to transcribe (this model needs at least 0.09 s)" in line


@SLOW
def test_transcribe_unwritable_output_is_named_before_the_work(runs, tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file where the output folder should be")
    proc = run_entry("transcribe.py", f"run={runs['unloadable']}", f"audio={runs['audio']}",
                     f"output={blocker / 'out.json'}", cwd=tmp_path)
    assert f"output={blocker / 'out.json'}: {blocker} is a file, not a folder" in one_error_line(proc)


@SLOW
def test_transcribe_learned_pe_past_its_table_is_one_line(tmp_path):
    run = make_run(tmp_path / "learned_ok", ["pe=learned", "pe.input.max_len=8"])  # loadable weights this time
    audio = tmp_path / "a.wav"
    sf.write(str(audio), (0.1 * np.random.default_rng(2).standard_normal(16000)).astype(np.float32), 16000)
    proc = run_entry("transcribe.py", f"run={run}", f"audio={audio}", cwd=tmp_path)
    line = one_error_line(proc)
    assert "the position table holds max_len=8" in line and "pe.input.policy=clamp|wrap" in line
