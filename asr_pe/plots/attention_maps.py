"""Attention maps of a trained encoder for one utterance: one PNG per layer, one panel per head.

This is how reviewers check whether a PE collapses on long inputs: a healthy map keeps a
diagonal band (local attention) along the whole utterance; a collapsing one smears out or
locks onto absolute positions seen in training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from asr_pe.io import atomic_path


def plot_layer_heads(weights: np.ndarray, frame_shift_s: float, title: str, path: Path) -> Path:
    """weights (H, T, T) of one layer -> a PNG with one panel per head (axes in seconds)."""
    n_heads, T, _ = weights.shape
    cols = min(4, n_heads)
    rows = (n_heads + cols - 1) // cols
    fig = Figure(figsize=(3.2 * cols, 3.0 * rows + 0.4), dpi=110)
    FigureCanvasAgg(fig)
    extent = (0, T * frame_shift_s, T * frame_shift_s, 0)
    for h in range(n_heads):
        ax = fig.add_subplot(rows, cols, h + 1)
        # log scale: a sharp diagonal and a diffuse map differ by orders of magnitude
        ax.imshow(np.log10(weights[h] + 1e-6), cmap="viridis", vmin=-4, vmax=0, extent=extent,
                  interpolation="nearest", aspect="auto")
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xlabel("key time (s)", fontsize=8)
        if h % cols == 0:
            ax.set_ylabel("query time (s)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    return path


def plot_attention_maps(attn: Sequence, frame_shift_s: float, label: str, out_dir: Path) -> list[Path]:
    """attn: per layer (1, H, T, T) tensors (or arrays) -> ``layer<k>.png`` files."""
    paths = []
    for k, w in enumerate(attn):
        w = np.asarray(w.detach().cpu().float() if hasattr(w, "detach") else w)[0]  # (H, T, T)
        paths.append(plot_layer_heads(w, frame_shift_s, f"{label} — layer {k}", Path(out_dir) / f"layer{k}.png"))
    return paths
