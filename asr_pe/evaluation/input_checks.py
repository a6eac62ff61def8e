"""Evaluation inputs checked before the model is loaded or anything decoded.

`check_eval_inputs`: ``decode.*`` against the run's loss, every test set's audio against its
manifest (`asr_pe.data.audio_checks.scan_audio`) and against a learned PE's table, so that an
input that cannot work is one line naming the file and what to do (``ConfigError``) instead of a
traceback in the middle of an evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from asr_pe.data.audio_checks import scan_audio
from asr_pe.data.manifest import Utterance
from asr_pe.errors import ConfigError
from asr_pe.evaluation.rate import rate_of
from asr_pe.inference.decode import check_decode_settings
from asr_pe.inference.run_loading import encoder_frames_fn
from asr_pe.run_folder import config_path


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value



def check_learned_pe_table(run_cfg: DictConfig, test_utts: Mapping[str, list[Utterance]],
                           settings: Mapping[str, Any], run_dir: str | Path) -> None:
    """A learned PE with ``policy: error`` stops at the first input past its table; say so
    before decoding, naming the longest such utterance and the keys that change it."""
    pe = _plain(run_cfg.get("pe")) or {}
    spec = pe.get("input") or {}
    if spec.get("name") != "learned" or spec.get("policy", "error") != "error":
        return
    max_len = int(spec.get("max_len", 2048))
    frames = encoder_frames_fn(run_cfg)
    window_s = None
    if settings.get("mode") == "chunked":
        window_s = float(settings["chunk_s"]) + 2 * float(settings["overlap_s"])  # what one pass sees
    # eval.tempo / eval.hop_ms: a slower tempo or a shorter hop gives more frames per recorded second
    run_hop = float(((_plain(run_cfg.get("data")) or {}).get("features") or {}).get("frame_shift_ms", 10.0))
    scale = rate_of(settings, run_hop).frames_per_audio_second(run_hop)
    for name, utts in test_utts.items():
        longest = max(utts, key=lambda u: u.duration)
        heard_s = longest.duration * scale
        seen_s = heard_s if window_s is None else min(heard_s, window_s)
        n = frames(seen_s)
        if n > max_len:
            where = longest.source or f"utterance {longest.id!r}"
            limit_s = 60.0 * max_len / frames(60.0)  # the table's length in seconds
            raise ConfigError(
                f"{where}: utterance {longest.id!r} of test set {name!r} ({seen_s:.1f} s = {n} encoder frames) is past "
                f"the run's learned PE table (pe.input.max_len={max_len}, about {limit_s:.3g} s, pe.input.policy=error); "
                f"leave the set out (data.test=...), use eval.mode=chunked with chunk_s + 2*overlap_s under "
                f"{limit_s:.3g} s, or set pe.input.policy=clamp or wrap in {config_path(run_dir)}")


def check_long_enough(run_cfg: DictConfig, test_utts: Mapping[str, list[Utterance]]) -> None:
    """An utterance too short to give the encoder one frame (under one 25 ms feature window, or
    under the front end's subsampling) is decoded as nothing and scored as all deletions without a
    word: say so before decoding, naming the first such manifest line and how many there are."""
    frames = encoder_frames_fn(run_cfg)
    for name, utts in test_utts.items():
        short = [u for u in utts if u.duration < 1.0 and frames(u.duration) < 1]  # frames: a torch call each
        if short:
            first = short[0]
            need = next((s / 1000 for s in range(1, 10001) if frames(s / 1000) >= 1), None)
            raise ConfigError(
                f"{first.source or first.audio_filepath}: utterance {first.id!r} of test set {name!r} lasts "
                f"{first.duration:g} s, too short for one encoder frame (this model needs at least {need:g} s); "
                f"{len(short)} of {len(utts)} utterances of the set are: remove them from the manifest")


def check_eval_inputs(run_cfg: DictConfig, decode: Mapping[str, Any], test_utts: Mapping[str, list[Utterance]],
                      settings: Mapping[str, Any], run_dir: str | Path) -> None:
    """Before the model is loaded: the decoding settings against the run's loss, each test set's
    audio against its manifest (one summary per set), a learned PE's table against the longest
    utterance."""
    check_decode_settings(decode, ctc_weight=float(run_cfg.loss.get("ctc_weight", 1.0)),
                          transducer=bool(run_cfg.loss.get("transducer")))
    sample_rate = int(run_cfg.data.features.sample_rate)
    for name, utts in test_utts.items():
        scan_audio(utts, sample_rate=sample_rate, name=name)
    check_long_enough(run_cfg, test_utts)
    check_learned_pe_table(run_cfg, test_utts, settings, run_dir)


__all__ = ["check_eval_inputs", "check_learned_pe_table", "check_long_enough"]
