"""asr_pe.bench (the attention benchmark behind scripts/bench_attention.py): the cases, the rows
and their ratios, the files, a tiny run of each mode. No timing is asserted: only what holds on
any machine (columns, the baseline's ratio, ratios taken from the same run, positive numbers)."""

import ast
import csv
import dataclasses
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from asr_pe.bench.runner import (
    ALL_PES, LONG_COLUMNS, REFERENCE, TARGET_LENGTHS, TARGETS, TRAIN_COLUMNS, BenchConfig, BenchError, batch_lengths,
    long_spec, median_interval, paired_ratios, run_benchmark, run_long, train_rows,
)
from asr_pe.bench.cases import target_status
from asr_pe.bench.long_worker import long_worker
from asr_pe.bench.report import markdown
from asr_pe.models.positional import available_pes

BENCH = Path(__file__).resolve().parents[2] / "asr_pe" / "bench"


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture()
def tiny(tmp_path):
    """Smoke sizes on one thread (no OpenMP barriers to wait at on a loaded machine); the
    process's thread count is restored afterwards."""
    threads = torch.get_num_threads()
    yield BenchConfig(threads=1, out=str(tmp_path), argv=["--smoke"]).smoke()
    torch.set_num_threads(threads)


def test_cases_cover_every_pe_of_the_package():
    pes = available_pes()
    assert sorted(ALL_PES) == sorted({"none", *pes["input"], *pes["attention"]})
    assert len(ALL_PES) == len(set(ALL_PES)) and ALL_PES[0] == "none"  # the baseline first
    assert REFERENCE not in ALL_PES
    assert set(TARGETS) == (set(ALL_PES) - {"none"}) | {REFERENCE}  # every PE has a target, the baseline none
    assert BenchConfig().pes == ALL_PES and BenchConfig().pes is not ALL_PES  # default: all, a copy


def test_smoke_config_is_tiny_and_keeps_the_rest():
    cfg = BenchConfig(pes=["none", "rope"], threads=1).smoke()
    assert (cfg.layers, cfg.d_model, cfg.heads, cfg.ffn, cfg.batch, cfg.reps, cfg.warmup, cfg.mem_reps) == \
        (2, 32, 2, 64, 2, 1, 0, 1)
    assert cfg.lengths == [16, 40] and cfg.pes == ["none", "rope"] and cfg.threads == 1
    assert BenchConfig(mode="long").smoke().minutes == [0.05]


def test_batch_lengths_pad_from_T_down_to_three_quarters():
    assert batch_lengths(100, 8).tolist()[0] == 100 and batch_lengths(100, 8).tolist()[-1] == 75
    assert batch_lengths(16, 2).tolist() == [16, 12]
    assert batch_lengths(1, 4).tolist() == [1, 1, 1, 1]


def test_train_rows_take_ratios_from_the_same_run():
    times = {"none": [0.004, 0.002, 0.003], "rope": [0.006, 0.0045, 0.009], REFERENCE: [0.0015, 0.0015, 0.0015]}
    cpu = {"none": [0.010, 0.010, 0.010], "rope": [0.012, 0.011, 0.013], REFERENCE: [0.005, 0.005, 0.005]}
    rows = train_rows(250, 8, times, cpu)
    assert [r["pe"] for r in rows] == ["none", "rope", REFERENCE]
    assert all(tuple(r) == TRAIN_COLUMNS for r in rows)
    by = {r["pe"]: r for r in rows}
    assert by["none"]["ratio_to_none"] == 1.0 and by["none"]["cpu_ratio_to_none"] == 1.0
    assert by["rope"]["ms_per_step"] == 6.0 and by["rope"]["min_ms"] == 4.5 and by["rope"]["reps"] == 3
    assert by["rope"]["ratio_to_none"] == 2.0 and by["rope"]["cpu_ratio_to_none"] == 1.2  # medians 6/3, 12/10
    assert by[REFERENCE]["ratio_to_none"] == 0.5 and by[REFERENCE]["cpu_ratio_to_none"] == 0.5
    assert all(math.isnan(r["peak_mem_mb"]) for r in rows)  # the memory pass fills it in
    no_base = train_rows(250, 8, {"rope": times["rope"]}, {"rope": cpu["rope"]})
    assert math.isnan(no_base[0]["ratio_to_none"]) and math.isnan(no_base[0]["cpu_ratio_to_none"])


def test_median_interval_is_the_order_statistics_of_at_least_95_percent_coverage():
    """[x_(l), x_(n+1-l)] covers the median with probability 1 - 2 P(Bin(n, 1/2) <= l - 1); the
    interval takes the largest l that keeps that >= 95 %."""
    def coverage(n, l):
        return 1 - 2 * sum(math.comb(n, i) for i in range(l)) / 2 ** n

    assert all(math.isnan(v) for v in median_interval([1.0, 2.0, 3.0, 4.0, 5.0]))  # [min, max] covers 93.75 %
    assert median_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (1.0, 6.0)  # 96.9 %; [x2, x5] only 78 %
    x = [float(v) for v in range(1, 16)]  # n = 15: [x4, x12] covers 96.5 %, [x5, x11] 88.2 %
    assert median_interval(x[::-1]) == (4.0, 12.0)
    for n in range(6, 41):
        lo, hi = median_interval([float(v) for v in range(1, n + 1)])
        l = int(lo)
        assert hi == n + 1 - l and coverage(n, l) >= 0.95 and (l == n // 2 or coverage(n, l + 1) < 0.95), n
    # and it covers what it says: draws from a skewed distribution whose median is known
    gen = torch.Generator().manual_seed(0)
    draws = torch.distributions.Exponential(1.0).sample((20000, 15))  # median ln 2
    hits = sum(lo <= math.log(2) <= hi for lo, hi in (median_interval(row.tolist()) for row in draws))
    assert abs(hits / 20000 - coverage(15, 4)) < 0.01


def test_paired_ratios_divide_each_rep_by_the_same_reps_baseline():
    assert paired_ratios([2.0, 6.0, 3.0], [1.0, 3.0, 2.0]) == [2.0, 2.0, 1.5]
    assert paired_ratios([2.0, 6.0], [1.0, 3.0, 2.0]) == []  # a PE that failed part-way: no pairs


def test_train_rows_pair_each_rep_with_the_baselines_and_bound_the_median():
    """The load drifts across reps (none from 1 to 6 s); rope costs 1.2x of none's step in every rep
    but one. The paired median and interval see that; the ratio of medians mixes reps."""
    base = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    rope = [1.2, 2.4, 3.6, 4.8, 6.0, 1.0]  # the last rep ran on a quiet moment
    rows = {r["pe"]: r for r in train_rows(1000, 8, {"none": base, "rope": rope}, {"none": base, "rope": rope})}
    assert rows["rope"]["paired_ratio"] == 1.2 and (rows["rope"]["paired_lo"], rows["rope"]["paired_hi"]) == (
        round(1 / 6, 3), 1.2)
    assert rows["rope"]["ratio_to_none"] == round(statistics.median(rope) / statistics.median(base), 3)
    assert (rows["none"]["paired_ratio"], rows["none"]["paired_lo"], rows["none"]["paired_hi"]) == (1.0, 1.0, 1.0)
    few = train_rows(1000, 8, {"none": base[:5], "rope": rope[:5]}, {"none": base[:5], "rope": rope[:5]})
    assert few[1]["paired_ratio"] == 1.2 and math.isnan(few[1]["paired_lo"]) and math.isnan(few[1]["paired_hi"])


def test_target_status_decides_by_the_interval_when_there_is_one():
    T, tgt = TARGET_LENGTHS[1], TARGETS["shaw"]
    row = {"pe": "shaw", "T": T, "ratio_to_none": tgt + 0.1}
    assert target_status({**row, "paired_lo": tgt - 0.1, "paired_hi": tgt}) == "met"  # the median ratio is not asked
    assert target_status({**row, "paired_lo": tgt - 0.1, "paired_hi": tgt + 0.01}) == "undecided"
    assert target_status({**row, "paired_lo": tgt + 0.01, "paired_hi": tgt + 0.2}) == "MISSED"
    assert target_status({**row, "paired_lo": float("nan"), "paired_hi": float("nan")}) == "MISSED"
    assert target_status({**row, "ratio_to_none": tgt, "paired_lo": "", "paired_hi": ""}) == "met"  # CSV cells


def test_markdown_shows_the_paired_interval_and_marks_an_undecided_target():
    base = [1.0, 1.1, 0.9, 1.0, 1.2, 1.0]
    shaw = [1.2, 1.4, 1.1, 1.25, 1.6, 1.2]  # paired 1.20 ... 1.33 (median 1.24): the target 1.25 inside
    rows = train_rows(TARGET_LENGTHS[1], 8, {"none": base, "shaw": shaw}, {"none": base, "shaw": shaw})
    for r in rows:
        r["peak_mem_mb"] = 12.0
    md = markdown(rows, BenchConfig(argv=["--lengths", "1000"]), torch.device("cpu"))
    assert "T=1000 ms (ratio; CPU-time ratio; paired ratio [95 % interval])" in md
    assert "| shaw | ≤ 1.25 | 1225.0 (1.23 ?; 1.23; 1.24 [1.20, 1.33]) | 12 |" in md, md
    assert "| none | - | 1000.0 (1.00; 1.00; 1.00 [1.00, 1.00]) | 12 |" in md


def test_target_status_only_at_the_target_lengths():
    T = TARGET_LENGTHS[0]
    assert target_status({"pe": "rope", "T": T, "ratio_to_none": TARGETS["rope"]}) == "met"
    assert target_status({"pe": "rope", "T": T, "ratio_to_none": TARGETS["rope"] + 0.01}) == "MISSED"
    assert target_status({"pe": "rope", "T": T + 1, "ratio_to_none": 9.0}) == ""
    assert target_status({"pe": "none", "T": T, "ratio_to_none": 1.0}) == ""
    assert target_status({"pe": REFERENCE, "T": T, "ratio_to_none": 9.0}) == ""


def test_markdown_marks_a_missed_target():
    rows = train_rows(TARGET_LENGTHS[0], 8, {"none": [0.01], "shaw": [0.02]}, {"none": [0.01], "shaw": [0.01]})
    for r in rows:
        r["peak_mem_mb"] = 12.0
    md = markdown(rows, BenchConfig(argv=["--lengths", "250"]), torch.device("cpu"))
    assert "- command: `python scripts/bench_attention.py --lengths 250`" in md
    assert "| shaw | ≤ 1.25 | 20.0 (2.00 ✗; 1.00) | 12 |" in md and "| none | - | 10.0 (1.00; 1.00) | 12 |" in md


def test_tiny_train_run_of_every_case_writes_csv_and_markdown(tiny, capsys):
    """Every PE and the reference row at one length, one repetition, with the memory pass."""
    cfg = dataclasses.replace(tiny, lengths=[8])
    csv_path, md_path = run_benchmark(cfg)
    assert csv_path.name == "bench_train_cpu.csv" and md_path.name == "bench_train_cpu.md"
    with open(csv_path, newline="") as f:
        assert tuple(next(csv.reader(f))) == TRAIN_COLUMNS
    rows = read_csv(csv_path)
    assert [r["pe"] for r in rows] == ALL_PES + [REFERENCE]
    base = next(r for r in rows if r["pe"] == "none")
    assert float(base["ratio_to_none"]) == 1.0 and float(base["cpu_ratio_to_none"]) == 1.0
    for r in rows:
        assert r["mode"] == "train" and int(r["T"]) == 8 and int(r["batch"]) == 2 and int(r["reps"]) == 1
        assert float(r["ms_per_step"]) > 0 and float(r["cpu_ms"]) >= 0 and float(r["min_ms"]) > 0
        # the ratio is this run's median over this run's baseline (up to the 0.01 ms rounding of the CSV)
        assert float(r["ratio_to_none"]) == pytest.approx(float(r["ms_per_step"]) / float(base["ms_per_step"]),
                                                          rel=0.02, abs=2e-3)
        assert not math.isnan(float(r["peak_mem_mb"]))  # the memory pass ran
    out = capsys.readouterr().out
    assert "[bench] train mode on" in out and "T=8 ms (ratio; CPU-time ratio)" in out  # the table is printed
    assert md_path.read_text() in out
    # the machine line names the vector instructions torch dispatched to: guests of one CPU name
    # differ there, and so do their ratios (docs/benchmarks.md, 2026-12-02)
    machine = next(line for line in md_path.read_text().splitlines() if line.startswith("- machine: "))
    assert f", {torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}, 1 threads" in machine, machine


def test_train_run_without_memory_pass_or_reference(tiny):
    cfg = dataclasses.replace(tiny, pes=["none", "alibi"], lengths=[8], memory=False, reference=False)
    rows = read_csv(run_benchmark(cfg)[0])
    assert [r["pe"] for r in rows] == ["none", "alibi"]
    assert all(math.isnan(float(r["peak_mem_mb"])) for r in rows)


def test_run_benchmark_refuses_what_it_cannot_measure(tiny):
    with pytest.raises(BenchError, match="unknown mode"):
        run_benchmark(dataclasses.replace(tiny, mode="infer"))
    if not torch.cuda.is_available():
        with pytest.raises(BenchError, match="no CUDA device"):
            run_benchmark(dataclasses.replace(tiny, device="cuda"))


def test_bf16_train_run_autocasts_the_forward_and_names_its_files(tiny, monkeypatch):
    # what trainer=gpu trains in (bf16-mixed): the forward under bfloat16 autocast, weights fp32
    import asr_pe.bench.runner as runner

    seen = []
    real = runner.train_step

    def spy(model, x, lengths, precision="32"):
        seen.append(precision)
        return real(model, x, lengths, precision)

    monkeypatch.setattr(runner, "train_step", spy)
    cfg = dataclasses.replace(tiny, pes=["none", "rope"], lengths=[8], reference=False, precision="bf16")
    csv_path, md_path = run_benchmark(cfg)
    assert csv_path.name == "bench_train_cpu_bf16.csv" and "Forward+backward (bf16 autocast)" in md_path.read_text()
    assert {r["precision"] for r in read_csv(csv_path)} == {"bf16"} and set(seen) == {"bf16"}
    model = runner.build_model("rope", cfg, 8)
    x, lengths = runner._batch(cfg, 8, torch.device("cpu"))
    linear_out = []
    linear = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    linear.register_forward_hook(lambda mod, inp, out: linear_out.append(out.dtype))
    assert runner.train_step(model, x, lengths, "bf16").dtype == torch.float32  # the loss is taken in fp32
    runner.train_step(model, x, lengths, "32")
    assert linear_out == [torch.bfloat16, torch.float32]  # the autocast reaches the encoder's matmuls
    assert all(p.grad.dtype == torch.float32 for p in model.parameters() if p.grad is not None)


def test_long_spec_gives_learned_the_wrap_policy():
    cfg = BenchConfig(mode="long", chunk_s=10.0, overlap_s=2.0, threads=1)
    spec = long_spec(cfg, "learned", 1, "chunked")
    assert spec["pe_options"] == {"policy": "wrap"} and spec["block_size"] == "auto"
    assert (spec["chunk_s"], spec["overlap_s"], spec["threads"], spec["minutes"]) == (10.0, 2.0, 1, 1)
    assert long_spec(dataclasses.replace(cfg, block_size=64), "rope", 1, "full")["pe_options"] == {}
    assert long_spec(dataclasses.replace(cfg, block_size=64), "rope", 1, "full")["block_size"] == 64
    json.dumps(spec)  # goes to the child as JSON


@pytest.mark.parametrize("infer", ["full", "chunked"])
def test_long_worker_encodes_a_recording(tiny, infer):
    spec = long_spec(dataclasses.replace(tiny, mode="long", minutes=[0.05], block_size=16, chunk_s=1.0, overlap_s=0.5),
                     "relative", 0.05, infer)
    result = long_worker(spec)
    assert set(result) == set(LONG_COLUMNS) - {"mode", "pe", "minutes", "infer", "block_size", "chunk_s",
                                               "overlap_s", "pe_options", "status",
                                               "peak_gpu_mb", "gpu_extra_mb"}  # (those: on a GPU only)
    assert result["frames"] == 74  # 300 feature frames -> ((300 − 3)//2 + 1 − 3)//2 + 1
    assert result["seconds"] >= 0 and result["peak_rss_mb"] > 0 and result["input_mb"] > 0


def test_long_run_records_a_timed_out_child_and_writes_the_csv(tiny):
    cfg = dataclasses.replace(tiny, mode="long", minutes=[0.05], pes=["none", "learned"], infer=["full"], timeout=0.01)
    rows = run_long(cfg)
    assert [(r["pe"], r["status"]) for r in rows] == [("none", "timeout after 0.01 s"), ("learned", "timeout after 0.01 s")]
    assert rows[1]["pe_options"] == '{"policy": "wrap"}' and rows[0]["block_size"] == "auto"
    assert all(r["minutes"] == 0.05 and r["infer"] == "full" and "seconds" not in r for r in rows)
    written = read_csv(f"{tiny.out}/bench_long_cpu.csv")  # rewritten after every run
    assert [r["pe"] for r in written] == ["none", "learned"]
    assert set(written[0]) <= set(LONG_COLUMNS)


def bench_imports() -> set[str]:
    """asr_pe/bench's modules and every module they import, at any depth (lazy imports in functions too)."""
    found = set()
    for path in sorted(BENCH.glob("*.py")):
        found.add("asr_pe.bench" if path.stem == "__init__" else f"asr_pe.bench.{path.stem}")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):  # relative ones are `from .sibling import x`
                found.add(f"asr_pe.bench.{node.module}" if node.level else node.module)
    return found


def test_bench_imports_neither_lightning_nor_hydra():
    """Importing the package and everything it imports, even lazily, loads no Lightning or Hydra."""
    modules = sorted(bench_imports())
    assert {"asr_pe.bench.long_worker", "asr_pe.models.encoder", "asr_pe.inference.chunked", "torchaudio"} <= set(modules)
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n"
            "    importlib.import_module(m)\n"
            "bad = sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'pytorch_lightning', 'hydra'})\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
