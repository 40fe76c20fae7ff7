import json

import pytest
import torch

from playground.tokenizer import CharTokenizer, UnknownCharacterError, escape_char


def test_tiny_shakespeare_vocabulary_and_hello_world(shakespeare_text):
    tokenizer = CharTokenizer.train_from_text(shakespeare_text)
    assert tokenizer.vocabulary_size == 65
    ids = tokenizer.encode("Hello world")
    assert ids.dtype == torch.long
    assert ids.tolist() == [20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42]
    assert tokenizer.decode(ids) == "Hello world"


def test_round_trip_and_json_form():
    tokenizer = CharTokenizer.train_from_text("hello world\n")
    text = "low\nhole"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    restored = CharTokenizer.from_dict(tokenizer.to_dict())
    assert restored == tokenizer
    assert restored.encode(text).tolist() == tokenizer.encode(text).tolist()


def test_unknown_characters_are_named_with_positions():
    tokenizer = CharTokenizer.train_from_text("abc")
    with pytest.raises(UnknownCharacterError) as info:
        tokenizer.encode("abZcé")
    assert [(u.position, u.character) for u in info.value.unknown] == [(2, "Z"), (4, "é")]
    assert "'Z' at position 2" in str(info.value) and "'é' at position 4" in str(info.value)
    assert not isinstance(info.value, KeyError)


def test_decode_refuses_ids_outside_vocabulary():
    with pytest.raises(ValueError, match="token id 7 is outside"):
        CharTokenizer.train_from_text("ab").decode([0, 7])


def test_escaped_forms():
    assert [escape_char(c) for c in (" ", "\n", "a", "\x07")] == ["␣", "\\n", "a", "\\x07"]


def test_vocabulary_size_reads_as_an_int_and_calls_as_notebook_000_calls_it():
    tokenizer = CharTokenizer.train_from_text("hello world")
    assert tokenizer.vocabulary_size == 8 and tokenizer.vocabulary_size() == 8
    assert type(tokenizer.vocabulary_size()) is int
    assert tokenizer.vocabulary_size + 1 == 9 and f"{tokenizer.vocabulary_size}" == "8"
    assert json.loads(json.dumps({"v": tokenizer.vocabulary_size})) == {"v": 8}
