"""What one training run of an experiment costs, measured on the machine at hand (CPU or GPU):
parameters, checkpoint bytes, memory of a training step at the configured batch, FLOPs per step.

Used by ``scripts/plan_run.py`` for the recipes' "Plan the run" tables. Per PE:

* **parameters**: counted on the full model;
* **checkpoint**: the full model's ``state_dict`` plus its AdamW state after one optimiser step
  (``exp_avg``, ``exp_avg_sq``, as ``ASRModule.configure_optimizers`` sets it up), saved with
  ``torch.save`` and its bytes read from disk; Lightning adds a few KB of loop and callback state;
* **training-step memory**: a 36-layer model at the full batch does not fit a development
  machine, so the step is measured on models of the full width with few layers and one
  utterance of the longest training length (``data.train_max_duration``), in train mode
  (dropout on). Its activation memory is the bytes of the tensors autograd saves for the
  backward (`SavedTensors`: exact, unlike a peak of the resident set, which is reported beside
  it). Layers and utterances enter it linearly (identical layers; utterances independent), so
  two layer counts give the per-layer share; the per-layer share measured again at half the
  length splits it into a part growing with T and one growing with T^2 (the stored attention
  scores, which fused GPU kernels do not keep). The configured batch is then
  ``floor(max_batch_seconds / train_max_duration)`` utterances of the longest length: the
  duration-bucket sampler fills a batch with utterances of similar length, and the longest ones
  hold the most attention memory per second (T x T per utterance). The step's memory is that
  plus 16 bytes per parameter (fp32 weights and gradients, two AdamW moments);
* **FLOPs per step**: ``torch.utils.flop_counter.FlopCounterMode`` on the same small models,
  extrapolated the same way.

The peak of the step (``measure.PeakMemory``: the resident set on CPU, the allocator on a GPU)
is logged beside the saved bytes. A CPU figure is not a GPU's: attention there runs fused
kernels that store no T x T probabilities for most PEs, and bf16 autocast halves most stored
activations (a CPU run is fp32 by default: ``scripts/plan_run.py --precision``). The report says
which device and precision measured. No Lightning or Hydra here: the caller passes the composed config
sections as plain mappings.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from asr_pe.io import atomic_write_text
from asr_pe.models.asr import build_asr_model, model_kwargs
from asr_pe.models.losses import ctc_loss

from .measure import PeakMemory, fix_malloc_for_rss, trim_heap

__all__ = ["PlanConfig", "PlanRow", "measure_pe", "plan_rows", "markdown", "write_outputs", "CSV_FIELDS"]

MiB = 2**20
GB = 1e9
# The letters of LibriSpeech / TED-LIUM transcripts, apostrophe, space and the CTC blank: the CTC
# head's size only (768 x 29 weights), negligible beside the encoder.
CHAR_VOCAB = 29


@dataclass
class PlanConfig:
    """What to measure. ``sections``: the composed config per PE (``frontend``, ``encoder``,
    ``pe``, ``data``, ``loss``, ``optim``, ``trainer`` as plain mappings)."""

    experiment: str
    sections: Mapping[str, Mapping[str, Any]]           # pe -> composed config sections
    layers: tuple[int, int] = (1, 2)                    # the two layer counts measured
    checkpoint: bool = True                             # save and weigh the full model's checkpoint
    checkpoint_dir: str | None = None                   # default: the system's temporary folder
    device: str = "cpu"
    precision: str | None = None                        # None: the trainer's (trainer.precision)
    vocab_size: int = CHAR_VOCAB
    out: str | None = None                              # folder for run_plan_<experiment>.{csv,md}
    argv: list[str] = field(default_factory=list)


@dataclass
class PlanRow:
    pe: str
    parameters: int
    layers: int
    utterance_s: float
    batch_utterances: int
    checkpoint_bytes: int | None
    state_bytes: int                  # fp32 weights + gradients + two AdamW moments
    act_mib_per_layer_utt: float      # saved-tensor MiB per layer and utterance (measured slope)
    act_mib_rest_per_utt: float       # front end, CTC head, loss per utterance (intercept)
    quadratic_share: float            # share of act_mib_per_layer_utt growing with T^2 (from T and T/2)
    activation_bytes: int             # extrapolated to the full model and batch
    step_bytes: int                   # state + activations
    tflop_per_step: float             # forward + backward, extrapolated
    device: str
    precision: str
    measured: list[dict] = field(default_factory=list)  # the small-model measurements


def _model(sections: Mapping[str, Any], n_layers: int, vocab: int) -> torch.nn.Module:
    cfg = dict(sections)
    cfg["encoder"] = {**sections["encoder"], "n_layers": n_layers}
    return build_asr_model(**model_kwargs(cfg, vocab))


def _batch(sections: Mapping[str, Any], n_utts: int, seconds: float, vocab: int, device: torch.device) -> dict:
    """``n_utts`` utterances of ``seconds`` of 10 ms fbank frames, with transcripts of a
    letter rate (15 per second) that CTC can align at 30 ms frames."""
    feats = int(sections["data"]["features"]["num_mel_bins"])
    frames = int(round(seconds * 100))
    labels = int(seconds * 15)
    g = torch.Generator().manual_seed(0)
    return {
        "features": torch.randn(n_utts, frames, feats, generator=g).to(device),
        "feature_lengths": torch.full((n_utts,), frames, dtype=torch.long, device=device),
        "tokens": torch.randint(1, vocab, (n_utts, labels), generator=g).to(device),
        "token_lengths": torch.full((n_utts,), labels, dtype=torch.long, device=device),
    }


def _autocast(precision: str, device: torch.device):
    """The trainer's precision as Lightning applies it: bf16-mixed is autocast to bfloat16."""
    if str(precision).startswith("bf16"):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if str(precision).startswith("16"):
        return torch.autocast(device.type, dtype=torch.float16)
    return torch.autocast(device.type, enabled=False)


class SavedTensors:
    """Bytes of the tensors autograd keeps for the backward, counted once per storage and
    without the parameters: the activation memory of a step, exactly and on any device (a
    peak of the resident set adds the allocator's and other threads' noise to it)."""

    def __init__(self, model: torch.nn.Module):
        self._params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self._seen: dict[int, int] = {}

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in self._params:
            self._seen[storage.data_ptr()] = max(self._seen.get(storage.data_ptr(), 0), storage.nbytes())
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    @property
    def nbytes(self) -> int:
        return sum(self._seen.values())


def _step(model, batch: dict, precision: str, device: torch.device, saved: SavedTensors | None = None) -> None:
    with _autocast(precision, device), (saved.hooks() if saved is not None else contextlib.nullcontext()):
        enc, enc_lengths = model.encode(batch["features"], batch["feature_lengths"])
        loss, _ = ctc_loss(model.ctc_log_probs(enc), enc_lengths, batch["tokens"], batch["token_lengths"], blank=0)
    loss.backward()


def _measure_small(sections, n_layers: int, n_utts: int, seconds: float, precision: str,
                   vocab: int, device: torch.device, warm_up: bool = False) -> dict:
    """Saved-tensor bytes, peak memory and FLOPs of one training step of a small model of the
    full width, all from the same step (the counters keep no tensor alive)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = _model(sections, n_layers, vocab).to(device).train()
    batch = _batch(sections, n_utts, seconds, vocab, device)
    if warm_up:  # lazy buffers, kernels, allocator pools: once per PE, before its first measurement
        _step(model, batch, precision, device)
        model.zero_grad(set_to_none=True)
    trim_heap()
    counter, saved = FlopCounterMode(display=False), SavedTensors(model)
    with counter, PeakMemory(device) as pm:
        _step(model, batch, precision, device, saved)
    grad_mib = sum(p.numel() * p.element_size() for p in model.parameters()) / MiB
    out = {"layers": n_layers, "utterances": n_utts, "utterance_s": seconds,
           "saved_mib": round(saved.nbytes / MiB, 2), "peak_mib": round(pm.peak_mb, 1),
           "grad_mib": round(grad_mib, 1), "tflop": counter.get_total_flops() / 1e12}
    del model, batch
    trim_heap()
    return out


def _checkpoint_bytes(model: torch.nn.Module, optim: Mapping[str, Any], folder: str | None) -> int:
    """Bytes of the model's state_dict and its AdamW state after one step, as saved."""
    decay = [p for n, p in model.named_parameters() if not (p.ndim < 2 or "norm" in n or ".pe." in n)]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "norm" in n or ".pe." in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": float(optim.get("weight_decay", 0.0))},
                             {"params": no_decay, "weight_decay": 0.0}], lr=float(optim.get("lr", 1e-4)))
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()  # creates exp_avg and exp_avg_sq for every parameter
    model.zero_grad(set_to_none=True)
    fd, path = tempfile.mkstemp(suffix=".ckpt", dir=folder)
    os.close(fd)
    try:
        torch.save({"state_dict": model.state_dict(), "optimizer_states": [opt.state_dict()]}, path)
        return os.path.getsize(path)
    finally:
        os.unlink(path)
        del opt
        trim_heap()


def measure_pe(cfg: PlanConfig, pe: str, log: Callable[[str], None] = print) -> PlanRow:
    sections = cfg.sections[pe]
    device = torch.device(cfg.device)
    enc, data = sections["encoder"], sections["data"]
    n_layers = int(enc["n_layers"])
    seconds = float(data.get("train_max_duration") or 36.0)
    batch_utts = max(1, int(float(data["max_batch_seconds"]) // seconds))
    precision = cfg.precision or str(sections["trainer"].get("precision", "32-true"))

    full = _model(sections, n_layers, cfg.vocab_size)
    params = sum(p.numel() for p in full.parameters())
    log(f"{pe}: {params / 1e6:.1f} M parameters")
    ckpt = _checkpoint_bytes(full, sections["optim"], cfg.checkpoint_dir) if cfg.checkpoint else None
    if ckpt is not None:
        log(f"{pe}: checkpoint {ckpt / GB:.2f} GB")
    del full
    trim_heap()

    l1, l2 = cfg.layers
    runs = []
    plan = ((l1, seconds), (l2, seconds), (l1, seconds / 2), (l2, seconds / 2))
    for i, (n_l, s) in enumerate(plan):
        r = _measure_small(sections, n_l, 1, s, precision, cfg.vocab_size, device, warm_up=i == 0)
        log(f"{pe}: {n_l} layer(s), one utterance of {s:g} s: {r['saved_mib']:.0f} MiB saved for the backward "
            f"(peak {r['peak_mib']:.0f} MiB), {r['tflop']:.3f} TFLOP")
        runs.append(r)
    (a1, a2, h1, h2), (f1, f2) = (r["saved_mib"] for r in runs), (runs[0]["tflop"], runs[1]["tflop"])
    per_layer = (a2 - a1) / (l2 - l1)              # MiB per layer and utterance of the full length
    rest = a1 - per_layer * l1                     # front end, CTC head and loss per utterance
    # per layer, A(T) = a T + b T^2, so b T^2 = 2 (A(T) - 2 A(T/2)): the share growing with T^2 is
    # the attention scores, probabilities and dropout masks (fused attention kernels keep none).
    # A part that does not grow with T at all (bf16 autocast saves a bf16 copy of each weight for
    # the backward) makes this negative: measured on an H100, -53 %; such a share is 0
    per_layer_half = (h2 - h1) / (l2 - l1)
    quad_share = max(0.0, 2 * (per_layer - 2 * per_layer_half) / per_layer) if per_layer > 0 else float("nan")
    flop_layer = f2 - f1
    flop_rest = f1 - flop_layer * l1
    act = batch_utts * (rest + n_layers * per_layer) * MiB
    state = params * 16  # fp32 weights and gradients, two fp32 AdamW moments
    return PlanRow(
        pe=pe, parameters=params, layers=n_layers, utterance_s=seconds, batch_utterances=batch_utts,
        checkpoint_bytes=ckpt, state_bytes=state, act_mib_per_layer_utt=round(per_layer, 2),
        act_mib_rest_per_utt=round(rest, 2), quadratic_share=round(quad_share, 3),
        activation_bytes=int(act), step_bytes=int(act + state),
        tflop_per_step=float(f"{batch_utts * (flop_rest + n_layers * flop_layer):.4g}"),
        device=str(device), precision=precision, measured=runs,
    )


def plan_rows(cfg: PlanConfig, log: Callable[[str], None] = print) -> list[PlanRow]:
    if cfg.device == "cpu":
        fix_malloc_for_rss()  # freed tensors leave the resident set at once: RSS tracks live tensors
    return [measure_pe(cfg, pe, log) for pe in cfg.sections]


CSV_FIELDS = ["experiment", "pe", "device", "precision", "parameters", "layers", "utterance_s", "batch_utterances",
              "checkpoint_bytes", "state_bytes", "act_mib_per_layer_utt", "act_mib_rest_per_utt",
              "quadratic_share", "activation_bytes", "step_bytes", "tflop_per_step"]


def _csv(rows: list[PlanRow], experiment: str) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    w.writeheader()
    for r in rows:
        w.writerow({"experiment": experiment, **{k: getattr(r, k) for k in CSV_FIELDS[1:]}})
    return buf.getvalue()


def _gb(n: int | None) -> str:
    return "-" if n is None else f"{n / GB:.1f}"


def markdown(rows: list[PlanRow], cfg: PlanConfig) -> str:
    first = rows[0] if rows else None
    head = [f"- command: `python scripts/plan_run.py {' '.join(cfg.argv)}`".rstrip(),
            f"- device: {first.device if first else cfg.device}, precision {first.precision if first else '-'}, "
            f"torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s)"]
    if first:
        head.append(f"- training step: {first.batch_utterances} utterances of {first.utterance_s:g} s "
                    f"(the configured batch filled with the longest training utterances), "
                    f"{first.layers} layers; measured on {cfg.layers} layers, one utterance at the full and half "
                    "length, and extrapolated linearly in layers and utterances")
    table = ["| pe | parameters (M) | checkpoint (GB) | weights+grads+AdamW (GB) | activations per layer "
             "and utterance (MiB) | of which T^2 | activations (GB) | step memory (GB) | TFLOP per step |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r.pe} | {r.parameters / 1e6:.1f} | {_gb(r.checkpoint_bytes)} | {_gb(r.state_bytes)} | "
                     f"{r.act_mib_per_layer_utt:.0f} | {r.quadratic_share:.0%} | {_gb(r.activation_bytes)} | {_gb(r.step_bytes)} | "
                     f"{r.tflop_per_step:.1f} |")
    return "\n".join(head + [""] + table) + "\n"


def write_outputs(rows: list[PlanRow], cfg: PlanConfig) -> tuple[Path, Path] | None:
    if not cfg.out:
        return None
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / f"run_plan_{cfg.experiment}.csv", out / f"run_plan_{cfg.experiment}.md"
    atomic_write_text(csv_path, _csv(rows, cfg.experiment))
    atomic_write_text(md_path, markdown(rows, cfg))
    return csv_path, md_path

