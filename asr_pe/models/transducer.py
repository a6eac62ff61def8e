"""The transducer head (RNN-T, Graves 2012): a prediction network and a joiner over the encoder.

``head = build_transducer(vocab_size, enc_dim, predictor="stateless", context_size=2, ...)``

p(k | t, u) = softmax_k( W_out · tanh(W_enc · enc_t + W_pred · g_u) )  over V = vocabulary with
blank (id 0, the CTC blank of the tokenizer), where g_u is the prediction network's output after
the first u labels. The lattice of (t, u) nodes is scored by `transducer_loss`
(`asr_pe/models/losses.py`: ``torchaudio.functional.rnnt_loss``).

Prediction networks (``predictor``):

- ``stateless`` (default; icefall's ``decoder.py``, Ghodsi et al. 2020, "Rnn-transducer with
  stateless prediction network"): g_u = ReLU(DepthwiseConv1d_c(E[y_{u-c+1}], ..., E[y_u])), an
  embedding of the last ``context_size`` = c labels (c = 2, a bigram context, icefall's default)
  mixed by a grouped convolution of width c (groups = dim / 4, as icefall) without bias. The
  sequence starts with blank as <sos>, and the context left of it is blank too, so the state of
  an empty hypothesis is c blanks. No recurrence: the label context is all it knows.
- ``lstm`` (the original RNN-T, ESPnet's/NeMo's default): g_u = LSTM(E[<sos>=blank], E[y_1], ...,
  E[y_u]), ``lstm_layers`` layers of ``lstm_hidden`` units.

Joiner (icefall's ``joiner.py``): both sides projected to ``joiner_dim``, added, tanh, a linear
output layer. ``joiner(enc_proj, pred_proj)`` broadcasts, so training calls it on (B, T, 1, J) +
(B, 1, U+1, J) -> (B, T, U+1, V) and decoding on (N, J) + (N, J) -> (N, V), one frame at a time:
the encoder projection is computed once per utterance and nothing of size T × U is ever built
outside the training loss.

Decoding state (`Predictor.init_state`, `step`, `select_state`, `merge_state`): each predictor
keeps its per-hypothesis state as a tuple of tensors whose batch dimension is ``state_batch_dims``,
so the searches (`asr_pe/decoding/transducer.py`) stay predictor-agnostic.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["StatelessPredictor", "LSTMPredictor", "Joiner", "TransducerHead", "build_transducer", "PREDICTORS"]

PREDICTORS = ("stateless", "lstm")

State = tuple[torch.Tensor, ...]


class StatelessPredictor(nn.Module):
    """Embedding of the last ``context_size`` labels through a grouped Conv1d and ReLU (icefall)."""

    state_batch_dims = (0,)

    def __init__(self, vocab_size: int, dim: int, context_size: int = 2, blank: int = 0, dropout: float = 0.0):
        super().__init__()
        if context_size < 1:
            raise ValueError(f"transducer context_size must be >= 1, got {context_size}")
        self.vocab_size, self.dim, self.context_size, self.blank = vocab_size, dim, context_size, blank
        self.embedding = nn.Embedding(vocab_size, dim)
        groups = dim // 4 if dim % 4 == 0 and dim >= 4 else 1
        self.conv = (nn.Conv1d(dim, dim, kernel_size=context_size, groups=groups, bias=False)
                     if context_size > 1 else None)
        self.dropout = nn.Dropout(dropout)
        self.out_dim = dim

    def _mix(self, emb: torch.Tensor) -> torch.Tensor:
        """emb (N, L + c - 1, dim) -> (N, L, dim): each output reads the c embeddings ending at it."""
        if self.conv is not None:
            emb = self.conv(emb.transpose(1, 2)).transpose(1, 2)  # (N, L, dim)
        return F.relu(self.dropout(emb))

    def forward(self, tokens_in: torch.Tensor) -> torch.Tensor:
        """tokens_in (B, U+1) = [blank, y_1, ..., y_U] (padding any valid id) -> (B, U+1, dim)."""
        left = tokens_in.new_full((tokens_in.shape[0], self.context_size - 1), self.blank)  # (B, c-1)
        return self._mix(self.embedding(torch.cat([left, tokens_in], dim=1)))  # (B, U+1, dim)

    def init_state(self, n: int, device: torch.device | str) -> State:
        return (torch.full((n, self.context_size), self.blank, dtype=torch.long, device=device),)  # (N, c)

    def step(self, tokens: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """Feed one label per hypothesis: tokens (N,) -> (out (N, dim), state after it)."""
        context = torch.cat([state[0][:, 1:], tokens[:, None]], dim=1)  # (N, c)
        return self._mix(self.embedding(context))[:, -1], (context,)

    def start(self, n: int, device: torch.device | str) -> tuple[torch.Tensor, State]:
        """The output and state of an empty hypothesis (after <sos> = blank)."""
        return self.step(torch.full((n,), self.blank, dtype=torch.long, device=device),
                         self.init_state(n, device))


class LSTMPredictor(nn.Module):
    """Embedding, ``layers`` × LSTM(``hidden``), dropout: the original RNN-T prediction network."""

    state_batch_dims = (1, 1)

    def __init__(self, vocab_size: int, dim: int, hidden: int = 320, layers: int = 1, blank: int = 0,
                 dropout: float = 0.0):
        super().__init__()
        if layers < 1:
            raise ValueError(f"transducer lstm_layers must be >= 1, got {layers}")
        self.vocab_size, self.blank = vocab_size, blank
        self.embedding = nn.Embedding(vocab_size, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=layers, batch_first=True,
                            dropout=dropout if layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.out_dim = hidden

    def forward(self, tokens_in: torch.Tensor) -> torch.Tensor:
        """tokens_in (B, U+1) = [blank, y_1, ..., y_U] -> (B, U+1, hidden). Padding follows the
        valid labels, so it cannot reach a valid position of a left-to-right LSTM."""
        out, _ = self.lstm(self.dropout(self.embedding(tokens_in)))
        return self.dropout(out)

    def init_state(self, n: int, device: torch.device | str) -> State:
        shape = (self.lstm.num_layers, n, self.lstm.hidden_size)  # (L, N, H)
        w = self.lstm.weight_hh_l0
        return (torch.zeros(shape, dtype=w.dtype, device=device), torch.zeros(shape, dtype=w.dtype, device=device))

    def step(self, tokens: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        out, (h, c) = self.lstm(self.embedding(tokens)[:, None, :], state)  # (N, 1, H)
        return out[:, 0], (h, c)

    def start(self, n: int, device: torch.device | str) -> tuple[torch.Tensor, State]:
        return self.step(torch.full((n,), self.blank, dtype=torch.long, device=device),
                         self.init_state(n, device))


def select_state(predictor: nn.Module, state: State, index: torch.Tensor) -> State:
    """The states of hypotheses ``index`` (M,) of N."""
    return tuple(s.index_select(d, index) for s, d in zip(state, predictor.state_batch_dims))


def merge_state(predictor: nn.Module, old: State, new: State, take_new: torch.Tensor) -> State:
    """Per hypothesis, the new state where ``take_new`` (N,) bool, else the old one."""
    out = []
    for o, n, d in zip(old, new, predictor.state_batch_dims):
        shape = [1] * o.dim()
        shape[d] = -1
        out.append(torch.where(take_new.view(shape), n, o))
    return tuple(out)


class Joiner(nn.Module):
    """out(tanh(enc_proj + pred_proj)); the projections are applied once by the caller
    (`project_encoder`, `project_predictor`) so that decoding projects each frame once."""

    def __init__(self, enc_dim: int, pred_dim: int, joiner_dim: int, vocab_size: int):
        super().__init__()
        self.enc_proj = nn.Linear(enc_dim, joiner_dim)
        self.pred_proj = nn.Linear(pred_dim, joiner_dim)
        self.out = nn.Linear(joiner_dim, vocab_size)

    def forward(self, enc_proj: torch.Tensor, pred_proj: torch.Tensor) -> torch.Tensor:
        """Broadcasting: (B, T, 1, J) + (B, 1, U+1, J) -> (B, T, U+1, V); (N, J) + (N, J) -> (N, V)."""
        return self.out(torch.tanh(enc_proj + pred_proj))


class TransducerHead(nn.Module):
    """A prediction network and a joiner; ``blank`` is the tokenizer's blank (id 0)."""

    def __init__(self, predictor: nn.Module, joiner: Joiner, blank: int = 0, lattice_budget_mb: float | None = 512.0):
        super().__init__()
        self.predictor = predictor
        self.joiner = joiner
        self.blank = blank
        # training memory budget of the joiner and loss lattice (`losses.transducer_loss`)
        self.lattice_budget_mb = lattice_budget_mb

    def predictor_input(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, U) labels padded with -1 -> (B, U+1) [blank, y] with padding replaced by blank."""
        y = tokens.clamp(min=0).masked_fill(tokens < 0, self.blank)
        return torch.cat([y.new_full((y.shape[0], 1), self.blank), y], dim=1)  # (B, U+1)

    def project(self, enc: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Training: enc (B, T, D), tokens (B, U) -> enc_proj (B, T, J), pred_proj (B, U+1, J)."""
        pred = self.predictor(self.predictor_input(tokens))  # (B, U+1, P)
        return self.joiner.enc_proj(enc), self.joiner.pred_proj(pred)


def build_transducer(vocab_size: int, enc_dim: int, *, predictor: str = "stateless", embed_dim: int = 256,
                     context_size: int = 2, lstm_hidden: int = 320, lstm_layers: int = 1, joiner_dim: int = 320,
                     dropout: float = 0.1, blank: int = 0, lattice_budget_mb: float | None = 512.0,
                     **unused: Any) -> TransducerHead:
    """Build from ``loss.transducer`` (`conf/loss/transducer.yaml`); unknown keys are an error."""
    if unused:
        raise ValueError(f"loss.transducer: unknown option(s) {sorted(unused)}; known: predictor, embed_dim, "
                         "context_size, lstm_hidden, lstm_layers, joiner_dim, dropout, lattice_budget_mb")
    if predictor == "stateless":
        pred: nn.Module = StatelessPredictor(vocab_size, embed_dim, context_size, blank, dropout)
    elif predictor == "lstm":
        pred = LSTMPredictor(vocab_size, embed_dim, lstm_hidden, lstm_layers, blank, dropout)
    else:
        raise ValueError(f"loss.transducer.predictor={predictor!r}: choose one of {', '.join(PREDICTORS)}")
    if lattice_budget_mb is not None and not float(lattice_budget_mb) > 0:
        raise ValueError(f"loss.transducer.lattice_budget_mb={lattice_budget_mb!r}: a number > 0, or null (no cap)")
    return TransducerHead(pred, Joiner(enc_dim, pred.out_dim, joiner_dim, vocab_size), blank,
                          None if lattice_budget_mb is None else float(lattice_budget_mb))
