"""A large tokenizer.json is built and kept in a worker process of its own, so building it never holds this
process's GIL: the library's Tokenizer.from_str held it 1.25-1.43 s for Qwen2's 151,936 tokens and 10 s for a
790k-token bomb, and every other visitor's view stalled behind it (issue 54). Its memory and time are capped, and its
failures are told in words."""

from __future__ import annotations

import itertools
import json
import threading

import pytest

from playground.text import tokenizer_process
from playground.text.subword import BPETokenizer, TokenizerFileError, bytes_to_unicode
from playground.text.tokenizer import CharTokenizer
from playground.text.tokenizer_process import ProcessTokenizer, TokenizerProcessError


def byte_level_bpe(tokens: int) -> str:
    """A byte-level BPE tokenizer.json of ``tokens`` tokens, every one a merge of two before it."""
    alphabet = list(bytes_to_unicode().values())
    vocab = {character: i for i, character in enumerate(alphabet)}
    merges = []
    for left, right in itertools.product(alphabet, alphabet):
        if len(vocab) >= tokens:
            break
        vocab[left + right] = len(vocab)
        merges.append(f"{left} {right}")
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return json.dumps({"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": byte_level,
                       "post_processor": None, "decoder": byte_level,
                       "model": {"type": "BPE", "vocab": vocab, "merges": merges}}, ensure_ascii=False)


@pytest.fixture(scope="module")
def large() -> str:
    text = byte_level_bpe(65_536)  # 256 bytes and every pair of them
    assert len(text) > tokenizer_process.IN_PROCESS_BYTES
    return text


def test_a_large_tokenizer_builds_in_a_process_while_this_one_keeps_answering(large):
    """An event-ordering check: a quick view (a character tokenizer's encode, as the Tokenize tab runs) started once
    the large tokenizer's worker is building ends before the build does. Built here, the build held the GIL from
    its start to its end and the quick view could only end after it."""
    started, built, answered_while_building = threading.Event(), threading.Event(), []
    real = tokenizer_process._Worker.__init__

    def starting(worker, *arguments):
        real(worker, *arguments)
        started.set()

    quick = CharTokenizer.train_from_text("to be or not to be")
    holder = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokenizer_process._Worker, "__init__", starting)
        building = threading.Thread(target=lambda: holder.update(tokenizer=BPETokenizer.from_str(large)) or built.set())
        building.start()
        assert started.wait(60), "no worker process was started for a large tokenizer"
        for _ in range(20):
            quick.encode("not to be")
            answered_while_building.append(not built.is_set())
        building.join(120)
    assert built.is_set() and all(answered_while_building)
    tokenizer = holder["tokenizer"]
    assert type(tokenizer._tokenizer) is ProcessTokenizer and tokenizer.vocabulary_size == 65_536
    assert tokenizer.decode(tokenizer.encode("Hello, wörld")) == "Hello, wörld"
    assert len(tokenizer.encode("Hello")) == 3  # "He" "ll" "o": pairs merged
    tokenizer._tokenizer.close()


def test_a_worker_that_dies_is_built_again_at_the_next_question(large):
    tokenizer = ProcessTokenizer(large)
    ids = tokenizer.encode("abc")[0]
    tokenizer._worker.process.kill()
    tokenizer._worker.process.wait()
    assert tokenizer.encode("abc")[0] == ids
    tokenizer.close()
    assert tokenizer._worker.process.poll() is not None  # closed: its process has ended


def test_a_worker_over_its_memory_or_time_is_stopped_with_a_message(large):
    with pytest.raises(TokenizerProcessError, match=r"more than 24 MiB.*too large for this server"):
        ProcessTokenizer(large, memory_bytes=24 * 2**20)
    with pytest.raises(TokenizerProcessError, match="took longer than 0 s to build: it is too large"):
        ProcessTokenizer(large, build_seconds=0.001)
    with pytest.raises(TokenizerFileError, match="not a tokenizer.json the tokenizers library can read"):
        ProcessTokenizer("{" + large[:-1])


def test_the_server_keeps_a_bounded_number_of_workers(large, monkeypatch):
    monkeypatch.setattr(tokenizer_process, "_alive", threading.BoundedSemaphore(1))
    first = ProcessTokenizer(large)
    with pytest.raises(TokenizerProcessError, match="already holds 8 large tokenizers"):
        ProcessTokenizer(large)
    first.close()
    ProcessTokenizer(large).close()  # its place was given back
