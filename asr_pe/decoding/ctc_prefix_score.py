"""CTC prefix scoring for joint CTC/attention decoding.

Implements the prefix probability of Watanabe et al. 2017 ("Hybrid CTC/attention
architecture for end-to-end speech recognition", Algorithm 2; the algorithm of ESPnet's
``CTCPrefixScore``), written from the equations. For an utterance with CTC log-posteriors
x (T, V) and a label prefix h (sos excluded), the forward variables are

    r^n_t(h) = log p(frames 0..t produce h, frame t emits h's last label)
    r^b_t(h) = log p(frames 0..t produce h, frame t emits blank)

and the score of extending h by a label c is the *prefix* probability

    psi(h + c) = log sum_{l : h + c is a prefix of l} p_ctc(l | x)
               = log( r^n_0(c) [h empty]  +  sum_{t >= 1} phi_{t-1} * x_t(c) )

with phi_t = r^b_t(h) + r^n_t(h), or r^b_t(h) alone when c repeats h's last label (CTC needs
a blank between repeated labels). For c = eos the score is the full-sequence probability
log p_ctc(h | x) = log(r^n_{T-1}(h) + r^b_{T-1}(h)). Blank is never a candidate (-inf).
Each score costs O(T) per candidate; candidates of many hypotheses are scored together.
The default path evaluates the frame recursion with cumulative sums (no Python loop over
frames); ``use_reference=True`` runs the readable frame-by-frame loop it is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["CTCPrefixState", "CTCPrefixScorer"]

NEG_INF = float("-inf")
LOG_FLOOR = -1.0e4  # log-probs below this (probability e^-10000) are treated as this value


@dataclass
class CTCPrefixState:
    """CTC forward variables of one label prefix."""

    r: torch.Tensor  # (T, 2): log r^n_t(h), log r^b_t(h)
    length: int  # number of labels in h (sos excluded)
    last: int  # last label of h, -1 when h is empty
    score: float  # log psi(h) (the prefix probability); log p_ctc(h | x) after eos


class CTCPrefixScorer:
    """Prefix scorer over the CTC log-posteriors of one utterance.

    Args:
        log_probs: (T, V) CTC log-posteriors of the valid frames of the utterance.
        blank: CTC blank index.
        eos: end-of-sentence id of the attention decoder; a candidate equal to it gets the
            full-sequence probability of the prefix. None: no eos handling.
        use_reference: run the readable frame-by-frame recursion instead of the vectorised
            one (same numbers up to ~1e-9; for tests and debugging).
    """

    def __init__(
        self, log_probs: torch.Tensor, blank: int = 0, eos: int | None = None, *, use_reference: bool = False
    ):
        if log_probs.dim() != 2:
            raise ValueError(f"CTCPrefixScorer expects (T, V) log-probs, got shape {tuple(log_probs.shape)}")
        if log_probs.shape[0] < 1:
            raise ValueError("CTCPrefixScorer needs at least one frame")
        vocab = log_probs.shape[1]
        if not 0 <= blank < vocab:
            raise ValueError(f"blank={blank} is outside the vocabulary of size {vocab}")
        if eos is not None and eos == blank:
            raise ValueError("eos must differ from the CTC blank")
        self.x = log_probs.detach().to(dtype=torch.float64)  # (T, V); float64: sums over many frames
        self.x_floored = self.x.clamp(min=LOG_FLOOR)  # finite cumulative sums for the fast path
        self.blank = blank
        self.eos = eos
        self.use_reference = use_reference
        self.num_frames = log_probs.shape[0]
        self.vocab_size = vocab

    def initial_state(self) -> CTCPrefixState:
        """State of the empty prefix: only blanks so far, psi(empty) = log 1."""
        r = torch.full((self.num_frames, 2), NEG_INF, dtype=torch.float64, device=self.x.device)
        r[:, 1] = torch.cumsum(self.x[:, self.blank], dim=0)
        return CTCPrefixState(r=r, length=0, last=-1, score=0.0)

    def full_sequence_score(self, state: CTCPrefixState) -> float:
        """log p_ctc(h | x): all T frames produce exactly h."""
        return float(torch.logaddexp(state.r[-1, 0], state.r[-1, 1]))

    def score(self, state: CTCPrefixState, candidates: torch.Tensor) -> tuple[torch.Tensor, list[CTCPrefixState]]:
        """Score candidate labels (K,) after one prefix: (psi (K,), K new states)."""
        candidates = torch.as_tensor(candidates, dtype=torch.long)
        if candidates.dim() != 1:
            raise ValueError(f"candidates must be 1-D (K,), got shape {tuple(candidates.shape)}")
        scores, states = self.score_batch([state], candidates[None, :])
        return scores[0], states[0]

    def score_batch(
        self, states: list[CTCPrefixState], candidates: torch.Tensor
    ) -> tuple[torch.Tensor, list[list[CTCPrefixState]]]:
        """Score K candidates for each of N prefixes of equal length.

        Args:
            states: N prefix states, all with the same ``length`` (synchronous beam search).
            candidates: (N, K) int64 candidate labels.
        Returns:
            psi (N, K) float64 prefix log-probabilities on CPU, and the N x K new states.
        """
        candidates = torch.as_tensor(candidates, dtype=torch.long)
        n_hyp = len(states)
        if candidates.dim() != 2 or candidates.shape[0] != n_hyp:
            raise ValueError(f"candidates must have shape ({n_hyp}, K), got {tuple(candidates.shape)}")
        lengths = {s.length for s in states}
        if len(lengths) != 1:
            raise ValueError(f"score_batch needs prefixes of one length, got lengths {sorted(lengths)}")
        if int(candidates.min()) < 0 or int(candidates.max()) >= self.vocab_size:
            raise ValueError(f"candidate ids must lie in [0, {self.vocab_size})")
        length = lengths.pop()
        k = candidates.shape[1]
        device = self.x.device
        cand = candidates.to(device).flatten()  # (M,) with M = N*K, hypothesis-major
        hyp = torch.arange(n_hyp, device=device).repeat_interleave(k)  # (M,) parent of each candidate
        r_prev = torch.stack([s.r for s in states], dim=2)  # (T, 2, N)
        last = torch.tensor([s.last for s in states], dtype=torch.long, device=device)  # (N,)

        # phi_t: probability that frames 0..t produce h and a new label may start at t + 1.
        phi = torch.logaddexp(r_prev[:, 0], r_prev[:, 1])[:, hyp]  # (T, M)
        same = cand == last[hyp]  # (M,) repeat of the last label: only paths ending in blank
        phi[:, same] = r_prev[:, 1, hyp[same]]

        forward = self._forward_reference if self.use_reference else self._forward
        r, psi = forward(phi, cand, length)  # (T, 2, M), (M,)

        if self.eos is not None:
            is_eos = cand == self.eos
            if is_eos.any():
                full = torch.logaddexp(r_prev[-1, 0], r_prev[-1, 1])[hyp]  # (M,) log p_ctc(h | x)
                psi = torch.where(is_eos, full, psi)
        psi = torch.where(cand == self.blank, torch.full_like(psi, NEG_INF), psi)

        psi_cpu = psi.cpu().view(n_hyp, k)  # (N, K)
        cand_list = cand.tolist()
        scores = psi_cpu.flatten().tolist()
        new_states = [
            [
                CTCPrefixState(r=r[:, :, j], length=length + 1, last=cand_list[j], score=scores[j])
                for j in range(i * k, (i + 1) * k)
            ]
            for i in range(n_hyp)
        ]
        return psi_cpu, new_states

    def _forward_reference(
        self, phi: torch.Tensor, cand: torch.Tensor, length: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Readable frame-by-frame recursion: forward variables (T, 2, M) of h + c and psi (M,)."""
        frames, m = phi.shape
        xs = self.x[:, cand]  # (T, M) log x_t(c)
        xb = self.x[:, self.blank]  # (T,)
        r = torch.full((frames, 2, m), NEG_INF, dtype=torch.float64, device=phi.device)  # (T, 2, M)
        if length >= frames:  # h + c needs more labels than there are frames
            return r, torch.full((m,), NEG_INF, dtype=torch.float64, device=phi.device)
        if length == 0:
            r[0, 0] = xs[0]  # c emitted at the first frame
        start = max(length, 1)  # frames before ``length`` cannot hold length + 1 labels
        for t in range(start, frames):
            r[t, 0] = torch.logaddexp(r[t - 1, 0], phi[t - 1]) + xs[t]
            r[t, 1] = torch.logaddexp(r[t - 1, 0], r[t - 1, 1]) + xb[t]
        # psi = r^n_{start-1} + sum_{t >= start} phi_{t-1} x_t(c): every frame where c can start.
        terms = torch.cat([r[start - 1, 0][None], phi[start - 1 : frames - 1] + xs[start:]], dim=0)
        return r, torch.logsumexp(terms, dim=0)

    def _forward(self, phi: torch.Tensor, cand: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Same recursion without a Python loop over frames.

        Both recursions have the form a_t = logaddexp(a_{t-1}, b_{t-1}) + w_t. With
        W_t = sum_{u=start..t} w_u this gives a_t = W_t + logcumsumexp_s(b_s - W_s) (s < t),
        started from a_{start-1}. Log-probs are floored at LOG_FLOOR so W stays finite; in
        float64 the cancellation in W_t + (...) costs about |W_t| * 1e-16.
        """
        frames, m = phi.shape
        if length >= frames:
            r = torch.full((frames, 2, m), NEG_INF, dtype=torch.float64, device=phi.device)
            return r, torch.full((m,), NEG_INF, dtype=torch.float64, device=phi.device)
        start = max(length, 1)
        xs = self.x_floored[start:, cand]  # (T', M) with T' = T - start
        xb = self.x_floored[start:, self.blank, None]  # (T', 1)
        w_n = torch.cumsum(xs, dim=0)  # (T', M)
        w_b = torch.cumsum(xb, dim=0)  # (T', 1)
        zero = torch.zeros(1, 1, dtype=torch.float64, device=phi.device)
        w_n_prev = torch.cat([zero.expand(1, m), w_n[:-1]], dim=0)  # (T', M): W_{t-1}
        w_b_prev = torch.cat([zero, w_b[:-1]], dim=0)  # (T', 1)

        init_n = torch.full((1, m), NEG_INF, dtype=torch.float64, device=phi.device)  # r^n_{start-1}
        if length == 0:
            init_n = self.x[0, cand][None, :]
        phi_prev = phi[start - 1 : frames - 1]  # (T', M): phi_{t-1} for t = start..T-1
        # r^n_t = W_t + lse(r^n_{start-1}, phi_{s-1} - W_{s-1} for s = start..t)
        acc_n = torch.logcumsumexp(torch.cat([init_n, phi_prev - w_n_prev], dim=0), dim=0)  # (T'+1, M)
        r_n = w_n + acc_n[1:]  # (T', M)
        r_n_prev = torch.cat([init_n, r_n[:-1]], dim=0)  # (T', M): r^n_{t-1}
        # r^b_t = B_t + lse(r^n_{s-1} - B_{s-1} for s = start..t); r^b_{start-1} of h + c is zero probability
        r_b = w_b + torch.logcumsumexp(r_n_prev - w_b_prev, dim=0)  # (T', M)

        r = torch.full((frames, 2, m), NEG_INF, dtype=torch.float64, device=phi.device)  # (T, 2, M)
        r[start - 1, 0] = init_n[0]
        r[start:, 0] = r_n
        r[start:, 1] = r_b
        terms = torch.cat([init_n, phi_prev + self.x[start:, cand]], dim=0)  # (T'+1, M)
        return r, torch.logsumexp(terms, dim=0)
