"""evaluate_run / evaluate.py on a LibriSpeech-layout run (manifests in a manifest_dir, FLAC audio,
random weights: transcripts are noise, but the settings, device, blocking and errors are not).

- the device: ``auto`` is CUDA exactly when torch sees a GPU, ``cuda`` without one is one error,
  and both entry points (the evaluation after ``train.py`` and ``evaluate.py run=<dir>``)
  resolve it the same way from their composed configs;
- ``evaluate.py run=<dir>`` buckets like the evaluation after training (the run's own eval
  settings unless given on the command line);
- the attention-block path (``block_size=auto`` on a 160 s input) gives the unblocked outputs;
- an empty or missing test manifest is one error naming the file, before anything is decoded.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import asr_pe.inference.full_context as full_context
import asr_pe.evaluation.pipeline as ev
from asr_pe.data.features import GlobalCMVN
from asr_pe.data.manifest import Utterance, read_manifest, write_manifest
from asr_pe.data.tokenizer import build_tokenizer
from asr_pe.evaluation.settings import EVAL_DEFAULTS, EvalSettingsError, eval_settings
from asr_pe.inference.device import DeviceError, resolve_device
from asr_pe.inference.run_loading import load_run, model_config
from asr_pe.inference.transcribe import make_encode_fn
from asr_pe.models.asr import build_asr_model, model_kwargs
from asr_pe.training.data import resolve_manifests

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
TINY = ["frontend.channels=8", "encoder.d_model=32", "encoder.n_heads=4", "encoder.n_layers=2",
        "encoder.ffn_dim=64", "encoder.dropout=0.0", "pe=relative", "loss=ctc", "data=librispeech",
        "data/tokenizer=char"]
TEXTS = ["he hoped there would be stew for dinner", "turnips and carrots", "and bruised potatoes",
         "after early nightfall the yellow lamps would light up"]
SHORT_DURATIONS = (1.5, 3.2, 6.0, 11.0)
LONG_S = 160.0  # a LibriSpeech long-form set (recipes/librispeech stage 3 joins recordings to 80 / 160 s)



def evaluate_run(run_dir, overrides=None, device=None, *, corpus_manifests=resolve_manifests):
    """The evaluation as the entry points call it: the run's corpus located by Hydra's instantiate."""
    return ev.evaluate_run(run_dir, overrides, device, corpus_manifests=corpus_manifests)

def compose_cfg(name, overrides):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose(name, overrides=overrides)


def write_flac(path, seconds, seed):
    rng = np.random.default_rng(seed)
    sf.write(str(path), (0.05 * rng.standard_normal(int(seconds * 16000))).astype(np.float32), 16000, format="FLAC")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """manifest_dir with train-clean-100, dev-clean, test-clean (4 utterances, 1.5-11 s) and
    test-clean_long (one 160 s recording), as recipes/librispeech stages 2-3 write them."""
    root = tmp_path_factory.mktemp("librispeech")
    audio = root / "LibriSpeech" / "test-clean" / "1089" / "134686"
    audio.mkdir(parents=True)
    utts = []
    for i, (dur, text) in enumerate(zip(SHORT_DURATIONS, TEXTS)):
        path = audio / f"1089-134686-{i:04d}.flac"
        write_flac(path, dur, i)
        utts.append(Utterance(id=path.stem, audio_filepath=str(path), duration=dur, text=text, speaker="1089-134686"))
    manifests = root / "manifests"
    manifests.mkdir()
    for part in ("train-clean-100", "dev-clean", "test-clean"):
        write_manifest(manifests / f"{part}.jsonl", utts)
    long_path = root / "long" / "test-clean_long_0000.flac"
    long_path.parent.mkdir()
    write_flac(long_path, LONG_S, 99)
    write_manifest(manifests / "test-clean_long.jsonl",
                   [Utterance(id="test-clean_long_0000", audio_filepath=str(long_path), duration=LONG_S,
                              text=" ".join(TEXTS * 20))])
    return manifests


def make_run(run, manifests, extra=()):
    """A run directory as train.py leaves it (config.yaml, tokenizer, CMVN, best.ckpt)."""
    run.mkdir(parents=True, exist_ok=True)
    cfg = compose_cfg("train", TINY + [f"data.corpus.manifest_dir={manifests}", "data.corpus.train=[train-clean-100]",
                                       "data.corpus.dev=[dev-clean]", "data.corpus.test=[test-clean]", *extra])
    OmegaConf.save(cfg, run / "config.yaml")
    tok = build_tokenizer("char", TEXTS, run)
    torch.manual_seed(0)
    model = build_asr_model(**model_kwargs(model_config(cfg), tok.vocab_size))
    (run / "checkpoints").mkdir(exist_ok=True)
    torch.save({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}},
               run / "checkpoints" / "best.ckpt")
    n_mel = int(cfg.data.features.num_mel_bins)
    GlobalCMVN(torch.zeros(n_mel), torch.ones(n_mel)).save(run / "cmvn.json")
    return cfg


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, corpus):
    run = tmp_path_factory.mktemp("run")
    make_run(run, corpus)
    return run


def train_style(train_cfg, test=None):
    """The overrides train.py passes to evaluate_run after training."""
    return {"decode": train_cfg.decode, "eval": train_cfg.eval, "data": {"test": test}}


# ----------------------------------------------------------------------------- device


def test_resolve_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto") == resolve_device(None) == "cuda"
    assert resolve_device("CUDA") == "cuda" and resolve_device("cuda:0") == "cuda:0"
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(DeviceError, match=r"device=cuda:1: only 1 CUDA GPU\(s\) visible"):
        resolve_device("cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == resolve_device(None) == "cpu"
    with pytest.raises(DeviceError, match=r"device=cuda: torch sees no CUDA GPU.*use device=auto or device=cpu"):
        resolve_device("cuda")
    with pytest.raises(DeviceError, match="choose auto, cpu, cuda"):
        resolve_device("gpu")


class Stop(Exception):
    pass


@pytest.mark.parametrize("cuda", [True, False], ids=["gpu_node", "cpu_node"])
def test_both_entry_points_resolve_the_same_device(run_dir, monkeypatch, cuda):
    """train.py's evaluation (its composed eval: section) and evaluate.py run=<dir> (its composed
    config, nothing given) both load the model on the GPU when torch sees one, else on the CPU;
    evaluate.py device=cpu / eval.device=cpu still picks the CPU on a GPU node."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    loaded = []

    def fake_load_run(run, checkpoint, device):
        loaded.append(device)
        raise Stop

    monkeypatch.setattr(ev, "load_run", fake_load_run)
    train_cfg = OmegaConf.load(run_dir / "config.yaml")
    assert train_cfg.eval.device == "auto" and train_cfg.eval.block_size == "auto"
    with pytest.raises(Stop):
        evaluate_run(run_dir, train_style(train_cfg))
    for overrides in ([], ["device=cpu"], ["eval.device=cpu"]):
        cfg = compose_cfg("evaluate", [f"run={run_dir}", *overrides])
        # what evaluate.py passes: only the eval keys of its command line (the rest: the run's own)
        given = {o.split("=")[0][len("eval."):]: o.split("=")[1] for o in overrides if o.startswith("eval.")}
        with pytest.raises(Stop):
            evaluate_run(cfg.run, {"decode": cfg.decode, "eval": given}, device=cfg.device)
    assert loaded == ["cuda" if cuda else "cpu", "cuda" if cuda else "cpu", "cpu", "cpu"]


def test_composed_configs_default_to_auto_device_doubling_edges_and_auto_blocks():
    for experiment in [None] + sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")):
        cfg = compose_cfg("train", [f"experiment={experiment}"] if experiment else [])
        settings = eval_settings(cfg.eval, cfg.eval)
        got = (settings["device"], settings["edges"], settings["block_size"])
        assert got == ("auto", "doubling", "auto"), experiment
    cfg = compose_cfg("evaluate", ["run=/x"])
    # one definition: evaluate.py composes the group train.py does, and EVAL_DEFAULTS is that file
    assert cfg.device is None and OmegaConf.to_container(cfg.eval) == EVAL_DEFAULTS
    assert OmegaConf.to_container(compose_cfg("train", []).eval) == EVAL_DEFAULTS
    assert compose_cfg("evaluate", ["run=/x"]).decode == compose_cfg("transcribe", ["run=/x", "audio=/y"]).decode
    assert compose_cfg("transcribe", ["run=/x", "audio=/y"]).device == "auto"


def test_cuda_without_a_gpu_fails_before_anything_is_decoded(run_dir, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="device=cuda"):
        evaluate_run(run_dir, {"eval": {"device": "cuda", "suffix": "_gpu"}})
    assert not (run_dir / "eval" / "test-clean_gpu").exists()


# ----------------------------------------------------------------------------- settings and buckets


def test_eval_settings_precedence_and_checks():
    run = {"edges": [0, 5, 10], "n_boot": 200, "block_size": None, "old_key": 1}
    s = eval_settings(run, {"n_boot": None, "mode": "chunked"})
    assert s["edges"] == [0, 5, 10] and s["n_boot"] == 200   # the run's own values
    assert s["block_size"] == "auto" and s["device"] == "auto"  # a null or missing key: the default
    assert s["mode"] == "chunked" and "old_key" not in s
    for bad, match in (({"edge": [0, 1]}, "unknown eval setting"), ({"edges": "halving"}, "eval: bucket edges"),
                       ({"block_size": "big"}, "block_size"), ({"mode": "stream"}, "eval.mode"),
                       ({"suffix": "a/b"}, "eval.suffix"), ({"batch_seconds": 0}, "eval.batch_seconds"),
                       ({"n_boot": -1}, "eval.n_boot")):
        with pytest.raises(EvalSettingsError, match=match):
            eval_settings(run, bad)


def test_evaluate_py_buckets_like_the_evaluation_after_training(corpus, tmp_path):
    """A run trained with its own edges ([0, 2.5, 5]): evaluate.py run=<dir> (nothing given)
    writes exactly the buckets.csv of the evaluation after training; eval.edges=... on the command
    line still wins; the console states the edges and that empty buckets have no row."""
    run = tmp_path / "run"
    train_cfg = make_run(run, corpus, ["eval.edges=[0,2.5,5]", "eval.n_boot=50"])
    evaluate_run(run, train_style(train_cfg))
    after_training = (run / "eval" / "test-clean" / "buckets.csv").read_text()
    assert [line.split(",")[0] for line in after_training.splitlines()[1:]] == ["0-2.5", "2.5-5", "5+", "all"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), f"run={run}", "eval.suffix=_cli"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (run / "eval" / "test-clean_cli" / "buckets.csv").read_text() == after_training
    meta = json.loads((run / "eval" / "test-clean_cli" / "buckets.meta.json").read_text())
    assert meta["edges"] == "0 2.5 5" and meta["device"] == resolve_device("auto") and meta["block_size"] == "auto"
    assert "bucket edges (s): 0 2.5 5; buckets without utterances have no row" in proc.stdout
    evaluate_run(run, {"eval": {"edges": "doubling", "suffix": "_doubling", "n_boot": 50}})
    rows = (run / "eval" / "test-clean_doubling" / "buckets.csv").read_text().splitlines()[1:]
    assert [line.split(",")[0] for line in rows] == ["0-2", "2-4", "4-8", "8-16", "all"]


def test_explicit_edges_that_stop_short_log_the_open_bucket(run_dir, caplog):
    with caplog.at_level("WARNING", logger="asr_pe.evaluation.pipeline"):
        evaluate_run(run_dir, {"eval": {"edges": [0, 2, 4], "n_boot": 10, "suffix": "_short"}})
    assert "test-clean: 2 of 4 utterances are at or past the last bucket edge 4 s" in caplog.text


# ----------------------------------------------------------------------------- blocked attention


def test_blocked_attention_equals_unblocked_on_a_160_s_input(run_dir, corpus, monkeypatch):
    """block_size=auto (the default) splits the 160 s input (3998 encoder frames) into query
    blocks; the encoder output equals the unblocked one (1e-5) and so does the transcript."""
    cfg, model, _, features, cmvn, _ = load_run(run_dir)
    from asr_pe.data.audio import load_audio

    wave = load_audio(str(corpus.parent / "long" / "test-clean_long_0000.flac"), sample_rate=16000)
    feats = cmvn(features(wave))[None]  # (1, T, F)
    lengths = torch.tensor([feats.size(1)])
    with torch.no_grad():
        ref, ref_len = make_encode_fn(model, "full", block_size=None)(feats, lengths)
        out, out_len = make_encode_fn(model, "full", block_size="auto")(feats, lengths)
    assert ref.size(1) == 3998
    block = full_context.resolve_block_size("auto", ref.size(1), model.encoder.layers[0].attn.n_heads)
    assert block is not None and block < ref.size(1)  # the blocked path is the one taken
    assert torch.equal(out_len, ref_len)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)

    blocks_used = []
    real = full_context.resolve_block_size
    monkeypatch.setattr(full_context, "resolve_block_size",
                        lambda *a, **k: blocks_used.append(real(*a, **k)) or blocks_used[-1])
    hyps = {}
    for block_size in ("none", "auto"):
        evaluate_run(run_dir, {"data": {"test": str(corpus / "test-clean_long.jsonl")},
                                  "eval": {"block_size": block_size, "suffix": f"_{block_size}", "n_boot": 10}})
        out_dir = run_dir / "eval" / f"test-clean_long_{block_size}"
        hyps[block_size] = json.loads((out_dir / "per_utt.jsonl").read_text())["hyp"]
        rows = (out_dir / "buckets.csv").read_text().splitlines()[1:]
        assert [line.split(",")[0] for line in rows] == ["128-256", "all"]  # the 160 s set has its own row
    assert blocks_used[-2:] == [None, block]
    assert hyps["none"] == hyps["auto"]


# ----------------------------------------------------------------------------- empty test sets


def test_an_empty_test_manifest_is_one_error_naming_it_before_decoding(run_dir, corpus, tmp_path):
    empty = tmp_path / "test-other.jsonl"
    empty.write_text("\n\n")  # blank lines only: no utterances
    with pytest.raises(ev.EmptyTestSetError, match=rf"^{empty}: test manifest of test set 'test-other' has no "
                                                   r"utterances; re-run the recipe's prepare stage"):
        evaluate_run(run_dir, {"data": {"test": {"test-clean": str(corpus / "test-clean.jsonl"),
                                                    "test-other": str(empty)}},
                                  "eval": {"suffix": "_with_empty"}})
    assert not (run_dir / "eval" / "test-clean_with_empty").exists()  # nothing decoded, nothing written


def test_a_missing_test_manifest_of_the_corpus_is_named(run_dir, monkeypatch, tmp_path):
    gone = tmp_path / "dev_talks.jsonl"
    corpus = lambda data_cfg: {"train": [], "dev": [], "test": {"dev_talks": str(gone)}}  # noqa: E731
    with pytest.raises(FileNotFoundError, match=rf"^{gone}: test manifest of test set 'dev_talks' not found"):
        evaluate_run(run_dir, {}, corpus_manifests=corpus)


@pytest.mark.parametrize("case", ["empty_manifest", "cuda_without_gpu"])
def test_cli_errors_are_one_line(run_dir, tmp_path, case):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if case == "empty_manifest":
        empty = tmp_path / "empty.jsonl"
        empty.write_text("")
        args, message = [f"data.test={empty}"], f"error: {empty}: test manifest of test set 'empty' has no utterances"
    else:
        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU: device=cuda is valid here")
        args, message = ["device=cuda"], "error: device=cuda: torch sees no CUDA GPU"
    proc = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), f"run={run_dir}", *args],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(message) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# ----------------------------------------------------------------------------- every utterance, once


def _per_utt_ids(out_dir):
    return [json.loads(line)["id"] for line in (out_dir / "per_utt.jsonl").read_text().splitlines()]


def test_inside_a_process_group_evaluation_still_scores_every_utterance(run_dir, corpus, tmp_path, monkeypatch):
    """After DDP training the process group is still up when train.py evaluates on rank 0; a
    sampler that took its rank from it scored 1/world_size of the batches. Here: a real 1-process
    gloo group that reports a world size of 4, and 1.5 s batches (one utterance each)."""
    import torch.distributed as dist

    from asr_pe.evaluation.provenance import file_sha256

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        monkeypatch.setattr(dist, "get_world_size", lambda group=None: 4)
        assert dist.is_initialized() and dist.get_world_size() == 4 and dist.get_rank() == 0
        evaluate_run(run_dir, {"eval": {"batch_seconds": 1.5, "n_boot": 10, "suffix": "_in_group"}})
    finally:
        monkeypatch.undo()
        dist.destroy_process_group()
    out = run_dir / "eval" / "test-clean_in_group"
    manifest = [u.id for u in read_manifest(corpus / "test-clean.jsonl")]
    assert _per_utt_ids(out) == manifest  # all 4, each once, in manifest order (1/4 before the fix)
    meta = json.loads((out / "buckets.meta.json").read_text())
    assert meta["utterances"] == len(manifest)
    ckpt = run_dir / "checkpoints" / "best.ckpt"
    assert meta["checkpoint"] == {"name": "best.ckpt", "global_step": None, "sha256": file_sha256(ckpt)}


def test_a_lost_batch_is_an_error_and_writes_nothing(run_dir, monkeypatch):
    from asr_pe.evaluation.pipeline import IncompleteScoringError

    class LosesTheLastBatch(ev.DurationBucketSampler):
        def __iter__(self):
            yield from list(super().__iter__())[:-1]

    monkeypatch.setattr(ev, "DurationBucketSampler", LosesTheLastBatch)
    with pytest.raises(IncompleteScoringError, match=r"test set 'test-clean' \(.*test-clean.jsonl\): scored 3 "
                                                      r"utterances, the manifest has 4; missing: 1089-134686-0003"):
        evaluate_run(run_dir, {"eval": {"batch_seconds": 1.5, "n_boot": 10, "suffix": "_lossy"}})
    assert not (run_dir / "eval" / "test-clean_lossy" / "buckets.csv").exists()


# ----------------------------------------------------------------------------- remedies


def test_a_remedy_writes_its_own_folder_and_leaves_trained_lengths_alone(run_dir):
    """eval.remedy=window:2 (L_tr given): results in eval/test-clean_window2 with the remedy in the
    meta file; the 1.5 s utterance (inside the window and the training length) decodes as without."""
    plain = evaluate_run(run_dir, {"eval": {"n_boot": 10, "suffix": "_plain"}})
    out = evaluate_run(run_dir, {"eval": {"n_boot": 10, "remedy": "window:2", "train_length_s": 3.0}})
    assert set(out) == {"test-clean_window2"} and set(plain) == {"test-clean_plain"}
    meta = json.loads((run_dir / "eval" / "test-clean_window2" / "buckets.meta.json").read_text())
    assert meta["remedy"] == "window:2" and meta["train_length_s"] == 3.0

    def hyps(folder):
        lines = (run_dir / "eval" / folder / "per_utt.jsonl").read_text().splitlines()
        return {r["id"]: r["hyp"] for r in map(json.loads, lines)}

    assert hyps("test-clean_window2")["1089-134686-0000"] == hyps("test-clean_plain")["1089-134686-0000"]


def test_remedy_errors_name_what_to_do(run_dir):
    with pytest.raises(EvalSettingsError, match="unknown remedy 'windw'"):
        evaluate_run(run_dir, {"eval": {"remedy": "windw"}})
    with pytest.raises(ValueError, match="pe=rope only"):
        evaluate_run(run_dir, {"eval": {"remedy": "rope_yarn", "train_length_s": 3.0}})
    with pytest.raises(ValueError, match=r"run_info.json: no train_max_duration.*eval.train_length_s"):
        evaluate_run(run_dir, {"eval": {"remedy": "logit_scale"}})
    with pytest.raises(EvalSettingsError, match="train_length_s"):
        evaluate_run(run_dir, {"eval": {"remedy": "logit_scale", "train_length_s": -1}})


# ----------------------------------------------------------------------------- reuse


def test_reuse_decodes_only_what_is_missing_stale_or_half_written(corpus, tmp_path, monkeypatch, caplog):
    """With ``reuse``: a complete result of the same checkpoint bytes and settings is read back, not
    decoded (its per_utt.jsonl keeps its inode and time); other settings, other checkpoint bytes, a
    folder killed while being written or written before settings were recorded decode again."""
    import logging

    from asr_pe.evaluation.provenance import file_sha256
    from asr_pe.evaluation.reuse import Reuse

    run = tmp_path / "run"
    make_run(run, corpus)
    one = tmp_path / "one.jsonl"                             # one 1.5 s utterance: quick to decode
    write_manifest(one, read_manifest(corpus / "test-clean.jsonl")[:1])
    out = run / "eval" / "one"
    over = {"data": {"test": [str(one)]}}

    def evaluate(n_boot=10):
        tally = Reuse()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="asr_pe.evaluation.pipeline"):
            rows = ev.evaluate_run(run, {**over, "eval": {"n_boot": n_boot}}, corpus_manifests=resolve_manifests,
                                   reuse=tally)
        assert set(rows) == {"one"} and rows["one"]
        return tally.decoded, tally.reused, caplog.text

    def stamp():
        st = (out / "per_utt.jsonl").stat()
        return st.st_ino, st.st_mtime_ns

    assert evaluate()[:2] == (["one"], [])
    meta = json.loads((out / "buckets.meta.json").read_text())
    assert meta["settings"]["n_boot"] == 10 and meta["settings"]["device"] == "cpu"
    assert meta["settings"]["manifest_sha256"] == file_sha256(one)
    before = stamp()
    decoded, reused, text = evaluate()
    assert (decoded, reused) == ([], ["one"]) and stamp() == before and "reused" in text
    evaluate_run(run, {**over, "eval": {"n_boot": 10}})      # without reuse: decoded as before
    assert stamp() != before
    off = Reuse(enabled=False)                               # switched off: decoded, and counted
    ev.evaluate_run(run, {**over, "eval": {"n_boot": 10}}, corpus_manifests=resolve_manifests, reuse=off)
    assert (off.decoded, off.reused) == (["one"], [])

    decoded, _, text = evaluate(n_boot=11)                   # other settings
    assert decoded == ["one"] and "settings differ: n_boot 10 -> 11" in text

    def killed(*args, **kwargs):                             # killed after per_utt.jsonl was replaced
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(ev, "write_bucket_files", killed)
        with pytest.raises(KeyboardInterrupt):
            evaluate(n_boot=12)
    assert (out / "per_utt.jsonl").is_file() and not (out / "buckets.meta.json").exists()
    decoded, _, text = evaluate(n_boot=11)                   # the half-written folder is not read as n_boot 11
    assert decoded == ["one"] and "incomplete (no buckets.meta.json)" in text
    assert evaluate(n_boot=11)[:2] == ([], ["one"])

    meta = json.loads((out / "buckets.meta.json").read_text())
    del meta["settings"]                                     # written before settings were recorded
    (out / "buckets.meta.json").write_text(json.dumps(meta))
    decoded, _, text = evaluate(n_boot=11)
    assert decoded == ["one"] and "settings are not recorded" in text

    ckpt = torch.load(run / "checkpoints" / "best.ckpt", weights_only=True)   # other bytes: trained further
    first = next(iter(ckpt["state_dict"]))
    ckpt["state_dict"][first] = ckpt["state_dict"][first] + 0.01
    torch.save(ckpt, run / "checkpoints" / "best.ckpt")
    decoded, _, text = evaluate(n_boot=11)
    assert decoded == ["one"] and "checkpoint changed" in text


def test_evaluate_py_reuse_true_reads_back_only_what_has_these_settings(corpus, tmp_path):
    """``python evaluate.py run=... reuse=true`` (what the recipes' stage 5 runs when given other
    settings): a set decoded with this checkpoint and these settings is read back, not decoded;
    with another setting it is decoded again."""
    run = tmp_path / "run"
    make_run(run, corpus)
    one = tmp_path / "one.jsonl"
    write_manifest(one, read_manifest(corpus / "test-clean.jsonl")[:1])
    evaluate_run(run, {"data": {"test": [str(one)]}, "eval": {"n_boot": 10}})
    per_utt = run / "eval" / "one" / "per_utt.jsonl"
    before = per_utt.stat().st_mtime_ns, per_utt.read_text()
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def cli(*args):
        proc = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), f"run={run}", f"data.test={one}",
                               "reuse=true", *args], capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "[asr_pe] decoded 0 sets, reused 1: one reused" in cli("eval.n_boot=10")
    assert (per_utt.stat().st_mtime_ns, per_utt.read_text()) == before
    assert "[asr_pe] decoded 1 sets, reused 0: none reused" in cli("eval.n_boot=11")
    assert per_utt.stat().st_mtime_ns != before[0]
