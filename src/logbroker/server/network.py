"""The socket side of the broker: listeners, connections, frames in, responses out in order.

One asyncio.Protocol per connection. Every complete frame in a read is handed to the dispatcher at
once (clients pipeline requests), and responses leave in request order, however long each takes:
each request gets a slot in a queue, and one writer coroutine per connection drains the queue from
the head.

Writing: byte chunks go through the transport; a Fetch response's record regions go straight from
the page cache to the socket with os.sendfile, never through Python. The two must not interleave,
so the transport's high-water mark is 0: any byte it has to buffer pauses writing, and the writer
waits for `resume_writing` (the buffer is empty again) before its next sendfile. When sendfile hits
a full socket, a small piece of the region is written through the transport instead, which parks
the writer until the socket drains — the only time record bytes are copied, a few KiB per stall.

TLS (SSL and SASL_SSL listeners): the connection keeps a TlsSession (server/tls.py) and passes
every byte through it. Record regions cannot go by sendfile under TLS; they are read with
os.pread in TLS_CHUNK_BYTES pieces, encrypted and written, and the transport keeps a larger
high-water mark (TLS_WRITE_BUFFER_BYTES) since nothing bypasses it. PLAINTEXT and SASL_PLAINTEXT
keep the sendfile path untouched.

SASL (SASL_PLAINTEXT, SASL_SSL): `sasl` is the connection's SaslServerAuthenticator and
`auth_gate` is True until it completes (or while a re-authentication deadline is set); the
dispatcher checks the gate, so an authenticated connection pays one attribute test per request.

Backpressure: a connection with more than MAX_IN_FLIGHT unanswered requests stops being read
until the writer catches up, so a fast producer cannot make the broker buffer without bound.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Union

from logbroker.errors import KafkaError
from logbroker.protocol.framing import FrameDecoder
from logbroker.security.principal import ANONYMOUS, ssl_principal
from logbroker.server.tls import TlsError, TlsSession
from logbroker.storage.values import FileRegion

log = logging.getLogger("kafka.network.SocketServer")

MAX_IN_FLIGHT = 128
RESUME_IN_FLIGHT = 32
STALL_PIECE_BYTES = 4096
TLS_CHUNK_BYTES = 262144
TLS_WRITE_BUFFER_BYTES = 1048576


class Close:
    """A response slot that closes the connection once the responses before it are written."""


CLOSE = Close()


class CloseAfter:
    """A response slot that writes `response` and then closes the connection (a failed
    authentication). Handlers return it around their dict; the dispatcher encodes the inside."""

    __slots__ = ("response",)

    def __init__(self, response) -> None:
        self.response = response


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """How connections to one listener are secured. `ssl_context` is set for SSL and SASL_SSL;
    `authenticator` (peer → SaslServerAuthenticator) for SASL_PLAINTEXT and SASL_SSL;
    `max_unauthenticated_request_bytes` (sasl.server.max.receive.size) bounds frames before
    authentication."""

    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    ssl_context: Any = None
    authenticator: Callable[[str], Any] | None = None
    max_unauthenticated_request_bytes: int = 524288


PLAINTEXT = ListenerSecurity()
Chunks = list[Union[bytes, bytearray, memoryview, FileRegion]]
Response = Union[Chunks, None, Close]
Handler = Callable[[memoryview, "KafkaConnection"], Union[Response, Awaitable[Response]]]


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: KafkaServer, security: ListenerSecurity = PLAINTEXT) -> None:
        self.server = server
        self.security = security
        self.listener_name = security.listener_name
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.principal = ANONYMOUS
        self.tls: TlsSession | None = None
        self.sasl = None  # SaslServerAuthenticator on SASL listeners
        self.auth_gate = False
        self._received_any = False
        self.decoder = FrameDecoder(server.max_request_bytes)
        self.last_active_ms = server.clock_ms()
        self._slots: collections.deque = collections.deque()
        self._slot_ready = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._reading_paused = False
        self._writer: asyncio.Task | None = None
        self._sock_fd = -1

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        sock = transport.get_extra_info("socket")
        self._sock_fd = sock.fileno()
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        security = self.security
        if security.ssl_context is not None:
            self.tls = TlsSession(security.ssl_context)
            transport.set_write_buffer_limits(high=TLS_WRITE_BUFFER_BYTES)
        else:
            transport.set_write_buffer_limits(high=0)
        if security.authenticator is not None:
            self.sasl = security.authenticator(self.peer)
            self.auth_gate = True
            self.decoder = FrameDecoder(min(self.server.max_request_bytes,
                                            security.max_unauthenticated_request_bytes))
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_active_ms = self.server.clock_ms()
        if self.tls is not None:
            data = self._tls_received(data)
            if not data:
                return
        try:
            frames = self.decoder.feed(data)
        except KafkaError as exc:
            if not self._received_any and data[:2] == b"\x16\x03":
                log.warning("Closing connection from %s: a TLS handshake arrived on %s listener %s",
                            self.peer, self.security.security_protocol, self.listener_name)
            else:
                log.warning("Closing connection from %s: %s", self.peer, exc)
            self.abort()
            return
        self._received_any = True
        for frame in frames:
            result = self.server.handler(frame, self)
            if asyncio.iscoroutine(result):
                result = asyncio.ensure_future(result)
            self._slots.append(result)
        if frames:
            self._slot_ready.set()
        if len(self._slots) > MAX_IN_FLIGHT and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def _tls_received(self, data: bytes) -> bytes:
        tls = self.tls
        was_done = tls.handshake_done
        try:
            plaintext = tls.receive(data)
        except TlsError as exc:
            what = "TLS handshake failed" if not was_done else "TLS error"
            hint = " (a plaintext client?)" if not was_done and data[:1] != b"\x16" else ""
            log.warning("Closing connection from %s on %s listener %s: %s%s: %s", self.peer,
                        self.security.security_protocol, self.listener_name, what, hint, exc)
            self.abort()
            return b""
        output = tls.take_output()
        if output:
            self.transport.write(output)
        if not was_done and tls.handshake_done and self.sasl is None:
            self.principal = ssl_principal(tls.peer_subject)
        return plaintext

    def authenticated(self, principal: str) -> None:
        """The SASL exchange completed: lift the gate (unless a re-authentication deadline
        keeps it) and allow full-size requests."""
        self.principal = principal
        self.auth_gate = bool(self.sasl.session_expiry_ms)
        if self.decoder.buffered_bytes == 0:
            self.decoder = FrameDecoder(self.server.max_request_bytes)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self._writer is not None:
            self._writer.cancel()
        for slot in self._slots:
            if isinstance(slot, asyncio.Future):
                slot.cancel()
        self._slots.clear()
        self._can_write.set()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # -- writing ------------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        try:
            while True:
                if not self._slots:
                    self._slot_ready.clear()
                    await self._slot_ready.wait()
                    continue
                slot = self._slots[0]
                response = await slot if isinstance(slot, asyncio.Future) else slot
                self._slots.popleft()
                if self._reading_paused and len(self._slots) <= RESUME_IN_FLIGHT:
                    self._reading_paused = False
                    self.transport.resume_reading()
                if response is None:
                    continue
                if response is CLOSE:
                    self.transport.close()
                    return
                if isinstance(response, CloseAfter):
                    await self._send(response.response)
                    self.transport.close()
                    return
                await self._send(response)
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - one bad connection must not leave a dangling task
            log.exception("Closing connection from %s after a failure while writing", self.peer)
            self.abort()

    async def _send(self, chunks: Chunks) -> None:
        pending: list = []
        for chunk in chunks:
            if isinstance(chunk, FileRegion):
                if pending:
                    await self._write_bytes(pending)
                    pending = []
                await self._sendfile(chunk)
            else:
                pending.append(chunk)
        if pending:
            await self._write_bytes(pending)

    async def _write_bytes(self, pieces: list) -> None:
        if not self._can_write.is_set():
            await self._can_write.wait()
        if self.tls is not None:
            self.transport.write(self.tls.encrypt(pieces[0] if len(pieces) == 1 else b"".join(pieces)))
            return
        self.transport.writelines(pieces)

    async def _sendfile(self, region: FileRegion) -> None:
        if self.tls is not None:
            await self._send_region_tls(region)
            return
        offset, remaining = region.position, region.size
        while remaining > 0:
            if not self._can_write.is_set():
                await self._can_write.wait()
            if self.transport.is_closing():
                return
            try:
                sent = os.sendfile(self._sock_fd, region.fd, offset, remaining)
            except BlockingIOError:
                piece = os.pread(region.fd, min(remaining, STALL_PIECE_BYTES), offset)
                self.transport.write(piece)
                sent = len(piece)
            if sent == 0:
                # The file is shorter than the size already promised in the response frame.
                raise OSError(f"segment file ended {remaining} bytes early while sending a fetch response")
            offset += sent
            remaining -= sent


    async def _send_region_tls(self, region: FileRegion) -> None:
        """A record region under TLS: pread, encrypt, write, in bounded chunks (no sendfile)."""
        offset, remaining = region.position, region.size
        while remaining > 0:
            if not self._can_write.is_set():
                await self._can_write.wait()
            if self.transport.is_closing():
                return
            piece = os.pread(region.fd, min(remaining, TLS_CHUNK_BYTES), offset)
            if not piece:
                raise OSError(f"segment file ended {remaining} bytes early while sending a fetch response")
            self.transport.write(self.tls.encrypt(piece))
            offset += len(piece)
            remaining -= len(piece)


class KafkaServer:
    """The listeners of one broker. `handler(frame, connection)` answers one request frame."""

    def __init__(self, handler: Handler, *, max_request_bytes: int, connections_max_idle_ms: int,
                 clock_ms: Callable[[], int]) -> None:
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.clock_ms = clock_ms
        self.connections: set[KafkaConnection] = set()
        self._servers: list[asyncio.base_events.Server] = []

    async def listen(self, host: str, port: int, security: ListenerSecurity = PLAINTEXT) -> int:
        """Start a listener; returns the bound port (useful with port 0)."""
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: KafkaConnection(self, security), host or None, port,
                                          reuse_address=True, backlog=1024)
        self._servers.append(server)
        return server.sockets[0].getsockname()[1]

    def close_idle_connections(self) -> int:
        """Close connections silent for connections.max.idle.ms; returns how many."""
        now = self.clock_ms()
        idle = [c for c in self.connections if now - c.last_active_ms > self.connections_max_idle_ms]
        for connection in idle:
            log.info("Closing idle connection from %s", connection.peer)
            connection.abort()
        return len(idle)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for connection in list(self.connections):
            connection.abort()
        for server in self._servers:
            await server.wait_closed()
