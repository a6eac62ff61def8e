"""What the CAPE paper did for each figure the toolkit redraws: one place the figures' captions
and the corpus recipes' RESULTS templates take it from.

Likhomanenko et al., "CAPE: Encoding Relative Positions with Continuous Augmented Positional
Embeddings", NeurIPS 2021 (arXiv 2106.03143). Its text is not readable here beyond the abstract and
introduction, so none of its WER numbers is quoted anywhere in the toolkit; the setup below was
read from the authors' public configs and run logs (flashlight, branch ``cape``, ``cape/runs/asr/``:
``*.cfg``, ``run.md``, ``ASR_nopad_training.ipynb``). A reader finds the numbers in the paper's
speech-recognition section and its appendix.
"""

from __future__ import annotations

import textwrap

PAPER = "Likhomanenko et al., NeurIPS 2021 (arXiv 2106.03143)"
CONFIGS = "the authors' configs: flashlight, branch cape, cape/runs/asr/"
WHERE_THE_NUMBERS_ARE = "the paper's speech-recognition section and its appendix (not quoted here)"

# (field, what the authors' configs set); the corpus recipes' RESULTS.md print this table
SETUP: tuple[tuple[str, str], ...] = (
    ("corpora", "WSJ (si284; licensed) and TED-LIUM 3; LibriSpeech appears in the run log only"),
    ("front end", "80 log-mel, LayerNorm, 1-D conv (kernel 7, stride 3: 30 ms frames), GLU, dropout 0.3"),
    ("encoder", "36 post-LN Transformer layers, d 768, FFN 3072, 4 heads, dropout = layerdrop 0.1 (TL) / 0.4 (WSJ)"),
    ("output", "CTC on letters and a word separator"),
    ("optimiser", "Adagrad, lr 0.01, warm-up 45k (TL) / 35k (WSJ) updates, max grad norm 0.1, fp16"),
    ("batches", "dynamic, 240 s (TL) / 120 s (WSJ) of audio, on 16 GPUs"),
    ("CAPE", "global shift up to 60 s, no padding, global scaling as a random per-utterance STFT hop "
             "(mean 9.5 ms, std 0.9 on WSJ si284), local shift"),
    ("length figure", "TED-LIUM 3's natural test utterances in 5 s duration bins"),
    ("rate figures", "WSJ dev (nov93dev) re-encoded with sox tempo -s 1.2; WER versus the STFT hop"),
)

_CAPTIONS = {
    "natural_bins": "The CAPE paper drew this on TED-LIUM 3's natural test utterances in 5 s duration bins "
                    "(36-layer Transformer, d 768, CTC on letters).",
    "tempo": "The CAPE paper's rate test: WSJ dev re-encoded with sox tempo -s 1.2 (faster, pitch kept); "
             "CAPE's global scaling trains on random per-utterance hops (mean 9.5 ms, std 0.9).",
    "hop_ms": "The CAPE paper's hop figures: WER versus the STFT hop of the features (WSJ); CAPE's global "
              "scaling trains on random per-utterance hops (mean 9.5 ms, std 0.9).",
}
KINDS = tuple(_CAPTIONS)


def caption(kind: str, note: str | None = None) -> str:
    """The caption of a figure of ``kind`` ("natural_bins", "tempo", "hop_ms"): what the paper did,
    where its numbers are, and ``note`` (the corpus recipe's own word, e.g. which corpus stands in
    for one the paper used)."""
    assert kind in _CAPTIONS, f"no CAPE-paper caption for {kind!r}; kinds: {KINDS}"
    parts = [_CAPTIONS[kind], f"{PAPER}; setup from {CONFIGS}; its numbers: {WHERE_THE_NUMBERS_ARE}."]
    if note:
        parts.append(note.strip())
    return " ".join(parts)


def add_caption(fig, text: str | None, width: int = 150) -> None:
    """A caption ``text`` under a matplotlib figure's panels, wrapped to ``width`` characters (a
    figure-level x label: constrained layout keeps room for it; the legend beside the panels and
    the title above them stay clear)."""
    if text:
        fig.supxlabel(textwrap.fill(text, width=width), fontsize=7.5)


def setup_markdown() -> str:
    """The paper's setup as a markdown table (what the RESULTS templates print)."""
    rows = [f"| {field} | {value} |" for field, value in SETUP]
    return "\n".join(["| field | the CAPE paper (from its authors' configs) |", "| --- | --- |", *rows])
