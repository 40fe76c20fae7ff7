import json

import pytest
import torch

from playground.text.tokenizer import (
    CharTokenizer,
    UnknownCharacterError,
    escape_char,
    labels,
    list_unknown,
    without_unknown,
)


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


def test_unknown_characters_are_listed_as_the_page_shows_them_and_the_rest_counted():
    unknown = CharTokenizer.train_from_text("a").find_unknown("a\u200b" + "xyz" * 4)
    listed = list_unknown(unknown)
    assert listed.startswith("'\\u200b' at 1, 'x' at 2, ")  # one backslash, as escape_char shows it (repr gave two)
    assert listed.endswith("'y' at 9, 'z' at 10 and 3 more") and listed.count(" at ") == 10



def test_encode_maps_every_code_point_as_the_vocabulary_orders_it():
    """encode looks code points up in a sorted table: IDs follow the vocabulary's own order (not the sorted one),
    characters beyond the BMP and a lone surrogate are single characters, and an empty text is an empty tensor."""
    vocabulary = ["😀", "z", "a", "\ud800", "\n", "é"]
    tokenizer = CharTokenizer(vocabulary)
    text = "a😀\ud800z\néa😀"
    assert tokenizer.encode(text).tolist() == [vocabulary.index(c) for c in text]
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.encode("").tolist() == [] and tokenizer.encode("").dtype == torch.long
    with pytest.raises(UnknownCharacterError) as info:
        tokenizer.encode("a{😁")  # '{' sorts just after 'z', '😁' past every entry
    assert [(u.position, u.character) for u in info.value.unknown] == [(1, "{"), (2, "😁")]

def test_decode_refuses_ids_outside_vocabulary():
    with pytest.raises(ValueError, match="token id 7 is outside"):
        CharTokenizer.train_from_text("ab").decode([0, 7])


def test_escaped_forms():
    assert [escape_char(c) for c in (" ", "\n", "a", "\x07")] == ["␣", "\\n", "a", "\\x07"]
    # invisible ones are named, a combining mark sits on a dotted circle: ZWJ, an emoji's variation selector, an acute
    assert [escape_char(c) for c in ("\u200d", "\ufe0f", "\u0301", "é")] == ["\\u200d", "\\ufe0f", "◌\u0301", "é"]


def test_vocabulary_size_reads_as_an_int_and_calls_as_notebook_000_calls_it():
    tokenizer = CharTokenizer.train_from_text("hello world")
    assert tokenizer.vocabulary_size == 8 and tokenizer.vocabulary_size() == 8
    assert type(tokenizer.vocabulary_size()) is int
    assert tokenizer.vocabulary_size + 1 == 9 and f"{tokenizer.vocabulary_size}" == "8"
    assert json.loads(json.dumps({"v": tokenizer.vocabulary_size})) == {"v": 8}


# ------------------------------------------------------------------------------ the interface, and BPE
def test_character_pieces_and_dropping_unknown_characters():
    tokenizer = CharTokenizer.train_from_text("ab ")
    pieces = tokenizer.pieces("a∑ b")
    assert [(p.token_id, p.start, p.label) for p in pieces] == [(1, 0, "a"), (None, 1, "∑"), (0, 2, "␣"), (2, 3, "b")]
    assert without_unknown(tokenizer, "a∑ b∑") == "a b"
    assert labels(tokenizer, tokenizer.encode("ba ")) == ["b", "a", "␣"]
    assert tokenizer.start_text == " " and CharTokenizer.train_from_text("a\n").start_text == "\n"


@pytest.fixture(scope="module", params=["built here", "built in a worker process"])
def bpe(request):
    """The same BPE built here and in a worker process (text/tokenizer_process.py): each test holds for both."""
    from test_gpt2 import train_bpe

    from playground.text import tokenizer_process

    with pytest.MonkeyPatch.context() as patch:
        if request.param == "built in a worker process":
            patch.setattr(tokenizer_process, "IN_PROCESS_BYTES", 0)
        tokenizer = train_bpe()
    kind = tokenizer_process.ProcessTokenizer if "process" in request.param else tokenizer_process.LibraryTokenizer
    assert type(tokenizer._tokenizer) is kind
    yield tokenizer
    if "process" in request.param:
        tokenizer._tokenizer.close()


def test_bpe_pieces_show_the_space_marker_and_round_trip_any_text(bpe):
    pieces = bpe.pieces("To be or not")
    assert "".join(p.label for p in pieces) == "To␣be␣or␣not" and len(pieces) < 12  # merged: fewer than characters
    assert any(p.label.startswith("␣") and len(p.label) > 1 for p in pieces)  # " be": one token, space first
    assert all(bpe.token(p.token_id).startswith("Ġ") == p.label.startswith("␣") for p in pieces)
    text = "Grüße, жизнь ∑ 🙂\n\t<|endoftext|>"
    assert bpe.find_unknown(text) == [] and bpe.decode(bpe.encode(text)) == text
    assert bpe.encode("<|endoftext|>").tolist() == [bpe.vocabulary_size - 1] and bpe.start_text == "<|endoftext|>"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        bpe.decode([bpe.vocabulary_size])


def test_a_character_split_over_two_tokens_streams_whole(bpe):
    ids = bpe.encode("жж").tolist()  # never seen in training: two byte tokens each (0xd0 0xb6)
    assert len(ids) == 4 and bpe.label(ids[0]) == "\\xd0"
    stream = bpe.stream_decoder()
    assert [stream.step(i) for i in ids] == ["", "ж", "", "ж"]
    assert bpe.stream_decoder().step(ids[0], final=True) == "\ufffd"  # the last token: no waiting


def test_a_token_ending_inside_a_character_brings_its_whole_characters_with_it(bpe):
    """" naïve": one token holds "a" and the first byte of "ï" ("a\\xc3"). Its whole character comes with it and
    "ï" with the next, so the Sample tab shows each character on the token that drew it.

    tokenizers' ``decoders.DecodeStream`` (0.21+) was measured as a replacement: the same text in the end on 3,000
    random 30-token sequences, but it holds "a" back to the next token ([" n", None, "aï", ...]), and on a
    byte-fallback (not byte-level) BPE it raised "Invalid prefix encountered" on random sequences a sampled model
    can draw. So the playground keeps its two streams."""
    ids = bpe.encode(" naïve").tolist()
    assert [bpe.label(i) for i in ids] == ["␣n", "a\\xc3", "\\xaf", "v", "e"]
    stream = bpe.stream_decoder()
    assert [stream.step(i) for i in ids] == [" n", "a", "ï", "v", "e"]


def test_merges_replay_the_merge_list_and_end_at_the_librarys_tokens(bpe):
    for word in ("nobler", " question", " to be", "Café", "xyz"):
        for piece in bpe.word_merges(word):
            assert piece.matches, piece
            symbols = list(piece.start)
            for step in piece.steps:  # each step joins one pair of the list, wherever it occurs
                assert (step.left + step.right) in step.symbols and len(step.symbols) < len(symbols)
                symbols = list(step.symbols)
    question = bpe.word_merges(" question")[0]
    assert question.piece == "Ġquestion" and question.start == tuple("Ġquestion") and question.steps
    assert [s.rank for s in question.steps] == sorted(s.rank for s in question.steps)  # lowest rank first
    assert [bpe.symbol_label(s) for s in question.start[:2]] == ["␣", "q"]
    assert len(bpe.word_merges(" to be")) == 2  # the pre-tokenizer splits words first


@pytest.mark.parametrize("in_process_bytes", [2**20, 0], ids=["here", "in a worker process"])
def test_a_tokenizer_file_that_is_not_bpe_is_refused(in_process_bytes, monkeypatch):
    from playground.text import tokenizer_process
    from playground.text.subword import BPETokenizer, TokenizerFileError

    monkeypatch.setattr(tokenizer_process, "IN_PROCESS_BYTES", in_process_bytes)
    with pytest.raises(TokenizerFileError, match="not a tokenizer.json the tokenizers library can read"):
        BPETokenizer.from_str("{not json")
    from tokenizers import Tokenizer, models

    with pytest.raises(TokenizerFileError, match="holds a WordLevel model, not BPE"):
        BPETokenizer.from_str(Tokenizer(models.WordLevel({"a": 0}, unk_token="a")).to_str())
