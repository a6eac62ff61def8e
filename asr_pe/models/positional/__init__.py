"""Positional encodings: one module per family, registered by name.

``build_positional(spec, d_model=…, n_heads=…, n_layers=…, frame_shift_s=…)`` accepts

* a name: ``"none"``, ``"rope"``, ``"sinusoidal"``;
* a combination ``"<input>+<attention>"``: ``"cape+rope"``;
* a mapping ``{"input": {"name": …, **options} | None, "attention": {…} | None}``
  (the form the Hydra ``pe`` group produces; a top-level ``name`` key is a label only).

Every module in this package is imported on first use so that registering a new PE means
adding one file (and one YAML under ``conf/pe``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any, Mapping

from torch import nn

from .base import (
    ATTENTION_PES,
    FAMILY_ORDER,
    INPUT_PES,
    AttentionPE,
    InputPE,
    UnknownPEError,
    constructor_kwargs,
    register_attention_pe,
    register_input_pe,
)

__all__ = [
    "AttentionPE",
    "FAMILY_ORDER",
    "InputPE",
    "PositionalEncoding",
    "UnknownPEError",
    "available_pes",
    "build_positional",
    "pe_family",
    "pe_names",
    "register_attention_pe",
    "register_input_pe",
]

_loaded = False


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
    _loaded = True


def available_pes() -> dict[str, list[str]]:
    _load_all()
    return {"input": sorted(INPUT_PES), "attention": sorted(ATTENTION_PES)}


def pe_names() -> list[str]:
    """Every PE the package has: ``none``, then the registered ones by family (``FAMILY_ORDER``),
    by name within one. The one list the benchmark, the figures and the tests read."""
    _load_all()
    classes = {**INPUT_PES, **ATTENTION_PES}
    return ["none"] + sorted(classes, key=lambda n: (FAMILY_ORDER.index(classes[n].family), n))


def pe_family(name: str | None) -> str | None:
    """Where the PE a run names acts (its class's ``family``): ``none`` for no PE; a configured
    variant ``<pe>_<variant>`` (``conf/pe``: ``rope_pi``, ``sinusoidal_sqrtd``) as its PE;
    ``<input>+<attention>`` by its attention stage (the input one when that is ``none``); None
    for a name no registered PE explains."""
    _load_all()
    name = str(name or "none")
    if name == "none":
        return "none"
    parts = name.split("+")
    if len(parts) > 1:
        families = [pe_family(p) for p in parts]
        if None in families:
            return None
        attention = [f for f in families if f not in ("input", "none")]
        return attention[-1] if attention else ("input" if "input" in families else "none")
    classes = {**INPUT_PES, **ATTENTION_PES}
    base = max((n for n in classes if name == n or name.startswith(n + "_")), key=len, default=None)
    return None if base is None else classes[base].family


class PositionalEncoding(nn.Module):
    """Holds the input-stage PE (or None) and one attention hook per layer (or None)."""

    def __init__(self, input_pe: InputPE | None, attention_layers: nn.ModuleList | None, label: str):
        super().__init__()
        self.input = input_pe
        self.attention = attention_layers
        self.label = label

    def forward_input(self, x, lengths):
        """The input stage; also draws the attention hooks' positions for this forward pass when
        they take a position map (one draw shared by every layer)."""
        if self.attention is not None:
            pmap = getattr(self.attention[0], "position_map", None)
            drawn = None if pmap is None else pmap.draw(lengths, x.size(1), self.training)
            for hook in self.attention:
                hook.drawn_positions = drawn  # (B, T) or None: positions 0 … T−1
        return x if self.input is None else self.input(x, lengths)

    def layer(self, i: int) -> AttentionPE | None:
        return None if self.attention is None else self.attention[i]

    def extra_repr(self) -> str:
        return f"label={self.label!r}"


def _normalise_spec(spec: Any) -> tuple[dict | None, dict | None]:
    """Return (input_spec, attention_spec), each ``{"name": str, **options}`` or None."""
    _load_all()
    if spec is None:
        return None, None
    if isinstance(spec, str):
        names = [n.strip() for n in spec.split("+") if n.strip()]
        if names == ["none"] or not names:
            return None, None
        inp = att = None
        for n in names:
            if n in INPUT_PES:
                if inp is not None:
                    raise UnknownPEError(f"pe {spec!r}: more than one input-stage PE")
                inp = {"name": n}
            elif n in ATTENTION_PES:
                if att is not None:
                    raise UnknownPEError(f"pe {spec!r}: more than one attention-stage PE")
                att = {"name": n}
            else:
                raise UnknownPEError(_unknown_message(n))
        return inp, att
    if isinstance(spec, Mapping):
        extra = set(spec) - {"name", "input", "attention"}
        if extra:
            raise UnknownPEError(f"pe spec has unknown keys {sorted(extra)}; expected input/attention")
        return _stage(spec.get("input"), INPUT_PES, "input"), _stage(
            spec.get("attention"), ATTENTION_PES, "attention"
        )
    raise UnknownPEError(f"pe spec must be a name or a mapping, got {type(spec).__name__}")


def _stage(sub: Any, registry: dict, stage: str) -> dict | None:
    if sub is None or sub == "none":
        return None
    if isinstance(sub, str):
        sub = {"name": sub}
    sub = dict(sub)
    name = sub.get("name")
    if name is None or name == "none":
        return None
    if name not in registry:
        raise UnknownPEError(_unknown_message(name, stage))
    return sub


def _unknown_message(name: str, stage: str | None = None) -> str:
    avail = available_pes()
    where = f" at the {stage} stage" if stage else ""
    return (
        f"unknown positional encoding {name!r}{where}; input-stage: {avail['input']}, "
        f"attention-stage: {avail['attention']}, or 'none'"
    )


def build_positional(
    spec: Any,
    *,
    d_model: int,
    n_heads: int,
    n_layers: int,
    frame_shift_s: float = 0.04,
    causal: bool = False,
    position_map: Mapping[str, Any] | None = None,
    **options: Any,
) -> PositionalEncoding:
    """Build the PE of an encoder/decoder. ``options`` go to the single PE of a plain name;
    ``position_map`` (position_maps.py) to the stage whose PE reads positions (the input stage
    first), an error if neither does."""
    inp, att = _normalise_spec(spec)
    if position_map is not None:
        takes = [s for s, reg in ((inp, INPUT_PES), (att, ATTENTION_PES))
                 if s is not None and "position_map" in inspect.signature(reg[s["name"]].__init__).parameters]
        if not takes:
            raise UnknownPEError(f"encoder.position_map: pe {spec if isinstance(spec, str) else spec.get('name', spec)!r} "
                                 "reads no positions; use it with rope, relative or sinusoidal")
        takes[0]["position_map"] = dict(position_map)
    if options:
        if inp is not None and att is not None:
            raise UnknownPEError("options for a combined PE must be given per stage in a mapping")
        target = inp if inp is not None else att
        if target is None:
            raise UnknownPEError(f"pe 'none' takes no options, got {sorted(options)}")
        target.update(options)
    common = {"d_model": d_model, "n_heads": n_heads, "frame_shift_s": frame_shift_s, "causal": causal}
    input_pe = attn = None
    if inp is not None:
        cls = INPUT_PES[inp["name"]]
        opts = {k: v for k, v in inp.items() if k not in ("name", "label")}
        input_pe = cls(**constructor_kwargs(cls, common, opts, inp["name"]))
    if att is not None:
        cls = ATTENTION_PES[att["name"]]
        opts = {k: v for k, v in att.items() if k not in ("name", "label")}
        attn = cls.build_layers(n_layers, **constructor_kwargs(cls, common, opts, att["name"]))
    label = "+".join(s.get("label", s["name"]) for s in (inp, att) if s is not None) or "none"
    return PositionalEncoding(input_pe, attn, label)
