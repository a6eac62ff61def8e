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

import bisect
import csv
import io
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asr_pe.data.manifest import read_manifest  # noqa: E402
from asr_pe.evaluation.attention_stats import STAT_KEYS, attention_stats  # noqa: E402
from asr_pe.evaluation.buckets import DEFAULT_EDGES, bucket_label, resolve_edges  # noqa: E402
from asr_pe.io import atomic_write_text  # noqa: E402
from asr_pe.training.evaluate import load_run  # noqa: E402
from asr_pe.training.inspect_run import (  # noqa: E402
    cropped_duration, encode_with_attention, parse_key_values, run_test_sets, utterance_features,
)
from asr_pe.training.run_dir import pe_label  # noqa: E402

KEYS = {"run", "test", "per_bucket", "out", "checkpoint", "local_s", "max_seconds"}
CSV_KEYS = ("test_set", "bucket", "utt", "duration", "frames", "layer", "head", *STAT_KEYS)
TITLES = {"mean_distance_s": "mean attended distance (s)",
          "norm_entropy": "attention entropy / ln T (0 = one frame, 1 = uniform)",
          "local_mass": "share of attention within ±local_s",
          "entropy": "attention entropy (nats)"}


def parse(argv: list[str]) -> dict:
    args = parse_key_values(argv, KEYS, required=("run",), numeric=("per_bucket", "local_s", "max_seconds"),
                            defaults={"per_bucket": 3, "checkpoint": "best", "local_s": 0.5}, usage=__doc__)
    if not (isinstance(args["per_bucket"], int) and args["per_bucket"] >= 1):
        raise SystemExit(f"error: per_bucket must be a positive integer, got {args['per_bucket']!r}")
    return args


def first_per_bucket(utts: list, edges: list[float], n: int) -> dict[str, list]:
    """The first ``n`` utterances (manifest order) of each [lo, hi) duration bucket, in bucket order;
    durations past the last edge share one open bucket."""
    bounds = sorted(float(e) for e in edges)
    bounds = ([0.0] if bounds[0] > 0 else []) + bounds + [math.inf]
    picked: dict[str, list] = {bucket_label(lo, hi): [] for lo, hi in zip(bounds, bounds[1:])}
    for u in utts:
        k = bisect.bisect_right(bounds, u.duration) - 1
        label = bucket_label(bounds[k], bounds[k + 1])
        if len(picked[label]) < n:
            picked[label].append(u)
    return {label: us for label, us in picked.items() if us}


def markdown(rows: list[dict], title: str, n_layers: int, local_s: float) -> str:
    """Per statistic: rows (set, bucket), columns layers + their mean; cells are head+utterance means."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["test_set"], r["bucket"])].append(r)
    out = [f"# Attention vs input length — {title}", "",
           "Each cell: mean over the bucket's utterances and the layer's heads "
           "(`scripts/attention_vs_length.py`; `asr_pe/evaluation/attention_stats.py` defines the "
           f"statistics; local_s = {local_s:g} s).", ""]
    for key in ("mean_distance_s", "norm_entropy", "local_mass"):
        out += [f"## {TITLES[key]}", "",
                "| set | bucket (s) | utts | mean dur (s) | " + " | ".join(f"layer {k}" for k in range(n_layers))
                + " | all |", "| --- | --- | ---: | ---: |" + " ---: |" * (n_layers + 1)]
        for (test_set, bucket), rs in groups.items():
            utts = {r["utt"]: r["duration"] for r in rs}
            per_layer = [np.mean([r[key] for r in rs if r["layer"] == k]) for k in range(n_layers)]
            cells = [f"{v:.3f}" if key != "mean_distance_s" else f"{v:.2f}" for v in per_layer]
            all_v = float(np.mean(per_layer))
            cells.append(f"{all_v:.3f}" if key != "mean_distance_s" else f"{all_v:.2f}")
            out.append(f"| {test_set} | {bucket} | {len(utts)} | {np.mean(list(utts.values())):.1f} | "
                       + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    a = parse(argv)
    cfg, model, _, features, cmvn, ckpt = load_run(a["run"], a["checkpoint"])
    test = a.get("test")
    sets = run_test_sets(cfg, test.split(",") if isinstance(test, str) else test)
    edges_spec = cfg.get("eval", {}).get("edges") or DEFAULT_EDGES  # "doubling" or a list (older runs)
    rows: list[dict] = []
    n_layers = 0
    for name, manifest in sets.items():
        utts = read_manifest(manifest)
        edges = resolve_edges(edges_spec, [u.duration for u in utts])  # the buckets evaluate.py uses
        for label, bucket_utts in first_per_bucket(utts, edges, a["per_bucket"]).items():
            for utt in bucket_utts:
                feats = utterance_features(utt, features, cmvn, a.get("max_seconds"))  # (1, T, F)
                _, attn = encode_with_attention(model, feats)
                n_layers = len(attn)
                duration = cropped_duration(utt, a.get("max_seconds"))
                for layer, w in enumerate(attn):
                    stats = attention_stats(w[0].float(), model.frame_shift_s, a["local_s"])  # w: (1, H, T, T)
                    for head in range(w.size(1)):
                        rows.append({"test_set": name, "bucket": label, "utt": utt.id,
                                     "duration": round(duration, 3), "frames": w.size(-1), "layer": layer,
                                     "head": head, **{k: float(stats[k][head]) for k in STAT_KEYS}})
                print(f"{name} {label}: {utt.id} ({duration:.1f} s, {attn[0].size(-1)} frames)", flush=True)
    if not rows:
        raise SystemExit(f"error: no utterances in the test sets {sorted(sets)}")
    out = Path(a.get("out") or Path(a["run"]) / "attention_stats")
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_KEYS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (f"{r[k]:.6g}" if isinstance(r[k], float) and math.isfinite(r[k]) else r[k])
                         for k in CSV_KEYS})
    atomic_write_text(out / "attention_stats.csv", buf.getvalue())
    title = f"{pe_label(cfg.pe)}/{cfg.loss.name}, {Path(a['run']).name}, {ckpt.name}"
    md = markdown(rows, title, n_layers, a["local_s"])
    atomic_write_text(out / "attention_stats.md", md)
    print(md)
    print(out / "attention_stats.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
