"""Recurrence encoding matrices — Self-Attention with Recurrence, RSA (Huang, Xu, Lin, Tang &
Yang, ICLR 2023, "Encoding Recurrence into Transformers").

Per head h:   O_h = [(1 − σ(μ))·softmax(S_h) + σ(μ)·P_h]·V_h,

P_h a recurrence encoding matrix (REM) that depends on the lag n = |i − j| only, zero on the
diagonal (n = 0):

* ``regular``:     P[i, j] = λ^n,               λ = tanh(η)   (λ < 0 gives alternating signs)
* ``cyclic_cos``:  P[i, j] = γ^n·cos(n·θ),      γ = sigmoid(ν)
* ``cyclic_sin``:  P[i, j] = γ^n·sin(n·θ)
* dilated (``<type>:<dil>``, e.g. ``regular:2``): lag n/dil where dil divides n, else 0.

Bidirectional (encoder) form: P is symmetric, P_mask + P_maskᵀ, entries for every j ≠ i.
Causal form (``causal=True``, decoders): lower-triangular, only keys j < i.

Head allocation (``heads``): a list of per-head types, a mapping of counts (``{regular: 2,
cyclic_cos: 1}``, heads filled in that order), or ``auto`` (default): every head gets a REM,
⌈H/2⌉ ``regular``, then the rest split between ``cyclic_cos`` (rounded up) and ``cyclic_sin``
(H = 4 → regular, regular, cyclic_cos, cyclic_sin). Heads left over by a list or mapping, and
heads typed ``plain``, are ordinary attention: their gate is fixed to 0 and P_h = 0.

Gate μ: one learned scalar per layer (``gate: layer``, default) or one per head (``head``).
Init as public reproductions: η ~ ±U[1, 2] (random sign), ν ~ U[1, 2], θ = π/4 (learned),
μ ~ U[−3, 3]; every draw uses torch's global RNG, so ``torch.manual_seed`` fixes them.

Normalisation (``normalize``): ``none`` (default, as the reproductions: rows of P may sum to
≫ 1 for λ near 1) or ``row``: each row is divided by its sum of |P| over valid keys (rows with
no nonzero entry stay 0), which bounds the REM term by max|V|.

Padding: P's columns at padded keys are zero (so padded frames never leak into valid ones).
P is generated from the positions of each query block (``rem_matrix``), never cached as a
T×T table, so there is no length cap.

Fused path (``mix_output``): (1 − σ)·SDPA(Q, K, V) + σ·(P @ V), with V zeroed at padded keys
instead of masking P per utterance, so P stays (H, Tq, Tk) and never gets a batch axis.
``mix_weights`` returns the mixed weights (1 − σ)·softmax + σ·P for diagnostics.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from .base import AttentionPE, register_attention_pe
from .relative import is_range

TYPES = ("regular", "cyclic_cos", "cyclic_sin", "plain")
_KIND = {"regular": 0, "cyclic_cos": 1, "cyclic_sin": 2, "plain": 3}
NORMALIZE = ("none", "row")
GATES = ("layer", "head")


def parse_head_spec(spec: str) -> tuple[str, int]:
    """``"regular"`` -> ("regular", 1); ``"cyclic_sin:3"`` -> ("cyclic_sin", 3)."""
    name, _, dil = str(spec).partition(":")
    name = name.strip()
    if name not in TYPES:
        raise ValueError(f"rem PE: unknown head type {spec!r}; types: {TYPES}, optionally ':<dilation>'")
    try:
        dilation = int(dil) if dil else 1
    except ValueError:
        raise ValueError(f"rem PE: dilation in {spec!r} must be an integer") from None
    if dilation < 1:
        raise ValueError(f"rem PE: dilation in {spec!r} must be >= 1")
    return name, dilation


def allocate_heads(heads: Any, n_heads: int) -> list[tuple[str, int]]:
    """Per-head (type, dilation) from the ``heads`` option (see module docstring)."""
    if heads is None or heads == "auto":
        n_reg = math.ceil(n_heads / 2)
        n_cos = math.ceil((n_heads - n_reg) / 2)
        specs = ["regular"] * n_reg + ["cyclic_cos"] * n_cos + ["cyclic_sin"] * (n_heads - n_reg - n_cos)
    elif isinstance(heads, Mapping):
        specs = []
        for name, count in heads.items():
            if int(count) < 0:
                raise ValueError(f"rem PE: head count for {name!r} must be >= 0, got {count!r}")
            specs += [str(name)] * int(count)
    elif isinstance(heads, Sequence) and not isinstance(heads, str):
        specs = [str(h) for h in heads]
    else:
        raise ValueError(
            f"rem PE: heads must be 'auto', a list of types or a mapping of counts, got {heads!r}"
        )
    if len(specs) > n_heads:
        raise ValueError(f"rem PE: {len(specs)} head types given ({specs}) but the layer has {n_heads} heads")
    alloc = [parse_head_spec(s) for s in specs] + [("plain", 1)] * (n_heads - len(specs))
    if all(t == "plain" for t, _ in alloc):
        raise ValueError(f"rem PE: no REM head in allocation {heads!r}; use pe=none for plain attention")
    return alloc


def _pair(x: Any, name: str) -> tuple[float, float]:
    lo, hi = (float(v) for v in x)
    if lo > hi:
        raise ValueError(f"rem PE: {name} must be [low, high] with low <= high, got {x!r}")
    return lo, hi


@register_attention_pe("rem")
class REMPE(AttentionPE):
    family = "after softmax"

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        causal: bool = False,
        heads: Any = "auto",
        gate: str = "layer",
        normalize: str = "none",
        eta_init: Sequence[float] = (1.0, 2.0),
        nu_init: Sequence[float] = (1.0, 2.0),
        theta_init: float = math.pi / 4,
        mu_init: Sequence[float] = (-3.0, 3.0),
    ):
        super().__init__()
        if gate not in GATES:
            raise ValueError(f"rem PE: gate must be one of {GATES}, got {gate!r}")
        if normalize not in NORMALIZE:
            raise ValueError(f"rem PE: normalize must be one of {NORMALIZE}, got {normalize!r}")
        self.n_heads, self.causal, self.gate, self.normalize = n_heads, bool(causal), gate, normalize
        self.allocation = allocate_heads(heads, n_heads)
        kinds = [_KIND[t] for t, _ in self.allocation]
        self.register_buffer("kind", torch.tensor(kinds), persistent=False)  # (H,)
        self.register_buffer(
            "dilation", torch.tensor([d for _, d in self.allocation]), persistent=False
        )  # (H,)
        self.register_buffer("is_rem", torch.tensor([k != _KIND["plain"] for k in kinds]), persistent=False)
        reg = [h for h, k in enumerate(kinds) if k == 0]
        cyc = [h for h, k in enumerate(kinds) if k in (1, 2)]
        # Parameter n of eta belongs to head reg_heads[n]; of nu and theta, to head cyc_heads[n].
        self.register_buffer("reg_heads", torch.tensor(reg, dtype=torch.long), persistent=False)
        self.register_buffer("cyc_heads", torch.tensor(cyc, dtype=torch.long), persistent=False)
        e_lo, e_hi = _pair(eta_init, "eta_init")
        n_lo, n_hi = _pair(nu_init, "nu_init")
        m_lo, m_hi = _pair(mu_init, "mu_init")
        if reg:
            sign = torch.randint(0, 2, (len(reg),)).float() * 2 - 1
            self.eta = nn.Parameter(sign * torch.empty(len(reg)).uniform_(e_lo, e_hi))
        else:
            self.register_parameter("eta", None)
        if cyc:
            self.nu = nn.Parameter(torch.empty(len(cyc)).uniform_(n_lo, n_hi))
            self.theta = nn.Parameter(torch.full((len(cyc),), float(theta_init)))
        else:
            self.register_parameter("nu", None)
            self.register_parameter("theta", None)
        self.mu = nn.Parameter(torch.empty(n_heads if gate == "head" else 1).uniform_(m_lo, m_hi))
        self.fused_ok = True  # softmax part goes through SDPA; the REM term is added after

    # --- REM ---------------------------------------------------------------------------------
    def _per_head(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Decay base (λ or γ) and angle θ per head: (H,), (H,); 0 for heads that lack them."""
        H = self.n_heads
        ref = self.mu
        base = ref.new_zeros(H)
        theta = ref.new_zeros(H)
        if self.eta is not None:
            base = base.index_put((self.reg_heads,), torch.tanh(self.eta))
        if self.nu is not None:
            base = base.index_put((self.cyc_heads,), torch.sigmoid(self.nu))
            theta = theta.index_put((self.cyc_heads,), self.theta)
        return base, theta

    def rem_matrix(
        self,
        q_pos: torch.Tensor,
        k_pos: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """P for query rows q_pos and keys k_pos: (H, Tq, Tk), or (B, H, Tq, Tk) when a key
        padding mask (B, Tk) is given (columns at padded keys zeroed, then normalised)."""
        p = self._raw_rem(q_pos, k_pos)  # (H, Tq, Tk)
        if key_padding_mask is not None:
            p = p.unsqueeze(0).masked_fill(key_padding_mask[:, None, None, :], 0.0)  # (B, H, Tq, Tk)
        if self.normalize == "row":
            s = p.abs().sum(-1, keepdim=True)
            p = torch.where(s > 0, p / s.clamp_min(torch.finfo(p.dtype).tiny), torch.zeros_like(p))
        return p

    def rem_values(self, offsets: torch.Tensor) -> torch.Tensor:
        """P entries for signed offsets i − j of any shape: (...) -> (H, ...) in float32."""
        lag = offsets if self.causal else offsets.abs()  # causal: only i > j gets a nonzero entry
        per_head = (self.n_heads,) + (1,) * offsets.dim()  # (H, 1, ...) broadcasts against lag
        dil = self.dilation.view(per_head)
        valid = (lag > 0) & (lag % dil == 0) & self.is_rem.view(per_head)  # off-diagonal, on the grid
        if self.window is not None:  # an inference window (MultiHeadAttention.window) hides P too
            valid = valid & (offsets.abs() <= self.window)
        # Lag 1 where invalid keeps pow and its gradient finite; those entries are zeroed below.
        n = torch.where(valid, lag // dil, torch.ones_like(lag)).float()  # (H, ...)
        base, theta = self._per_head()
        kind = self.kind.view(per_head)
        decay = torch.pow(base.view(per_head), n)  # λ^n or γ^n
        angle = n * theta.view(per_head)
        osc = torch.where(
            kind == 1, torch.cos(angle), torch.where(kind == 2, torch.sin(angle), torch.ones_like(angle))
        )  # cyclic_cos, cyclic_sin, or 1 for regular heads
        return torch.where(valid, decay * osc, torch.zeros_like(decay))

    def _raw_rem(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """Unmasked, unnormalised P: (H, Tq, Tk) in float32.

        P depends on i − j only, so for position ranges the Tq + Tk − 1 distinct offsets are
        evaluated once and laid out as sliding windows (no transcendental work per entry).
        Ranges are checked on CPU, assumed elsewhere (``MultiHeadAttention`` passes ranges)."""
        Tq, Tk = q_pos.numel(), k_pos.numel()
        if q_pos.device.type == "cpu" and not (is_range(q_pos) and is_range(k_pos)):
            return self.rem_values(q_pos[:, None] - k_pos[None, :])  # (H, Tq, Tk)
        top = q_pos[-1] - k_pos[0]
        offsets = top - torch.arange(Tq + Tk - 1, device=q_pos.device)  # descending i − j
        table = self.rem_values(offsets)  # (H, Tq + Tk − 1)
        # window m holds columns m … m + Tk − 1; row a needs window Tq − 1 − a, whose column b is
        # offset top − (Tq − 1 − a + b) = q_pos[a] − k_pos[b]
        return table.unfold(-1, Tk, 1).flip(1)  # (H, Tq, Tk)

    def gate_value(self) -> torch.Tensor:
        """σ(μ) per head, 0 for plain heads: (H,)."""
        g = torch.sigmoid(self.mu).expand(self.n_heads)
        return g * self.is_rem.to(g.dtype)

    # --- hooks -------------------------------------------------------------------------------
    def mix_output(self, out, v, q_pos, k_pos, key_padding_mask):
        """(1 − σ)·out + σ·(P @ V); out (B, H, Tq, d) is softmax(S)·V from either path."""
        p = self._raw_rem(q_pos, k_pos).to(v.dtype)  # (H, Tq, Tk)
        if key_padding_mask is not None:
            v = v.masked_fill(key_padding_mask[:, None, :, None], 0.0)  # = zeroing P's padded columns
        B, H, Tk, d = v.shape
        # one (H, Tq, Tk) @ (H, Tk, B·d) product: matmul would broadcast P over the batch by
        # copying it B times, and P's gradient comes out summed over the batch for free
        v_h = v.permute(1, 2, 0, 3).reshape(H, Tk, B * d)  # (H, Tk, B·d)
        pv = torch.bmm(p, v_h).view(H, -1, B, d).permute(2, 0, 1, 3)  # (B, H, Tq, d)
        if self.normalize == "row":
            if key_padding_mask is None:
                s = p.abs().sum(-1)[None, :, :, None]  # (1, H, Tq, 1)
            else:
                valid = (~key_padding_mask).to(v.dtype)[:, None, :, None]  # (B, 1, Tk, 1)
                s = torch.matmul(p.abs(), valid)  # (B, H, Tq, 1): Σ_j valid |P_ij|
            pv = torch.where(s > 0, pv / s.clamp_min(torch.finfo(pv.dtype).tiny), torch.zeros_like(pv))
        g = self.gate_value().to(out.dtype)[None, :, None, None]  # (1, H, 1, 1)
        return (1 - g) * out + g * pv

    def mix_weights(self, weights, q_pos, k_pos, key_padding_mask):
        """(1 − σ)·softmax(S) + σ·P: (B, H, Tq, Tk), the weights the output actually uses."""
        p = self.rem_matrix(q_pos, k_pos, key_padding_mask).to(weights.dtype)
        g = self.gate_value().to(weights.dtype)[None, :, None, None]  # (1, H, 1, 1)
        return (1 - g) * weights + g * p

    def extra_repr(self) -> str:
        heads = [t if d == 1 else f"{t}:{d}" for t, d in self.allocation]
        return f"heads={heads}, causal={self.causal}, gate={self.gate!r}, normalize={self.normalize!r}"
