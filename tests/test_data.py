import http.server
import threading
from pathlib import Path

import pytest
import torch

from playground import settings
from playground.text import data
from playground.text.data import CorpusError, TokenIdsDataset, decode_text, load_corpus, split_train_val


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


def test_offline_without_cache_falls_back_to_builtin_and_says_why(monkeypatch):
    monkeypatch.delenv("PLAYGROUND_TINY_SHAKESPEARE")
    corpus = load_corpus()
    assert corpus.source == "builtin" and "Shall I compare thee to a summer's day?" in corpus.text
    assert not corpus.is_tiny_shakespeare and corpus.label == "the built-in Sonnets corpus"
    assert corpus.reason == "offline and Tiny Shakespeare is not cached, so the built-in Sonnets are used"


def test_each_corpus_knows_its_label_and_whether_a_visitor_gave_it(tmp_path, shakespeare_text):
    mine = tmp_path / "mine.txt"
    mine.write_text("from a file", encoding="utf-8")
    named_like_it = tmp_path / "tinyshakespeare.txt"  # a server file by that name is taken at its word
    named_like_it.write_text(shakespeare_text[:100], encoding="utf-8")
    cases = {
        "tiny shakespeare": (load_corpus(), "Tiny Shakespeare", True, False),
        "the keyword": (load_corpus("tinyshakespeare"), "Tiny Shakespeare", True, False),
        "a file named so": (load_corpus(named_like_it), "Tiny Shakespeare", True, False),
        "built-in": (data.builtin_corpus(), "the built-in Sonnets corpus", False, False),
        "a server file": (load_corpus(mine), "the mine corpus", False, False),
        "upload": (load_corpus(text="abc", name="notes", uploaded=True), "an uploaded file", False, True),
        "paste": (load_corpus(text="abc"), "the pasted text", False, True),
        "a paste calling itself so": (load_corpus(text="abc", name="tinyshakespeare"), "the pasted text", False,
                                      True),
    }
    for what, (corpus, label, tiny, visitor) in cases.items():
        assert (corpus.label, corpus.is_tiny_shakespeare, corpus.from_visitor) == (label, tiny, visitor), what
        assert corpus.reason, f"{what} does not say why it is what it is"


def test_a_checkpoints_training_record_answers_the_same_question():
    """training.json keeps {"name", "characters", "source"}: the Tokenize tab asks whether that was Tiny Shakespeare."""
    assert data.is_tiny_shakespeare("tinyshakespeare", "path") and data.is_tiny_shakespeare("tinyshakespeare")
    assert not data.is_tiny_shakespeare("tinyshakespeare", "text")
    assert not data.is_tiny_shakespeare("builtin", "builtin") and not data.is_tiny_shakespeare(None, None)
    corpus = load_corpus()
    assert data.is_tiny_shakespeare(corpus.name, corpus.source) == corpus.is_tiny_shakespeare


def test_a_missing_file_is_read_as_a_file_not_sniffed_by_name(tmp_path):
    with pytest.raises(CorpusError, match="cannot read tinyshakespeare"):
        load_corpus(tmp_path / "tinyshakespeare")


def test_settings_are_read_when_called(monkeypatch, tmp_path):
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path / "here"))
    assert settings.cache_dir() == tmp_path / "here"
    monkeypatch.delenv("PLAYGROUND_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert settings.cache_dir() == Path(tmp_path) / ".cache" / "attention-playground"
    for value, expected in (("1", True), ("TRUE", True), (" yes ", True), ("0", False), ("", False)):
        monkeypatch.setenv("PLAYGROUND_OFFLINE", value)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        assert settings.offline() is expected, value
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert settings.offline()


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
    assert first.is_tiny_shakespeare and second.is_tiny_shakespeare and first.reason != second.reason
    assert first.text == second.text == _Handler.body.decode()
    assert _Handler.hits == 1
    assert (tmp_path / "tinyshakespeare.txt").is_file()


def test_failed_download_falls_back_to_builtin(monkeypatch):
    monkeypatch.delenv("PLAYGROUND_TINY_SHAKESPEARE")
    monkeypatch.delenv("PLAYGROUND_OFFLINE")
    monkeypatch.setenv("PLAYGROUND_CORPUS_URL", "http://127.0.0.1:9/nothing-listens-here")
    corpus = load_corpus()
    assert corpus.source == "builtin" and corpus.reason.startswith("the Tiny Shakespeare download failed")
    assert "127.0.0.1" not in corpus.reason  # visitors read it; the URL and error go to the server log


@pytest.mark.parametrize("raw,match", [(b"", "empty"), (b"  \n", "empty"), (b"ab\x00cd", "binary"),
                                       (b"ab\xfa", "not UTF-8"), (b"x" * 11, "upload.txt is 11 bytes; the limit is 10"),
                                       ("hi".encode("utf-16"), "is UTF-16 text; save it as UTF-8"),
                                       ("hi!".encode("utf-16-le"), "is UTF-16 text")])
def test_uploads_are_checked(raw, match):
    with pytest.raises(CorpusError, match=match):
        decode_text(raw, "upload.txt", max_bytes=10)


def test_an_upload_says_its_whole_size_and_drops_a_utf8_byte_order_mark():
    """The handler reads at most the cap plus a byte: the message gives the file's own size, not what was read."""
    with pytest.raises(CorpusError, match="upload.txt is 7,285,504 bytes; the limit is 10 bytes"):
        decode_text(b"x" * 11, "upload.txt", max_bytes=10, size=7_285_504)
    assert decode_text("\ufeffto be".encode(), "upload.txt") == "to be"


def test_the_tokenize_tab_says_which_corpus_it_counts_in_and_why(monkeypatch, tiny_weights):
    """Offline with nothing cached, the Sonnets stand in for Tiny Shakespeare: the counts say so, not the old label."""
    from playground.config import Limits
    from playground.ui import tokenize_tab
    from playground.ui.common import AppContext

    online = AppContext(limits=Limits(), weights=tiny_weights)
    *_, stats, table = tokenize_tab.tokenize(online, "to be", "loaded checkpoint", "shakespeare-char")
    assert table["headers"][3] == "count in Tiny Shakespeare" and "built-in" not in stats

    monkeypatch.delenv("PLAYGROUND_TINY_SHAKESPEARE")
    offline = AppContext(limits=Limits(), weights=tiny_weights)
    *_, stats, table = tokenize_tab.tokenize(offline, "to be", "loaded checkpoint", "shakespeare-char")
    assert table["headers"][3] == "count in the built-in Sonnets corpus"
    assert ("shakespeare-char was trained on Tiny Shakespeare, but the counts are in the built-in Sonnets corpus: "
            "offline and Tiny Shakespeare is not cached, so the built-in Sonnets are used.") in stats
    *_, stats, table = tokenize_tab.tokenize(offline, "to be", "corpus (Tiny Shakespeare)", None)
    assert table["headers"][3] == "count in the built-in Sonnets corpus"
    assert "offline and Tiny Shakespeare is not cached" in stats
