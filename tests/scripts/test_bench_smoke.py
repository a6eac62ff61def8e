"""scripts/bench_attention.py runs end to end in smoke mode (tiny sizes, one repetition) and
writes a CSV and a markdown table with a row per PE and length. No timing is asserted."""

import csv
import dataclasses
import importlib.util
import math
from pathlib import Path

import pytest

from asr_pe.bench.runner import REFERENCE, BenchConfig

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_attention.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_attention", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_train_mode_smoke(bench, tmp_path, capsys):
    assert bench.main(["--smoke", "--threads", "1", "--out", str(tmp_path)]) == 0
    rows = read_csv(tmp_path / "bench_train_cpu.csv")
    names = bench.ALL_PES + [REFERENCE]
    assert {(r["pe"], int(r["T"])) for r in rows} == {(n, T) for n in names for T in (16, 40)}
    for r in rows:
        assert float(r["ms_per_step"]) > 0 and int(r["reps"]) == 1
        assert not math.isnan(float(r["peak_mem_mb"]))  # the memory pass ran
        if r["pe"] == "none":
            assert float(r["ratio_to_none"]) == 1.0
    md = (tmp_path / "bench_train_cpu.md").read_text()
    assert "| pe | target |" in md and "torchaudio_conformer" in md and "--smoke" in md
    assert "T=40 ms (ratio; CPU-time ratio)" in capsys.readouterr().out  # the table is printed too


def test_long_mode_smoke(bench, tmp_path):
    """Each run is a child process; 0.05 min = 3 s of audio, full-context and chunked."""
    argv = ["--smoke", "--mode", "long", "--pes", "relative", "--threads", "1", "--out", str(tmp_path),
            "--chunk-s", "1", "--overlap-s", "0.5", "--block-size", "16"]
    assert bench.main(argv) == 0
    rows = read_csv(tmp_path / "bench_long_cpu.csv")
    assert [(r["pe"], r["infer"]) for r in rows] == [("relative", "full"), ("relative", "chunked")]
    for r in rows:
        assert r["status"] == "ok", r
        assert int(r["frames"]) == 74  # 300 feature frames -> ((300 − 3)//2 + 1 − 3)//2 + 1
        assert float(r["peak_rss_mb"]) > 0
    assert "| minutes | mode | pe |" in (tmp_path / "bench_long_cpu.md").read_text()


def test_unknown_pe_is_a_clear_error(bench, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--pes", "nope"])
    assert "unknown PE" in capsys.readouterr().err


def test_flags_default_to_the_package_config(bench):
    """The script only parses: its defaults are asr_pe.bench's BenchConfig, field for field."""
    args = vars(bench.parse_args([]))
    assert (args.pop("smoke"), args.pop("argv")) == (False, [])
    expected = dataclasses.asdict(BenchConfig())
    expected.pop("argv")
    assert args == expected
