"""Diagnostic figures for positional encodings: what each PE tells attention about position.

One figure family per PE, computed from the module itself (its public methods and hooks),
so the plots show the implementation, not a re-derivation:

* input stage: ``sinusoidal`` dot-product similarity PE·PEᵀ; ``cape`` eval positions vs
  several train-time draws (+ similarity of the eval embedding); any other input PE
  (``learned``, ``conv``, …): cosine similarity of the position signal it adds;
* attention stage: ``rope`` long-term decay of |q·k| with distance (RoFormer §3.4.3) and the
  score map; ``t5`` bucket id vs offset and the bias per head; ``alibi`` bias per head;
  ``rem`` recurrence kernels P_h per head (via ``rem_matrix``); any other attention PE
  (``shaw``, ``relative``, …): the positional logit map with the same content at every
  position (q = k = u_h), so only position changes the score.

``plot_pe(spec, out_dir, …)`` builds the PE, writes the PNGs (atomically) and returns their
paths. matplotlib's Agg canvas is used directly: no pyplot state, no backend switch.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import torch

from asr_pe.errors import UserError
from asr_pe.io import atomic_path
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.base import ATTENTION_PES, INPUT_PES, AttentionPE, InputPE

__all__ = [
    "attention_score_map",
    "bias_map",
    "cape_draws",
    "input_similarity",
    "plot_pe",
    "rem_kernels",
    "rope_decay",
    "t5_bucket_curve",
]


class DiagnosticsError(UserError, RuntimeError):
    """A PE cannot be drawn (e.g. an expected public method is missing)."""


# --------------------------------------------------------------------------- computations
@torch.no_grad()
def input_similarity(pe: InputPE, T: int, d_model: int, *, cosine: bool = False, seed: int = 0) -> torch.Tensor:
    """(T, T) similarity of the position signal an input PE adds, in eval mode.

    The signal is pe(0) (exact for additive PEs); when that is zero — a content-dependent PE
    such as ``conv`` — it is pe(x) − x for a fixed random x."""
    was_training = pe.training
    pe.eval()
    try:
        lengths = torch.tensor([T])
        e = pe(torch.zeros(1, T, d_model), lengths)[0]  # (T, D)
        if e.abs().max() < 1e-12:
            g = torch.Generator().manual_seed(seed)
            x = torch.randn(1, T, d_model, generator=g)
            e = (pe(x, lengths) - x)[0]
    finally:
        pe.train(was_training)
    if cosine:
        e = torch.nn.functional.normalize(e, dim=-1)
    return e @ e.T  # (T, T)


@torch.no_grad()
def rope_decay(pe: AttentionPE, max_distance: int, *, n_samples: int = 256, seed: int = 0) -> dict[str, torch.Tensor]:
    """|q·k|/d between a query at 0 and a key at distance n = 0 … max_distance, q = k.

    ``constant``: q = k = 1 (RoFormer's bound); ``random``: mean over ``n_samples`` Gaussian
    q = k. Uses the module's own ``transform_qk``."""
    d = pe.d_head
    g = torch.Generator().manual_seed(seed)
    dist = torch.arange(max_distance + 1)
    out = {"distance": dist}
    for name, x in (("constant", torch.ones(1, d)), ("random", torch.randn(n_samples, d, generator=g))):
        N = x.size(0)
        k = x[None, :, None, :].expand(1, N, dist.numel(), d)  # (1, N, L, d): same vector at every position
        q = x[None, :, None, :]  # (1, N, 1, d) at position 0
        qr, kr = pe.transform_qk(q, k, torch.zeros(1, dtype=torch.long), dist)
        scores = (qr * kr).sum(-1)[0]  # (N, L)
        out[name] = scores.abs().mean(0) / d
    return out


@torch.no_grad()
def t5_bucket_curve(pe: AttentionPE, max_offset: int) -> dict[str, torch.Tensor]:
    """Bucket id and bias per head for offsets r = j − i in [−max_offset, max_offset]."""
    r = torch.arange(-max_offset, max_offset + 1)
    b = pe.buckets(torch.zeros(1, dtype=torch.long), r)[0]  # (2R+1,) query at 0, keys at r
    return {"offset": r, "bucket": b, "bias": pe.table.detach()[b].T.float()}  # bias (H, 2R+1)


@torch.no_grad()
def bias_map(pe: AttentionPE, T: int, d_head: int, n_heads: int) -> torch.Tensor | None:
    """``logits_bias`` for T positions with zero queries: (H, T, T), or None without a bias."""
    pos = torch.arange(T)
    b = pe.logits_bias(torch.zeros(1, n_heads, T, d_head), pos, pos)
    if b is None:
        return None
    return b.float().expand(1, n_heads, T, T)[0]


@torch.no_grad()
def attention_score_map(pe: AttentionPE, T: int, d_head: int, n_heads: int, *, seed: int = 0) -> torch.Tensor:
    """Positional logits (H, T, T): q = k = u_h (one random unit-scale vector per head, the
    same at every position) through ``transform_qk``, QKᵀ/√d, plus ``logits_bias``."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(1, n_heads, 1, d_head, generator=g).expand(1, n_heads, T, d_head)  # (1, H, T, d)
    pos = torch.arange(T)
    q, k = pe.transform_qk(u, u, pos, pos)
    s = q @ k.transpose(-1, -2) / math.sqrt(d_head)  # (1, H, T, T)
    b = pe.logits_bias(u, pos, pos)
    if b is not None:
        s = s + b
    return s[0].float()


@torch.no_grad()
def cape_draws(pe: InputPE, T: int, n_draws: int, *, seed: int = 0) -> dict[str, torch.Tensor]:
    """Eval positions (T,) and ``n_draws`` train-time draws (n_draws, T), seconds."""
    if not hasattr(pe, "positions"):
        raise DiagnosticsError(f"{type(pe).__name__} has no positions(lengths, T) method")
    lengths = torch.tensor([T])
    was_training = pe.training
    try:
        pe.eval()
        ev = pe.positions(lengths, T)[0]
        pe.train()
        g = torch.Generator().manual_seed(seed)
        draws = torch.stack([pe.positions(lengths, T, generator=g)[0] for _ in range(n_draws)])
    finally:
        pe.train(was_training)
    return {"eval": ev, "train": draws}


@torch.no_grad()
def rem_kernels(pe: AttentionPE, T: int) -> torch.Tensor:
    """REM matrices P_h (H, T, T) from the module's public ``rem_matrix(q_pos, k_pos)``."""
    fn = getattr(pe, "rem_matrix", None)
    if fn is None:
        raise DiagnosticsError(
            f"{type(pe).__name__} has no rem_matrix(q_pos, k_pos) method; cannot draw REM kernels"
        )
    pos = torch.arange(T)
    p = fn(pos, pos)
    return p.float().reshape(-1, T, T)  # (H, T, T)


# --------------------------------------------------------------------------- drawing
def _figure(n_panels: int, *, cols: int | None = None, size: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # no global backend switch
    from matplotlib.figure import Figure

    cols = cols or n_panels
    rows = math.ceil(n_panels / cols)
    fig = Figure(figsize=(size * cols + 0.6, size * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(n_panels)]
    return fig, axes


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    return path


def _heat(fig, ax, m: torch.Tensor, title: str, *, cmap: str = "viridis", label: str = "") -> None:
    lim = {}
    if cmap == "coolwarm":  # diverging: centre the colour scale on 0
        a = float(m.abs().max()) or 1.0
        lim = {"vmin": -a, "vmax": a}
    im = ax.imshow(m.numpy(), origin="upper", aspect="auto", cmap=cmap, interpolation="nearest", **lim)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("key j")
    ax.set_ylabel("query i")
    fig.colorbar(im, ax=ax, shrink=0.8, label=label)


def _head_maps(maps: torch.Tensor, title: str, path: Path, label: str, cmap: str = "viridis") -> Path:
    H = maps.size(0)
    fig, axes = _figure(H, cols=min(H, 4))
    for h, ax in enumerate(axes):
        _heat(fig, ax, maps[h], f"head {h}", cmap=cmap, label=label)
    fig.suptitle(title)
    return _save(fig, path)


def plot_similarity(sim: torch.Tensor, title: str, path: Path, label: str) -> Path:
    """Similarity map and the row of the middle frame."""
    fig, (a, b) = _figure(2)
    _heat(fig, a, sim, "map", label=label)
    mid = sim.size(0) // 2
    b.plot(sim[mid].numpy())
    b.axvline(mid, color="grey", lw=0.8, ls=":")
    b.set_xlabel("frame j")
    b.set_ylabel(f"similarity to frame {mid}")
    b.set_title(f"row i = {mid}", fontsize=9)
    fig.suptitle(title)
    return _save(fig, path)


def plot_rope_decay(curves: dict[str, torch.Tensor], title: str, path: Path) -> Path:
    fig, (ax,) = _figure(1, size=4.5)
    dist = curves["distance"].numpy()
    ax.plot(dist, curves["constant"].numpy(), label="q = k = 1")
    ax.plot(dist, curves["random"].numpy(), label="random q = k (mean)")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("distance |i − j| (frames)")
    ax.set_ylabel("|q·k| / d")
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def plot_t5(curve: dict[str, torch.Tensor], title: str, path: Path) -> Path:
    fig, (a, b) = _figure(2, size=4.2)
    r = curve["offset"].numpy()
    a.step(r, curve["bucket"].numpy(), where="mid")
    a.set_xlabel("offset j − i")
    a.set_ylabel("bucket id")
    a.set_title("bucket(j − i)", fontsize=9)
    for h, row in enumerate(curve["bias"]):
        b.plot(r, row.numpy(), label=f"head {h}", lw=1)
    b.set_xlabel("offset j − i")
    b.set_ylabel("bias E[bucket, h]")
    b.set_title("bias per head (current table)", fontsize=9)
    b.legend(fontsize=7, ncol=2)
    fig.suptitle(title)
    return _save(fig, path)


def plot_bias_per_head(bias: torch.Tensor, title: str, path: Path) -> Path:
    """Bias (H, T, T): the row of the middle query for every head, and head maps."""
    H, T, _ = bias.shape
    fig, axes = _figure(1 + min(H, 3))
    mid = T // 2
    offs = torch.arange(T) - mid
    for h in range(H):
        axes[0].plot(offs.numpy(), bias[h, mid].numpy(), label=f"head {h}", lw=1)
    axes[0].set_xlabel("offset j − i")
    axes[0].set_ylabel("logit bias")
    axes[0].set_title(f"query i = {mid}", fontsize=9)
    axes[0].legend(fontsize=7, ncol=2)
    for h, ax in enumerate(axes[1:]):
        _heat(fig, ax, bias[h], f"head {h}", cmap="magma", label="bias")
    fig.suptitle(title)
    return _save(fig, path)


def plot_cape(draws: dict[str, torch.Tensor], sim: torch.Tensor, title: str, path: Path) -> Path:
    fig, (a, b, c) = _figure(3, size=4.0)
    t = torch.arange(draws["eval"].numel()).numpy()
    for i, p in enumerate(draws["train"]):
        a.plot(t, p.numpy(), lw=0.8, alpha=0.7, label="train draws" if i == 0 else None)
    a.plot(t, draws["eval"].numpy(), color="black", lw=2, label="eval (centred)")
    a.set_xlabel("frame")
    a.set_ylabel("position (s)")
    a.set_title("positions", fontsize=9)
    a.legend(fontsize=7)
    # jitter relative to each draw's own straight line: the local shift alone
    for p in draws["train"]:
        slope, icpt = _line_fit(p)
        b.plot(t, (p - (slope * torch.arange(p.numel()) + icpt)).numpy(), lw=0.6, alpha=0.7)
    b.set_xlabel("frame")
    b.set_ylabel("deviation from linear fit (s)")
    b.set_title("local shift", fontsize=9)
    _heat(fig, c, sim, "eval embedding PE·PEᵀ", label="dot product")
    fig.suptitle(title)
    return _save(fig, path)


def _line_fit(p: torch.Tensor) -> tuple[float, float]:
    t = torch.arange(p.numel(), dtype=torch.float64)
    pd = p.double()
    tm, pm = t.mean(), pd.mean()
    var = ((t - tm) ** 2).sum()
    slope = float(((t - tm) * (pd - pm)).sum() / var) if var > 0 else 0.0
    return slope, float(pm - slope * tm)


def plot_rem(p: torch.Tensor, gates: Sequence[float] | None, kinds: Sequence[str] | None, title: str,
             path: Path) -> Path:
    H, T, _ = p.shape
    fig, axes = _figure(H + 1, cols=min(H + 1, 4))
    mid = T // 2
    for h in range(H):
        name = kinds[h] if kinds is not None and h < len(kinds) else ""
        axes[0].plot((torch.arange(T) - mid).numpy(), p[h, mid].numpy(), lw=1, label=f"head {h} {name}")
        gate = f", σ(μ)={gates[h]:.2f}" if gates is not None else ""
        _heat(fig, axes[h + 1], p[h], f"P, head {h} {name}{gate}", cmap="coolwarm", label="P")
    axes[0].set_xlabel("offset j − i")
    axes[0].set_ylabel(f"P[{mid}, j]")
    axes[0].set_title("kernel at the middle query", fontsize=9)
    axes[0].legend(fontsize=6)
    fig.suptitle(title)
    return _save(fig, path)


# --------------------------------------------------------------------------- entry point
def _registered_name(module: Any, registry: dict) -> str | None:
    for name, cls in registry.items():
        if type(module) is cls:
            return name
    return None


def plot_pe(
    spec: Any,
    out_dir: str | os.PathLike,
    *,
    T: int = 200,
    d_model: int = 144,
    n_heads: int = 4,
    frame_shift_s: float = 0.04,
    seed: int = 0,
    n_draws: int = 5,
    **options: Any,
) -> list[Path]:
    """Build the PE ``spec`` (name, ``"input+attention"`` or mapping; see
    ``build_positional``) with fresh (initial) parameters and write its diagnostic PNGs
    into ``out_dir``. Returns the paths written."""
    if T < 2:
        raise ValueError(f"T must be >= 2 frames, got {T}")
    torch.manual_seed(seed)  # initial parameters (T5 table, REM decays) are reproducible
    pos = build_positional(spec, d_model=d_model, n_heads=n_heads, n_layers=1,
                           frame_shift_s=frame_shift_s, **options)
    out = Path(out_dir)
    label = pos.label
    d_head = d_model // n_heads
    paths: list[Path] = []
    if pos.input is not None:
        paths += _plot_input(pos.input, label, out, T, d_model, n_draws, seed)
    layer = pos.layer(0)
    if layer is not None:
        paths += _plot_attention(layer, label, out, T, d_head, n_heads, seed)
    if not paths:  # 'none': still draw the (absent) positional signal, explicitly flat
        sim = torch.zeros(T, T)
        paths.append(plot_similarity(sim, f"{label}: no positional signal", out / f"{label}_similarity.png",
                                     "similarity"))
    return paths


def _plot_input(pe: InputPE, label: str, out: Path, T: int, d_model: int, n_draws: int, seed: int) -> list[Path]:
    name = _registered_name(pe, INPUT_PES)
    if name == "sinusoidal":
        sim = input_similarity(pe, T, d_model)
        return [plot_similarity(sim, f"{label}: PE·PEᵀ (T={T}, D={d_model})", out / f"{name}_similarity.png",
                                "dot product")]
    if name == "cape":
        draws = cape_draws(pe, T, n_draws, seed=seed)
        sim = input_similarity(pe, T, d_model)
        return [plot_cape(draws, sim, f"{label}: eval vs {n_draws} train-time draws (T={T})",
                          out / "cape_jitter.png")]
    tag = name or type(pe).__name__.lower()
    sim = input_similarity(pe, T, d_model, cosine=True, seed=seed)
    return [plot_similarity(sim, f"{label}: cosine similarity of the added position signal (T={T})",
                            out / f"{tag}_similarity.png", "cosine")]


def _plot_attention(layer: AttentionPE, label: str, out: Path, T: int, d_head: int, n_heads: int,
                    seed: int) -> list[Path]:
    name = _registered_name(layer, ATTENTION_PES)
    paths = []
    if name == "rope":
        curves = rope_decay(layer, max(T, 2), seed=seed)
        paths.append(plot_rope_decay(curves, f"{label}: long-term decay (d={d_head})", out / "rope_decay.png"))
    elif name == "t5":
        curve = t5_bucket_curve(layer, max(T, 2))
        paths.append(plot_t5(curve, f"{label}: buckets and bias (causal={layer.causal})", out / "t5_buckets.png"))
    elif name == "alibi":
        bias = bias_map(layer, T, d_head, n_heads)
        return paths + [plot_bias_per_head(bias, f"{label}: −m_h·|i − j| per head", out / "alibi_bias.png")]
    elif name == "rem":
        p = rem_kernels(layer, T)
        gates = [float(g) for g in layer.gate_value().detach()] if hasattr(layer, "gate_value") else None
        alloc = getattr(layer, "allocation", None)
        kinds = [t if dil == 1 else f"{t}:{dil}" for t, dil in alloc] if alloc is not None else None
        paths.append(plot_rem(p, gates, kinds, f"{label}: recurrence kernels P_h (T={T})", out / "rem_kernels.png"))
        return paths
    tag = name or type(layer).__name__.lower()
    maps = attention_score_map(layer, T, d_head, n_heads, seed=seed)
    paths.append(_head_maps(maps, f"{label}: positional logits, same content at every frame (T={T})",
                            out / f"{tag}_scores.png", "logit"))
    return paths
