"""Attention (label-synchronous) beam search over a step function, optionally joint with CTC.

The search knows nothing of the decoder: it calls

    step_fn(tokens (N, t) int64, state) -> (log_probs (N, V), new_state)

which returns next-token log-probabilities for N hypotheses whose tokens (sos first) are
given. ``state`` is whatever the decoder caches (None: recompute from the full prefix); its
tensor leaves must index hypotheses on dim 0 so that :func:`reorder_state` can follow the
survivors (or pass ``reorder=`` for another layout). A decoder without a cache needs only

    memory = encoder_out[b : b + 1, : enc_len[b]]                                  # (1, T, D)
    def step_fn(tokens, state):
        logits = decoder(tokens, memory.expand(tokens.shape[0], -1, -1))[:, -1]  # (N, V)
        return logits.log_softmax(-1), None

Scores (all natural-log):
    att(h)   = sum of step log-probs of h's tokens, eos included (teacher-forced log-likelihood)
    ctc(h)   = CTC prefix log-probability psi(h); after eos the full-sequence log p_ctc(h | x)
    total(h) = (1 - ctc_weight) * att(h) + ctc_weight * ctc(h) + length_bonus * len(h)
    rank(h)  = total(h) / len(h) ** length_alpha
where len(h) counts the output tokens including eos. The search itself ranks partial
hypotheses by ``total`` (all have the same length at a step); ended hypotheses are ranked by
``rank``: with the default length_alpha = 1 that is the per-token average, which removes the
bias towards short outputs of a sum of log-probs; length_alpha = 0 ranks by the raw total.

Joint CTC/attention (Watanabe et al. 2017, one pass as in ESPnet): for each hypothesis only the
``ceil(pre_beam_ratio * beam)`` tokens with the best attention log-prob are scored by CTC
(scoring all V tokens costs O(T V) per hypothesis); the ``beam`` best (hypothesis, token)
pairs by ``total`` go on. A candidate outside the attention pre-beam is never considered,
even if CTC likes it.

End detection (ESPnet's ``end_detect``, Watanabe et al. 2017 Sec. 4): stop when, for each of
the last M output lengths, the best hypothesis that ended with that length has a total
more than |D| below the best ended total so far, i.e. hypotheses that end now are hopeless.
Defaults M = 3, D = -10 (ESPnet's ``np.log(1 * np.exp(-10))``: e^-10 in probability).
ESPnet checks lengths i, i-1, i-2 two steps behind its loop counter; here the lengths are
those of hypotheses that ended in the current step and the M - 1 steps before it.

Max length: ``max_len`` labels (eos excluded). When not given it is
``max(1, int(max_len_ratio * encoder_length))`` (encoder_length defaults to the CTC scorer's
frame count; CTC cannot emit more labels than frames). A hypothesis still running after
``max_len`` labels is ended with eos, whose step log-prob is added like any other token.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch

from asr_pe.decoding.ctc_prefix_score import CTCPrefixScorer

__all__ = ["Hypothesis", "StepFn", "beam_search", "greedy_search", "reorder_state"]

NEG_INF = float("-inf")

StepFn = Callable[[torch.Tensor, Any], tuple[torch.Tensor, Any]]


class Hypothesis(NamedTuple):
    """One finished hypothesis."""

    ids: list[int]  # output labels, sos and eos removed
    score: float  # ranking score: total / len ** length_alpha
    components: dict  # total, att, ctc (None without a CTC scorer), length (labels + eos)


def reorder_state(state: Any, index: torch.Tensor) -> Any:
    """Select hypotheses ``index`` (dim 0) from every tensor leaf of a decoder state."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.index_select(0, index.to(state.device))
    if isinstance(state, tuple) and hasattr(state, "_fields"):  # namedtuple
        return type(state)(*(reorder_state(s, index) for s in state))
    if isinstance(state, (list, tuple)):
        return type(state)(reorder_state(s, index) for s in state)
    if isinstance(state, Mapping):
        return {key: reorder_state(value, index) for key, value in state.items()}
    raise TypeError(
        f"cannot reorder a decoder state of type {type(state).__name__}: use tensors (hypotheses on "
        "dim 0) in lists/tuples/dicts, or pass reorder= to beam_search"
    )


def _resolve_max_len(
    max_len: int | None, encoder_length: int | None, max_len_ratio: float, ctc_scorer: CTCPrefixScorer | None
) -> int:
    if max_len is not None:
        if max_len < 0:
            raise ValueError(f"max_len must be >= 0, got {max_len}")
        return int(max_len)
    if encoder_length is None and ctc_scorer is not None:
        encoder_length = ctc_scorer.num_frames
    if encoder_length is None:
        raise ValueError("give max_len, or encoder_length (max_len = max_len_ratio * encoder_length)")
    return max(1, int(max_len_ratio * int(encoder_length)))


def _call_step(step_fn: StepFn, tokens: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
    log_probs, new_state = step_fn(tokens, state)
    if log_probs.dim() != 2 or log_probs.shape[0] != tokens.shape[0]:
        raise ValueError(
            f"step_fn must return log-probs of shape ({tokens.shape[0]}, V), got {tuple(log_probs.shape)}"
        )
    return log_probs.detach().to(device="cpu", dtype=torch.float64), new_state


def greedy_search(
    step_fn: StepFn,
    init_state: Any = None,
    *,
    sos: int,
    eos: int,
    max_len: int | None = None,
    encoder_length: int | None = None,
    max_len_ratio: float = 1.0,
    length_alpha: float = 1.0,
    device: torch.device | str = "cpu",
) -> Hypothesis:
    """Pick the most probable next token until eos (or max_len labels, then eos is forced)."""
    limit = _resolve_max_len(max_len, encoder_length, max_len_ratio, None)
    tokens = torch.full((1, 1), sos, dtype=torch.long, device=device)  # (1, t)
    state = init_state
    att = 0.0
    for step in range(limit + 1):
        log_probs, state = _call_step(step_fn, tokens, state)
        token = eos if step == limit else int(log_probs[0].argmax())
        att += float(log_probs[0, token])
        if token == eos:
            break
        tokens = torch.cat([tokens, tokens.new_full((1, 1), token)], dim=1)
    ids = tokens[0, 1:].tolist()
    length = len(ids) + 1
    return Hypothesis(ids, att / length**length_alpha, {"total": att, "att": att, "ctc": None, "length": length})


def _end_detected(ended: list[dict], step_length: int, m: int, d: float) -> bool:
    """ESPnet end detection over the ended hypotheses' unnormalised totals."""
    if not ended:
        return False
    best = max(h["total"] for h in ended)
    count = 0
    for back in range(m):
        same = [h["total"] for h in ended if h["length"] == step_length - back]
        if same and max(same) - best < d:
            count += 1
    return count == m


def beam_search(
    step_fn: StepFn,
    init_state: Any = None,
    *,
    sos: int,
    eos: int,
    beam: int = 10,
    max_len: int | None = None,
    encoder_length: int | None = None,
    max_len_ratio: float = 1.0,
    min_len: int = 0,
    length_alpha: float = 1.0,
    length_bonus: float = 0.0,
    ctc_scorer: CTCPrefixScorer | None = None,
    ctc_weight: float = 0.0,
    pre_beam_ratio: float = 1.5,
    end_detect: bool = True,
    end_detect_m: int = 3,
    end_detect_d: float = -10.0,
    nbest: int | None = None,
    reorder: Callable[[Any, torch.Tensor], Any] = reorder_state,
    device: torch.device | str = "cpu",
) -> list[Hypothesis]:
    """Beam search for one utterance; see the module docstring for the scores.

    Args:
        step_fn: next-token log-probs for N hypotheses, see module docstring.
        init_state: decoder state for the single initial hypothesis [sos] (or None).
        sos, eos: start / end ids (may be equal, as in ESPnet).
        beam: hypotheses kept per step (and the number of hypotheses that may end per step).
        max_len, encoder_length, max_len_ratio: label limit, see module docstring.
        min_len: eos is not allowed before this many labels.
        length_alpha: exponent of the length normalisation of the final ranking.
        length_bonus: added to the total per output token (ESPnet's ``penalty``).
        ctc_scorer: CTC prefix scorer of this utterance for joint decoding; its score is
            reported in the components even with ctc_weight = 0.
        ctc_weight: lambda in total = (1 - lambda) att + lambda ctc.
        pre_beam_ratio: with a CTC scorer, tokens per hypothesis scored by CTC =
            ceil(pre_beam_ratio * beam) best by attention.
        end_detect, end_detect_m, end_detect_d: ESPnet end detection (M, D).
        nbest: hypotheses returned (default: beam).
        reorder: how to select hypotheses from the decoder state.
        device: device of the token tensor handed to step_fn.
    Returns:
        Ended hypotheses sorted by ranking score, best first.
    """
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    if not 0.0 <= ctc_weight <= 1.0:
        raise ValueError(f"ctc_weight must lie in [0, 1], got {ctc_weight}")
    if ctc_weight > 0.0 and ctc_scorer is None:
        raise ValueError("ctc_weight > 0 needs a ctc_scorer (CTCPrefixScorer of the utterance)")
    if ctc_scorer is not None and ctc_scorer.eos != eos:
        raise ValueError(f"the CTC scorer's eos ({ctc_scorer.eos}) differs from the search's eos ({eos})")
    limit = _resolve_max_len(max_len, encoder_length, max_len_ratio, ctc_scorer)
    nbest = beam if nbest is None else nbest
    use_ctc = ctc_scorer is not None

    tokens = torch.full((1, 1), sos, dtype=torch.long, device=device)  # (N, t), sos first
    state = init_state
    att = torch.zeros(1, dtype=torch.float64)  # (N,) sums of attention log-probs
    ctc_states = [ctc_scorer.initial_state()] if use_ctc else None
    ended: list[dict] = []

    for step in range(limit + 1):  # ``step`` labels so far in every running hypothesis
        log_probs, new_state = _call_step(step_fn, tokens, state)  # (N, V)
        n_hyp, vocab = log_probs.shape
        if not 0 <= eos < vocab:
            raise ValueError(f"eos={eos} is outside the step function's vocabulary of size {vocab}")
        if step == limit:  # out of length: every hypothesis ends now
            cand = torch.full((n_hyp, 1), eos, dtype=torch.long)  # (N, 1)
        else:
            select = log_probs
            if step < min_len:
                select = log_probs.clone()
                select[:, eos] = NEG_INF
            k = max(beam, math.ceil(pre_beam_ratio * beam)) if use_ctc else beam
            cand = torch.topk(select, min(k, vocab), dim=1).indices  # (N, K) best attention tokens
        att_c = att[:, None] + log_probs.gather(1, cand)  # (N, K)
        if use_ctc:
            ctc_c, ctc_new = ctc_scorer.score_batch(ctc_states, cand)  # (N, K)
            total_c = (1.0 - ctc_weight) * att_c + (ctc_weight * ctc_c if ctc_weight > 0 else 0.0)
        else:
            ctc_c, ctc_new = None, None
            total_c = att_c
        total_c = total_c + length_bonus * (step + 1)

        width = cand.shape[1]
        top = torch.topk(total_c.flatten(), min(beam, total_c.numel())).indices.tolist()
        keep_parent, keep_token, keep_att, keep_states = [], [], [], []
        for j in top:
            n, c = divmod(j, width)
            token = int(cand[n, c])
            ctc_value = float(ctc_c[n, c]) if use_ctc else None
            if token == eos:
                ended.append(
                    {
                        "ids": tokens[n, 1:].tolist(),
                        "total": float(total_c[n, c]),
                        "att": float(att_c[n, c]),
                        "ctc": ctc_value,
                        "length": step + 1,
                    }
                )
                continue
            keep_parent.append(n)
            keep_token.append(token)
            keep_att.append(float(att_c[n, c]))
            if use_ctc:
                keep_states.append(ctc_new[n][c])
        if not keep_parent:
            break
        parent = torch.tensor(keep_parent, dtype=torch.long)
        tokens = torch.cat(
            [tokens.index_select(0, parent.to(tokens.device)), torch.tensor(keep_token, device=tokens.device)[:, None]],
            dim=1,
        )  # (N', t + 1)
        state = reorder(new_state, parent)
        att = torch.tensor(keep_att, dtype=torch.float64)
        if use_ctc:
            ctc_states = keep_states
        if end_detect and _end_detected(ended, step + 1, end_detect_m, end_detect_d):
            break

    # The last step forces eos and end detection needs ended hypotheses, so ``ended`` is never empty.
    assert ended, "beam search finished without an ended hypothesis"
    hyps = [
        Hypothesis(
            h["ids"],
            h["total"] / h["length"] ** length_alpha,
            {"total": h["total"], "att": h["att"], "ctc": h["ctc"], "length": h["length"]},
        )
        for h in ended
    ]
    hyps.sort(key=lambda h: h.score, reverse=True)
    return hyps[:nbest]
