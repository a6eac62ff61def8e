"""What the transducer head costs against CTC: training-step time and peak memory at several
encoder lengths, in one run (ratios to CTC at each length), and the memory of transducer
decoding over a long recording (frame by frame: no T × U tensor).

``run_heads_benchmark(HeadsConfig(...))`` (``scripts/bench_heads.py``) builds one encoder
(front end + encoder, as `build_asr_model`) with each head of ``heads``:

* ``ctc``: the CTC linear head and `ctc_loss`;
* ``transducer``: the stateless prediction network and joiner, `transducer_loss` with no lattice
  budget (the whole B × T × (U+1) lattice at once);
* ``transducer_budget``: the same with ``lattice_budget_mb`` set (runs of utterances under
  activation checkpointing);

and times forward + backward of the whole model on random features of T encoder frames
(4·T feature frames at the 40 ms front end) with U = ``tokens_per_frame`` · T labels per
utterance (0.6: ~15 characters a second at 25 frames a second), interleaved across heads
(`reps` rounds, medians), then measures each step's peak memory (`measure.PeakMemory`: the
allocator on a GPU, the sampled resident set on CPU). The lattice estimate `lattice_bytes` is
reported beside the measured peak. ``long_minutes``: transducer greedy decoding of random
encoder output of that many minutes (T = minutes · 1500 frames), peak memory and time.

Prints a markdown table and writes ``<out>/bench_heads_<device>.{csv,md}``.
"""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from asr_pe.io import atomic_write_text

from .measure import PeakMemory, fix_malloc_for_rss, timed

__all__ = ["HeadsConfig", "run_heads_benchmark", "HEADS"]

HEADS = ("ctc", "transducer", "transducer_budget")


@dataclass
class HeadsConfig:
    lengths: list[int] = field(default_factory=lambda: [250, 1000])
    heads: list[str] = field(default_factory=lambda: list(HEADS))
    batch: int = 4
    vocab: int = 256
    tokens_per_frame: float = 0.6
    d_model: int = 144
    layers: int = 4
    heads_attn: int = 4
    joiner_dim: int = 320
    embed_dim: int = 256
    budget_mb: float = 64.0
    reps: int = 3
    warmup: int = 1
    memory: bool = True
    long_minutes: list[float] = field(default_factory=lambda: [60.0])
    device: str = "cpu"
    threads: int | None = 1
    precision: str = "32"
    out: str = "bench_out"


def _model(cfg: HeadsConfig, head: str, device: torch.device):
    from asr_pe.models.asr import build_asr_model

    transducer = None
    if head != "ctc":
        transducer = {"embed_dim": cfg.embed_dim, "joiner_dim": cfg.joiner_dim, "dropout": 0.0,
                      "lattice_budget_mb": cfg.budget_mb if head == "transducer_budget" else None}
    torch.manual_seed(0)
    model = build_asr_model(vocab_size=cfg.vocab, in_features=80, frontend={"kind": "conv2d", "channels": cfg.d_model},
                            encoder={"kind": "conformer", "d_model": cfg.d_model, "n_heads": cfg.heads_attn,
                                     "n_layers": cfg.layers, "ffn_dim": 4 * cfg.d_model, "dropout": 0.0},
                            pe="none", ctc_head=head == "ctc", transducer=transducer)
    return model.to(device).train()


def _batch(cfg: HeadsConfig, T: int, device: torch.device):
    g = torch.Generator().manual_seed(T)
    frames = 4 * T + 3  # conv2d factor 4: (F - 3) // 4 + ... gives T encoder frames
    U = max(1, int(round(cfg.tokens_per_frame * T)))
    feats = torch.randn(cfg.batch, frames, 80, generator=g).to(device)
    lengths = torch.full((cfg.batch,), frames, dtype=torch.long, device=device)
    tokens = torch.randint(1, cfg.vocab - 1, (cfg.batch, U), generator=g).to(device)
    return feats, lengths, tokens, torch.full((cfg.batch,), U, dtype=torch.long, device=device)


def _step_fn(model, batch, head: str, precision: str, device: torch.device):
    from asr_pe.models.losses import ctc_loss, transducer_loss

    feats, lengths, tokens, token_lengths = batch

    def step():
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            enc, enc_lengths = model.encode(feats, lengths)
            if head == "ctc":
                loss, _ = ctc_loss(model.ctc_log_probs(enc), enc_lengths, tokens, token_lengths)
            else:
                loss, _ = transducer_loss(model.transducer, enc, enc_lengths, tokens, token_lengths)
        loss.backward()
        return enc.shape[1]

    return step


def train_rows(cfg: HeadsConfig, device: torch.device, log=print) -> list[dict]:
    from asr_pe.models.losses import lattice_bytes

    rows = []
    for T in cfg.lengths:
        batch = _batch(cfg, T, device)
        models = {h: _model(cfg, h, device) for h in cfg.heads}
        steps = {h: _step_fn(models[h], batch, h, cfg.precision, device) for h in cfg.heads}
        frames = steps[cfg.heads[0]]()
        for _ in range(cfg.warmup):
            for h in cfg.heads:
                steps[h]()
        times: dict[str, list[float]] = {h: [] for h in cfg.heads}
        for _ in range(cfg.reps):  # interleaved: a slow moment of a shared machine hits every head
            for h in cfg.heads:
                times[h].append(timed(steps[h], device)[0])
        U = int(batch[3][0])
        for h in cfg.heads:
            rows.append({"T": frames, "U": U, "batch": cfg.batch, "head": h, "step_s": statistics.median(times[h]),
                         "lattice_mb": (cfg.batch * lattice_bytes(frames, U, cfg.joiner_dim, cfg.vocab) / 2**20
                                        if h != "ctc" else 0.0),
                         "budget_mb": cfg.budget_mb if h == "transducer_budget" else None})
        log(f"T={frames}: " + ", ".join(f"{h} {statistics.median(times[h]):.3f} s" for h in cfg.heads))
    if cfg.memory:
        fix_malloc_for_rss()
        for row in rows:
            T = row["T"]
            model = _model(cfg, row["head"], device)
            step = _step_fn(model, _batch(cfg, T, device), row["head"], cfg.precision, device)
            step()
            with PeakMemory(device) as peak:
                step()
            row["peak_mb"] = peak.peak_mb
            del model, step
            log(f"T={T} {row['head']}: peak {peak.peak_mb:.0f} MiB")
    base = {r["T"]: r for r in rows if r["head"] == "ctc"}
    for r in rows:
        b = base.get(r["T"])
        r["time_x_ctc"] = r["step_s"] / b["step_s"] if b else None
        r["mem_x_ctc"] = (r["peak_mb"] / b["peak_mb"] if b and r.get("peak_mb") and b.get("peak_mb") else None)
    return rows


def long_rows(cfg: HeadsConfig, device: torch.device, log=print) -> list[dict]:
    """Greedy transducer decoding of random encoder output of ``minutes`` (40 ms frames)."""
    from asr_pe.decoding.transducer import transducer_greedy
    from asr_pe.models.transducer import build_transducer

    torch.manual_seed(0)
    head = build_transducer(cfg.vocab, cfg.d_model, embed_dim=cfg.embed_dim, joiner_dim=cfg.joiner_dim,
                            dropout=0.0).to(device).eval()
    rows = []
    for minutes in cfg.long_minutes:
        T = int(round(minutes * 60 / 0.04))
        enc = torch.randn(1, T, cfg.d_model, device=device)
        fix_malloc_for_rss()
        with PeakMemory(device) as peak:
            wall, _ = timed(lambda: transducer_greedy(head, enc, torch.tensor([T], device=device)), device)
        lattice = T * 0.6 * T * cfg.vocab * 4 / 2**20  # what one (T, U+1, V) fp32 logit tensor would take
        rows.append({"minutes": minutes, "T": T, "decode_s": wall, "peak_mb": peak.peak_mb,
                     "enc_mb": enc.numel() * 4 / 2**20, "lattice_would_be_mb": lattice})
        log(f"{minutes:g} min (T={T}): greedy {wall:.1f} s, peak {peak.peak_mb:.1f} MiB "
            f"(encoder output {enc.numel() * 4 / 2**20:.0f} MiB; a T x U x V lattice would be {lattice / 2**10:.0f} GiB)")
    return rows


def _f(v, fmt="{:.2f}"):
    return "" if v is None else fmt.format(v)


def markdown(train: list[dict], long: list[dict], cfg: HeadsConfig, device: torch.device) -> str:
    lines = [f"Transducer vs CTC, {device.type}, precision {cfg.precision}, threads {cfg.threads}: conformer "
             f"d={cfg.d_model} x {cfg.layers} layers, batch {cfg.batch}, V={cfg.vocab}, J={cfg.joiner_dim}, "
             f"U = {cfg.tokens_per_frame} T, lattice budget {cfg.budget_mb:g} MiB (transducer_budget)", "",
             "| T | U | head | step (s) | x CTC | peak (MiB) | x CTC | lattice estimate (MiB) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in train:
        lines.append(f"| {r['T']} | {r['U']} | {r['head']} | {r['step_s']:.3f} | {_f(r['time_x_ctc'])} | "
                     f"{_f(r.get('peak_mb'), '{:.0f}')} | {_f(r['mem_x_ctc'])} | {r['lattice_mb']:.0f} |")
    if long:
        lines += ["", "| recording (min) | T | greedy decode (s) | peak (MiB) | encoder output (MiB) |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r['minutes']:g} | {r['T']} | {r['decode_s']:.1f} | {r['peak_mb']:.1f} | {r['enc_mb']:.0f} |"
                  for r in long]
    return "\n".join(lines) + "\n"


def run_heads_benchmark(cfg: HeadsConfig, log=print) -> tuple[Path, Path]:
    unknown = [h for h in cfg.heads if h not in HEADS]
    if unknown:
        raise ValueError(f"unknown head(s) {unknown}; choose from {', '.join(HEADS)}")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = torch.device("cuda" if cfg.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if cfg.device == "auto" else cfg.device))
    train = train_rows(cfg, device, log)
    long = long_rows(cfg, device, log) if cfg.long_minutes else []
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    keys = list(train[0]) if train else []
    w = csv.DictWriter(buf, fieldnames=["section", *keys, *(k for k in (long[0] if long else {}) if k not in keys)])
    w.writeheader()
    for r in train:
        w.writerow({"section": "train", **r})
    for r in long:
        w.writerow({"section": "long", **r})
    md = markdown(train, long, cfg, device)
    csv_path, md_path = out / f"bench_heads_{device.type}.csv", out / f"bench_heads_{device.type}.md"
    atomic_write_text(csv_path, buf.getvalue())
    atomic_write_text(md_path, md + "\n" + "config: " + str(asdict(cfg)) + "\n")
    print(md)
    return csv_path, md_path
