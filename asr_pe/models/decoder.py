"""Transformer decoder for the seq2seq / hybrid heads (Vaswani et al. 2017; ESPnet layout).

``dec = build_decoder(vocab_size, d_model, n_layers=4, n_heads=4, pe="sinusoidal")``
``logits = dec(tokens_in (B, U), token_lengths (B,), enc (B, T, D), enc_lengths (B,))`` -> (B, U, V)

Blocks are pre-LN: x += SelfAttn(LN(x)) (causal), x += CrossAttn(LN(x), enc) (padded encoder
frames masked), x += FFN(LN(x)); a final LayerNorm and a linear output layer follow. Both
attentions are the package's one ``MultiHeadAttention``; the decoder has its own PE
(``decoder.pe``), built with ``causal=True`` so that ALiBi, T5 and REM use their causal
(unidirectional) forms. Cross-attention has no positional hook: the encoder carries its own.

Token embedding: ``nn.Embedding`` initialised N(0, 1/D) and multiplied by √D (Vaswani et al.
§3.4, fairseq), so the scaled embedding has unit-variance entries, the scale of the sinusoid;
the input-stage PE then applies its own ``xscale`` (1 by default) and adds its table.

Self-attention uses the causal mask only, no key padding mask: padding follows the valid
tokens, so no valid query can see a padded key; padded rows are garbage that the loss ignores.

Decoding: ``step_log_probs`` recomputes the whole prefix (the readable reference);
``precompute_memory`` + ``forward_step`` keep a key/value cache (the projected encoder frames
once per utterance, the self-attention keys/values of the prefix per hypothesis), so a step
costs O(t + T) instead of O(t² + t·T). Both give the teacher-forced numbers; tests hold them
to it.

PEs that are not causal (``conv``: a centred convolution over tokens; ``cape``: positions
centred on the mean of the whole sequence) would let a token's representation depend on later
tokens, so they are rejected here with a clear error.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention, make_pad_mask
from .encoder import FeedForward
from .positional import AttentionPE, PositionalEncoding, build_positional
from .positional.base import INPUT_PES

__all__ = ["DecoderLayer", "DecoderMemory", "TransformerDecoder", "build_decoder", "NON_CAUSAL_PES"]

# Input-stage PEs whose value at position t depends on positions after t.
NON_CAUSAL_PES = ("conv", "cape")


class DecoderMemory(NamedTuple):
    """Encoder output projected once for every layer's cross-attention (one utterance or a batch)."""

    keys: list[torch.Tensor]  # per layer (B, H, T, d)
    values: list[torch.Tensor]  # per layer (B, H, T, d)
    pad_mask: torch.Tensor | None  # (B, T) True at padded frames, None when no frame is padded


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, dropout: float, attn_dropout: float = 0.0,
                 **attn_opts: Any):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, attn_dropout, **attn_opts)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attn_dropout, **attn_opts)
        self.ffn = FeedForward(d_model, ffn_dim, dropout)
        self.norm_self, self.norm_cross, self.norm_ffn = (nn.LayerNorm(d_model) for _ in range(3))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, enc: torch.Tensor, enc_pad_mask: torch.Tensor | None,
                pe: AttentionPE | None = None) -> torch.Tensor:
        a, _ = self.self_attn(self.norm_self(x), None, pe=pe, causal=True)
        x = x + self.drop(a)
        c, _ = self.cross_attn(self.norm_cross(x), enc_pad_mask, kv=enc)
        x = x + self.drop(c)
        return x + self.drop(self.ffn(self.norm_ffn(x)))

    # --- incremental decoding -------------------------------------------------------------
    def project_memory(self, enc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention keys and values of the encoder output: 2 x (B, H, T, d)."""
        attn = self.cross_attn
        D = attn.d_model
        k, v = F.linear(enc, attn.in_proj.weight[D:], attn.in_proj.bias[D:]).split(D, dim=-1)  # (B, T, D) each
        return attn.split_heads(k), attn.split_heads(v)

    def step(self, x_last: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None, pos: int,
             mem_k: torch.Tensor, mem_v: torch.Tensor, mem_mask: torch.Tensor | None,
             pe: AttentionPE | None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """One new position ``pos`` for N hypotheses.

        x_last (N, 1, D) is this layer's input at ``pos``; cache holds the raw (pre-PE)
        self-attention keys/values of positions 0 … pos−1, 2 x (N, H, pos, d). Returns the
        layer output at ``pos`` (N, 1, D) and the cache extended by ``pos``.
        """
        sa = self.self_attn
        N, _, D = x_last.shape
        q, k, v = (sa.split_heads(t) for t in sa.in_proj(self.norm_self(x_last)).split(D, dim=-1))  # (N, H, 1, d)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)  # (N, H, pos + 1, d)
            v = torch.cat([cache[1], v], dim=2)
        assert k.size(2) == pos + 1, f"decoder cache holds {k.size(2) - 1} positions, expected {pos}"
        q_pos = torch.tensor([pos], device=x_last.device)
        k_pos = torch.arange(pos + 1, device=x_last.device)
        q_t, k_t = (q, k) if pe is None else pe.transform_qk(q, k, q_pos, k_pos)
        # The query block of MultiHeadAttention.forward, for the last row only.
        out, _ = sa.attend_block(q_t, q, k_t, v, q_pos, k_pos, None, pe, True, False)  # (N, H, 1, d)
        x = x_last + self.drop(sa.out_proj(out.transpose(1, 2).reshape(N, 1, D)))

        ca = self.cross_attn
        qc = ca.split_heads(F.linear(self.norm_cross(x), ca.in_proj.weight[:D], ca.in_proj.bias[:D]))  # (N, H, 1, d)
        if mem_k.size(0) != N:  # one utterance's memory shared by N hypotheses
            assert mem_k.size(0) == 1, f"memory holds {mem_k.size(0)} utterances for {N} hypotheses"
            mem_k, mem_v = mem_k.expand(N, -1, -1, -1), mem_v.expand(N, -1, -1, -1)  # (N, H, T, d)
            if mem_mask is not None:
                mem_mask = mem_mask.expand(N, -1)
        T = mem_k.size(2)
        out, _ = ca.attend_block(qc, qc, mem_k, mem_v, torch.zeros(1, dtype=torch.long, device=x.device),
                            torch.arange(T, device=x.device), mem_mask, None, False, False)  # (N, H, 1, d)
        x = x + self.drop(ca.out_proj(out.transpose(1, 2).reshape(N, 1, D)))
        x = x + self.drop(self.ffn(self.norm_ffn(x)))
        return x, (k, v)


class TransformerDecoder(nn.Module):
    """Attention decoder: tokens + encoder output -> next-token logits. See the module docstring."""

    def __init__(self, vocab_size: int, d_model: int, layers: nn.ModuleList, pe: PositionalEncoding,
                 dropout: float):
        super().__init__()
        self.vocab_size, self.d_model = vocab_size, d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embed.weight, mean=0.0, std=d_model**-0.5)
        self.embed_scale = math.sqrt(d_model)
        self.pe = pe
        self.input_dropout = nn.Dropout(dropout)
        self.layers = layers
        self.final_norm = nn.LayerNorm(d_model)
        self.output = nn.Linear(d_model, vocab_size)

    def _check_tokens(self, tokens: torch.Tensor) -> None:
        if tokens.dim() != 2:
            raise ValueError(f"decoder tokens must be (B, U) int64, got shape {tuple(tokens.shape)}")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise ValueError(
                f"decoder token ids must lie in [0, {self.vocab_size}) within their lengths; got "
                f"min {int(tokens.min())}, max {int(tokens.max())}"
            )

    def _check_enc(self, enc: torch.Tensor, enc_lengths: torch.Tensor) -> None:
        if enc.dim() != 3 or enc.size(-1) != self.d_model:
            raise ValueError(f"encoder output must be (B, T, {self.d_model}), got {tuple(enc.shape)}")
        if enc_lengths.shape != (enc.size(0),) or int(enc_lengths.min()) < 1 or int(enc_lengths.max()) > enc.size(1):
            raise ValueError(f"enc_lengths must be ({enc.size(0)},) in [1, {enc.size(1)}], got {enc_lengths.tolist()}")

    def embed_tokens(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, U) ids -> (B, U, D): scaled embedding + input-stage PE, dropout."""
        x = self.embed(tokens) * self.embed_scale  # (B, U, D)
        return self.input_dropout(self.pe.forward_input(x, lengths))

    def forward(self, tokens_in: torch.Tensor, token_lengths: torch.Tensor, enc: torch.Tensor,
                enc_lengths: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: tokens_in (B, U) ([sos, y…], padding past token_lengths is ignored)
        -> logits (B, U, V); row t predicts the token after tokens_in[:, t]."""
        token_lengths = torch.as_tensor(token_lengths, dtype=torch.long, device=tokens_in.device)
        enc_lengths = torch.as_tensor(enc_lengths, dtype=torch.long, device=enc.device)
        if token_lengths.shape != (tokens_in.size(0),):
            raise ValueError(f"token_lengths must have shape ({tokens_in.size(0)},), got {tuple(token_lengths.shape)}")
        tok_pad = make_pad_mask(token_lengths, tokens_in.size(1))  # (B, U)
        tokens_in = tokens_in.masked_fill(tok_pad, 0)  # padding may be -1: keep it a valid index
        self._check_tokens(tokens_in)
        self._check_enc(enc, enc_lengths)
        enc_mask = make_pad_mask(enc_lengths, enc.size(1))  # (B, T)
        x = self.embed_tokens(tokens_in, token_lengths)
        for i, layer in enumerate(self.layers):
            x = layer(x, enc, enc_mask, self.pe.layer(i))
        return self.output(self.final_norm(x))  # (B, U, V)

    def step_log_probs(self, tokens: torch.Tensor, enc: torch.Tensor, enc_lengths: torch.Tensor) -> torch.Tensor:
        """Next-token log-probs after full prefixes tokens (N, t) (sos first): (N, V).
        Recomputes the prefix: the reference for ``forward_step``."""
        lengths = torch.full((tokens.size(0),), tokens.size(1), dtype=torch.long, device=tokens.device)
        logits = self.forward(tokens, lengths, enc, enc_lengths)[:, -1]  # (N, V)
        return torch.log_softmax(logits.float(), dim=-1)

    # --- incremental decoding -------------------------------------------------------------
    def precompute_memory(self, enc: torch.Tensor, enc_lengths: torch.Tensor | None = None) -> DecoderMemory:
        """Project the encoder output for every layer's cross-attention once per utterance."""
        if enc_lengths is None:
            enc_lengths = torch.full((enc.size(0),), enc.size(1), dtype=torch.long, device=enc.device)
        self._check_enc(enc, enc_lengths)
        mask = make_pad_mask(enc_lengths, enc.size(1))  # (B, T)
        keys, values = zip(*(layer.project_memory(enc) for layer in self.layers))
        return DecoderMemory(list(keys), list(values), mask if bool(mask.any()) else None)

    def forward_step(self, tokens: torch.Tensor, memory: DecoderMemory,
                     cache: list[tuple[torch.Tensor, torch.Tensor]] | None = None
                     ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Next-token log-probs (N, V) after prefixes tokens (N, t), with a key/value cache.

        ``cache`` is what the previous call returned, for tokens[:, :t−1] (None at t = 1 or
        to recompute); its tensors index hypotheses on dim 0, so a beam search can reorder it.
        ``memory`` comes from ``precompute_memory`` for N utterances or for one shared by all.
        """
        self._check_tokens(tokens)
        N, t = tokens.shape
        have = 0 if cache is None else cache[0][0].size(2)
        if have != t - 1:  # no cache, or one for another prefix length: rebuild position by position
            cache, have = None, 0
        lengths = torch.full((N,), t, dtype=torch.long, device=tokens.device)
        x_all = self.embed_tokens(tokens, lengths)  # (N, t, D); input PEs are position-wise and cheap
        new_cache = list(cache) if cache is not None else [None] * len(self.layers)
        for pos in range(have, t):
            x = x_all[:, pos : pos + 1]  # (N, 1, D)
            for i, layer in enumerate(self.layers):
                x, new_cache[i] = layer.step(x, new_cache[i], pos, memory.keys[i], memory.values[i],
                                             memory.pad_mask, self.pe.layer(i))
        logits = self.output(self.final_norm(x[:, 0]))  # (N, V)
        return torch.log_softmax(logits.float(), dim=-1), new_cache


def build_decoder(
    vocab_size: int,
    d_model: int,
    n_layers: int = 4,
    n_heads: int = 4,
    ffn_dim: int | None = None,
    dropout: float = 0.1,
    pe: Any = "sinusoidal",
    attn_dropout: float = 0.0,
    bias_mode: str = "auto",
    kind: str = "transformer",
    **pe_options: Any,
) -> TransformerDecoder:
    """Build the attention decoder. ``pe`` is a name, ``"input+attention"`` or a mapping (see
    ``positional``); positions are token indices (``frame_shift_s`` = 1 for time-scaled PEs)."""
    if kind != "transformer":
        raise ValueError(f"decoder.kind={kind!r}: only 'transformer' is implemented")
    if n_layers < 1:
        raise ValueError(f"decoder.n_layers must be >= 1, got {n_layers}")
    ffn_dim = ffn_dim or 4 * d_model
    pos = build_positional(pe, d_model=d_model, n_heads=n_heads, n_layers=n_layers, frame_shift_s=1.0,
                           causal=True, **pe_options)
    bad = [n for n in NON_CAUSAL_PES if n in INPUT_PES and isinstance(pos.input, INPUT_PES[n])]
    if bad:
        raise ValueError(
            f"decoder.pe={pe!r}: the {bad[0]!r} PE is not causal (a token's encoding would depend on later "
            f"tokens); choose none, sinusoidal, learned, rope, alibi, t5, shaw, relative or rem"
        )
    layers = nn.ModuleList(
        DecoderLayer(d_model, n_heads, ffn_dim, dropout, attn_dropout, bias_mode=bias_mode) for _ in range(n_layers)
    )
    return TransformerDecoder(vocab_size, d_model, layers, pos, dropout)
