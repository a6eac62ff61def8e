"""The attention benchmark's reference-path option and its handling of a step that does not fit the
device: that PE is a row with the status, every other PE is still measured (the GPU check's
T = 4000 steps of the written-out path)."""

import csv
import dataclasses
import math

import pytest
import torch

import asr_pe.bench.runner as runner
from asr_pe.bench.runner import OUT_OF_MEMORY, BenchConfig, BenchError, run_benchmark
from asr_pe.models.attention import MultiHeadAttention


@pytest.fixture
def tiny(tmp_path):
    torch.set_num_threads(1)
    return dataclasses.replace(BenchConfig(threads=1, out=str(tmp_path)).smoke(), reference=False)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_reference_attention_puts_every_attention_on_the_written_out_path(tiny):
    for pe in ("none", "rope", "relative"):
        fused = runner.build_model(pe, tiny, 16)
        ref = runner.build_model(pe, dataclasses.replace(tiny, attention="reference"), 16)
        attn = [m for m in ref.modules() if isinstance(m, MultiHeadAttention)]
        assert attn and all(m.use_reference for m in attn)
        assert not any(m.use_reference for m in fused.modules() if isinstance(m, MultiHeadAttention))
        x, lengths = runner._batch(tiny, 16, torch.device("cpu"))
        torch.testing.assert_close(fused.eval()(x, lengths)[0], ref.eval()(x, lengths)[0], rtol=1e-4, atol=1e-5)
    cfg = dataclasses.replace(tiny, pes=["none", "alibi"], lengths=[16], attention="reference")
    csv_path, md_path = run_benchmark(cfg)
    assert csv_path.name == "bench_train_cpu_reference.csv"
    assert [(r["pe"], r["status"]) for r in read_csv(csv_path)] == [("none", "ok"), ("alibi", "ok")]
    assert "every attention on the written-out reference path" in md_path.read_text()
    with pytest.raises(BenchError, match="attention 'flash'"):
        run_benchmark(dataclasses.replace(cfg, attention="flash"))


def test_a_pe_out_of_memory_at_one_length_is_a_row_and_the_others_are_measured(tiny, monkeypatch):
    real_build, real_step = runner.build_model, runner.train_step

    def build(name, cfg, max_frames):
        model = real_build(name, cfg, max_frames)
        model.bench_name = name
        return model

    def step(model, x, lengths, precision="32"):
        if model.bench_name == "alibi" and x.size(1) == 16:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real_step(model, x, lengths, precision)

    monkeypatch.setattr(runner, "build_model", build)
    monkeypatch.setattr(runner, "train_step", step)
    cfg = dataclasses.replace(tiny, pes=["none", "alibi", "rope"], lengths=[16, 24], warmup=1)
    csv_path, md_path = run_benchmark(cfg)
    rows = {(r["pe"], int(r["T"])): r for r in read_csv(csv_path)}
    assert set(rows) == {(pe, T) for pe in ("none", "alibi", "rope") for T in (16, 24)}
    bad = rows[("alibi", 16)]
    assert bad["status"] == OUT_OF_MEMORY and math.isnan(float(bad["ms_per_step"])) and int(bad["reps"]) == 0
    for key, r in rows.items():
        if key != ("alibi", 16):
            assert r["status"] == "ok" and float(r["ms_per_step"]) > 0 and not math.isnan(float(r["peak_mem_mb"]))
    assert float(rows[("none", 16)]["ratio_to_none"]) == 1.0
    assert "| alibi | ≤ 1.25 | out of memory |" in md_path.read_text()
