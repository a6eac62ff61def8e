"""The ASR model: front end → encoder → CTC head (and, for seq2seq/hybrid, an attention decoder;
for transducer/hybrid_transducer, a transducer head: prediction network + joiner)."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from .encoder import Encoder, build_encoder
from .frontend import build_frontend


class ASRModel(nn.Module):
    def __init__(self, frontend: nn.Module, encoder: Encoder, vocab_size: int,
                 decoder: nn.Module | None = None, ctc_head: bool = True, transducer: nn.Module | None = None):
        super().__init__()
        self.frontend = frontend
        self.encoder = encoder
        self.ctc_head = nn.Linear(encoder.d_model, vocab_size) if ctc_head else None
        self.decoder = decoder
        self.transducer = transducer
        self.vocab_size = vocab_size

    @property
    def frame_shift_s(self) -> float:
        return self.frontend.frame_shift_s

    def encode(self, features: torch.Tensor, lengths: torch.Tensor, return_attention: bool = False):
        """features (B, T, F) at 10 ms -> enc (B, T', D), enc_lengths (B,) [, attention]."""
        x, lengths = self.frontend(features, lengths)
        return self.encoder(x, lengths, return_attention=return_attention)

    def ctc_log_probs(self, enc: torch.Tensor) -> torch.Tensor:
        assert self.ctc_head is not None, "this model has no CTC head"
        return torch.log_softmax(self.ctc_head(enc).float(), dim=-1)  # (B, T', V)


def frontend_from_config(frontend: Mapping[str, Any], in_features: int, d_model: int) -> nn.Module:
    opts = {k: v for k, v in frontend.items() if k not in ("_target_", "kind")}
    return build_frontend(frontend["kind"], in_features, d_model, **opts)


def build_asr_model(
    *,
    vocab_size: int,
    in_features: int,
    frontend: Mapping[str, Any],
    encoder: Mapping[str, Any],
    pe: Any,
    decoder: Mapping[str, Any] | None = None,
    ctc_head: bool = True,
    transducer: Mapping[str, Any] | None = None,
) -> ASRModel:
    """Build from plain mappings (the resolved config of a run), so evaluation can rebuild it."""
    enc_opts = {k: v for k, v in encoder.items() if k not in ("_target_", "name")}
    fe = frontend_from_config(frontend, in_features, enc_opts["d_model"])
    pe_spec = {k: v for k, v in pe.items() if k != "name"} if isinstance(pe, Mapping) else pe
    enc = build_encoder(pe=pe_spec, frame_shift_s=fe.frame_shift_s, **enc_opts)
    dec = None
    if decoder is not None:
        from .decoder import build_decoder  # the attention decoder (seq2seq / hybrid heads)

        dec = build_decoder(vocab_size=vocab_size, d_model=enc_opts["d_model"], **decoder)
    head = None
    if transducer is not None:
        from .transducer import build_transducer  # the transducer head (transducer / hybrid_transducer)

        head = build_transducer(vocab_size, enc_opts["d_model"], **transducer)
    if dec is not None and head is not None:
        raise ValueError("a model has an attention decoder or a transducer head, not both")
    return ASRModel(fe, enc, vocab_size, dec, ctc_head, head)


def second_head(loss: Mapping[str, Any]) -> str | None:
    """The head besides CTC that a ``loss:`` section trains: ``"transducer"`` when it has a
    ``transducer`` section (loss=transducer, hybrid_transducer), ``"attention"`` when
    ``ctc_weight`` < 1 otherwise (seq2seq, hybrid), None for CTC only."""
    if loss.get("transducer"):
        return "transducer"
    return "attention" if float(loss.get("ctc_weight", 1.0)) < 1.0 else None


# The top-level sections of a run config that `model_kwargs` reads (``data`` for its ``features``).
MODEL_CONFIG_SECTIONS = ("data", "frontend", "encoder", "pe", "loss", "decoder")


def model_kwargs(cfg: Mapping[str, Any], vocab_size: int) -> dict[str, Any]:
    """The arguments of `build_asr_model` for a run config.

    ``cfg`` is the run's resolved config (at least `MODEL_CONFIG_SECTIONS`) as plain nested
    mappings, e.g. a ``DictConfig`` through ``OmegaConf.to_container(cfg, resolve=True)``; the
    sections are passed on as they are."""
    ctc_weight = float(cfg["loss"].get("ctc_weight", 1.0))
    head = second_head(cfg["loss"])
    if head == "transducer" and ctc_weight >= 1.0:
        raise ValueError(f"loss.ctc_weight={ctc_weight:g} leaves the transducer head no weight; use loss=ctc")
    return {
        "vocab_size": vocab_size,
        "in_features": int(cfg["data"]["features"]["num_mel_bins"]),
        "frontend": cfg["frontend"],
        "encoder": cfg["encoder"],
        "pe": cfg["pe"],
        "decoder": cfg.get("decoder") if head == "attention" else None,
        "ctc_head": ctc_weight > 0.0,
        **({"transducer": dict(cfg["loss"]["transducer"])} if head == "transducer" else {}),
    }
