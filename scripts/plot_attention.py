"""Attention maps of a trained run for one utterance.

    python scripts/plot_attention.py run=<run dir> utt=<id> [test=<set name or manifest>]
                                     [out=<dir>] [checkpoint=best|last] [max_seconds=<s>]

Writes ``<out>/layer<k>.png`` (default ``<run>/attention/<utt>/``): one panel per head, log
colour scale, axes in seconds. The weights come from the encoder's reference path (for REM,
the mixed weights). ``max_seconds`` crops the audio first (T×T maps of very long inputs are large).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asr_pe.inference.run_loading import load_run  # noqa: E402
from asr_pe.plots.attention_maps import plot_attention_maps  # noqa: E402
from asr_pe.training.inspect_run import (  # noqa: E402
    cropped_duration, encode_with_attention, find_utterance, parse_key_values, run_test_sets, utterance_features,
)
from asr_pe.run_folder import pe_label  # noqa: E402

KEYS = {"run", "utt", "test", "out", "checkpoint", "max_seconds"}


def parse(argv: list[str]) -> dict:
    return parse_key_values(argv, KEYS, required=("run", "utt"), numeric=("max_seconds",), usage=__doc__)


def main(argv: list[str]) -> int:
    a = parse(argv)
    cfg, model, tokenizer, features, cmvn, ckpt = load_run(a["run"], a.get("checkpoint", "best"))
    utt = find_utterance(run_test_sets(cfg, a.get("test")), a["utt"])
    duration = cropped_duration(utt, a.get("max_seconds"))
    feats = utterance_features(utt, features, cmvn, a.get("max_seconds"))  # (1, T, F)
    enc, attn = encode_with_attention(model, feats)
    with torch.no_grad():
        hyp = tokenizer.decode(model.ctc_log_probs(enc).argmax(-1)[0].unique_consecutive().tolist()) \
            if model.ctc_head is not None else ""
    out = Path(a.get("out") or Path(a["run"]) / "attention" / utt.id)
    label = f"{pe_label(cfg.pe)}/{cfg.loss.name} {utt.id} ({duration:.1f} s)"
    paths = plot_attention_maps(attn, model.frame_shift_s, label, out)
    print(f"ref: {utt.text}\nhyp: {hyp}")
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
