import http.server
import threading

import pytest
import torch

from playground import data
from playground.data import CorpusError, TokenIdsDataset, decode_text, load_corpus, split_train_val


def test_dataset_windows_match_the_worked_example():
    dataset = TokenIdsDataset(torch.arange(1, 10), block_size=4)
    assert len(dataset) == 5
    x, y = dataset[0]
    assert x.tolist() == [1, 2, 3, 4] and y.tolist() == [2, 3, 4, 5]
    x, y = dataset[4]
    assert x.tolist() == [5, 6, 7, 8] and y.tolist() == [6, 7, 8, 9]
    with pytest.raises(IndexError):
        dataset[5]


def test_seeded_batches_are_repeatable_and_shifted():
    dataset = TokenIdsDataset(torch.arange(100), block_size=8)
    x1, y1 = dataset.random_batch(4, torch.Generator().manual_seed(3))
    x2, y2 = dataset.random_batch(4, torch.Generator().manual_seed(3))
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.shape == (4, 8) and torch.equal(y1, x1 + 1)


def test_split_is_ninety_ten_with_validation_last():
    train, val = split_train_val(torch.arange(100))
    assert train.tolist() == list(range(90)) and val.tolist() == list(range(90, 100))


def test_too_short_text_for_context_is_a_clear_error():
    with pytest.raises(CorpusError, match="too few for context_size 8"):
        TokenIdsDataset(torch.arange(5), block_size=8)


def test_corpus_order_explicit_text_then_path(tmp_path):
    assert load_corpus(text="pasted").source == "text"
    file = tmp_path / "mine.txt"
    file.write_text("from a file", encoding="utf-8")
    corpus = load_corpus(path=file)
    assert (corpus.source, corpus.text, corpus.name) == ("path", "from a file", "mine")


def test_tiny_shakespeare_from_explicit_file(shakespeare_text):
    corpus = load_corpus()
    assert corpus.name == "tinyshakespeare" and len(corpus) == 1_115_394


def test_offline_without_cache_falls_back_to_builtin(monkeypatch):
    monkeypatch.delenv("PLAYGROUND_TINY_SHAKESPEARE")
    corpus = load_corpus()
    assert corpus.source == "builtin" and "Shall I compare thee to a summer's day?" in corpus.text


def test_builtin_corpus_fits_tiny_shakespeare_vocabulary(shakespeare_text):
    assert set(data.builtin_corpus().text) <= set(shakespeare_text)


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b"First Citizen:\nBefore we proceed any further, hear me speak.\n" * 50
    hits = 0

    def do_GET(self):  # noqa: N802
        type(self).hits += 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_download_is_cached_and_reused(monkeypatch, tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.delenv("PLAYGROUND_TINY_SHAKESPEARE")
        monkeypatch.delenv("PLAYGROUND_OFFLINE")
        monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path))
        monkeypatch.setenv("PLAYGROUND_CORPUS_URL", f"http://127.0.0.1:{server.server_port}/input.txt")
        first = load_corpus()
        second = load_corpus()
    finally:
        server.shutdown()
    assert (first.source, second.source) == ("download", "cache")
    assert first.text == second.text == _Handler.body.decode()
    assert _Handler.hits == 1
    assert (tmp_path / "tinyshakespeare.txt").is_file()


def test_failed_download_falls_back_to_builtin(monkeypatch):
    monkeypatch.delenv("PLAYGROUND_TINY_SHAKESPEARE")
    monkeypatch.delenv("PLAYGROUND_OFFLINE")
    monkeypatch.setenv("PLAYGROUND_CORPUS_URL", "http://127.0.0.1:9/nothing-listens-here")
    assert load_corpus().source == "builtin"


@pytest.mark.parametrize("raw,match", [(b"", "empty"), (b"  \n", "empty"), (b"ab\x00cd", "binary"),
                                       (b"\xff\xfe\xfa", "not UTF-8"), (b"x" * 11, "limit is 10")])
def test_uploads_are_checked(raw, match):
    with pytest.raises(CorpusError, match=match):
        decode_text(raw, "upload.txt", max_bytes=10)
