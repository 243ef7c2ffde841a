from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.errors import InvalidRequestError
from logbroker.protocol.errors import InvalidReceiveError
from logbroker.protocol.framing import DEFAULT_MAX_REQUEST_BYTES, DIRECT_READ_BYTES, DIRECT_READ_SHARE, FrameDecoder


def framed(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def as_bytes(frames) -> list[bytes]:
    return [bytes(f) for f in frames]


def test_one_feed_with_several_frames_yields_them_all_in_order():
    decoder = FrameDecoder()
    assert as_bytes(decoder.feed(framed(b"a", b"bc", b"", b"def"))) == [b"a", b"bc", b"", b"def"]
    assert decoder.buffered_bytes == 0


def test_frame_split_across_feeds_is_yielded_once_complete():
    decoder = FrameDecoder()
    data = framed(b"hello world")
    assert decoder.feed(data[:2]) == []  # half a size prefix
    assert decoder.pending_frame_size is None
    assert decoder.feed(data[2:6]) == []
    assert decoder.pending_frame_size == 11
    assert decoder.buffered_bytes == 6
    assert as_bytes(decoder.feed(data[6:])) == [b"hello world"]
    assert decoder.buffered_bytes == 0


def test_feed_completing_one_frame_and_starting_the_next():
    decoder = FrameDecoder()
    data = framed(b"first", b"second", b"third")
    cut1, cut2 = 7, 20
    out = as_bytes(decoder.feed(data[:cut1]))
    out += as_bytes(decoder.feed(data[cut1:cut2]))
    out += as_bytes(decoder.feed(data[cut1 + (cut2 - cut1):]))
    assert out == [b"first", b"second", b"third"]


def test_byte_by_byte_feeding():
    decoder = FrameDecoder()
    payloads = [b"x" * n for n in (0, 1, 5, 300)]
    data = framed(*payloads)
    out = []
    for i in range(len(data)):
        out += as_bytes(decoder.feed(data[i:i + 1]))
    assert out == payloads


@settings(max_examples=200, deadline=None)
@given(payloads=st.lists(st.binary(max_size=40), max_size=8), cuts=st.lists(st.integers(0, 400), max_size=10))
def test_any_split_of_the_stream_yields_the_same_frames(payloads, cuts):
    data = framed(*payloads)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    decoder = FrameDecoder()
    out = []
    for start, stop in zip(bounds, bounds[1:]):
        out += as_bytes(decoder.feed(data[start:stop]))
    assert out == payloads
    assert decoder.buffered_bytes == 0


def test_frames_stay_valid_after_later_feeds():
    # Views handed out must not be overwritten by the bytes of later frames.
    decoder = FrameDecoder()
    data = framed(b"A" * 10, b"B" * 10, b"C" * 10)
    first = decoder.feed(data[:8])  # none yet
    second = decoder.feed(data[8:20])  # completes A, starts B
    third = decoder.feed(data[20:])
    frames = first + second + third
    decoder.feed(framed(b"Z" * 50)[:30])
    assert as_bytes(frames) == [b"A" * 10, b"B" * 10, b"C" * 10]


def test_frames_inside_one_feed_are_views_of_it_not_copies():
    data = framed(b"payload")
    (frame,) = FrameDecoder().feed(data)
    assert isinstance(frame, memoryview)
    assert frame.obj is data


def test_oversized_prefix_is_rejected_before_the_body_arrives():
    decoder = FrameDecoder(max_frame_bytes=1000)
    with pytest.raises(InvalidReceiveError) as info:
        decoder.feed(struct.pack(">i", 1001))  # only the prefix
    assert info.value.size == 1001
    assert info.value.max_size == 1000
    assert "1001" in str(info.value) and "1000" in str(info.value)
    assert isinstance(info.value, InvalidRequestError)
    assert decoder.buffered_bytes == 0


def test_oversized_prefix_split_across_feeds_is_rejected_when_complete():
    decoder = FrameDecoder(max_frame_bytes=1000)
    prefix = struct.pack(">i", 5000)
    assert decoder.feed(prefix[:3]) == []
    with pytest.raises(InvalidReceiveError):
        decoder.feed(prefix[3:] + b"x" * 10)


def test_default_limit_is_socket_request_max_bytes():
    decoder = FrameDecoder()
    assert decoder.max_frame_bytes == DEFAULT_MAX_REQUEST_BYTES == 104857600
    assert decoder.feed(struct.pack(">i", DEFAULT_MAX_REQUEST_BYTES)) == []  # at the limit: fine
    with pytest.raises(InvalidReceiveError):
        FrameDecoder().feed(struct.pack(">i", DEFAULT_MAX_REQUEST_BYTES + 1))


def test_negative_size_is_rejected():
    with pytest.raises(InvalidReceiveError, match="negative"):
        FrameDecoder().feed(struct.pack(">i", -1) + b"abcd")


def test_decoder_stays_failed_after_a_bad_prefix():
    decoder = FrameDecoder(max_frame_bytes=10)
    with pytest.raises(InvalidReceiveError):
        decoder.feed(struct.pack(">i", 11))
    with pytest.raises(InvalidReceiveError):
        decoder.feed(framed(b"ok"))


def test_reused_input_buffer_does_not_corrupt_frames():
    decoder = FrameDecoder()
    buffer = bytearray(framed(b"abc"))
    (frame,) = decoder.feed(buffer)
    buffer[4:7] = b"xyz"
    assert bytes(frame) == b"abc"


def test_frame_split_across_reads_decodes_like_a_whole_one():
    """kio refuses writable buffers: a frame reassembled from several reads must decode too."""
    import struct

    from logbroker.protocol.codec import decode_request

    # ApiVersions v3 request: header v2 (api 18, v3, correlation 7, client id "c", no tags),
    # body: client_software_name "lb", client_software_version "1", no tags.
    body = struct.pack(">hhih", 18, 3, 7, 1) + b"c" + b"\x00" + b"\x03lb" + b"\x021" + b"\x00"
    wire = struct.pack(">i", len(body)) + body
    decoder = FrameDecoder()
    assert decoder.feed(wire[:9]) == []
    (frame,) = decoder.feed(wire[9:])
    request = decode_request(frame)
    assert (request.api_key, request.api_version, request.correlation_id) == (18, 3, 7)
    assert request.body.client_software_name == "lb"


def test_frames_before_a_negative_size_are_returned_and_the_error_kept():
    decoder = FrameDecoder()
    frames = decoder.feed(framed(b"one") + framed(b"two") + struct.pack(">i", -5) + b"junk")
    assert [bytes(f) for f in frames] == [b"one", b"two"]
    assert decoder.failed is not None and "negative" in str(decoder.failed)
    with pytest.raises(InvalidReceiveError):
        decoder.feed(framed(b"three"))


def read_like_the_server(decoder: FrameDecoder, stream: bytes, reads: list[int]) -> list[memoryview]:
    """What KafkaConnection does: each read goes into `decoder.direct` while a large frame is in
    progress (and may fill only part of it), else into one reused buffer that is then fed; `reads`
    are the sizes the socket returns, cycled."""
    scratch = bytearray(256 * 1024)
    frames: list[memoryview] = []
    pos, i = 0, 0
    while pos < len(stream):
        want = reads[i % len(reads)]
        i += 1
        if decoder.direct is not None:
            n = min(want, len(decoder.direct), len(stream) - pos)
            decoder.direct[:n] = stream[pos:pos + n]
            frames += decoder.filled(n)
        else:
            n = min(want, len(scratch), len(stream) - pos)
            scratch[:n] = stream[pos:pos + n]
            frames += decoder.feed(memoryview(scratch)[:n])
            scratch[:n] = b"\xee" * n  # the next read overwrites it
        pos += n
    return frames


def test_a_large_frame_is_read_into_its_own_buffer_not_copied_out_of_reads():
    big = bytes(range(256)) * (DIRECT_READ_BYTES // 32)  # 8 x DIRECT_READ_BYTES
    stream = framed(b"small", big, b"tail")
    eighth = 9 + 4 + len(big) // DIRECT_READ_SHARE  # the small frame, the prefix, an eighth of the body
    decoder = FrameDecoder()
    assert as_bytes(decoder.feed(memoryview(bytearray(stream[:1000])))) == [b"small"]
    assert decoder.direct is None  # too little of it here yet: kept as before
    assert decoder.feed(memoryview(bytearray(stream[1000:eighth]))) == []
    direct = decoder.direct
    assert direct is not None and len(direct) == len(big) - len(big) // DIRECT_READ_SHARE  # the rest
    assert decoder.pending_frame_size == len(big) and decoder.buffered_bytes == eighth - 9
    direct[:50000] = stream[eighth:eighth + 50000]  # a read that filled part of it
    assert decoder.filled(50000) == []
    rest = len(decoder.direct)
    decoder.direct[:] = stream[eighth + 50000:eighth + 50000 + rest]
    (frame,) = decoder.filled(rest)
    assert bytes(frame) == big and frame.readonly
    assert decoder.direct is None and decoder.buffered_bytes == 0
    assert as_bytes(decoder.feed(stream[eighth + 50000 + rest:])) == [b"tail"]


def test_the_decoder_says_while_a_client_sends_large_frames_so_reads_of_their_starts_stay_small():
    """`large_frames` is what the server sizes its next read by: a large frame's start copied
    out of a big shared read would be most of the frame (kcat's ~1 MB requests)."""
    big = bytes(range(256)) * (DIRECT_READ_BYTES // 64)  # 4 x DIRECT_READ_BYTES
    stream = framed(big, big, b"small")
    half = 4 + len(big) // 2
    decoder = FrameDecoder()
    assert not decoder.large_frames
    assert decoder.feed(memoryview(bytearray(stream[:half]))) == []
    assert not decoder.large_frames  # its start came in a read of the shared buffer
    decoder.direct[:] = stream[half:4 + len(big)]
    assert as_bytes(decoder.filled(len(big) // 2)) == [big]
    assert decoder.large_frames  # read directly: the next read is a small one
    second = 4 + len(big)
    assert decoder.feed(memoryview(bytearray(stream[second:second + half]))) == []
    assert decoder.large_frames  # only the next large frame's start: still a large-frame client
    decoder.direct[:] = stream[second + half:2 * second]
    assert as_bytes(decoder.filled(len(big) // 2)) == [big]
    assert as_bytes(decoder.feed(memoryview(bytearray(stream[2 * second:])))) == [b"small"]
    assert not decoder.large_frames  # a frame lying in the data fed: big reads again


def test_a_read_that_brings_an_eighth_of_a_large_frame_starts_its_own_buffer_at_once():
    big = bytes(range(256)) * (DIRECT_READ_BYTES // 64)  # 4 x DIRECT_READ_BYTES
    stream = framed(b"small", big)
    first = 9 + 4 + len(big) // 2  # the small frame, then half of the large one, in one read
    decoder = FrameDecoder()
    assert as_bytes(decoder.feed(memoryview(bytearray(stream[:first])))) == [b"small"]
    assert decoder.direct is not None and len(decoder.direct) == len(big) // 2
    assert decoder.buffered_bytes == first - 9
    rest = len(decoder.direct)
    decoder.direct[:] = stream[first:]
    assert as_bytes(decoder.filled(rest)) == [big]


def test_a_large_frames_own_buffer_shows_none_of_what_its_memory_held_before():
    """The buffer is not zero-filled: every byte of the frame must come from the stream."""
    size = 3 * DIRECT_READ_BYTES
    for _ in range(3):
        stale = bytearray(b"\xab") * size  # freed at once: the allocator may hand its memory back
        del stale
    payload = bytes(range(251)) * (size // 251) + b"\x00" * (size % 251)
    for reads in ([size // 3], [1000, 70000, 7], [size + 4]):
        decoder = FrameDecoder()
        assert as_bytes(read_like_the_server(decoder, framed(payload, b"next"), reads)) == [payload, b"next"]


def test_announcing_a_large_frame_allocates_only_as_the_bytes_arrive():
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">i", 100_000_000) + b"x" * 1000) == []
    assert decoder.direct is None and decoder.buffered_bytes == 1004


def test_a_frame_whose_rest_is_under_the_threshold_is_copied_as_before():
    stream = framed(b"m" * DIRECT_READ_BYTES)
    decoder = FrameDecoder()
    assert decoder.feed(stream[:100]) == []  # the rest is DIRECT_READ_BYTES - 96
    assert decoder.direct is None and decoder.buffered_bytes == 100
    assert as_bytes(decoder.feed(stream[100:])) == [b"m" * DIRECT_READ_BYTES]


def test_a_large_frame_fed_rather_than_read_directly_completes_the_same():
    """TLS hands the decoder plaintext: the body in progress takes fed bytes too."""
    big = b"\x01" * (2 * DIRECT_READ_BYTES)
    stream = framed(big, b"after")
    decoder = FrameDecoder()
    assert decoder.feed(stream[:len(big) // 2]) == []
    assert decoder.direct is not None
    assert as_bytes(decoder.feed(stream[len(big) // 2:])) == [big, b"after"]
    assert decoder.direct is None


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 3, 100, 5000, DIRECT_READ_BYTES - 1, DIRECT_READ_BYTES,
                                        DIRECT_READ_BYTES + 7, 3 * DIRECT_READ_BYTES]), max_size=6),
       reads=st.lists(st.integers(1, 4 * DIRECT_READ_BYTES), min_size=1, max_size=6))
def test_any_mix_of_reads_into_the_shared_and_the_direct_buffer_yields_the_same_frames(sizes, reads):
    payloads = [bytes([i + 1]) * size for i, size in enumerate(sizes)]
    decoder = FrameDecoder()
    frames = read_like_the_server(decoder, framed(*payloads), reads)
    assert as_bytes(frames) == payloads  # also after the shared buffer was overwritten
    assert decoder.buffered_bytes == 0 and decoder.direct is None


def test_a_bad_prefix_after_a_large_frame_read_directly_still_fails_the_decoder():
    big = b"z" * (2 * DIRECT_READ_BYTES)
    decoder = FrameDecoder(max_frame_bytes=len(big))
    assert decoder.feed(framed(big)[:len(big) // 2]) == []
    rest = len(decoder.direct)
    decoder.direct[:] = big[-rest:]
    assert as_bytes(decoder.filled(rest)) == [big]
    with pytest.raises(InvalidReceiveError):
        decoder.feed(struct.pack(">i", len(big) + 1))
    assert decoder.direct is None


def test_a_prefix_announcing_more_than_the_limit_gets_no_buffer():
    decoder = FrameDecoder(max_frame_bytes=DIRECT_READ_BYTES * 2)
    too_big = struct.pack(">i", DIRECT_READ_BYTES * 2 + 1)
    frames = decoder.feed(memoryview(bytearray(framed(b"ok") + too_big + b"x" * 100)))
    assert as_bytes(frames) == [b"ok"] and decoder.failed is not None
    assert decoder.direct is None and decoder.buffered_bytes == 0
