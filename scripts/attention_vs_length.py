"""How a trained run's attention changes with input length: distance, entropy, locality per layer.

    python scripts/attention_vs_length.py run=<run dir> [test=<set or manifest>[,...]] [per_bucket=3]
                                          [out=<dir>] [checkpoint=best|last] [local_s=0.5]
                                          [max_seconds=<s>]

For every test set of the run (or those named by ``test``), the first ``per_bucket`` utterances
(manifest order) of each duration bucket (the run's ``eval.edges``) are encoded one at a time
and each layer's attention is summarised (`asr_pe.evaluation.attention_stats`): mean attended
distance in seconds, entropy normalised by ln T, share of attention within ±local_s. Writes
(default ``<run>/attention_stats/``) ``attention_stats.csv`` (one row per utterance, layer and
head) and ``attention_stats.md`` (head means per bucket and layer, one table per statistic).
The weights come from the encoder's reference path, so each layer holds a (1, H, T, T) tensor:
~256 MB per layer for 160 s at 40 ms frames; ``max_seconds`` crops longer recordings.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asr_pe.evaluation.attention_vs_length import collect_rows, write_report  # noqa: E402
from asr_pe.evaluation.buckets import DEFAULT_EDGES  # noqa: E402
from asr_pe.inference.run_loading import load_run  # noqa: E402
from asr_pe.training.inspect_run import (  # noqa: E402
    cropped_duration, encode_with_attention, parse_key_values, run_test_sets, utterance_features,
)
from asr_pe.run_folder import pe_label  # noqa: E402

KEYS = {"run", "test", "per_bucket", "out", "checkpoint", "local_s", "max_seconds"}


def parse(argv: list[str]) -> dict:
    args = parse_key_values(argv, KEYS, required=("run",), numeric=("per_bucket", "local_s", "max_seconds"),
                            defaults={"per_bucket": 3, "checkpoint": "best", "local_s": 0.5}, usage=__doc__)
    if not (isinstance(args["per_bucket"], int) and args["per_bucket"] >= 1):
        raise SystemExit(f"error: per_bucket must be a positive integer, got {args['per_bucket']!r}")
    return args


def main(argv: list[str]) -> int:
    a = parse(argv)
    cfg, model, _, features, cmvn, ckpt = load_run(a["run"], a["checkpoint"])
    test = a.get("test")
    sets = run_test_sets(cfg, test.split(",") if isinstance(test, str) else test)
    edges_spec = cfg.get("eval", {}).get("edges") or DEFAULT_EDGES  # "doubling" or a list (older runs)

    def attend(utt):  # -> (seconds encoded, per-layer attention [(1, H, T, T)])
        feats = utterance_features(utt, features, cmvn, a.get("max_seconds"))  # (1, T, F)
        return cropped_duration(utt, a.get("max_seconds")), encode_with_attention(model, feats)[1]

    rows, n_layers = collect_rows(sets, edges_spec, a["per_bucket"], attend, model.frame_shift_s, a["local_s"])
    if not rows:
        raise SystemExit(f"error: no utterances in the test sets {sorted(sets)}")
    title = f"{pe_label(cfg.pe)}/{cfg.loss.name}, {Path(a['run']).name}, {ckpt.name}"
    csv_path, md = write_report(rows, a.get("out") or Path(a["run"]) / "attention_stats", title, n_layers,
                                a["local_s"])
    print(md)
    print(csv_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
