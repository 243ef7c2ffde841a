from __future__ import annotations

import random
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.protocol.framing import FrameDecoder
from logbroker.server.read_buffers import LEND_READ_BYTES, ReadBuffers

READ_BYTES = 1 << 20


def framed(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def read(buffers: ReadBuffers, decoder: FrameDecoder, wire: bytes) -> list[memoryview]:
    """What KafkaConnection does with one socket read of `wire`: into the space offered, then
    fed, and lent when the frames are views of it."""
    space = buffers.space(False, True)
    space[:len(wire)] = wire
    del space  # the event loop releases the buffer it read into before `buffer_updated`
    data, lent = buffers.received(len(wire))
    frames = decoder.feed(data, lent=lent)
    if lent and frames:
        buffers.lend(len(wire))
    return frames


def test_a_large_reads_frames_are_views_of_the_arena_and_a_small_reads_are_copies():
    buffers, decoder = ReadBuffers(READ_BYTES, READ_BYTES // 4), FrameDecoder()
    read(buffers, decoder, framed(b"x" * LEND_READ_BYTES))  # the first large read makes the arena
    large = read(buffers, decoder, framed(b"a" * 40_000, b"b" * 30_000))
    small = read(buffers, decoder, framed(b"c" * 100, b"d" * 200))
    assert [type(f.obj) for f in large] == [bytearray, bytearray]  # the arena, no copy
    assert [type(f.obj) for f in small] == [bytes, bytes]  # copied out of the space read into
    assert [bytes(f) for f in large + small] == [b"a" * 40_000, b"b" * 30_000, b"c" * 100, b"d" * 200]


def test_frames_keep_their_bytes_while_later_reads_fill_the_arena_past_them():
    buffers, decoder = ReadBuffers(READ_BYTES, READ_BYTES // 4), FrameDecoder()
    read(buffers, decoder, framed(b"x" * LEND_READ_BYTES))
    held = read(buffers, decoder, framed(b"h" * 50_000))  # kept, as a request in a purgatory is
    for i in range(200):  # ~13 MB more, in reads whose frames are dropped at once
        assert [bytes(f) for f in read(buffers, decoder, framed(bytes([i]) * 65_000))] == [bytes([i]) * 65_000]
    assert bytes(held[0]) == b"h" * 50_000


def test_the_arena_starts_over_once_no_frame_views_it():
    buffers, decoder = ReadBuffers(READ_BYTES, READ_BYTES // 4), FrameDecoder()
    read(buffers, decoder, framed(b"x" * LEND_READ_BYTES))
    first = read(buffers, decoder, framed(b"a" * 20_000))
    arena = first[0].obj
    held = first
    for _ in range(100):  # the arena fills behind the held frame; reads then go to the scratch
        read(buffers, decoder, framed(b"b" * 60_000))
    del first, held
    again = read(buffers, decoder, framed(b"c" * 20_000))
    assert again[0].obj is arena  # the same arena, from its start: memory stays bounded


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_no_frame_ever_sees_its_bytes_change_however_reads_and_holds_interleave(seed):
    # Random frames (some large enough to be lent, some not), cut into random reads, and random
    # frames held for a random number of further reads: every frame must read back as sent.
    rng = random.Random(seed)
    buffers, decoder = ReadBuffers(READ_BYTES, READ_BYTES // 4), FrameDecoder()
    payloads = [rng.randbytes(rng.choice((10, 300, 5_000, 20_000, 70_000, 200_000))) for _ in range(60)]
    wire = framed(*payloads)
    held: list[tuple[int, memoryview, bytes]] = []  # (release after read n, frame, expected)
    expected = iter(payloads)
    pos, n = 0, 0
    while pos < len(wire):
        size = rng.choice((100, 16_384, 65_536, 300_000, READ_BYTES))
        for frame in read(buffers, decoder, wire[pos:pos + size]):
            want = next(expected)
            assert bytes(frame) == want
            if rng.random() < 0.3:
                held.append((n + rng.randint(1, 30), frame, want))
        pos += size
        n += 1
        for item in [h for h in held if h[0] <= n]:
            assert bytes(item[1]) == item[2]
            held.remove(item)
    for _, frame, want in held:
        assert bytes(frame) == want
