"""The socket side of the broker: listeners, connections, frames in, responses out in order.

One asyncio.BufferedProtocol per connection. Every complete frame in a read is handed to the
dispatcher at once (clients pipeline requests), and responses leave in request order, however long
each takes: each request gets a slot in a queue, and one writer coroutine per connection drains the
queue from the head.

Reading: the connections of a server read into shared space (server/read_buffers.py). A read of 16
KiB or more (a ~64 KiB Produce) is lent to its frames: they are views of the space it was read into
for as long as they live, with no copy; a smaller one is copied out at once (the copy asyncio would
make for `data_received`). While a large frame is in progress the socket reads straight into that
frame's own buffer (FrameDecoder.direct), so most of a big Produce's records are never copied in
user space on the way in. Sharing is safe because the event loop calls `buffer_updated` right after
the read that filled the space, before any other connection's read. A read takes up to
READ_BUFFER_BYTES: a pipelining producer's requests (confluent-kafka's are ~64 KiB) then come ~15
to a read, and their answers leave in two writes, each waking the client once — fewer reads and
writes than with uvloop's 256 KiB (bench_cpu_per_gb.py, docs/benchmarks.md). Two, not one: the
answers ready so far go out every ANSWERS_EVERY_BYTES of requests handled, so the first requests of
a full read (the broker is behind: a read is full only then) do not wait for all the others, at a
CPU per GB within the runs' spread of one write a read (bench_roll_latency.py,
bench_cpu_per_gb.py). From a client whose frames are read directly (FrameDecoder.large_frames:
kcat's ~1 MB), reads take LARGE_FRAMES_READ_BYTES, so the start of its next frame, which is copied
into the frame's own buffer, stays a small part of it.

Writing: byte chunks go through the transport; a Fetch response's record regions go straight from
the page cache to the socket with os.sendfile, never through Python — except small regions (a
consumer at the end of the log gets one new record or a few), which are read with os.pread and
written with the bytes around them, unparsed, while those of one send add up to no more than
SMALL_REGION_BYTES: one write and one TCP segment instead of a write, a sendfile and two
segments, each waking the client (bench_request_cost.py, a fetch of a few records: 63 -> 49 µs of
broker CPU ping-pong, 37 -> 25 pipelined; sendfile's fixed cost exceeds copying this little
twice). The bound keeps what a send holds in memory small however many partitions an answer has;
the rest go by sendfile. The transport's writes and sendfile must not interleave, so the
transport's high-water mark is 0: any byte it has to buffer pauses writing, and the writer waits
for `resume_writing` (the buffer is empty again) before its next sendfile. When sendfile hits a
full socket, a small piece of the region is written through the transport instead, which parks
the writer until the socket drains — a few KiB per stall, the only other time record bytes are
copied.

TLS (SSL and SASL_SSL listeners): the connection keeps a TlsSession (server/tls.py) and passes
every byte through it. Record regions cannot go by sendfile under TLS; they are read with
os.pread in TLS_CHUNK_BYTES pieces, encrypted and written, and the transport keeps a larger
high-water mark (TLS_WRITE_BUFFER_BYTES) since nothing bypasses it. PLAINTEXT and SASL_PLAINTEXT
keep the sendfile path untouched.

SASL (SASL_PLAINTEXT, SASL_SSL): `sasl` is the connection's SaslServerAuthenticator and
`auth_gate` is True until it completes (or while a re-authentication deadline is set); the
dispatcher checks the gate, so an authenticated connection pays one attribute test per request.

Accepting: each listening socket has an Acceptor that calls accept() itself when the socket is
readable, so it can stop. Every accepted connection is counted in the server's ConnectionQuotas
(server/connection_quotas.py) and released in `connection_lost`, which asyncio calls however the
connection ends. A connection over its IP's limit is closed at once with one log line; at
max.connections (or a listener's own) the acceptors stop reading their sockets (new clients wait in the kernel's listen
backlog, as behind Kafka's blocked acceptor) and start again when a connection closes.

Backpressure: a connection with more than MAX_IN_FLIGHT unanswered requests stops being read
until the writer catches up, so a fast producer cannot make the broker buffer without bound.

Quota throttling (KIP-219): `mute_for(ms)` stops reading a connection whose client went over a
quota (server/client_quotas.py) for the throttle time; its responses still go out.
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
from logbroker.log_limits import RateLimitedLog
from logbroker.protocol.framing import FrameDecoder
from logbroker.security.principal import ANONYMOUS, ssl_principal
from logbroker.server.connection_quotas import ConnectionQuotas, normalize_ip
from logbroker.server.read_buffers import ReadBuffers
from logbroker.server.tls import TlsError, TlsSession
from logbroker.topic_configs import INT_MAX
from logbroker.storage.values import FileRegion

log = logging.getLogger("kafka.network.SocketServer")
_limited = RateLimitedLog(log, burst=3, interval_s=60.0)  # lines a flood of clients could repeat

MAX_IN_FLIGHT = 128
RESUME_IN_FLIGHT = 32
STALL_PIECE_BYTES = 4096
SMALL_REGION_BYTES = 16384  # record regions copied, not sent by sendfile, per send (at most)
READ_BUFFER_BYTES = 1048576  # what a read takes, at most: many of a pipelining client's requests
LARGE_FRAMES_READ_BYTES = 262144  # ... and from a client that sends frames read directly
ANSWERS_EVERY_BYTES = 524288  # of a read's requests handled: the ready answers go out
TLS_CHUNK_BYTES = 262144
TLS_WRITE_BUFFER_BYTES = 1048576


def _read_small_region(region: FileRegion) -> bytes | None:
    """The bytes of a small region, to write with the bytes around it; None if the file cannot
    give them all (closed, or shorter than promised): the region then goes the sendfile way,
    which meets the same failure and reports it."""
    try:
        data = os.pread(region.fd, region.size, region.position)
    except OSError:
        return None
    return data if len(data) == region.size else None


def _write_runs(chunks: Chunks) -> list[Union[list, FileRegion]]:
    """The chunks of one send as the writes they leave in: a list of byte pieces for one
    writelines each, small record regions read in among them (their copies ≤ SMALL_REGION_BYTES
    a send), and the FileRegions left to sendfile between those writes."""
    runs: list[Union[list, FileRegion]] = []
    pending: list = []
    copy_budget = SMALL_REGION_BYTES
    for chunk in chunks:
        if type(chunk) is not FileRegion:
            pending.append(chunk)
        elif chunk.size <= copy_budget and (data := _read_small_region(chunk)) is not None:
            copy_budget -= chunk.size
            pending.append(data)
        else:
            if pending:
                runs.append(pending)
                pending = []
            runs.append(chunk)
    if pending:
        runs.append(pending)
    return runs


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


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: KafkaServer, security: ListenerSecurity = PLAINTEXT,
                 counted_ip: str | None = None) -> None:
        self.server = server
        self.security = security
        self.counted_ip = counted_ip  # the IP this connection is counted under in the quotas
        self.listener_name = security.listener_name
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.principal = ANONYMOUS
        self.tls: TlsSession | None = None
        self.sasl = None  # SaslServerAuthenticator on SASL listeners
        self.client_software = ("", "")  # (name, version) from ApiVersions v3+ (client telemetry)
        self.auth_gate = False
        self._lift_request_limit = False  # authenticated with a partial frame buffered
        self._received_any = False
        self.decoder = FrameDecoder(server.max_request_bytes)
        self.last_active_ms = server.clock_ms()
        self._slots: collections.deque = collections.deque()
        self._slot_ready = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._reading_paused = False
        self._muted_until = 0.0  # loop time until which a quota throttle keeps reading stopped
        self._writer: asyncio.Task | None = None
        self._writer_idle = False  # the writer waits for a slot: nothing is being written
        self._sock_fd = -1

    # -- asyncio.BufferedProtocol -------------------------------------------------------------
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

    def get_buffer(self, sizehint: int) -> memoryview:
        decoder = self.decoder
        direct = decoder.direct
        if direct is None or self.tls is not None:
            return self.server.read_buffers.space(decoder.large_frames, self.tls is None)
        return direct

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active_ms = self.server.clock_ms()
        if self.decoder.direct is not None and self.tls is None:  # get_buffer handed it out
            frames = self.decoder.filled(nbytes)
        else:
            buffers = self.server.read_buffers
            data, lent = buffers.received(nbytes)
            if self.tls is not None:
                data = self._tls_received(bytes(data))
                if not data:
                    return
            try:
                frames = self.decoder.feed(data, lent=lent)
                if lent and frames:
                    buffers.lend(nbytes)
            except KafkaError as exc:
                if not self._received_any and data[:2] == b"\x16\x03":
                    log.warning("Closing connection from %s: a TLS handshake arrived on %s listener %s",
                                self.peer, self.security.security_protocol, self.listener_name)
                else:
                    log.warning("Closing connection from %s: %s", self.peer, exc)
                self.abort()
                return
        self._received_any = True
        if self._lift_request_limit and self.decoder.buffered_bytes == 0:
            self._lift_request_limit = False
            self.decoder = FrameDecoder(self.server.max_request_bytes)
        # Answers ready at once, with nothing queued before them and the writer idle, go out from
        # here rather than through the writer task (whose wake-up is a good part of a small
        # request's cost), and all of this read's together, in one send: a pipelining client
        # then gets them in one piece too, and sends its next requests in one. Not while the
        # socket is full (`_can_write` clear): those wait in slots, which is what pauses reading.
        # Every ANSWERS_EVERY_BYTES of requests, the answers ready so far go (a full read's first
        # requests are not held behind the rest).
        handler, slots = self.server.handler, self._slots
        direct = self._writer_idle and self.tls is None and self._can_write.is_set()
        ready: list = []
        ready_for = 0  # bytes of the requests answered in `ready`
        queued = False
        for frame in frames:
            result = handler(frame, self)
            if direct and not slots:
                if result is None:  # acks=0: no answer
                    continue
                if type(result) is list:
                    ready += result
                    ready_for += frame.nbytes
                    if ready_for >= ANSWERS_EVERY_BYTES:
                        self._write_now(ready)
                        ready, ready_for = [], 0
                        direct = self._can_write.is_set()
                    continue
            if asyncio.iscoroutine(result):
                result = asyncio.ensure_future(result)
            slots.append(result)
            queued = True
        if ready:
            self._write_now(ready)
        if self.decoder.failed is not None:
            # A bad size prefix after complete requests: answer those, then close (as Kafka).
            log.warning("Closing connection from %s: %s", self.peer, self.decoder.failed)
            self.transport.pause_reading()
            self._reading_paused = False  # never resumed: the next slot closes
            self._slots.append(CLOSE)
            self._slot_ready.set()
            return
        if queued:
            self._slot_ready.set()
        if len(slots) > MAX_IN_FLIGHT and not self._reading_paused:
            self._reading_paused = True
            if self._muted_until == 0.0:
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
        if self.decoder.max_frame_bytes < self.server.max_request_bytes:
            if self.decoder.buffered_bytes == 0:
                self.decoder = FrameDecoder(self.server.max_request_bytes)
            else:  # the frame being read was announced under the small limit: swap after it
                self._lift_request_limit = True

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.counted_ip is not None:
            self.server.connection_closed(self.counted_ip, self.listener_name)
            self.counted_ip = None
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

    def mute_for(self, throttle_ms: int) -> None:
        """Stop reading this connection for `throttle_ms` (a quota throttle); a longer mute
        already running stays."""
        if self.transport is None or self.transport.is_closing():
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if until <= self._muted_until:
            return
        if self._muted_until == 0.0 and not self._reading_paused:
            self.transport.pause_reading()
        self._muted_until = until
        loop.call_at(until, self._unmute, until)

    def _unmute(self, until: float) -> None:
        # Which mute this timer ends, by identity rather than by reading the clock: a loop may run
        # a timer slightly before its time (asyncio within its clock resolution, uvloop rounds
        # to milliseconds), and a timer that returned early would leave the connection muted.
        if self._muted_until != until:
            return  # a later mute is running; its own timer ends it
        self._muted_until = 0.0
        if not self._reading_paused and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    # -- writing ------------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        try:
            while True:
                if not self._slots:
                    self._slot_ready.clear()
                    self._writer_idle = True
                    try:
                        await self._slot_ready.wait()
                    finally:
                        self._writer_idle = False
                    continue
                slot = self._slots[0]
                response = await slot if isinstance(slot, asyncio.Future) else slot
                self._slots.popleft()
                if self._reading_paused and len(self._slots) <= RESUME_IN_FLIGHT:
                    self._reading_paused = False
                    if self._muted_until == 0.0:
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
        except ConnectionError as exc:  # the client went while its answer was on its way: no fault
            log.debug("Connection from %s closed while writing to it: %s", self.peer, exc)
            self.abort()
        except Exception:  # noqa: BLE001 - one bad connection must not leave a dangling task
            log.exception("Closing connection from %s after a failure while writing", self.peer)
            self.abort()

    def _write_now(self, chunks: Chunks) -> None:
        """Write ready responses at once, from data_received: the writer is idle and nothing was
        queued before them, so order holds. Record regions go by sendfile between the byte
        writes; one the socket does not take whole is queued, with everything after it, as a
        slot that goes ahead of the slots queued in the same read, for the writer to finish."""
        runs = _write_runs(chunks)
        for i, run in enumerate(runs):
            if type(run) is list:
                self.transport.writelines(run)
                continue
            sent = 0
            if self._can_write.is_set() and not self.transport.is_closing():
                try:
                    sent = os.sendfile(self._sock_fd, run.fd, run.position, run.size)
                except OSError:  # a full socket, or a failure the writer meets again and reports
                    sent = 0
            if sent < run.size:
                rest: Chunks = [FileRegion(run.fd, run.position + sent, run.size - sent)]
                for later in runs[i + 1:]:
                    rest += later if type(later) is list else [later]
                self._slots.appendleft(rest)
                self._slot_ready.set()
                return

    async def _send(self, chunks: Chunks) -> None:
        for run in _write_runs(chunks):
            if type(run) is list:
                await self._write_bytes(run)
            else:
                await self._sendfile(run)

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
    """The listeners of one broker. `handler(frame, connection)` answers one request frame;
    `quotas` limits the connections (no limit when None)."""

    def __init__(self, handler: Handler, *, max_request_bytes: int, connections_max_idle_ms: int,
                 clock_ms: Callable[[], int], quotas: ConnectionQuotas | None = None) -> None:
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.clock_ms = clock_ms
        self.quotas = quotas or ConnectionQuotas(max_connections=INT_MAX, max_connections_per_ip=INT_MAX,
                                                 per_ip_overrides={})
        self.connections: set[KafkaConnection] = set()
        self._acceptors: list[Acceptor] = []
        self.read_buffers = ReadBuffers(READ_BUFFER_BYTES, LARGE_FRAMES_READ_BYTES)  # every connection's reads

    async def listen(self, host: str, port: int, security: ListenerSecurity = PLAINTEXT, *,
                     accepting: bool = True) -> int:
        """Start a listener on every address of `host` (all interfaces when empty); returns the
        bound port (useful with port 0). With `accepting` False the socket is bound and listening
        (connections wait in its backlog) but none is accepted until `start_accepting()`."""
        try:  # an address literal or all interfaces: no DNS, so no worker thread at start; as
            # bytes, the host skips the idna codec (~0.3 MiB imported for a str host)
            infos = socket.getaddrinfo(host.encode("ascii") if host else None, port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE | socket.AI_NUMERICHOST)
        except (UnicodeEncodeError, socket.gaierror):  # a host name: resolved off the event loop
            infos = await asyncio.get_running_loop().getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                                 flags=socket.AI_PASSIVE)
        bound = port
        for family, type_, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, type_, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], bound, *address[2:]))
                sock.listen(1024)
                sock.setblocking(False)
            except OSError:
                sock.close()
                raise
            bound = sock.getsockname()[1]
            acceptor = Acceptor(self, sock, security)
            self._acceptors.append(acceptor)
            if accepting:
                acceptor.resume()
        return bound

    def start_accepting(self) -> None:
        """Accept the connections of every listener opened with `accepting=False`."""
        for acceptor in self._acceptors:
            acceptor.resume()

    def connection_closed(self, ip: str, listener_name: str) -> None:
        """A counted connection ended: release its count, and accept again if that was the limit."""
        self.quotas.dec(ip, listener_name)
        self._resume_acceptors()

    def set_listener_security(self, listener_name: str, security: ListenerSecurity) -> None:
        """New connections to `listener_name` use `security` (a dynamic config change: a renewed
        certificate, new JAAS users); connections already open keep theirs."""
        for acceptor in self._acceptors:
            if acceptor.security.listener_name == listener_name:
                acceptor.security = security

    def set_quota_limits(self, quotas: ConnectionQuotas) -> None:
        """Take the limits of `quotas` (a dynamic config change) and accept again where they allow."""
        self.quotas.adopt_limits(quotas)
        self._resume_acceptors()

    def _resume_acceptors(self) -> None:
        """Accept again on every listener paused at a connection limit that no longer holds."""
        for acceptor in self._acceptors:
            if acceptor.paused and not self.quotas.accept_blocked(acceptor.security.listener_name):
                acceptor.resume()

    def close_idle_connections(self) -> int:
        """Close connections silent for connections.max.idle.ms; returns how many."""
        now = self.clock_ms()
        idle = [c for c in self.connections if now - c.last_active_ms > self.connections_max_idle_ms]
        for connection in idle:
            log.info("Closing idle connection from %s", connection.peer)
            connection.abort()
        return len(idle)

    async def close(self) -> None:
        for acceptor in self._acceptors:
            acceptor.close()
        for connection in list(self.connections):
            connection.abort()
        await asyncio.sleep(0)  # let connection_lost run


class Acceptor:
    """Accepts the connections of one listening socket, counting each in the server's quotas.
    Runs on the event loop (a reader callback); `paused` while max.connections (broker-wide or
    the listener's own) is reached."""

    def __init__(self, server: KafkaServer, sock: socket.socket, security: ListenerSecurity) -> None:
        self.server = server
        self.sock = sock
        self.security = security
        self.paused = True
        self._at_limit = False
        self._loop = asyncio.get_running_loop()

    def resume(self) -> None:
        if self.paused and self.sock.fileno() >= 0:
            if self._at_limit:
                self._at_limit = False
                log.info("Accepting connections on listener %s again", self.security.listener_name)
            self.paused = False
            self._loop.add_reader(self.sock.fileno(), self._accept)

    def pause(self) -> None:
        if not self.paused:
            self.paused = True
            self._loop.remove_reader(self.sock.fileno())

    def close(self) -> None:
        self.pause()
        self.sock.close()

    def _accept(self) -> None:
        quotas = self.server.quotas
        for _ in range(64):  # then let other callbacks run
            limit = quotas.accept_blocked(self.security.listener_name)
            if limit is not None:
                log.warning("Not accepting connections on listener %s: %s reached; new connections wait "
                            "until one closes", self.security.listener_name, limit)
                self._at_limit = True
                self.pause()
                return
            try:
                conn, address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and the like: back off as asyncio's own server does
                _limited.log(logging.ERROR, "accept", "Cannot accept connections on listener %s (%s); "
                             "retrying every second", self.security.listener_name, exc)
                self.pause()
                self._loop.call_later(1.0, self.resume)
                return
            ip = normalize_ip(address[0])
            if not quotas.try_inc(ip, self.security.listener_name):
                _limited.log(logging.INFO, f"ip limit {ip}", "Rejected connection from %s: the address already has "
                             "%d connections, the limit set by %s", ip, quotas.ip_limit(ip), quotas.ip_limit_key(ip))
                conn.close()
                continue
            conn.setblocking(False)
            connection = KafkaConnection(self.server, self.security, ip)
            task = self._loop.create_task(self._loop.connect_accepted_socket(lambda c=connection: c, conn))
            task.add_done_callback(lambda t, c=connection, s=conn: self._started(t, c, s))

    def _started(self, task: asyncio.Task, connection: KafkaConnection, conn: socket.socket) -> None:
        # Once connection_made has run, connection_lost releases the count; before, we must.
        if (task.cancelled() or task.exception() is not None) and connection.transport is None:
            conn.close()
            self.server.connection_closed(connection.counted_ip, connection.listener_name)
