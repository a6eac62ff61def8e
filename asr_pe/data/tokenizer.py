"""Character and SentencePiece tokenizers with the ESPnet id layout.

Id 0 is the CTC blank, the last id is shared by sos and eos; the units sit in between.
Texts are whitespace-normalised before encoding (runs of whitespace become one space, ends
are stripped), so ``decode(encode(t)) == " ".join(t.split())``. Any other normalisation
(case, punctuation) is the corpus preparation's job.

A tokenizer is saved as JSON ``{"kind": ..., ...}``; a SentencePiece tokenizer stores its
``.model`` file beside the JSON and references it by file name.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import sentencepiece as spm

from asr_pe.errors import UserError
from asr_pe.io import atomic_write_bytes, atomic_write_json

logger = logging.getLogger(__name__)

BLANK_ID = 0
# SentencePiece's word-boundary marker (U+2581).
SPM_SPACE = "\u2581"


class TokenizerError(UserError, ValueError):
    """Text that a tokenizer cannot encode, or a tokenizer file that cannot be used."""


@runtime_checkable
class Tokenizer(Protocol):
    blank_id: int
    sos_id: int
    eos_id: int
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def save(self, path: str | os.PathLike) -> None: ...


def normalize_whitespace(text: str) -> str:
    return " ".join(text.split())


def _write_json(path: str | os.PathLike, obj: dict[str, Any]) -> None:
    atomic_write_json(path, obj, indent=1)


def _unknown_error(unknown: set[str], text: str) -> TokenizerError:
    chars = ", ".join(repr(c) for c in sorted(unknown))
    snippet = text if len(text) <= 80 else text[:77] + "..."
    return TokenizerError(f"unknown character(s) {chars} in text {snippet!r}")


class CharTokenizer:
    """One unit per character of the training texts; the space is the word separator."""

    kind = "char"

    def __init__(self, units: Sequence[str]):
        units = list(units)
        if not units:
            raise TokenizerError("CharTokenizer needs at least one unit")
        bad = [u for u in units if len(u) != 1]
        if bad:
            raise TokenizerError(f"CharTokenizer units must be single characters, got {bad[:5]!r}")
        if len(set(units)) != len(units):
            raise TokenizerError("CharTokenizer units must be unique")
        self.units = units
        self._id_of = {u: i + 1 for i, u in enumerate(units)}  # 0 is the blank
        self.blank_id = BLANK_ID
        self.vocab_size = len(units) + 2
        self.sos_id = self.eos_id = self.vocab_size - 1

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "CharTokenizer":
        """Units = sorted set of characters of the (whitespace-normalised) texts."""
        chars: set[str] = set()
        for text in texts:
            chars.update(normalize_whitespace(text))
        if not chars:
            raise TokenizerError("CharTokenizer.from_texts: the training texts hold no characters")
        return cls(sorted(chars))

    def encode(self, text: str) -> list[int]:
        text = normalize_whitespace(text)
        try:
            return [self._id_of[c] for c in text]
        except KeyError:
            raise _unknown_error(set(text) - set(self._id_of), text) from None

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i in (self.blank_id, self.eos_id):
                continue
            if not 0 < i < self.vocab_size:
                raise TokenizerError(f"id {i} outside the vocabulary [0, {self.vocab_size})")
            out.append(self.units[i - 1])
        return "".join(out)

    def id_to_piece(self, i: int) -> str:
        if i == self.blank_id:
            return "<blank>"
        if i == self.eos_id:
            return "<sos/eos>"
        return self.units[i - 1]

    def save(self, path: str | os.PathLike) -> None:
        _write_json(path, {"kind": self.kind, "units": self.units})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and other.units == self.units

    def __hash__(self) -> int:
        return hash(tuple(self.units))

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


class SentencePieceTokenizer:
    """SentencePiece (unigram or BPE) with ids shifted by one so that 0 is the blank.

    SentencePiece id k (its ``<unk>`` is k = 0) becomes k + 1; sos/eos is the last id.
    ``encode`` refuses characters absent from the training texts instead of mapping them to
    ``<unk>``, so unseen characters are found before training rather than learned as noise.
    """

    kind = "sentencepiece"

    def __init__(self, model_proto: bytes, model_name: str = "spm.model"):
        self._proto = bytes(model_proto)
        self.model_name = model_name
        self._sp = spm.SentencePieceProcessor()
        self._sp.LoadFromSerializedProto(self._proto)
        n = self._sp.get_piece_size()
        self.blank_id = BLANK_ID
        self.vocab_size = n + 2
        self.sos_id = self.eos_id = self.vocab_size - 1
        # Characters the model can spell without <unk>: everything inside its normal pieces.
        known: set[str] = set()
        for k in range(n):
            if self._sp.is_unknown(k) or self._sp.is_control(k):
                continue
            known.update(self._sp.id_to_piece(k).replace(SPM_SPACE, " "))
        self.known_chars = frozenset(known | {" "})

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        out_dir: str | os.PathLike,
        *,
        vocab_size: int = 256,
        model_type: str = "unigram",
        character_coverage: float = 1.0,
        seed: int = 0,
        model_name: str | None = None,
        **trainer_options: Any,
    ) -> "SentencePieceTokenizer":
        """Train on ``texts`` and write ``<out_dir>/<model_name>`` (default ``spm_<type><size>.model``).

        Identity normalisation keeps ``decode(encode(t))`` equal to the normalised text;
        one thread and a fixed seed make training reproducible.
        """
        if model_type not in ("unigram", "bpe"):
            raise TokenizerError(f"model_type must be 'unigram' or 'bpe', got {model_type!r}")
        texts = [normalize_whitespace(t) for t in texts]
        texts = [t for t in texts if t]
        if not texts:
            raise TokenizerError("SentencePieceTokenizer.train: no non-empty training texts")
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        model_name = model_name or f"spm_{model_type}{vocab_size}.model"
        if not model_name.endswith(".model"):
            raise TokenizerError(f"model_name must end with .model, got {model_name!r}")
        prefix = out_dir / model_name[: -len(".model")]
        # SentencePiece writes <prefix>.model/.vocab in place: train into a private folder and move
        # the finished files over, so a killed run or a concurrent job never leaves a partial model.
        tmp_dir = Path(tempfile.mkdtemp(prefix=".spm_", dir=out_dir))
        tmp_prefix = tmp_dir / prefix.name
        options = dict(
            model_prefix=str(tmp_prefix),
            vocab_size=int(vocab_size),
            model_type=model_type,
            character_coverage=character_coverage,
            normalization_rule_name="identity",
            # Our own ids hold blank and sos/eos; SentencePiece keeps only <unk> (id 0).
            unk_id=0,
            bos_id=-1,
            eos_id=-1,
            pad_id=-1,
            num_threads=1,
            minloglevel=2,
        )
        options.update(trainer_options)
        spm.set_random_generator_seed(seed)
        try:
            try:
                spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), **options)
            except RuntimeError as e:
                # e.g. "Vocabulary size too high (500). Please set it to a value <= 120."
                raise TokenizerError(f"SentencePiece training failed: {e}") from None
            for ext in (".vocab", ".model"):  # the model last: its presence means both are complete
                os.replace(str(tmp_prefix) + ext, str(prefix) + ext)
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)
        return cls.load_model(str(prefix) + ".model")

    @classmethod
    def load_model(cls, model_path: str | os.PathLike) -> "SentencePieceTokenizer":
        model_path = Path(model_path)
        try:
            proto = model_path.read_bytes()
        except OSError as e:
            raise TokenizerError(f"cannot read SentencePiece model {model_path}: {e}") from None
        try:
            return cls(proto, model_name=model_path.name)
        except (RuntimeError, OSError) as e:
            raise TokenizerError(f"{model_path}: not a SentencePiece model ({e})") from None

    def encode(self, text: str) -> list[int]:
        text = normalize_whitespace(text)
        unknown = set(text) - self.known_chars
        if unknown:
            raise _unknown_error(unknown, text)
        return [k + 1 for k in self._sp.encode(text, out_type=int)]

    def decode(self, ids: Sequence[int]) -> str:
        pieces = []
        for i in ids:
            i = int(i)
            if i in (self.blank_id, self.eos_id):
                continue
            if not 0 < i < self.vocab_size:
                raise TokenizerError(f"id {i} outside the vocabulary [0, {self.vocab_size})")
            pieces.append(i - 1)
        return self._sp.decode(pieces)

    def id_to_piece(self, i: int) -> str:
        if i == self.blank_id:
            return "<blank>"
        if i == self.eos_id:
            return "<sos/eos>"
        return self._sp.id_to_piece(i - 1)

    def save(self, path: str | os.PathLike) -> None:
        """Write the JSON and the ``.model`` file beside it."""
        path = Path(path)
        atomic_write_bytes(path.parent / self.model_name, self._proto)
        _write_json(path, {"kind": self.kind, "model": self.model_name, "vocab_size": self.vocab_size})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SentencePieceTokenizer) and other._proto == self._proto

    def __hash__(self) -> int:
        return hash(self._proto)

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer(vocab_size={self.vocab_size}, model={self.model_name!r})"


TOKENIZER_KINDS = ("char", "sentencepiece")


def build_tokenizer(kind: str, texts: Iterable[str], out_dir: str | os.PathLike, **opts: Any) -> Tokenizer:
    """Train a tokenizer of ``kind`` on ``texts`` and save it as ``<out_dir>/tokenizer.json``.

    ``opts`` go to ``SentencePieceTokenizer.train`` (vocab_size, model_type, ...); the char
    tokenizer takes none.
    """
    out_dir = Path(out_dir)
    if kind == "char":
        if opts:
            raise TokenizerError(f"char tokenizer takes no options, got {sorted(opts)}")
        tokenizer: Tokenizer = CharTokenizer.from_texts(texts)
    elif kind == "sentencepiece":
        tokenizer = SentencePieceTokenizer.train(texts, out_dir, **opts)
    else:
        raise TokenizerError(f"unknown tokenizer kind {kind!r}; expected one of {TOKENIZER_KINDS}")
    tokenizer.save(out_dir / "tokenizer.json")
    logger.info("built %r in %s", tokenizer, out_dir)
    return tokenizer


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """Restore a tokenizer saved by ``save``; dispatches on its ``"kind"``."""
    path = Path(path)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise TokenizerError(f"cannot read tokenizer file {path}: {e}") from None
    except json.JSONDecodeError as e:
        raise TokenizerError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(config, dict) or "kind" not in config:
        raise TokenizerError(f"{path}: not a tokenizer file (no \"kind\")")
    kind = config["kind"]
    if kind == "char":
        units = config.get("units")
        if not isinstance(units, list):
            raise TokenizerError(f"{path}: char tokenizer without a \"units\" list")
        return CharTokenizer(units)
    if kind == "sentencepiece":
        model = config.get("model")
        if not isinstance(model, str):
            raise TokenizerError(f"{path}: sentencepiece tokenizer without a \"model\" file name")
        tokenizer = SentencePieceTokenizer.load_model(path.parent / model)
        if "vocab_size" in config and config["vocab_size"] != tokenizer.vocab_size:
            raise TokenizerError(
                f"{path}: vocab_size {config['vocab_size']} does not match the model "
                f"{path.parent / model} ({tokenizer.vocab_size})"
            )
        return tokenizer
    raise TokenizerError(f"{path}: unknown tokenizer kind {kind!r}; expected one of {TOKENIZER_KINDS}")
