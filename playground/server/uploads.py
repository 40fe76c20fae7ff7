"""Uploads reserved in the temp space's quota before they are written, a share per client inside it, and no
partial file left when a connection drops.

Gradio writes an upload as it arrives to a ``tmp*`` file at the top of its upload folder, then renames it into a
folder named by its hash. Nothing counted the bytes on their way: 100 uploads held open put 3.1 GB on disk against
a 500 MB quota, the sweep before each upload unlinked others still being written (their space stayed allocated),
and 740 MB of partial files stayed after their connections dropped. ``UploadLedger``:

- ``reserve(client, incoming)`` before Gradio reads a byte: the upload's declared size (a chunked one, the most
  Gradio takes) is held against the client's share (``per_client``) and the quota, the client's own earlier uploads
  making room first, then the temp space's sweep (temp_space.sweep, which never counts or removes a file still
  being written); an upload that would still pass either is refused before its bytes land;
- ``release(reservation, written)`` when the request ends: what it wrote is recorded as the client's; a request
  that ended without writing (dropped, refused, timed out) has its partial files removed.

``Uploads`` is the ASGI middleware around Gradio's upload route that does both.

    quota 100 MB, per client 32 MB: a client's second 30 MB upload removes their first; five clients' 30 MB
    uploads in flight at once leave the fourth refused until one ends.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from playground.server import temp_space
from playground.server.bodies import answer, human

logger = logging.getLogger(__name__)

UPLOAD_SUFFIX = "/upload"


class UploadRefusedError(ValueError):
    """An upload that does not fit its client's share or the temp space's quota; the message says why."""


@dataclass
class Reservation:
    client: str
    num_bytes: int
    started: float


@dataclass
class UploadLedger:
    """What is reserved in the temp space for uploads in flight, and which stored uploads are whose (module doc)."""

    root_of: Callable[[], Path]  # Gradio's upload folder (asked when needed: it may move at launch)
    max_bytes: int
    max_age_seconds: float
    per_client: int
    largest: int  # the most Gradio takes in one upload (max_file_size): a chunked upload reserves this
    _reserved: list[Reservation] = field(default_factory=list)
    _stored: dict[str, list[Path]] = field(default_factory=dict)  # client -> their uploads, oldest first
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def reserved(self) -> int:
        with self._lock:
            return sum(reservation.num_bytes for reservation in self._reserved)

    def reserve(self, client: str, incoming: int | None) -> Reservation:
        """Hold ``incoming`` bytes (None: chunked, ``largest``) for ``client``'s upload, or raise UploadRefusedError.
        Called in a worker thread: it may remove files."""
        size = self.largest if incoming is None else int(incoming)
        with self._lock:
            mine = sum(reservation.num_bytes for reservation in self._reserved if reservation.client == client)
            if mine + size > self.per_client:
                raise UploadRefusedError(
                    f"this upload of {human(size)} and your others under way would pass {human(self.per_client)}, "
                    "what this server takes from one visitor at a time: wait for them to finish, or send less")
            self._make_room_for_own(client, mine + size)
            others = sum(reservation.num_bytes for reservation in self._reserved)
            root = self.root_of()
            try:
                temp_space.sweep(root, self.max_bytes, self.max_age_seconds, incoming=others + size)
            except temp_space.TempSpaceError:
                pass  # over the quota alone: refused below
            if temp_space.usage(root, counted_only=True) + others + size > self.max_bytes:
                raise UploadRefusedError(
                    f"this server's space for uploads ({human(self.max_bytes)}) is taken by uploads under way: try "
                    "again in a minute")
            reservation = Reservation(client, size, time.time())
            self._reserved.append(reservation)
            return reservation

    def release(self, reservation: Reservation, written: list[str] | None) -> None:
        """The upload ``reservation`` held for has ended: ``written``, the files it stored (None: it failed, and what
        it left half-written goes)."""
        with self._lock:
            if reservation in self._reserved:
                self._reserved.remove(reservation)
            if written:
                self._stored.setdefault(reservation.client, []).extend(Path(path) for path in written)
            in_flight = bool(self._reserved)
        if written is None:
            removed = temp_space.remove_partials(self.root_of(), all_of_them=not in_flight)
            if removed:
                logger.info("an upload ended unfinished: removed %d bytes it left half-written", removed)

    def _make_room_for_own(self, client: str, needed: int) -> None:
        """Remove ``client``'s own oldest uploads until theirs and ``needed`` fit their share (lock held)."""
        stored = [path for path in self._stored.get(client, []) if path.is_file()]
        held = sum(_size(path) for path in stored)
        while stored and held + needed > self.per_client:
            oldest = stored.pop(0)
            held -= _size(oldest)
            try:
                oldest.unlink()
            except OSError:
                pass
        if stored:
            self._stored[client] = stored
        else:
            self._stored.pop(client, None)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class Uploads:
    """Pure ASGI middleware around Gradio's upload route: reserve before Gradio reads, release when it ends
    (UploadLedger). A refusal is a 413 with its reason; an upload that ends unwritten logs one line."""

    def __init__(self, app, ledger: UploadLedger, client_of: Callable[[dict], str]):
        self.app, self.ledger, self.client_of = app, ledger, client_of

    async def __call__(self, scope, receive, send):
        if not (scope["type"] == "http" and scope.get("method") == "POST"
                and scope.get("path", "").rstrip("/").endswith(UPLOAD_SUFFIX)):
            await self.app(scope, receive, send)
            return
        declared = next((value for name, value in scope.get("headers") or () if name.lower() == b"content-length"),
                        b"")
        incoming = int(declared) if declared.isdigit() else None
        try:
            # in a worker thread: it may remove files
            reservation = await anyio.to_thread.run_sync(self.ledger.reserve, self.client_of(scope), incoming)
        except UploadRefusedError as exc:
            await answer(send, 413, f"Upload refused: {exc}.")
            return
        arrived, status, body = 0, None, []

        async def counted_receive():
            nonlocal arrived
            message = await receive()
            if message["type"] == "http.request":
                arrived += len(message.get("body", b""))
                if arrived > reservation.num_bytes:  # a chunked upload past the most Gradio takes
                    raise UploadRefusedError("more bytes than reserved")
            return message

        async def recorded_send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status == 200:
                body.append(message.get("body", b""))
            await send(message)

        written: list[str] | None = None
        try:
            await self.app(scope, counted_receive, recorded_send)
            if status == 200:
                written = _paths(b"".join(body))
        except Exception as exc:  # noqa: BLE001 (a dropped connection, a timeout, more than reserved: one line)
            logger.info("an upload ended unfinished after %s bytes (%s)", f"{arrived:,}", type(exc).__name__)
            if status is None:
                await answer(send, 400, "The upload did not arrive whole; send it again.")
        finally:
            await anyio.to_thread.run_sync(self.ledger.release, reservation, written)


def _paths(body: bytes) -> list[str] | None:
    """The files Gradio's upload route answered with (a JSON list of paths), None where it answered otherwise."""
    try:
        paths = json.loads(body)
    except ValueError:
        return None
    return [path for path in paths if isinstance(path, str)] if isinstance(paths, list) else None
