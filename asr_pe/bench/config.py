"""``BenchConfig``: every option of the attention benchmark, in a module of its own so that the
runner (``runner.py``) and the report writer (``report.py``) both import it without importing
each other."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .cases import ALL_PES

__all__ = ["BenchConfig"]


@dataclass
class BenchConfig:
    """Every option of ``scripts/bench_attention.py`` with its default (the script's flags)."""

    mode: str = "train"                       # train | long
    pes: list[str] = field(default_factory=lambda: list(ALL_PES))
    lengths: list[int] = field(default_factory=lambda: [100, 250, 500, 1000, 2000])  # train: T frames
    minutes: list[float] = field(default_factory=lambda: [1, 10, 60])                # long: recording lengths
    infer: list[str] = field(default_factory=lambda: ["full", "chunked"])            # long: inference modes
    chunk_s: float = 20.0
    overlap_s: float = 4.0
    timeout: float | None = None              # long: seconds per child process
    encoder: str = "conformer"
    layers: int = 6
    d_model: int = 144
    heads: int = 4
    ffn: int = 576
    conv_kernel: int = 15
    dropout: float = 0.1
    batch: int = 8
    block_size: int | None = None             # attention query block (train: none; long: auto)
    reps: int = 7
    warmup: int = 2
    mem_reps: int = 2
    memory: bool = True                       # the peak-memory pass (train)
    reference: bool = True                    # the torchaudio row (train)
    threads: int = 2
    device: str = "cpu"                       # cpu | cuda | auto
    precision: str = "32"                     # train: 32 | bf16 (autocast, as trainer=gpu's bf16-mixed)
    attention: str = "fused"                  # train: fused (the model's own paths) | flex | reference (written out)
    out: str | None = "bench_results"         # folder for the CSV and markdown files
    argv: list[str] = field(default_factory=list)  # the command line, recorded in the markdown

    def smoke(self) -> "BenchConfig":
        """Tiny sizes and one repetition (the test suite's run)."""
        tiny = dict(layers=2, d_model=32, heads=2, ffn=64, batch=2, reps=1, warmup=0, mem_reps=1)
        if self.mode == "train":
            tiny["lengths"] = [16, 40]
        else:
            tiny["minutes"] = [0.05]
        return dataclasses.replace(self, **tiny)
