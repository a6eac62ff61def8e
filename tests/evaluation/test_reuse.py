"""When a set's result folder is reused instead of decoded again (asr_pe/evaluation/reuse.py)."""

import json

import pytest

from asr_pe.evaluation.reuse import SETTINGS, Reuse, decoding_settings, stale_reason
from asr_pe.evaluation.settings import EVAL_DEFAULTS

CKPT = {"name": "best.ckpt", "global_step": 40, "sha256": "a" * 64}


@pytest.fixture
def manifest(tmp_path):
    path = tmp_path / "ladder_dev_nogap_5s.jsonl"
    path.write_text('{"id": "r1", "audio_filepath": "r1.flac", "duration": 5.0, "text": "a b"}\n')
    return path


def settings_of(manifest, **eval_overrides):
    return decoding_settings(manifest=manifest, settings={**EVAL_DEFAULTS, **eval_overrides},
                             decode={"method": "greedy"}, remedy="", train_length_s=None, device="cpu")


def write_result(folder, checkpoint, settings, skip=()):
    """A result folder as evaluate_run writes it (``skip``: files a kill left unwritten)."""
    folder.mkdir(parents=True)
    for name in ("per_utt.jsonl", "buckets.csv", "buckets.md"):
        if name not in skip:
            (folder / name).write_text("x\n")
    if "buckets.meta.json" not in skip:
        meta = {"checkpoint": checkpoint, **({SETTINGS: settings} if settings is not None else {})}
        (folder / "buckets.meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))


def test_a_complete_result_of_the_same_checkpoint_and_settings_is_reused(tmp_path, manifest):
    now = settings_of(manifest)
    write_result(tmp_path / "set", CKPT, now)
    assert stale_reason(tmp_path / "set", CKPT, now) is None
    assert stale_reason(tmp_path / "set", CKPT, settings_of(manifest)) is None   # recomputed: equal


@pytest.mark.parametrize("skip", ["per_utt.jsonl", "buckets.csv", "buckets.md", "buckets.meta.json"])
def test_an_incomplete_folder_is_decoded_again(tmp_path, manifest, skip):
    now = settings_of(manifest)
    write_result(tmp_path / "set", CKPT, now, skip={skip})
    assert stale_reason(tmp_path / "set", CKPT, now) == f"incomplete (no {skip})"
    assert stale_reason(tmp_path / "missing", CKPT, now) == "no result yet"


def test_other_checkpoint_bytes_or_file_are_decoded_again(tmp_path, manifest):
    now = settings_of(manifest)
    write_result(tmp_path / "set", CKPT, now)
    assert "checkpoint changed" in stale_reason(tmp_path / "set", {**CKPT, "sha256": "b" * 64}, now)
    assert "checkpoint changed" in stale_reason(tmp_path / "set", {**CKPT, "name": "last.ckpt"}, now)


def test_a_folder_without_its_settings_recorded_is_decoded_again(tmp_path, manifest):
    now = settings_of(manifest)
    write_result(tmp_path / "set", CKPT, None)           # written before settings were recorded
    assert "not recorded" in stale_reason(tmp_path / "set", CKPT, now)
    (tmp_path / "set" / "buckets.meta.json").write_text("{not json")
    assert "unreadable" in stale_reason(tmp_path / "set", CKPT, now)


@pytest.mark.parametrize("change", [
    {"n_boot": 999}, {"mode": "chunked"}, {"chunk_s": 10.0}, {"overlap_s": 2.0}, {"block_size": 64},
    {"edges": [0, 5, 10]}, {"batch_seconds": 100}])
def test_each_setting_is_compared(tmp_path, manifest, change):
    write_result(tmp_path / "set", CKPT, settings_of(manifest))
    reason = stale_reason(tmp_path / "set", CKPT, settings_of(manifest, **change))
    assert reason.startswith("settings differ: ") and next(iter(change)) in reason


def test_remedy_decoding_device_and_ladder_bytes_are_compared(tmp_path, manifest):
    recorded = settings_of(manifest)
    write_result(tmp_path / "set", CKPT, recorded)
    base = dict(manifest=manifest, settings=EVAL_DEFAULTS, decode={"method": "greedy"}, remedy="",
                train_length_s=None, device="cpu")
    for key, value in (("remedy", "window:5"), ("train_length_s", 10.0), ("device", "cuda"),
                       ("decode", {"method": "beam", "beam_size": 4})):
        reason = stale_reason(tmp_path / "set", CKPT, decoding_settings(**{**base, key: value}))
        assert reason is not None and key in reason
    manifest.write_text(manifest.read_text().replace("a b", "a c"))   # the ladder rebuilt otherwise
    assert "manifest_sha256" in stale_reason(tmp_path / "set", CKPT, decoding_settings(**base))
    moved = tmp_path / "elsewhere.jsonl"                                # the same bytes elsewhere: the same set
    moved.write_text(manifest.read_text())
    write_result(tmp_path / "set2", CKPT, decoding_settings(**base))
    assert stale_reason(tmp_path / "set2", CKPT, decoding_settings(**{**base, "manifest": moved})) is None


def test_only_the_decode_keys_a_method_reads_are_compared(tmp_path, manifest):
    # greedy reads no beam width: the CLI's whole decode section (beam=10, ...) and an in-process
    # call's {"method": "greedy"} are the same decoding, in a record old or new; beam width counts
    # for beam search, and every key for the attention decoders
    base = dict(manifest=manifest, settings=EVAL_DEFAULTS, remedy="", train_length_s=None, device="cpu")
    full = {"method": "greedy", "beam": 10, "ctc_weight": 0.3, "length_penalty": 1.0, "max_len_ratio": 1.0}
    write_result(tmp_path / "set", CKPT, decoding_settings(**base, decode={"method": "greedy"}))
    assert stale_reason(tmp_path / "set", CKPT, decoding_settings(**base, decode=full)) is None
    old = json.loads((tmp_path / "set" / "buckets.meta.json").read_text())
    old[SETTINGS]["decode"] = full                      # as a record written before this rule holds it
    (tmp_path / "set" / "buckets.meta.json").write_text(json.dumps(old))
    assert stale_reason(tmp_path / "set", CKPT, decoding_settings(**base, decode={"method": "greedy"})) is None
    write_result(tmp_path / "beam", CKPT, decoding_settings(**base, decode={**full, "method": "beam"}))
    assert stale_reason(tmp_path / "beam", CKPT, decoding_settings(**base, decode={**full, "method": "beam",
                                                                                "ctc_weight": 0.5})) is None
    assert "decode" in stale_reason(tmp_path / "beam", CKPT, decoding_settings(**base, decode={**full, "method": "beam",
                                                                                           "beam": 4}))
    write_result(tmp_path / "joint", CKPT, decoding_settings(**base, decode={**full, "method": "joint"}))
    assert "decode" in stale_reason(tmp_path / "joint", CKPT, decoding_settings(**base, decode={**full, "method": "joint",
                                                                                             "ctc_weight": 0.5}))


def test_reuse_counts():
    tally = Reuse(decoded=["a", "b"], reused=["c"])
    assert tally.summary() == "decoded 2 sets, reused 1"
