"""server/network: responses leave in request order whether they are ready at once (written from
data_received, one send per read) or later (through the writer task), and a client that does not
read still stops being read."""

from __future__ import annotations

import asyncio
import socket
import struct

from logbroker.server.network import MAX_IN_FLIGHT, KafkaServer

_SIZE = struct.Struct(">i")


def _frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def _handler(frame, connection):
    """Echo the frame; `s` answers later (a coroutine), `n` not at all (acks=0)."""
    payload = bytes(frame)
    answer = [_frame(payload)]
    if payload.startswith(b"s"):
        async def later():
            await asyncio.sleep(0.01)
            return answer
        return later()
    if payload.startswith(b"n"):
        return None
    return answer


async def _serve():
    server = KafkaServer(_handler, max_request_bytes=1 << 20, connections_max_idle_ms=600_000,
                         clock_ms=lambda: 0)
    port = await server.listen("127.0.0.1", 0)
    return server, port


async def _read_frames(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    frames = []
    for _ in range(count):
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        frames.append(await reader.readexactly(size))
    return frames


def test_ready_and_late_answers_leave_in_request_order():
    async def main():
        server, port = await _serve()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0.01)  # the connection's writer task is idle
        requests = [b"r1", b"s2", b"r3", b"n4", b"r5", b"s6", b"r7"]
        writer.write(b"".join(_frame(r) for r in requests))
        got = await asyncio.wait_for(_read_frames(reader, 6), 5)
        # one request at a time, each read alone, too
        for r in (b"r8", b"s9", b"r10"):
            writer.write(_frame(r))
        got += await asyncio.wait_for(_read_frames(reader, 3), 5)
        writer.close()
        await server.close()
        return got

    assert asyncio.run(main()) == [b"r1", b"s2", b"r3", b"r5", b"s6", b"r7", b"r8", b"s9", b"r10"]


def test_a_client_that_does_not_read_stops_being_read():
    async def main():
        server, port = await _serve()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        payload = b"r" * 60_000
        sent = 0
        for _ in range(4 * MAX_IN_FLIGHT):
            try:
                sent += sock.send(_frame(payload))
            except BlockingIOError:
                break
            await asyncio.sleep(0)
        await asyncio.sleep(0.2)
        (connection,) = server.connections
        paused = connection._reading_paused
        sock.close()
        await server.close()
        return sent, paused

    sent, paused = asyncio.run(main())
    assert paused  # the broker stopped reading once its answers could not leave
    assert sent < 4 * MAX_IN_FLIGHT * 60_004
