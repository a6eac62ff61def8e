"""The heads benchmark: one run gives every head at every length with ratios to CTC from the
same run, the lattice estimate, and the long-recording decode row; CSV and markdown written."""

from __future__ import annotations

import csv

import pytest

from asr_pe.bench.heads import HeadsConfig, run_heads_benchmark
from asr_pe.models.losses import lattice_bytes


def test_heads_benchmark_rows_and_ratios(tmp_path):
    cfg = HeadsConfig(lengths=[12, 24], batch=2, vocab=11, d_model=16, layers=1, heads_attn=2, joiner_dim=8,
                      embed_dim=8, budget_mb=0.01, reps=1, warmup=0, long_minutes=[0.05], out=str(tmp_path))
    csv_path, md_path = run_heads_benchmark(cfg, log=lambda *_: None)
    rows = list(csv.DictReader(open(csv_path)))
    train = [r for r in rows if r["section"] == "train"]
    assert [(int(r["T"]), r["head"]) for r in train] == [(12, "ctc"), (12, "transducer"), (12, "transducer_budget"),
                                                         (24, "ctc"), (24, "transducer"), (24, "transducer_budget")]
    for r in train:
        step_ratio = float(r["step_s"]) / float(next(b for b in train if b["T"] == r["T"] and b["head"] == "ctc")["step_s"])
        assert float(r["time_x_ctc"]) == pytest.approx(step_ratio)
        expect = 0 if r["head"] == "ctc" else 2 * lattice_bytes(int(r["T"]), int(r["U"]), 8, 11) / 2**20
        assert float(r["lattice_mb"]) == pytest.approx(expect)
        assert int(r["U"]) == round(0.6 * int(r["T"]))
    (long,) = [r for r in rows if r["section"] == "long"]
    assert int(long["T"]) == 75 and float(long["decode_s"]) > 0
    text = md_path.read_text()
    assert "| 24 | 14 | transducer_budget |" in text and "| 0.05 | 75 |" in text


def test_unknown_head_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="unknown head"):
        run_heads_benchmark(HeadsConfig(heads=["rnnt"], out=str(tmp_path)), log=lambda *_: None)
