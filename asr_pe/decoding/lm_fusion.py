"""Optional n-gram LM / lexicon shallow fusion for CTC, through torchaudio's flashlight decoder.

``torchaudio.models.decoder.ctc_decoder`` wraps the flashlight-text beam search (KenLM
n-gram LM, optional lexicon trie). It needs the ``flashlight-text`` package, which is not a
core dependency: install it with ``pip install flashlight-text`` (the ``lm`` extra). Without
it, building a decoder raises :class:`LMFusionUnavailable` with that instruction instead of
torchaudio's stack trace.

The search maximises log p_ctc + lm_weight * log p_lm + word_score * |words| (+ sil_score per
silence). The token list is the model's output vocabulary in id order, so decoder token ids
are model token ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from asr_pe.errors import MissingFileError

__all__ = ["LMFusionUnavailable", "INSTALL_HINT", "require_flashlight", "CTCLMDecoder", "build_lm_decoder"]

INSTALL_HINT = "pip install flashlight-text  (or the package's 'lm' extra: pip install 'asr_pe[lm]')"


class LMFusionUnavailable(ImportError):
    """flashlight-text (needed for LM shallow fusion) is not installed."""


def require_flashlight():
    """Return torchaudio's ``ctc_decoder`` factory, or raise a clear error naming the fix."""
    try:
        import flashlight.lib.text.decoder  # noqa: F401  (the compiled beam search)
    except ImportError as err:
        raise LMFusionUnavailable(
            f"CTC decoding with an n-gram LM or a lexicon needs the flashlight-text package, which is "
            f"not installed ({err}). Install it with: {INSTALL_HINT}"
        ) from err
    from torchaudio.models.decoder import ctc_decoder

    return ctc_decoder


class CTCLMDecoder:
    """CTC beam search with optional KenLM shallow fusion and lexicon constraint.

    Args:
        tokens: output units in id order (``tokens[i]`` is the string of id i); unique.
        lm_path: KenLM model (ARPA or binary); None decodes without an LM.
        lexicon_path: lexicon file (``word t1 t2 ...`` per line) to restrict output to its
            words; None: lexicon-free (any token sequence; an LM then scores tokens as words).
        lm_weight: weight of the LM log-probability.
        word_score: score added per emitted word (insertion bonus/penalty).
        beam: hypotheses kept per frame.
        blank_id: CTC blank id.
        sil_token: word-separator unit inserted between words; default " " or "|" when in
            ``tokens``, else the blank (subword vocabularies without a separator unit).
            Leading and trailing separators the decoder adds are removed from the output.
        unk_word, beam_threshold, beam_size_token, sil_score, log_add, nbest: passed to
            ``torchaudio.models.decoder.ctc_decoder``.
    """

    def __init__(
        self,
        tokens: Sequence[str],
        lm_path: str | Path | None = None,
        lexicon_path: str | Path | None = None,
        lm_weight: float = 2.0,
        word_score: float = 0.0,
        beam: int = 50,
        *,
        blank_id: int = 0,
        sil_token: str | None = None,
        unk_word: str = "<unk>",
        beam_threshold: float = 50.0,
        beam_size_token: int | None = None,
        sil_score: float = 0.0,
        log_add: bool = False,
        nbest: int = 1,
    ):
        factory = require_flashlight()
        tokens = [str(t) for t in tokens]
        if len(set(tokens)) != len(tokens):
            dup = sorted({t for t in tokens if tokens.count(t) > 1})
            raise ValueError(f"token strings must be unique, repeated: {dup[:10]}")
        if not 0 <= blank_id < len(tokens):
            raise ValueError(f"blank_id={blank_id} is outside the {len(tokens)} tokens")
        for name, path in (("lm_path", lm_path), ("lexicon_path", lexicon_path)):
            if path is not None and not Path(path).is_file():
                raise MissingFileError(f"{name}: no such file: {path}")
        if sil_token is None:
            sil_token = next((t for t in (" ", "|") if t in tokens), tokens[blank_id])
        if sil_token not in tokens:
            raise ValueError(f"sil_token {sil_token!r} is not one of the tokens")
        self.tokens = tokens
        self.blank_id = blank_id
        self.sil_id = tokens.index(sil_token)
        try:
            self._decoder = factory(
                lexicon=None if lexicon_path is None else str(lexicon_path),
                tokens=tokens,
                lm=None if lm_path is None else str(lm_path),
                nbest=nbest,
                beam_size=beam,
                beam_size_token=beam_size_token,
                beam_threshold=beam_threshold,
                lm_weight=lm_weight,
                word_score=word_score,
                sil_score=sil_score,
                log_add=log_add,
                blank_token=tokens[blank_id],
                sil_token=sil_token,
                unk_word=unk_word,
            )
        except RuntimeError as err:
            if "KenLM" in str(err) and "not installed" in str(err):  # flashlight built without KenLM
                raise LMFusionUnavailable(f"{err} (needed for lm_path={lm_path}); {INSTALL_HINT}") from err
            first_line = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            raise ValueError(
                f"could not build the CTC LM decoder from lm_path={lm_path}, lexicon_path={lexicon_path}: {first_line}"
            ) from err

    def _clean(self, ids: torch.Tensor) -> list[int]:
        """Strip the separators the decoder adds at the ends (torchaudio already collapsed
        repeats and removed blanks from ``CTCHypothesis.tokens``)."""
        out = [int(k) for k in ids.tolist() if k != self.blank_id]
        if self.sil_id != self.blank_id:
            while out and out[0] == self.sil_id:
                out.pop(0)
            while out and out[-1] == self.sil_id:
                out.pop()
        return out

    def decode_nbest(
        self, log_probs: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> list[list[tuple[list[int], float, list[str]]]]:
        """(B, T, V) log-probs -> per utterance, n-best (token ids, score, words) lists."""
        if log_probs.dim() != 3:
            raise ValueError(f"expected (B, T, V) log-probs, got shape {tuple(log_probs.shape)}")
        if log_probs.shape[-1] != len(self.tokens):
            raise ValueError(
                f"log-probs have {log_probs.shape[-1]} classes but the decoder has {len(self.tokens)} tokens"
            )
        emissions = log_probs.detach().to(device="cpu", dtype=torch.float32).contiguous()  # flashlight: CPU float32
        if lengths is not None:
            lengths = torch.as_tensor(lengths, dtype=torch.int32).cpu()
            too_long = lengths.numel() > 0 and int(lengths.max()) > log_probs.shape[1]
            if lengths.shape != (log_probs.shape[0],) or too_long or bool((lengths < 0).any()):
                raise ValueError(f"lengths must be (B,) values <= T={log_probs.shape[1]}, got {lengths.tolist()}")
        results = self._decoder(emissions, lengths)
        return [[(self._clean(h.tokens), float(h.score), list(h.words)) for h in hyps] for hyps in results]

    def decode(self, log_probs: torch.Tensor, lengths: torch.Tensor | None = None) -> list[list[int]]:
        """(B, T, V) log-probs -> best token id list per utterance."""
        return [hyps[0][0] if hyps else [] for hyps in self.decode_nbest(log_probs, lengths)]


def build_lm_decoder(
    tokens: Sequence[str],
    lm_path: str | Path | None = None,
    lexicon_path: str | Path | None = None,
    lm_weight: float = 2.0,
    word_score: float = 0.0,
    beam: int = 50,
    **options,
) -> CTCLMDecoder:
    """Build a :class:`CTCLMDecoder` (raises :class:`LMFusionUnavailable` without flashlight-text)."""
    return CTCLMDecoder(tokens, lm_path, lexicon_path, lm_weight, word_score, beam, **options)
