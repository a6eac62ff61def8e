"""Attention maps of a trained run for one utterance.

    python scripts/plot_attention.py run=<run dir> utt=<id> [data.test=<set name or manifest>]
                                     [out=<dir>] [checkpoint=best|last] [max_seconds=<s>]

Writes ``<out>/layer<k>.png`` (default ``<run>/attention/<utt>/``): one panel per head, log
colour scale, axes in seconds. The weights come from the encoder's reference path (for REM,
the mixed weights). ``max_seconds`` crops the audio first (T×T maps of very long inputs are large).
Every option: conf/plot_attention.yaml.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from asr_pe.training.cli import friendly_errors, run_hydra_main


@hydra.main(config_path="../conf", config_name="plot_attention", version_base="1.3")
def main(cfg: DictConfig) -> None:
    import torch

    from asr_pe.inference.run_loading import load_run
    from asr_pe.plots.attention_maps import plot_attention_maps
    from asr_pe.inference.inspect_run import (
        cropped_duration, encode_with_attention, find_utterance, run_test_sets, utterance_features,
    )
    from asr_pe.run_folder import pe_label
    from asr_pe.training.data import resolve_manifests

    with friendly_errors():
        run_cfg, model, tokenizer, features, cmvn, ckpt = load_run(cfg.run, cfg.checkpoint)
        utt = find_utterance(run_test_sets(run_cfg, cfg.data.test, corpus_manifests=resolve_manifests), str(cfg.utt))
        duration = cropped_duration(utt, cfg.max_seconds)
        feats = utterance_features(utt, features, cmvn, cfg.max_seconds)  # (1, T, F)
        enc, attn = encode_with_attention(model, feats)
        with torch.no_grad():
            hyp = tokenizer.decode(model.ctc_log_probs(enc).argmax(-1)[0].unique_consecutive().tolist()) \
                if model.ctc_head is not None else ""
        out = Path(cfg.out or Path(cfg.run) / "attention" / utt.id)
        label = f"{pe_label(run_cfg.pe)}/{run_cfg.loss.name} {utt.id} ({duration:.1f} s)"
        paths = plot_attention_maps(attn, model.frame_shift_s, label, out)
    print(f"ref: {utt.text}\nhyp: {hyp}")
    for p in paths:
        print(p)


if __name__ == "__main__":
    run_hydra_main(main)
