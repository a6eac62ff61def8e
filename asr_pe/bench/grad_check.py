"""Step (d) of the GPU check: a bf16 training step's gradients stay finite at T % 128 == 64 with a
padding mask, for every PE, and which SDPA backend ran.

    python -m asr_pe.bench.grad_check --out DIR [--dry]      # writes DIR/grad_check.json

Why T % 128 == 64: cuDNN's SDPA backward returns NaN in grad_q when a mask is passed, the
sequence length is 64 more than a multiple of 128 and a query row's logsumexp is below about
-88.7 (pytorch/pytorch#196678; `asr_pe.models.attention_fast_paths.masked_sdpa_backends`).

* ``model`` rows: the benchmark's encoder (`asr_pe.bench.cases.build_model`) per PE, one
  forward + backward under bf16 autocast on a padded batch (lengths T ... 0.75 T), T = 1088:
  loss and every gradient finite, and the SDPA backends of the forward and backward.
* ``probe`` rows: the bug's own inputs (every logit about -120, a lower-triangular boolean mask,
  head size 64, bf16) through SDPA as torch chooses, with cuDNN forced, and through the project's
  ``sdpa``: the number of non-finite grad_q entries. Length 768 is the control (128 · 6).

The JSON is rewritten after every row, so a run stopped by its time limit keeps what it checked.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from asr_pe.io import atomic_write_text

from .cases import ALL_PES, build_model
from .config import BenchConfig
from .sdpa_spy import SDPASpy

__all__ = ["GRAD_T", "PROBE_LENGTHS", "check_model", "probe", "run_grad_check", "main"]

GRAD_T = 1088  # 8 · 128 + 64
PROBE_LENGTHS = (704, 1088, 768)  # two failing lengths of the issue, and a multiple of 128
DRY_T, DRY_PROBE_LENGTHS = 64, (64, 128)
RESULT = "grad_check.json"


def environment(device: torch.device) -> dict:
    """What decides the SDPA backends: torch, CUDA, cuDNN, the GPU and the enabled backends."""
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "device": str(device)}
    if device.type == "cuda":
        b = torch.backends.cuda
        env.update(gpu=torch.cuda.get_device_name(device), cudnn_sdp=b.cudnn_sdp_enabled(),
                   flash_sdp=b.flash_sdp_enabled(), mem_efficient_sdp=b.mem_efficient_sdp_enabled())
    return env


def _backends(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def check_model(pe: str, cfg: BenchConfig, T: int, device: torch.device) -> dict:
    """One bf16 training step of the PE's encoder at T (padded batch) -> a ``model`` row."""
    from .runner import _batch, train_step

    model = build_model(pe, cfg, T).to(device).train()
    x, lengths = _batch(cfg, T, device)
    with SDPASpy() as spy:
        loss = train_step(model, x, lengths, "bf16")
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    nonfinite = sum(int((~torch.isfinite(g)).sum()) for g in grads if g is not None)
    used = spy.summary()
    finite = bool(torch.isfinite(loss)) and nonfinite == 0
    return {"check": "model", "pe": pe, "T": T, "batch": cfg.batch,
            "lengths": f"{int(lengths.min())}-{int(lengths.max())}", "loss": round(float(loss.detach()), 6),
            "nonfinite_grads": nonfinite, "params_without_grad": sum(g is None for g in grads),
            "sdpa_calls": used["sdpa_calls"], "forward_backends": _backends(used["forward"]),
            "backward_backends": _backends(used["backward"]), "status": "finite" if finite else "NON-FINITE"}


def _probe_inputs(L: int, device: torch.device, d: int = 64):
    """pytorch/pytorch#196678's repro: every logit ≈ -120, so every row's logsumexp < -88.7."""
    g = torch.Generator().manual_seed(0)
    q = (torch.randn(1, 1, L, d, generator=g) * 0.1).to(device, torch.bfloat16)
    k = (torch.randn(1, 1, L, d, generator=g) * 0.1).to(device, torch.bfloat16)
    v = torch.randn(1, 1, L, d, generator=g).to(device, torch.bfloat16)
    q[..., 0], k[..., 0] = 1.0, -120 * math.sqrt(d)
    mask = torch.ones(L, L, dtype=torch.bool, device=device).tril()[None, None]  # (1, 1, L, L) True = attend
    d_out = torch.randn(1, 1, L, d, generator=g).to(device, torch.bfloat16)
    return q, k, v, mask, d_out


def probe(L: int, variant: str, device: torch.device) -> dict:
    """The bug's inputs through one SDPA ``variant``: ``torch`` (torch's choice), ``cudnn`` (forced),
    ``project`` (`asr_pe.models.attention_fast_paths.sdpa`) -> a ``probe`` row."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from asr_pe.models.attention_fast_paths import sdpa

    row = {"check": "probe", "variant": variant, "T": L}
    if variant == "cudnn" and device.type != "cuda":
        return {**row, "status": "n/a (no CUDA)"}
    q, k, v, mask, d_out = _probe_inputs(L, device)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    try:
        with SDPASpy() as spy:
            if variant == "project":
                out = sdpa(q, k, v, attn_mask=mask)
            elif variant == "cudnn":
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            else:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            out.backward(d_out)
    except RuntimeError as e:  # e.g. cuDNN refuses the shape: recorded, the check goes on
        return {**row, "status": f"not run: {str(e).splitlines()[0][:160]}"}
    used = spy.summary()
    bad = int((~torch.isfinite(q.grad)).sum())
    return {**row, "nonfinite_grad_q": bad, "nonfinite_grad_kv": int((~torch.isfinite(k.grad)).sum()
                                                                     + (~torch.isfinite(v.grad)).sum()),
            "forward_backends": _backends(used["forward"]), "backward_backends": _backends(used["backward"]),
            "status": "finite" if bad == 0 else "NON-FINITE"}


def run_grad_check(out: str | Path, *, dry: bool, device: torch.device, pes: list[str] | None = None) -> dict:
    """Every ``probe`` row, then a ``model`` row per PE; writes ``<out>/grad_check.json`` after each."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = BenchConfig(device=device.type)
    if dry:  # the benchmark's tiny sizes (2 layers, d 32, batch 2)
        cfg = dataclasses.replace(cfg, mode="train").smoke()
    cfg = dataclasses.replace(cfg, dropout=0.0)
    T, lengths = (DRY_T, DRY_PROBE_LENGTHS) if dry else (GRAD_T, PROBE_LENGTHS)
    result = {"environment": environment(device), "dry": dry, "rows": []}
    jobs = [(probe, (L, variant, device)) for L in lengths for variant in ("torch", "cudnn", "project")]
    jobs += [(check_model, (pe, cfg, T, device)) for pe in (pes or ALL_PES)]
    for fn, args in jobs:
        t0 = time.perf_counter()
        try:
            row = fn(*args)
        except Exception as e:  # noqa: BLE001 - one failing case is a row, the others still run
            row = {"check": fn.__name__, "case": str(args[0]), "status": f"failed: {type(e).__name__}: {e}"[:300]}
        row["seconds"] = round(time.perf_counter() - t0, 2)
        result["rows"].append(row)
        print(f"[grad_check] {json.dumps(row)}", flush=True)
        atomic_write_text(out / RESULT, json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m asr_pe.bench.grad_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for grad_check.json")
    p.add_argument("--dry", action="store_true", help="tiny model and lengths (the CPU run of the check)")
    p.add_argument("--device", default="auto", help="cpu | cuda | auto")
    p.add_argument("--pes", nargs="+", default=None, help="PE names (default: all)")
    args = p.parse_args(argv)
    dev = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    run_grad_check(args.out, dry=args.dry, device=torch.device(dev), pes=args.pes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
