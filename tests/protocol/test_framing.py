from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.errors import InvalidRequestError
from logbroker.protocol.errors import InvalidReceiveError
from logbroker.protocol.framing import DEFAULT_MAX_REQUEST_BYTES, FrameDecoder


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
