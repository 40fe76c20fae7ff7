"""A tokenizer.json read by the ``tokenizers`` library, here or in a worker process of its own.

Owns ``LibraryTokenizer`` (what BPETokenizer asks of the library: encode, decode, the vocabulary, a word's pieces)
and ``ProcessTokenizer``, the same questions answered by a ``LibraryTokenizer`` built and kept in a worker process.
Knows nothing about models, checkpoints or the UI.

Why a process: the library builds a Tokenizer (``Tokenizer.from_str``, ``from_file``, even unpickling one) holding
Python's GIL all the while, so every other thread of the server stops with it. Measured on the shared 2-core machine
under load, a byte-level BPE of 151,936 tokens (Qwen2's count, a 3.8 MB tokenizer.json): from_str 1.4-1.6 s with
another thread held for 1.25-1.43 s of it, json.loads 0.4 s more, unpickling a built one 0.9-2.3 s; a 790k-token
one held it 10 s. A large tokenizer is therefore built and kept in a worker process of its own (a fresh interpreter that
imports only this module and the library), which this process waits on without the GIL; its
memory and time are capped, and when it dies (out of memory, killed) it is built again from the text on the next
call. A small one (up to 1 MiB: the BPEs trained here, the tests') is built here: a process's start costs more than it
saves.

    small = LibraryTokenizer(json_text)              # built here
    large = ProcessTokenizer(json_text)              # built in a process of its own; the same methods
    large.encode("Hello world") -> ([15496, 995], ["Hello", "Ġworld"], [(0, 5), (5, 11)])
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from playground import checks

IN_PROCESS_BYTES = 2**20  # a tokenizer.json up to this size is built in this process (GPT-2's, 1.4 MB, is not)
PROCESS_BASE_BYTES = 768 * 2**20  # a worker's memory cap: the interpreter and the library's threads, plus
PROCESS_BYTES_PER_TEXT_BYTE = 48  # this many bytes per byte of its tokenizer.json (budget.tokenizer_cost's scale)
BUILD_SECONDS = 120.0  # a worker that has not built its tokenizer by then is stopped
CALL_SECONDS = 30.0  # a question to a worker unanswered by then stops it
MAX_PROCESSES = 8  # workers alive at once (the kept checkpoints' and the requests' in flight)


class TokenizerFileError(ValueError):
    """A tokenizer.json that the ``tokenizers`` library cannot read, or that is not a BPE tokenizer."""


class TokenizerProcessError(TokenizerFileError):
    """The worker building or holding a tokenizer failed: over its memory or time, or too many at once."""


def has_byte_level(component: Any) -> bool:
    """Whether a tokenizer.json component (decoder, pre-tokenizer), or one in its Sequence, is ByteLevel."""
    if not isinstance(component, dict):
        return False
    if component.get("type") == "ByteLevel":
        return True
    parts = component.get("decoders") or component.get("pretokenizers") or []
    return any(has_byte_level(part) for part in parts)


def _size(count: int) -> str:
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count // 2**20} MiB"


class LibraryTokenizer:
    """A tokenizer.json built by the library, asked in plain values only (so a worker can answer the same)."""

    def __init__(self, json_text: str):
        from tokenizers import Tokenizer

        try:
            data = json.loads(json_text)
            self._tokenizer = Tokenizer.from_str(json_text)
        except MemoryError:
            raise
        except Exception as exc:  # the Rust library raises plain Exceptions
            raise TokenizerFileError("not a tokenizer.json the tokenizers library can read: "
                                     f"{checks.shown(str(exc), quote=False)}") from None
        model = data.get("model") if isinstance(data, dict) else None
        if not isinstance(model, dict) or model.get("type", "BPE") != "BPE" or "merges" not in model:
            kind = model.get("type") if isinstance(model, dict) else None
            raise TokenizerFileError(f"the tokenizer.json holds a {kind or 'unknown'} model, not BPE with merges")
        self._merges = model.get("merges") or []
        added = sorted(self._tokenizer.get_added_tokens_decoder().items(), key=lambda item: item[0])
        unk = model.get("unk_token")
        self._about = dict(
            byte_level=has_byte_level(data.get("decoder")) or has_byte_level(data.get("pre_tokenizer")),
            added=[(token_id, token.content, bool(token.special)) for token_id, token in added],
            unk_token=unk if isinstance(unk, str) else None,
            unk_id=self._tokenizer.token_to_id(unk) if isinstance(unk, str) else None,
            ignore_merges=bool(model.get("ignore_merges")),
            vocabulary_size=self._tokenizer.get_vocab_size(with_added_tokens=True))

    def about(self) -> dict:
        """byte_level, added [(id, text, special)], unk_token, unk_id, ignore_merges, vocabulary_size."""
        return self._about

    def encode(self, text: str) -> tuple[list[int], list[str], list[tuple[int, int]]]:
        """(ids, tokens as the vocabulary writes them, (start, end) offsets), without special tokens added."""
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return encoding.ids, encoding.tokens, encoding.offsets

    def decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=False)

    def id_to_token(self, token_id: int) -> str | None:
        return self._tokenizer.id_to_token(token_id)

    def token_to_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def word_pieces(self, word: str) -> list[tuple[str, tuple[str, ...]]]:
        """The pre-tokenized pieces of ``word`` (normalized first), each with the tokens the model gives it."""
        normalizer, pre_tokenizer = self._tokenizer.normalizer, self._tokenizer.pre_tokenizer
        text = normalizer.normalize_str(word) if normalizer is not None else word
        pieces = [piece for piece, _ in pre_tokenizer.pre_tokenize_str(text)] if pre_tokenizer is not None else [text]
        return [(piece, tuple(token.value for token in self._tokenizer.model.tokenize(piece))) for piece in pieces]

    def merges(self) -> list:
        """The merge list as the file writes it ("a b" or ["a", "b"]), first merged first."""
        return self._merges


# ----------------------------------------------------------------------------------------------- the worker process
def _serve(connection, memory_bytes: int) -> None:
    """The worker: cap its memory, build the tokenizer sent first, then answer (verb, arguments) until the pipe
    closes."""
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    try:
        json_text = connection.recv()
    except (EOFError, OSError):
        return
    try:
        built = LibraryTokenizer(json_text)
    except MemoryError:
        connection.send((False, "memory"))
        return
    except TokenizerFileError as exc:
        connection.send((False, str(exc)))
        return
    del json_text
    connection.send((True, built.about()))
    while True:
        try:
            verb, arguments = connection.recv()
        except (EOFError, OSError):
            return
        try:
            connection.send((True, getattr(LibraryTokenizer, verb)(built, *arguments)))
        except MemoryError:
            connection.send((False, "memory"))
        except Exception as exc:
            connection.send((False, f"{type(exc).__name__}: {checks.shown(str(exc), quote=False)}"))


_alive = threading.BoundedSemaphore(MAX_PROCESSES)
WORKER_CODE = f"import sys; from {__name__} import worker_main; worker_main(sys.argv[1:])"


class _Worker:
    """One started worker process and its end of the pipe; stopped (and its place given back) once."""

    def __init__(self, json_text: str, memory_bytes: int):
        if not _alive.acquire(blocking=False):
            raise TokenizerProcessError(f"this server already holds {MAX_PROCESSES} large tokenizers: try again once "
                                        "a request has finished")
        # a fresh interpreter running this module alone (multiprocessing's spawn would import the server's own
        # __main__, app.py and Gradio with it, in every worker)
        ours, theirs = socket.socketpair()
        self._stopped = False
        self.connection = Connection(ours.detach())
        package_root = str(Path(__file__).resolve().parents[2])
        environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [package_root, *filter(None, [os.environ.get("PYTHONPATH")])]))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", WORKER_CODE, str(theirs.fileno()), str(memory_bytes)],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL, env=environment)
        except OSError as exc:
            self.process = None
            self.stop()
            raise TokenizerProcessError(f"could not start a process for the tokenizer: {exc.strerror}") from None
        finally:
            theirs.close()
        try:
            self.connection.send(json_text)
        except OSError:
            pass  # it died at once: answer() says so

    def answer(self, seconds: float, what: str, memory_bytes: int):
        """The worker's next answer (waited for without the GIL); stops it and raises on time, memory or death."""
        try:
            if not self.connection.poll(seconds):
                self.stop()
                raise TokenizerProcessError(f"the tokenizer took longer than {seconds:.0f} s to {what}: it is too "
                                            "large for this server")
            ok, value = self.connection.recv()
        except (EOFError, OSError):
            self.stop()
            raise TokenizerProcessError(f"the tokenizer's process stopped while it was asked to {what} (more than "
                                        f"{_size(memory_bytes)}?): it is too large for this server") from None
        if not ok:
            if value == "memory":
                self.stop()
                raise TokenizerProcessError(f"the tokenizer needs more than {_size(memory_bytes)} to "
                                            f"{what}: it is too large for this server")
            raise TokenizerFileError(value)
        return value

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.connection.close()
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=5)
        _alive.release()


class ProcessTokenizer:
    """A LibraryTokenizer built and kept in a worker process of its own: the same methods, answered there.

    Built when made (a TokenizerFileError says why it cannot be); a worker that dies later is built again from the
    text at the next question. Calls to one tokenizer take turns; the worker is stopped when this is collected."""

    def __init__(self, json_text: str, build_seconds: float = BUILD_SECONDS, call_seconds: float = CALL_SECONDS,
                 memory_bytes: int | None = None):
        self._json = json_text
        self.build_seconds, self.call_seconds = build_seconds, call_seconds
        self.memory_bytes = memory_bytes or (PROCESS_BASE_BYTES + PROCESS_BYTES_PER_TEXT_BYTE * len(json_text))
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._merges: list | None = None
        with self._lock:
            self._about = self._start()

    def _start(self) -> dict:
        """Under the lock: a worker holding the built tokenizer; returns what it says about it."""
        worker = _Worker(self._json, self.memory_bytes)
        if self._worker is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, worker.stop)
        try:
            about = worker.answer(self.build_seconds, "build", self.memory_bytes)
        except TokenizerFileError:
            worker.stop()
            raise
        self._worker = worker
        return about

    def _ask(self, verb: str, *arguments):
        with self._lock:
            for tries_left in (1, 0):
                if self._worker is None or self._worker._stopped:
                    self._start()
                try:
                    self._worker.connection.send((verb, arguments))
                    break
                except OSError:  # the worker died since its last answer (killed, out of memory): built again
                    self._worker.stop()
                    if not tries_left:
                        raise TokenizerProcessError("the tokenizer's process keeps stopping: try again later") from None
            return self._worker.answer(self.call_seconds, verb.replace("_", " "), self.memory_bytes)

    def about(self) -> dict:
        return self._about

    def encode(self, text: str):
        return self._ask("encode", text)

    def decode(self, ids: list[int]) -> str:
        return self._ask("decode", ids)

    def id_to_token(self, token_id: int) -> str | None:
        return self._ask("id_to_token", token_id)

    def token_to_id(self, token: str) -> int | None:
        return self._ask("token_to_id", token)

    def word_pieces(self, word: str):
        return self._ask("word_pieces", word)

    def merges(self) -> list:
        if self._merges is None:
            self._merges = self._ask("merges")
        return self._merges

    def close(self) -> None:
        """Stop the worker now (it is stopped when this is collected otherwise)."""
        self._finalizer()


def library_tokenizer(json_text: str) -> LibraryTokenizer | ProcessTokenizer:
    """The text built here when it is small (``IN_PROCESS_BYTES``), else in a worker process of its own."""
    if len(json_text) <= IN_PROCESS_BYTES:
        return LibraryTokenizer(json_text)
    return ProcessTokenizer(json_text)


def worker_main(arguments: list[str]) -> None:
    """A worker's entry (``_Worker`` starts it): FD MEMORY_BYTES, the pipe's end it inherited and its memory cap."""
    _serve(Connection(int(arguments[0])), int(arguments[1]))
