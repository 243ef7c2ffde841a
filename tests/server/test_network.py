"""server/network: responses leave in request order whether they are ready at once (written from
data_received, a send per read or per ANSWERS_EVERY_BYTES of its requests) or later (through the
writer task), record regions sent with sendfile never overtake the bytes around them, a client
that does not read still stops being read, a frame stays whole while later reads reuse the shared
read buffer, a full read's first answers leave before its last requests are handled, and a
waiting answer that fails closes its connection while one whose client left is dropped quietly —
on uvloop and on asyncio's loop, either of which the broker may serve on."""

from __future__ import annotations

import asyncio
import fcntl
import os
import random
import socket
import struct
import termios
import time

import pytest
import uvloop

from logbroker.server import network
from logbroker.server.network import MAX_IN_FLIGHT, SMALL_REGION_BYTES, KafkaServer
from logbroker.storage.values import FileRegion

_SIZE = struct.Struct(">i")


@pytest.fixture(params=[uvloop.new_event_loop, None], ids=["uvloop", "asyncio"])
def run(request):
    """Run a coroutine on each event loop the broker may serve on (cli/serve.py)."""
    def run(coroutine):
        with asyncio.Runner(loop_factory=request.param) as runner:
            return runner.run(coroutine)
    return run


@pytest.fixture
def segment(tmp_path):
    """Open a file holding the given bytes for reading, as a log segment: its descriptor, closed
    after the test."""
    fds: list[int] = []

    def open_segment(data: bytes) -> int:
        path = tmp_path / f"segment-{len(fds)}"
        path.write_bytes(data)
        fds.append(os.open(path, os.O_RDONLY))
        return fds[-1]

    yield open_segment
    for fd in fds:
        os.close(fd)


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


async def _serve(handler=_handler):
    server = KafkaServer(handler, max_request_bytes=1 << 20, connections_max_idle_ms=600_000,
                         clock_ms=lambda: 0)
    port = await server.listen("127.0.0.1", 0)
    return server, port


async def _read_frames(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    frames = []
    for _ in range(count):
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        frames.append(await reader.readexactly(size))
    return frames


def test_ready_and_late_answers_leave_in_request_order(run):
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

    assert run(main()) == [b"r1", b"s2", b"r3", b"r5", b"s6", b"r7", b"r8", b"s9", b"r10"]


def test_a_client_that_does_not_read_stops_being_read(run):
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

    sent, paused = run(main())
    assert paused  # the broker stopped reading once its answers could not leave
    assert sent < 4 * MAX_IN_FLIGHT * 60_004


def test_record_regions_and_bytes_arrive_in_order_through_a_full_socket(run, segment):
    # Each answer is bytes, a file region sent with os.sendfile, bytes again, to a client (in a
    # thread) that reads slowly: sendfile meets a full socket, the transport buffers, the socket
    # drains while the loop runs, and no byte may overtake another (the high-water mark of 0
    # pauses writing within the write that buffers, on either loop).
    data = bytes(range(251)) * 16_000  # ~4 MB: more than the socket buffers hold
    fd = segment(data)
    regions = [(i * 100_003, 1_500_000 + i) for i in range(6)]

    def handler(frame, connection):
        i = int(bytes(frame))
        position, size = regions[i]
        head, tail = b"head%d" % i, b"tail%d" % i
        return [_SIZE.pack(len(head) + size + len(tail)) + head, FileRegion(fd, position, size), tail]

    def client(port: int) -> bytes:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(10)
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"".join(_frame(b"%d" % i) for i in range(len(regions))))
            expected = sum(4 + 10 + n for _, n in regions)
            received = bytearray()
            while len(received) < expected:
                received += sock.recv(65536 if len(received) % 7 else 1024)
                if len(received) % 5 == 0:
                    time.sleep(0.0005)
            return bytes(received)

    async def main():
        server, port = await _serve(handler)
        received = await asyncio.get_running_loop().run_in_executor(None, client, port)
        await server.close()
        return received

    assert run(main()) == b"".join(_frame(b"head%d" % i + data[p:p + n] + b"tail%d" % i)
                                for i, (p, n) in enumerate(regions))


def test_small_and_large_record_regions_keep_their_place_answered_at_once_or_later(run, segment):
    # Small regions are copied and written with the bytes around them until a send has copied
    # SMALL_REGION_BYTES, the others go by sendfile: either way, in answers written at once and
    # in answers the writer sends later, every byte lands where the frame says. Each answer has
    # a region of each size below, rotated; 40 regions of 700 B overrun the budget mid-answer.
    data = bytes(range(253)) * 2_000
    fd = segment(data)
    sizes = [1, SMALL_REGION_BYTES, SMALL_REGION_BYTES + 1, 200_000, 700]

    def regions(i: int) -> list[tuple[int, int]]:
        rotated = [sizes[(i + k) % len(sizes)] for k in range(len(sizes))] + [700] * 40
        return [(100 * k + i, size) for k, size in enumerate(rotated)]

    def answer(i: int) -> list:
        head = b"head%d" % i
        chunks: list = [head]
        for position, size in regions(i):
            chunks += [FileRegion(fd, position, size), b"|"]
        return [_SIZE.pack(len(head) + sum(size + 1 for _, size in regions(i))) + chunks[0], *chunks[1:]]

    def expected(i: int) -> bytes:
        return _frame(b"head%d" % i + b"".join(data[p:p + n] + b"|" for p, n in regions(i)))

    def handler(frame, connection):
        i = int(bytes(frame))
        if i % 3:
            return answer(i)

        async def later():
            await asyncio.sleep(0.005)
            return answer(i)
        return later()

    async def main():
        server, port = await _serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_frame(b"%d" % i) for i in range(12)))
        received = await reader.readexactly(sum(len(expected(i)) for i in range(12)))
        writer.close()
        await server.close()
        return received

    assert run(main()) == b"".join(expected(i) for i in range(12))


def test_an_answer_of_many_small_regions_copies_at_most_the_budget(run, segment, monkeypatch):
    # A fetch of many partitions must not pull their records into memory: past SMALL_REGION_BYTES
    # copied in one send, the regions go by sendfile.
    data = bytes(range(251)) * 400
    fd = segment(data)
    copied: list[int] = []
    read_small_region = network._read_small_region

    def counting(region):
        copied.append(region.size)
        return read_small_region(region)

    monkeypatch.setattr(network, "_read_small_region", counting)
    spans = [(k * 997, 1000) for k in range(100)]

    def handler(frame, connection):
        return [_SIZE.pack(sum(n for _, n in spans)), *(FileRegion(fd, p, n) for p, n in spans)]

    async def main():
        server, port = await _serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"0"))
        (answer,) = await _read_frames(reader, 1)
        writer.close()
        await server.close()
        return answer

    assert run(main()) == b"".join(data[p:p + n] for p, n in spans)
    assert 0 < sum(copied) <= SMALL_REGION_BYTES


def test_a_small_region_the_file_no_longer_holds_closes_the_connection_mid_frame(run, segment):
    # As with sendfile: a region past the end of its file (truncated meanwhile) must not be
    # answered with other bytes; the client sees the frame cut short and the connection closed.
    fd = segment(b"x" * 100)

    def handler(frame, connection):
        return [_SIZE.pack(4 + 500) + b"head", FileRegion(fd, 50, 500)]

    async def main():
        server, port = await _serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"0"))
        received = await asyncio.wait_for(reader.read(), 5)  # until the broker closes
        writer.close()
        await server.close()
        return received

    received = run(main())
    assert received.startswith(_SIZE.pack(504) + b"head") and len(received) < 4 + 504


@pytest.mark.parametrize("piece", [70_001, 8 << 20], ids=["in pieces", "at once"])
def test_frames_stay_whole_while_other_connections_reuse_the_read_buffer(run, piece):
    # Every connection reads into one shared buffer, and frames of 1 MB and more are read into
    # buffers of their own: a frame a handler still holds after later reads (on this connection or
    # another) must keep its bytes. Here each request is answered 20 ms later from the frame view
    # itself, while two clients send small and large frames pipelined, in pieces that cut frames
    # anywhere or all at once (reads as large as the shared buffer, then smaller ones while a
    # client's large frames are read directly).
    rng = random.Random(7)
    sizes = {"a": (10, 1_500_000, 300, 200_000, 3_000_000, 5), "b": (2_000_000, 40, 40, 150_000, 1)}
    payloads = {name: [rng.randbytes(n) for n in ns] for name, ns in sizes.items()}

    def handler(frame, connection):
        async def later():
            await asyncio.sleep(0.02)
            return [_frame(bytes(frame))]  # the view, read only now
        return later()

    def client(port: int, name: str) -> list[bytes]:
        wire = b"".join(_frame(p) for p in payloads[name])
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            for start in range(0, len(wire), piece):
                sock.sendall(wire[start:start + piece])
                time.sleep(0.001)
            received = bytearray()
            expected = len(wire)
            while len(received) < expected:
                received += sock.recv(1 << 20)
        answers, pos = [], 0
        while pos < len(received):
            (size,) = _SIZE.unpack_from(received, pos)
            answers.append(bytes(received[pos + 4:pos + 4 + size]))
            pos += 4 + size
        return answers

    async def main():
        server = KafkaServer(handler, max_request_bytes=4 << 20, connections_max_idle_ms=600_000,
                             clock_ms=lambda: 0)
        port = await server.listen("127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        got = await asyncio.gather(*(loop.run_in_executor(None, client, port, name) for name in payloads))
        await server.close()
        return dict(zip(payloads, got))

    got = run(main())
    assert got == payloads


def test_a_full_reads_first_answers_leave_before_its_last_requests_are_handled(run):
    # A read takes up to 1 MiB of a pipelining client's requests. Their answers must not all wait
    # for the last of them: those ready leave every ANSWERS_EVERY_BYTES of requests handled. The
    # handler notes, as it takes each request, how many answer bytes wait at the client.
    frame = _frame(b"r" * 60_000)
    count = network.READ_BUFFER_BYTES // len(frame)  # as many as one read takes
    client: socket.socket | None = None
    waiting_at_client: list[int] = []

    first_write = -(-network.ANSWERS_EVERY_BYTES // len(frame))  # requests answered in it

    def handler(request, connection):
        waiting = _bytes_waiting(client)
        if len(waiting_at_client) == count - 1:
            # The last request: answers written earlier are in the kernel's hands, and on a busy
            # machine loopback may hand them to the client a little later; wait for them briefly.
            deadline = time.monotonic() + 2.0
            while waiting < first_write * len(frame) and time.monotonic() < deadline:
                time.sleep(0.005)
                waiting = _bytes_waiting(client)
        waiting_at_client.append(waiting)
        return [_frame(bytes(request))]

    async def main():
        nonlocal client
        server, port = await _serve(handler)
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        while not server.connections:
            await asyncio.sleep(0.001)
        (connection,) = server.connections
        connection.transport.pause_reading()  # the requests wait in the socket, then come in one read
        with socket.fromfd(connection._sock_fd, socket.AF_INET, socket.SOCK_STREAM) as accepted:
            accepted.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        client.sendall(frame * count)
        client.setblocking(False)
        connection.transport.resume_reading()
        received = bytearray()
        while len(received) < count * len(frame):
            received += await asyncio.get_running_loop().sock_recv(client, 1 << 22)
        client.close()
        await server.close()
        return bytes(received)

    assert run(main()) == frame * count
    assert waiting_at_client[:first_write] == [0] * first_write  # one read: nothing answered yet
    assert waiting_at_client[-1] >= first_write * len(frame)  # those answers were out


def _bytes_waiting(sock: socket.socket) -> int:
    """How many bytes wait in `sock` to be read, without reading them."""
    return struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, bytes(4)))[0]  # a C int


async def _one_waiting_request():
    """A server whose every request waits for its gate, a future the test completes or fails, and
    a connection to it with one request waiting: (server, reader, writer, gate)."""
    gates: list[asyncio.Future] = []

    def handler(frame, connection):
        answer = [_frame(bytes(frame))]
        gate = asyncio.get_running_loop().create_future()
        gates.append(gate)

        async def later():
            await gate
            return answer
        return later()

    server, port = await _serve(handler)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_frame(b"w1"))
    while not gates:
        await asyncio.sleep(0.001)
    return server, reader, writer, gates[0]


def test_a_waiting_answer_that_fails_closes_its_connection(run, caplog):
    async def main():
        server, reader, writer, gate = await _one_waiting_request()
        gate.set_exception(RuntimeError("a bug"))
        rest = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        await server.close()
        return rest

    assert run(main()) == b""  # closed, nothing written
    assert "after a failure while writing" in caplog.text


def test_a_waiting_answer_whose_client_left_is_dropped(run, caplog):
    async def main():
        server, reader, writer, gate = await _one_waiting_request()
        writer.close()
        while server.connections:
            await asyncio.sleep(0.001)
        cancelled = gate.cancelled()  # the request's task was cancelled with the connection
        await server.close()
        return cancelled

    assert run(main())
    assert "Closing connection" not in caplog.text


@pytest.mark.parametrize("error", [BrokenPipeError, ConnectionResetError])
def test_a_client_gone_while_its_records_are_sent_is_closed_without_an_error(run, segment, monkeypatch, caplog,
                                                                             error):
    # A consumer that closes while its fetch answer is on its way: the next sendfile meets the
    # reset connection (EPIPE or ECONNRESET, whichever the kernel has seen; raised here, since
    # which one comes, and when, is a race). The connection closes with one DEBUG line, nothing
    # at ERROR, and the server goes on serving.
    fd = segment(b"r" * 100_000)

    def handler(frame, connection):
        if bytes(frame) == b"records":
            return [_SIZE.pack(100_000), FileRegion(fd, 0, 100_000)]
        return _handler(frame, connection)

    def gone(*args):
        raise error("the client went")

    async def main():
        server, port = await _serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"records"))
        rest = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        monkeypatch.undo()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"still there?"))
        answer = await _read_frames(reader, 1)
        writer.close()
        await server.close()
        return rest, answer

    monkeypatch.setattr(network.os, "sendfile", gone)
    with caplog.at_level("DEBUG", logger="kafka.network.SocketServer"):
        assert run(main()) == (_SIZE.pack(100_000), [b"still there?"])  # the size went, then the close
    assert [r.getMessage() for r in caplog.records if r.levelname != "DEBUG"] == []
    assert "the client went" in caplog.text
