"""One long-mode measurement of the attention benchmark, in a process of its own.

    python -m asr_pe.bench.long_worker '<spec JSON>'     # prints one JSON line

``spec`` is `asr_pe.bench.runner.long_spec`. The process builds an ASR model, encodes one
random recording full-context or chunked, and reports its ``ru_maxrss``: a child per run so
that the peak is this run's alone. With ``spec["device"] == "cuda"`` the model and the input are
on the GPU and it also reports ``torch.cuda.max_memory_allocated`` (peak, and extra over the
model and input).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from asr_pe.bench.measure import current_rss, max_rss_bytes, trim_heap

__all__ = ["long_worker", "main"]

INPUT_STAGE = ("sinusoidal", "learned", "cape", "conv")


def long_worker(spec: dict) -> dict:
    """Build an ASR model, encode one long random input, report frames, seconds and memory."""
    torch.set_num_threads(spec["threads"])
    from asr_pe.inference.chunked import encode_chunked
    from asr_pe.inference.full_context import encode_full
    from asr_pe.models.asr import build_asr_model

    torch.manual_seed(0)
    pe = spec["pe"]
    n_feat = round(spec["minutes"] * 60 * 100)  # 10 ms feature frames
    opts = dict(spec["pe_options"])
    pe_cfg = {"input": {"name": pe, **opts}} if pe in INPUT_STAGE else pe
    if isinstance(pe_cfg, str) and opts:
        pe_cfg = {"attention": {"name": pe, **opts}}
    model = build_asr_model(
        vocab_size=32, in_features=80, frontend={"kind": "conv2d"},
        encoder={"kind": spec["encoder"], "d_model": spec["d_model"], "n_heads": spec["heads"],
                 "n_layers": spec["layers"], "ffn_dim": spec["ffn"], "conv_kernel": spec["conv_kernel"]},
        pe=pe_cfg,
    )
    device = torch.device(spec.get("device", "cpu"))
    cuda = device.type == "cuda"
    model = model.to(device).eval()
    feats = torch.randn(1, n_feat, 80, generator=torch.Generator().manual_seed(1)).to(device)
    lengths = torch.tensor([n_feat], device=device)
    trim_heap()
    base = current_rss() or 0
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        gpu_base = torch.cuda.memory_allocated(device)
    t0 = time.perf_counter()
    with torch.inference_mode():
        if spec["infer"] == "full":
            enc, enc_lengths = encode_full(model, feats, lengths, block_size=spec["block_size"])
        else:
            enc, enc_lengths = encode_chunked(model, feats, lengths, chunk_s=spec["chunk_s"],
                                              overlap_s=spec["overlap_s"])
        logp = model.ctc_log_probs(enc)
    if cuda:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - t0
    assert torch.isfinite(logp).all(), "non-finite output"
    row = {
        "frames": int(enc_lengths[0]), "seconds": round(seconds, 2),
        "peak_rss_mb": round(max_rss_bytes() / 2**20, 1),
        "peak_extra_mb": round((max_rss_bytes() - base) / 2**20, 1),
        "input_mb": round(feats.numel() * 4 / 2**20, 1),
    }
    if cuda:
        peak = torch.cuda.max_memory_allocated(device)
        row.update(peak_gpu_mb=round(peak / 2**20, 1), gpu_extra_mb=round((peak - gpu_base) / 2**20, 1))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asr_pe.bench.long_worker",
                                     description="One long-mode row of the attention benchmark (its child process).")
    parser.add_argument("spec", type=json.loads, help="the row's spec as JSON (asr_pe.bench.runner.long_spec)")
    print(json.dumps(long_worker(parser.parse_args(argv).spec)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
