"""Tokenizers: id layout (0 blank, last sos/eos), round trips, unknown characters, save/load."""

import json
import random

import pytest

from asr_pe.data.tokenizer import (
    CharTokenizer,
    SentencePieceTokenizer,
    Tokenizer,
    TokenizerError,
    build_tokenizer,
    load_tokenizer,
)

WORDS = "the quick brown fox jumps over a lazy dog while seven zebras eat hay in the field".split()


def make_texts(n=300, seed=0):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12))) for _ in range(n)]


def test_char_units_and_id_layout():
    tok = CharTokenizer.from_texts(["ba  c", "a\tb"])
    assert tok.units == [" ", "a", "b", "c"]  # sorted set; whitespace runs collapse to one space
    assert tok.blank_id == 0
    assert tok.vocab_size == 6 and tok.sos_id == tok.eos_id == 5
    assert tok.encode("ab c") == [2, 3, 1, 4]
    assert tok.encode("  ab   c ") == [2, 3, 1, 4]
    # decode skips blank and sos/eos
    assert tok.decode([0, 5, 2, 0, 3, 1, 4, 5]) == "ab c"
    assert isinstance(tok, Tokenizer)


def test_char_round_trip():
    texts = make_texts()
    tok = CharTokenizer.from_texts(texts)
    for t in texts:
        ids = tok.encode(t)
        assert all(0 < i < tok.eos_id for i in ids)
        assert tok.decode(ids) == t


def test_unknown_characters_are_named():
    tok = CharTokenizer.from_texts(["ab c"])
    with pytest.raises(TokenizerError, match=r"unknown character\(s\) '!', 'Z' in text 'aZ b!'"):
        tok.encode("aZ b!")
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.decode([99])


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_sentencepiece_round_trip_and_layout(tmp_path, model_type):
    texts = make_texts()
    tok = build_tokenizer("sentencepiece", texts, tmp_path, vocab_size=40, model_type=model_type)
    assert isinstance(tok, SentencePieceTokenizer)
    assert tok.vocab_size == 42  # 40 pieces (incl. <unk>) + blank + sos/eos
    assert tok.blank_id == 0 and tok.sos_id == tok.eos_id == 41
    multi = 0
    for t in texts:
        ids = tok.encode(t)
        assert all(0 < i < tok.eos_id for i in ids)
        assert tok.decode(ids) == t
        assert tok.decode([0, *ids, tok.eos_id]) == t
        multi += len(ids) < len(t)
    assert multi > 0  # subword units merge characters: fewer tokens than characters
    assert (tmp_path / f"spm_{model_type}40.model").exists()
    with pytest.raises(TokenizerError, match=r"unknown character\(s\) 'Q'"):
        tok.encode("the Quick fox")


def test_sentencepiece_training_is_reproducible(tmp_path):
    texts = make_texts()
    a = SentencePieceTokenizer.train(texts, tmp_path / "a", vocab_size=40)
    b = SentencePieceTokenizer.train(texts, tmp_path / "b", vocab_size=40)
    assert [a.id_to_piece(i) for i in range(a.vocab_size)] == [b.id_to_piece(i) for i in range(b.vocab_size)]


def test_sentencepiece_vocab_too_large_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerError, match="Vocabulary size too high"):
        build_tokenizer("sentencepiece", make_texts(20), tmp_path, vocab_size=5000)


@pytest.mark.parametrize("kind, opts", [("char", {}), ("sentencepiece", {"vocab_size": 40})])
def test_save_load_identity(tmp_path, kind, opts):
    texts = make_texts()
    tok = build_tokenizer(kind, texts, tmp_path / "build", **opts)
    assert load_tokenizer(tmp_path / "build" / "tokenizer.json") == tok  # build saves tokenizer.json
    # Saving elsewhere (a run directory) carries the SentencePiece model along.
    run = tmp_path / "run"
    tok.save(run / "tokenizer.json")
    saved = json.loads((run / "tokenizer.json").read_text())
    assert saved["kind"] == kind
    restored = load_tokenizer(run / "tokenizer.json")
    assert type(restored) is type(tok) and restored == tok
    assert (restored.vocab_size, restored.blank_id, restored.eos_id) == (tok.vocab_size, tok.blank_id, tok.eos_id)
    for t in texts[:50]:
        assert restored.encode(t) == tok.encode(t)
    if kind == "sentencepiece":
        assert (run / saved["model"]).exists()


def test_load_errors_name_the_file(tmp_path):
    bad = tmp_path / "tok.json"
    bad.write_text('{"kind": "wordpiece"}')
    with pytest.raises(TokenizerError, match=r"tok\.json: unknown tokenizer kind 'wordpiece'"):
        load_tokenizer(bad)
    bad.write_text('{"kind": "sentencepiece", "model": "missing.model"}')
    with pytest.raises(TokenizerError, match="missing.model"):
        load_tokenizer(bad)
    bad.write_text("{oops")
    with pytest.raises(TokenizerError, match=r"tok\.json:1: invalid JSON"):
        load_tokenizer(bad)
    with pytest.raises(TokenizerError, match="unknown tokenizer kind 'words'"):
        build_tokenizer("words", ["a"], tmp_path)
    with pytest.raises(TokenizerError, match="no characters"):
        build_tokenizer("char", [" "], tmp_path)


def test_sentencepiece_training_leaves_only_complete_files(tmp_path):
    from asr_pe.data.tokenizer import SentencePieceTokenizer, TokenizerError

    texts = ["the quick brown fox jumps over the lazy dog"] * 20
    with pytest.raises(TokenizerError):
        SentencePieceTokenizer.train(texts, tmp_path, vocab_size=5000)
    assert list(tmp_path.iterdir()) == [], "a failed training left files behind"
    tok = SentencePieceTokenizer.train(texts, tmp_path, vocab_size=29)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spm_unigram29.model", "spm_unigram29.vocab"]
    assert tok.decode(tok.encode("the lazy dog")) == "the lazy dog"
