"""score.py / asr_pe.evaluation.external_scoring and asr_pe.data.kaldi_export on hand-built files.

- the files score.py writes for a hypothesis file equal, byte for byte, those evaluate.py writes
  for a run whose decodings are those hypotheses;
- JSONL, Kaldi ``text`` and CTM (utterance- and recording-level) hypotheses give the counts their
  words imply; an empty hypothesis is all deletions;
- a missing id, an extra id, a duplicate id, a malformed line and a NeMo output without
  --text-key are one ``error:`` line naming the file (and line), exit 2;
- a CTM with two channels of a recording (NIST's A/B sides) is refused unless --channel picks
  one, and a recording whose words go back in time or overlap (two decodings in one file) is an
  error naming the line;
- a trained run's folder as --out is refused and left byte for byte as it was;
- the Kaldi data directory of a TED-LIUM-like set (segments of one talk) and of long-form
  recordings, and its ``text`` scored back against the manifest gives 0 errors.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr_pe.data import kaldi_export
from asr_pe.data.manifest import Utterance, write_manifest
from asr_pe.evaluation.buckets import read_per_utt
from asr_pe.evaluation.external_scoring import HypothesisError, score_hypotheses

ROOT = Path(__file__).resolve().parents[2]


def _load_score_py():
    import importlib.util

    spec = importlib.util.spec_from_file_location("score_cli", ROOT / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


score_cli = _load_score_py()


def _wav(path: Path, seconds: float) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.zeros(int(seconds * 16000), np.float32), 16000)
    return str(path)


@pytest.fixture
def talk_set(tmp_path):
    """A TED-LIUM-like test set: three segments of one talk file (offsets) and a long-form
    recording alone in its file."""
    talk = _wav(tmp_path / "audio" / "TalkA.wav", 30.0)
    long = _wav(tmp_path / "audio" / "test_long_0000.wav", 12.0)
    utts = [Utterance("TalkA-0001", talk, 1.5, "the cat sat", 0.5, "TalkA"),
            Utterance("TalkA-0002", talk, 3.0, "on the mat today", 5.0, "TalkA"),
            Utterance("TalkA-0003", talk, 6.8, "and then it left", 10.0, "TalkA"),
            Utterance("test_long_0000", long, 12.0, "a long one with five words", 0.0, "TalkB")]
    manifest = tmp_path / "test.jsonl"
    write_manifest(manifest, utts)
    return manifest, utts


def _score(tmp_path, manifest, hyp_text: str, name: str, **kw):
    hyp = tmp_path / name
    hyp.write_text(hyp_text)
    rows, folder = score_hypotheses(manifest, hyp, tmp_path / "sys", n_boot=20, **kw)
    return {r["id"]: r for r in read_per_utt(folder / "per_utt.jsonl")}, rows


def test_kaldi_text_counts_and_an_empty_hypothesis_is_all_deletions(tmp_path, talk_set):
    manifest, _ = talk_set
    per, rows = _score(tmp_path, manifest, "TalkA-0001 the cat sat\nTalkA-0002\n"
                       "TalkA-0003 and then it left us\ntest_long_0000 a long one with five words\n", "text")
    assert list(per) == ["TalkA-0001", "TalkA-0002", "TalkA-0003", "test_long_0000"]  # manifest order
    assert per["TalkA-0002"]["hyp"] == "" and per["TalkA-0002"]["del"] == 4 and per["TalkA-0002"]["errors"] == 4
    assert per["TalkA-0003"]["ins"] == 1 and per["TalkA-0001"]["errors"] == 0
    overall = rows[-1]
    assert overall["bucket"] == "all" and overall["errors"] == 5 and overall["ref_words"] == 3 + 4 + 4 + 6
    # the doubling buckets of evaluate.py: a 6.8 s segment is in 4-8, the 12 s recording in 8-16
    assert [r["bucket"] for r in rows] == ["0-2", "2-4", "4-8", "8-16", "all"]


def test_ctm_at_utterance_and_recording_level(tmp_path, talk_set):
    manifest, utts = talk_set
    rec = kaldi_export.recording_ids(utts)
    assert rec == {"TalkA-0001": "TalkA", "TalkA-0002": "TalkA", "TalkA-0003": "TalkA",
                   "test_long_0000": "test_long_0000"}
    # sorted by recording, channel and start time, as sclite reads a CTM (and Kaldi's scoring sorts it)
    ctm = (";; a comment line\n"
           "TalkA 1 0.60 0.3 the\nTalkA 1 1.00 0.3 cat\n"   # 1st segment 0.5-2.0
           "TalkA 1 5.10 0.2 on\n"                          # recording times: 2nd segment spans 5.0-8.0
           "TalkA 1 5.30 0.2 the\n"
           "TalkA 1 5.60 0.2 mat 0.9\n"
           "TalkA 1 25.0 0.3 applause\n"                    # in no segment: counted, not scored
           "test_long_0000 1 0.1 0.2 a\n")                  # utterance level; 3rd segment: no words
    per, _ = _score(tmp_path, manifest, ctm, "hyp.ctm")
    assert per["TalkA-0001"]["hyp"] == "the cat" and per["TalkA-0002"]["hyp"] == "on the mat"
    assert per["TalkA-0003"]["hyp"] == "" and per["TalkA-0003"]["del"] == 4  # no words: empty, not missing
    assert per["test_long_0000"]["del"] == 5
    meta = json.loads((tmp_path / "sys" / "eval" / "test" / "buckets.meta.json").read_text())
    assert meta["ctm_words_outside_utterances"] == 1 and meta["format"] == "ctm"
    bad = tmp_path / "bad.ctm"
    bad.write_text("TalkA 1 0.6 0.3 the\nTalkA 1 zero 0.3 cat\n")
    with pytest.raises(HypothesisError, match=r"bad.ctm:2: start and duration must be numbers"):
        score_hypotheses(manifest, bad, tmp_path / "sys2")
    bad.write_text("TalkA 1 0.6 the\n")
    with pytest.raises(HypothesisError, match=r"bad.ctm:1: a CTM line has 5 or 6 fields"):
        score_hypotheses(manifest, bad, tmp_path / "sys2")
    bad.write_text("TalkZ 1 0.6 0.3 the\n")
    with pytest.raises(HypothesisError, match=r"bad.ctm:1: 1 hypothesis id\(s\) are not in the manifest \('TalkZ'\)"):
        score_hypotheses(manifest, bad, tmp_path / "sys2")


def _cli(args, capsys):
    rc = score_cli.main([str(a) for a in args])
    return rc, capsys.readouterr().err


def test_id_mismatches_duplicates_and_malformed_lines_are_one_error(tmp_path, talk_set, capsys):
    manifest, _ = talk_set
    base = ["--manifest", manifest, "--out", tmp_path / "sys", "--no-plot", "--n-boot", "10"]
    hyp = tmp_path / "hyp.jsonl"
    lines = [{"id": "TalkA-0001", "text": "the cat sat"}, {"id": "TalkA-0002", "text": "on the mat today"},
             {"id": "TalkA-0003", "text": "and then it left"}]
    hyp.write_text("".join(json.dumps(r) + "\n" for r in lines))
    rc, err = _cli(["--hyp", hyp, *base], capsys)
    assert rc == 2 and "1 of 4 manifest utterance(s) have no hypothesis ('test_long_0000')" in err
    assert "--missing empty" in err and not (tmp_path / "sys" / "eval").exists()  # nothing written
    rc, _ = _cli(["--hyp", hyp, "--missing", "empty", *base], capsys)
    per = read_per_utt(tmp_path / "sys" / "eval" / "test" / "per_utt.jsonl")
    assert rc == 0 and len(per) == 4 and per[-1]["del"] == 6 and sum(r["errors"] for r in per) == 6
    meta = json.loads((tmp_path / "sys" / "eval" / "test" / "buckets.meta.json").read_text())
    assert meta["missing_scored_empty"] == 1 and meta["empty_hypotheses"] == 1

    hyp.write_text("".join(json.dumps(r) + "\n" for r in lines + [{"id": "test_long_0000", "text": "x"},
                                                                   {"id": "dev-9", "text": "y"}]))
    rc, err = _cli(["--hyp", hyp, *base], capsys)
    assert rc == 2 and f"{hyp}:5: 1 hypothesis id(s) are not in the manifest ('dev-9')" in err
    assert _cli(["--hyp", hyp, "--extra", "ignore", *base], capsys)[0] == 0

    hyp.write_text("".join(json.dumps(r) + "\n" for r in lines + [lines[1]]))
    rc, err = _cli(["--hyp", hyp, *base], capsys)
    assert rc == 2 and f"{hyp}:4: duplicate id 'TalkA-0002' (first at line 2)" in err
    hyp.write_text(json.dumps(lines[0]) + "\n{not json\n")
    rc, err = _cli(["--hyp", hyp, *base], capsys)
    assert rc == 2 and f"{hyp}:2: invalid JSON" in err
    # a NeMo transcription manifest: 'text' is the reference, 'pred_text' the hypothesis
    nemo = tmp_path / "nemo_out.json"
    nemo.write_text("".join(json.dumps({"id": r["id"], "text": r["text"], "pred_text": "wrong"}) + "\n"
                            for r in lines + [{"id": "test_long_0000", "text": "a long one with five words"}]))
    rc, err = _cli(["--hyp", nemo, *base], capsys)
    assert rc == 2 and f"{nemo}:1:" in err and "--text-key pred_text" in err
    rc, _ = _cli(["--hyp", nemo, "--text-key", "pred_text", *base], capsys)
    per = read_per_utt(tmp_path / "sys" / "eval" / "test" / "per_utt.jsonl")
    assert rc == 0 and all(r["hyp"] == "wrong" for r in per)
    text = tmp_path / "text"
    text.write_text("TalkA-0001 the cat sat\nTalkA-0001 the cat\n")
    rc, err = _cli(["--hyp", text, *base], capsys)
    assert rc == 2 and f"{text}:2: duplicate id 'TalkA-0001'" in err
    rc, err = _cli(["--hyp", tmp_path / "hyps.out", *base], capsys)
    assert rc == 2 and "hypothesis file not found" in err


def test_kaldi_export_of_segments_and_long_form_recordings(tmp_path, talk_set):
    manifest, utts = talk_set
    out = tmp_path / "kaldi"
    assert kaldi_export.main([str(manifest), "--out", str(out)]) == 0
    d = out / "test"
    talk, long = utts[0].audio_filepath, utts[3].audio_filepath
    assert (d / "wav.scp").read_text() == f"TalkA {talk}\ntest_long_0000 {long}\n"
    assert (d / "segments").read_text() == ("TalkA-0001 TalkA 0.500 2.000\nTalkA-0002 TalkA 5.000 8.000\n"
                                            "TalkA-0003 TalkA 10.000 16.800\ntest_long_0000 test_long_0000 0.000 12.000\n")
    # the long-form recording's id does not start with its speaker: it is its own speaker
    assert (d / "utt2spk").read_text() == ("TalkA-0001 TalkA\nTalkA-0002 TalkA\nTalkA-0003 TalkA\n"
                                           "test_long_0000 test_long_0000\n")
    assert (d / "spk2utt").read_text() == "TalkA TalkA-0001 TalkA-0002 TalkA-0003\ntest_long_0000 test_long_0000\n"
    # the exported references scored back as hypotheses: every word of the manifest, no error
    rows, _ = score_hypotheses(manifest, d / "text", tmp_path / "ref_as_hyp", n_boot=0)
    assert rows[-1]["errors"] == 0 and rows[-1]["ref_words"] == 17 and rows[-1]["utterances"] == 4
    assert kaldi_export.main([str(manifest), "--out", str(out), "--wav-format", "sox"]) == 0
    assert (d / "wav.scp").read_text().startswith(f"TalkA sox {talk} -t wav -r 16000 -c 1 -b 16 - |\n")
    spaced = tmp_path / "spaced.jsonl"
    write_manifest(spaced, [Utterance("a b", talk, 1.0, "x")])
    with pytest.raises(kaldi_export.KaldiExportError, match="'a b'.*whitespace"):
        kaldi_export.kaldi_files(kaldi_export.read_manifest(spaced))


# ----------------------------------------------------------------------------- equal to evaluate.py

def _tiny_run(tmp_path):
    """A run directory as train.py leaves it (random weights: the decodings are noise, which is
    all the comparison needs) on four LibriSpeech-like FLAC utterances of 1.37-9.1 s."""
    import torch
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from asr_pe.data.features import GlobalCMVN
    from asr_pe.data.tokenizer import build_tokenizer
    from asr_pe.inference.run_loading import model_config
    from asr_pe.models.asr import build_asr_model, model_kwargs

    texts = ["he hoped there would be stew", "turnips and carrots", "and bruised potatoes", "the yellow lamps"]
    rng = np.random.default_rng(0)
    utts = []
    for i, (dur, text) in enumerate(zip((1.37, 2.0, 4.3, 9.1), texts)):
        path = tmp_path / "audio" / f"1089-134686-{i:04d}.flac"
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(path), (0.05 * rng.standard_normal(int(dur * 16000))).astype(np.float32), 16000, format="FLAC")
        utts.append(Utterance(path.stem, str(path), dur, text, 0.0, "1089-134686"))
    manifests = tmp_path / "manifests"
    for part in ("train-clean-100", "dev-clean", "test-clean"):
        write_manifest(manifests / f"{part}.jsonl", utts)
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", ["frontend.channels=8", "encoder.d_model=32", "encoder.n_heads=4", "encoder.n_layers=1",
                                "encoder.ffn_dim=64", "pe=rope", "loss=ctc", "data=librispeech", "data/tokenizer=char",
                                f"data.corpus.manifest_dir={manifests}", "data.corpus.train=[train-clean-100]",
                                "data.corpus.dev=[dev-clean]", "data.corpus.test=[test-clean]", "eval.n_boot=50"])
    run = tmp_path / "run"
    run.mkdir()
    OmegaConf.save(cfg, run / "config.yaml")
    tok = build_tokenizer("char", texts, run)
    torch.manual_seed(0)
    model = build_asr_model(**model_kwargs(model_config(cfg), tok.vocab_size))
    (run / "checkpoints").mkdir()
    torch.save({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}},
               run / "checkpoints" / "best.ckpt")
    n_mel = int(cfg.data.features.num_mel_bins)
    GlobalCMVN(torch.zeros(n_mel), torch.ones(n_mel)).save(run / "cmvn.json")
    return run, manifests / "test-clean.jsonl"


def test_score_py_writes_what_evaluate_py_writes_for_the_same_decodings(tmp_path):
    from asr_pe.evaluation.pipeline import evaluate_run
    from asr_pe.training.data import resolve_manifests

    run, manifest = _tiny_run(tmp_path)
    evaluate_run(run, {"eval": {"n_boot": 50}}, device="cpu", corpus_manifests=resolve_manifests)
    ours = run / "eval" / "test-clean"
    hyps = tmp_path / "hyp.jsonl"
    hyps.write_text("".join(json.dumps({"id": r["id"], "text": r["hyp"]}) + "\n"
                            for r in reversed(read_per_utt(ours / "per_utt.jsonl"))))  # any order
    # the real entry point, in a subprocess: argparse, scoring, the plot of the system alone
    proc = subprocess.run([sys.executable, str(ROOT / "score.py"), "--manifest", str(manifest), "--hyp", str(hyps),
                           "--out", str(tmp_path / "other"), "--label", "other-toolkit", "--n-boot", "50"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    theirs = tmp_path / "other" / "eval" / "test-clean"
    for name in ("per_utt.jsonl", "buckets.csv"):
        assert (theirs / name).read_bytes() == (ours / name).read_bytes(), name
    # buckets.md differs only in its header line (the system instead of the run's decoding)
    assert (theirs / "buckets.md").read_text().split("\n")[1:] == (ours / "buckets.md").read_text().split("\n")[1:]
    plot_md = (tmp_path / "other" / "plots" / "test-clean" / "wer_vs_length.md").read_text()
    assert "other-toolkit" in plot_md and (tmp_path / "other" / "plots" / "test-clean" / "wer_vs_length.png").exists()
    bad = subprocess.run([sys.executable, str(ROOT / "score.py"), "--manifest", str(manifest), "--hyp", str(hyps),
                          "--out", str(tmp_path / "x"), "--test-set", "t", "--label", "y", "--format", "text"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    # read as Kaldi text, each JSON line's first token is an id the manifest does not have
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_long_set_with_parts_gets_the_in_context_ratio_of_the_same_system(tmp_path):
    """score.py on a short set, then on long-form recordings whose manifest rows carry ``parts``:
    ``in_context.json`` pairs each recording decoded whole with its parts' hypotheses from the short
    set, and the pooled ratio is Σ whole edits / Σ alone edits (counted by hand here)."""
    from asr_pe.data.manifest import Part

    wav = _wav(tmp_path / "a.wav", 4.0)
    short = [Utterance("u1", wav, 1.0, "abc"), Utterance("u2", wav, 1.0, "de"), Utterance("u3", wav, 1.0, "fgh")]
    long = [Utterance("r1", wav, 2.0, "abc de", parts=(Part("u1", 0.0, 1.0), Part("u2", 1.0, 2.0))),
            Utterance("r2", wav, 1.0, "fgh", parts=(Part("u3", 0.0, 1.0),))]
    write_manifest(tmp_path / "short.jsonl", short)
    write_manifest(tmp_path / "long.jsonl", long)
    # alone: u1 one substitution, u2 right, u3 one deletion -> 2 char edits; whole: r1 3 edits, r2 1
    (tmp_path / "short_hyp.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in
                                                      [("u1", "abd"), ("u2", "de"), ("u3", "fg")]))
    (tmp_path / "long_hyp.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in
                                                     [("r1", "abd dx "), ("r2", "fgx")]))
    out = tmp_path / "system"
    # the long set first: no scored set holds its parts yet, so no ratio (and no error)
    score_hypotheses(tmp_path / "long.jsonl", tmp_path / "long_hyp.jsonl", out, n_boot=50)
    assert not (out / "eval" / "long" / "in_context.json").exists()
    score_hypotheses(tmp_path / "short.jsonl", tmp_path / "short_hyp.jsonl", out, n_boot=50)
    score_hypotheses(tmp_path / "long.jsonl", tmp_path / "long_hyp.jsonl", out, n_boot=50)
    ic = json.loads((out / "eval" / "long" / "in_context.json").read_text())
    assert ic["alone_set"] == "short"
    whole = {r["id"]: r for r in ic["rows"]}
    assert sorted(whole) == ["r1", "r2"]
    assert ic["ratio"] == pytest.approx((2 + 1) / (1 + 1))  # r1: "abd dx" vs "abc de" = 2 edits


# ----------------------------------------------------------------------------- issue 43: CTM channels and decodings, --out

@pytest.fixture
def call_set(tmp_path):
    """A two-sided telephone call (NIST's CTM example, recording 7654) in the manifest as one mono
    recording whose reference is side A's words, and a TED-LIUM-like segment."""
    call = _wav(tmp_path / "audio" / "7654.wav", 20.0)
    talk = _wav(tmp_path / "audio" / "TalkA.wav", 30.0)
    utts = [Utterance("7654", call, 20.0, "yes you can as", 0.0, "7654"),
            Utterance("TalkA-0001", talk, 1.5, "the cat sat", 0.5, "TalkA")]
    manifest = tmp_path / "calls.jsonl"
    write_manifest(manifest, utts)
    return manifest


# sclite's CTM example (SCTK doc/infmts.htm): each side of the call is a channel, sorted by
# recording, channel and start time; and an utterance-level line as Kaldi's get_ctm.sh writes it
NIST_TWO_SIDES = (";;\n;;  Comments follow ';;'\n;;\n"
                  "7654 A 11.34 0.2  YES -6.763\n7654 A 12.00 0.34 YOU -12.384530\n"
                  "7654 A 13.30 0.5  CAN 2.806418\n7654 A 17.50 0.2  AS 0.537922\n"
                  "7654 B 1.34 0.2  I -6.763\n7654 B 2.00 0.34 CAN -12.384530\n"
                  "7654 B 3.40 0.5  ADD 2.806418\n7654 B 7.00 0.2  AS 0.537922\n"
                  "TalkA-0001 A 0.10 0.30 the\nTalkA-0001 A 0.45 0.30 cat\nTalkA-0001 A 0.80 0.40 sat\n")


def test_a_ctm_with_two_channels_of_a_recording_scores_one_when_asked(tmp_path, call_set, capsys):
    """Both sides of the call joined by time would be scored against side A's reference (the old
    code: 'i can add as yes you can as', 4 insertions); one error names the first line of the
    second channel, and --channel A scores side A alone, counting what it left out."""
    hyp = tmp_path / "call.ctm"
    hyp.write_text(NIST_TWO_SIDES)
    base = ["--manifest", call_set, "--hyp", hyp, "--out", tmp_path / "sys", "--no-plot", "--n-boot", "10"]
    rc, err = _cli(base, capsys)
    assert rc == 2 and err.startswith(f"error: {hyp}:8: recording '7654' has words on channel 'B' and on channel "
                                      "'A' (line 4)") and "--channel A" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "sys").exists()
    rc, err = _cli([*base, "--channel", "A"], capsys)
    assert rc == 0, err
    per = {r["id"]: r for r in read_per_utt(tmp_path / "sys" / "eval" / "calls" / "per_utt.jsonl")}
    assert per["7654"]["hyp"] == "YES YOU CAN AS" and sum(r["errors"] for r in per.values()) == 0
    meta = json.loads((tmp_path / "sys" / "eval" / "calls" / "buckets.meta.json").read_text())
    assert meta["ctm_channel"] == "A" and meta["ctm_lines_other_channels"] == 4
    rc, err = _cli([*base, "--channel", "1"], capsys)      # no word on it: every utterance would be empty
    assert rc == 2 and "no word on channel '1' (the file's channels: A, B)" in err
    text = tmp_path / "text"
    text.write_text("7654 yes you can as\nTalkA-0001 the cat sat\n")
    rc, err = _cli(["--manifest", call_set, "--hyp", text, "--out", tmp_path / "sys", "--no-plot", "--channel", "A"],
                   capsys)
    assert rc == 2 and "--channel applies to CTM hypotheses only" in err


def test_a_ctm_holding_two_decodings_is_an_error_naming_the_line(tmp_path, talk_set):
    """Two decodings of the same test set in one file (``cat a.ctm b.ctm``), scored, double every
    word: 100 % WER for a perfect system. Appended, the recording goes back in time; sorted
    (``sort -k1,1 -k2,2 -k3,3n``), its words overlap. Either is one error naming the line."""
    manifest, _ = talk_set
    one = ("TalkA 1 0.60 0.30 the\nTalkA 1 1.00 0.30 cat\nTalkA 1 1.40 0.30 sat\n"
           "TalkA 1 5.10 0.20 on\nTalkA 1 5.30 0.20 the\nTalkA 1 5.60 0.20 mat\nTalkA 1 5.90 0.30 today\n"
           "TalkA 1 10.2 0.20 and\nTalkA 1 10.5 0.20 then\nTalkA 1 10.8 0.20 it\nTalkA 1 11.0 0.30 left\n"
           "test_long_0000 1 0.10 0.20 a\ntest_long_0000 1 0.40 0.30 long\ntest_long_0000 1 0.80 0.20 one\n"
           "test_long_0000 1 1.10 0.20 with\ntest_long_0000 1 1.40 0.30 five\ntest_long_0000 1 1.80 0.40 words\n")
    per, rows = _score(tmp_path, manifest, one, "one.ctm")
    assert rows[-1]["errors"] == 0                     # one decoding, right word for word
    bad = tmp_path / "both.ctm"
    bad.write_text(one + one)
    with pytest.raises(HypothesisError, match=r"both.ctm:18: recording 'TalkA' channel '1' goes back in time "
                                              r"\(0.6 s after 11 s at line 11\)"):
        score_hypotheses(manifest, bad, tmp_path / "sys2", n_boot=10)
    lines = sorted((one + one).splitlines(), key=lambda ln: (ln.split()[0], ln.split()[1], float(ln.split()[2])))
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(HypothesisError, match=r"both.ctm:2: recording 'TalkA' channel '1': the word at 0.6 s starts "
                                              r"before the middle of the word at 0.6 s"):
        score_hypotheses(manifest, bad, tmp_path / "sys2", n_boot=10)
    assert not (tmp_path / "sys2").exists()


def _trained_run(folder: Path) -> Path:
    """A run folder as train.py leaves it (the files score.py would touch, with train.py's
    run_info.json fields)."""
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "best.ckpt").write_bytes(b"weights")
    (folder / "config.yaml").write_text("pe:\n  name: rope\nseed: 3\n")
    (folder / "run_info.json").write_text(json.dumps(
        {"arm": "", "data": "synth", "data_report": {"train_used": 7485}, "encoder": "transformer",
         "label": "rope/ctc", "loss": "ctc", "parameters": 1792894, "pe": "rope", "remedy": "", "seed": 3,
         "train_max_duration": 4.999625}, indent=2, sort_keys=True) + "\n")
    (folder / "eval" / "test").mkdir(parents=True)
    (folder / "eval" / "test" / "per_utt.jsonl").write_text('{"id": "TalkA-0001", "errors": 0}\n')
    (folder / "eval" / "test" / "buckets.csv").write_text("bucket,cer\nall,1.0\n")
    return folder


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("keep", [("config.yaml", "checkpoints", "run_info.json"), ("config.yaml",), ("checkpoints",),
                                  ("run_info.json",)], ids=["trained_run", "config", "checkpoints", "run_info"])
def test_score_py_refuses_a_trained_run_folder_and_writes_nothing(tmp_path, talk_set, capsys, keep):
    """Defect 6: --out <a trained run> replaced its run_info.json (pe, loss, seed, data report) and
    eval/test. A folder with config.yaml or checkpoints/, or with a run_info.json score.py did not
    write (an archived run's folder), is refused: one error line, exit 2, not a byte changed."""
    manifest, _ = talk_set
    run = _trained_run(tmp_path / "runs" / "rope_ctc_s3")
    for name in {"config.yaml", "checkpoints", "run_info.json"} - set(keep):
        path = run / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    before = _tree(run)
    hyp = tmp_path / "text"
    hyp.write_text("TalkA-0001 the cat sat\nTalkA-0002 on the mat today\nTalkA-0003 and then it left\n"
                   "test_long_0000 a long one with five words\n")
    rc, err = _cli(["--manifest", manifest, "--hyp", hyp, "--out", run, "--test-set", "test", "--n-boot", "10"], capsys)
    assert rc == 2 and err.startswith("error: ") and len(err.splitlines()) == 1 and "own --out folder" in err
    assert _tree(run) == before
    # a folder score.py wrote is scored into again (another test set of the same system)
    system = tmp_path / "whisper"
    assert _cli(["--manifest", manifest, "--hyp", hyp, "--out", system, "--no-plot", "--n-boot", "10"], capsys)[0] == 0
    assert _cli(["--manifest", manifest, "--hyp", hyp, "--out", system, "--no-plot", "--n-boot", "10",
                 "--test-set", "again"], capsys)[0] == 0
