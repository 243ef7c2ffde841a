import gzip
import os
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.errors import CorruptRecordError, UnsupportedCompressionTypeError
from logbroker.records import compression
from logbroker.records.compression import codec_id, codec_name, compress, decompress

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

# Compressible and incompressible parts, larger than a snappy (32 KiB) and an lz4 (64 KiB) block.
LARGE = b"record " * 20_000 + os.urandom(70_000) + bytes(range(256)) * 300


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=2000))
def test_compress_round_trip(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_across_several_blocks(codec):
    compressed = compress(codec, LARGE)
    assert decompress(codec, compressed) == LARGE
    assert decompress(codec, memoryview(compressed)) == LARGE


@pytest.mark.parametrize("codec", CODECS)
def test_codec_by_id_and_by_name_agree(codec):
    assert codec_name(codec_id(codec)) == codec
    assert decompress(codec_id(codec), compress(codec.upper(), b"abc" * 10)) == b"abc" * 10


@pytest.mark.parametrize("codec", [5, 7, -1, "brotli"])
def test_unknown_codec_is_unsupported_compression_type(codec):
    with pytest.raises(UnsupportedCompressionTypeError, match="unknown compression"):
        decompress(codec, b"x")
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(codec, b"x")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_garbage_is_corrupt_record(codec):
    with pytest.raises(CorruptRecordError, match=codec):
        decompress(codec, b"\x00\x01garbage that is not compressed at all\xff\xfe")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_truncated_stream_is_corrupt_record(codec):
    compressed = compress(codec, LARGE)
    with pytest.raises(CorruptRecordError):
        decompress(codec, compressed[: len(compressed) // 2])


# --- snappy: both framings ---------------------------------------------------------------

def test_snappy_writes_xerial_framing_in_32k_blocks():
    compressed = compress("snappy", LARGE)
    assert compressed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    position, blocks, out = 16, 0, b""
    while position < len(compressed):
        (length,) = struct.unpack_from(">i", compressed, position)
        block = bytes(cramjam.snappy.decompress_raw(compressed[position + 4:position + 4 + length]))
        assert len(block) <= 32 * 1024
        out += block
        position += 4 + length
        blocks += 1
    assert out == LARGE
    assert blocks == -(-len(LARGE) // (32 * 1024))


def test_snappy_reads_a_raw_block_as_librdkafka_writes_it():
    raw = bytes(cramjam.snappy.compress_raw(LARGE))
    assert decompress("snappy", raw) == LARGE


def test_snappy_reads_concatenated_xerial_streams():
    data = compress("snappy", b"first part ") + compress("snappy", b"second part")
    assert decompress("snappy", data) == b"first part second part"


def test_snappy_xerial_block_running_past_the_end_is_corrupt():
    data = compression.XERIAL_HEADER + struct.pack(">i", 1000) + b"short"
    with pytest.raises(CorruptRecordError, match="past the end"):
        decompress("snappy", data)


# --- lz4: Kafka's frame layout ----------------------------------------------------------

def test_lz4_frame_header_is_the_one_java_writes():
    compressed = compress("lz4", LARGE)
    # magic, FLG (v01, independent blocks, no checksums, no size), BD (64 KiB), header checksum
    assert compressed[:7] == bytes.fromhex("04224d18604082")
    assert compressed[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum
    # cramjam (liblz4) verifies the header checksum byte while decoding
    assert bytes(cramjam.lz4.decompress(compressed)) == LARGE


def test_lz4_stores_incompressible_blocks_uncompressed():
    noise = os.urandom(10_000)
    compressed = compress("lz4", noise)
    (block_size,) = struct.unpack_from("<I", compressed, 7)
    assert block_size == 0x80000000 | len(noise)
    assert decompress("lz4", compressed) == noise


def test_lz4_reads_frames_with_checksums_and_content_size():
    # liblz4's defaults (as python-lz4 and cramjam write them): content size, block checksums.
    assert decompress("lz4", bytes(cramjam.lz4.compress(LARGE))) == LARGE
    compressor = cramjam.lz4.Compressor(level=1, content_checksum=True, block_linked=False)
    compressor.compress(LARGE)
    assert decompress("lz4", bytes(compressor.finish())) == LARGE


# --- gzip and zstd: several members / frames --------------------------------------------

def test_gzip_reads_several_members():
    assert decompress("gzip", gzip.compress(b"one ") + gzip.compress(b"two")) == b"one two"


def test_gzip_output_is_standard_gzip():
    assert gzip.decompress(compress("gzip", LARGE)) == LARGE


def test_zstd_reads_several_frames():
    data = bytes(cramjam.zstd.compress(b"one ")) + bytes(cramjam.zstd.compress(b"two"))
    assert decompress("zstd", data) == b"one two"


def test_compression_levels_are_honoured():
    text = b"".join(b"%d lorem ipsum dolor sit amet " % i for i in range(5000))
    assert len(compress("zstd", text, level=19)) < len(compress("zstd", text, level=1))
    assert decompress("gzip", compress("gzip", text, level=1)) == text
    assert decompress("lz4", compress("lz4", text, level=1)) == text
