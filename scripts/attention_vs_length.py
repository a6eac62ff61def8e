"""How a trained run's attention changes with input length: distance, entropy, locality per layer.

    python scripts/attention_vs_length.py run=<run dir> [data.test=<set or manifest>|[a,b]] [per_bucket=3]
                                          [out=<dir>] [checkpoint=best|last] [local_s=0.5]
                                          [max_seconds=<s>]

For every test set of the run (or those named by ``data.test``), the first ``per_bucket`` utterances
(manifest order) of each duration bucket (the run's ``eval.edges``) are encoded one at a time
and each layer's attention is summarised (`asr_pe.evaluation.attention_stats`): mean attended
distance in seconds, entropy normalised by ln T, share of attention within ±local_s. Writes
(default ``<run>/attention_stats/``) ``attention_stats.csv`` (one row per utterance, layer and
head) and ``attention_stats.md`` (head means per bucket and layer, one table per statistic).
The weights come from the encoder's reference path, so each layer holds a (1, H, T, T) tensor:
~256 MB per layer for 160 s at 40 ms frames; ``max_seconds`` crops longer recordings.
Every option: conf/attention_vs_length.yaml.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from asr_pe.errors import ConfigError
from asr_pe.training.cli import friendly_errors, run_hydra_main


@hydra.main(config_path="../conf", config_name="attention_vs_length", version_base="1.3")
def main(cfg: DictConfig) -> None:
    with friendly_errors():
        if not (isinstance(cfg.per_bucket, int) and cfg.per_bucket >= 1):
            raise ConfigError(f"per_bucket must be a positive integer, got {cfg.per_bucket!r}")
        from asr_pe.evaluation.attention_vs_length import collect_rows, write_report
        from asr_pe.evaluation.buckets import DEFAULT_EDGES
        from asr_pe.inference.run_loading import load_run
        from asr_pe.inference.inspect_run import (
            cropped_duration, encode_with_attention, run_test_sets, utterance_features,
        )
        from asr_pe.run_folder import pe_label

        run_cfg, model, _, features, cmvn, ckpt = load_run(cfg.run, cfg.checkpoint)
        from asr_pe.training.data import resolve_manifests

        sets = run_test_sets(run_cfg, cfg.data.test, corpus_manifests=resolve_manifests)
        edges_spec = run_cfg.get("eval", {}).get("edges") or DEFAULT_EDGES  # "doubling" or a list (older runs)

        def attend(utt):  # -> (seconds encoded, per-layer attention [(1, H, T, T)])
            feats = utterance_features(utt, features, cmvn, cfg.max_seconds)  # (1, T, F)
            return cropped_duration(utt, cfg.max_seconds), encode_with_attention(model, feats)[1]

        rows, n_layers = collect_rows(sets, edges_spec, cfg.per_bucket, attend, model.frame_shift_s, cfg.local_s)
        if not rows:
            raise ConfigError(f"no utterances in the test sets {sorted(sets)}")
        title = f"{pe_label(run_cfg.pe)}/{run_cfg.loss.name}, {Path(cfg.run).name}, {ckpt.name}"
        csv_path, md = write_report(rows, cfg.out or Path(cfg.run) / "attention_stats", title, n_layers,
                                    cfg.local_s)
    print(md)
    print(csv_path)


if __name__ == "__main__":
    run_hydra_main(main)
