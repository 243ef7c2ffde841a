"""Per-batch compression codecs: the records section of a v2 batch, compressed as one stream.

The codec is in bits 0-2 of the batch attributes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
What each codec reads and writes, and why:

- gzip: one or more gzip members (RFC 1952), as java.util.zip.GZIPOutputStream writes;
  the default level is 6, zlib's default and Java's.
- snappy: decoding accepts both the framing that Java clients write (xerial's
  SnappyOutputStream: the 8-byte magic b"\\x82SNAPPY\\x00", int32 version, int32 minimum
  compatible version, then blocks of [int32 compressed length][raw snappy block], each block at
  most 32 KiB uncompressed, possibly several such streams concatenated) and a single raw snappy
  block, which librdkafka writes. Encoding writes the xerial framing, as Java does.
- lz4: the LZ4 frame format (KIP-57). Decoding accepts any standard frame. Encoding writes what
  Java's KafkaLZ4BlockOutputStream writes: independent 64 KiB blocks, no block or content
  checksum, no content size, so the frame header is always 04 22 4D 18 60 40 82; level 9 (LZ4 HC)
  by default, as KIP-390 set it.
- zstd: one or more zstd frames; level 3 by default.

`compress(codec, data)` and `decompress(codec, data)` take the codec as its attribute id or its
name. An unknown codec raises UnsupportedCompressionTypeError; bytes that do not decompress raise
CorruptRecordError. Both are pure functions.
"""

from __future__ import annotations

import struct

from logbroker.errors import CorruptRecordError, UnsupportedCompressionTypeError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_IDS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
CODEC_NAMES = {v: k for k, v in CODEC_IDS.items()}

DEFAULT_LEVELS = {GZIP: 6, LZ4: 9, ZSTD: 3}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, minimum compatible 1
XERIAL_BLOCK_SIZE = 32 * 1024
def _cramjam():
    """The codecs, imported on first use: ~2.5 MiB that a broker needs only when it compresses or
    decompresses a batch (compaction, LogAppendTime, dump-log), never on the produce and fetch
    paths."""
    import cramjam

    return cramjam


_INT32 = struct.Struct(">i")

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
# FLG 0x60: version 01, blocks independent, no block checksum, no content size or checksum.
# BD 0x40: 64 KiB maximum block size. HC 0x82: (xxhash32(FLG BD) >> 8) & 0xFF, a constant here.
LZ4_KAFKA_FRAME_HEADER = LZ4_FRAME_MAGIC + b"\x60\x40\x82"
LZ4_BLOCK_SIZE = 64 * 1024
LZ4_END_MARK = b"\x00\x00\x00\x00"
_UINT32_LE = struct.Struct("<I")
_LZ4_UNCOMPRESSED_FLAG = 0x80000000


def codec_id(codec: int | str) -> int:
    """The attribute id of a codec given by id or (case-insensitive) name."""
    if isinstance(codec, str):
        try:
            return CODEC_IDS[codec.lower()]
        except KeyError:
            raise UnsupportedCompressionTypeError(
                f"unknown compression type {codec!r} (expected one of {', '.join(CODEC_IDS)})") from None
    if codec in CODEC_NAMES:
        return codec
    raise UnsupportedCompressionTypeError(
        f"unknown compression codec id {codec} (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)")


def codec_name(codec: int | str) -> str:
    return CODEC_NAMES[codec_id(codec)]


# --- snappy -------------------------------------------------------------------------------

def snappy_xerial_encode(data, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """Frame `data` as xerial's SnappyOutputStream does: header, then [int32 len][block]*."""
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), block_size):
        block = bytes(_cramjam().snappy.compress_raw(view[start:start + block_size]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def snappy_decode(data) -> bytes:
    """Decode xerial-framed or raw snappy."""
    view = memoryview(data)
    if len(view) < 16 or view[:8] != XERIAL_MAGIC:
        return bytes(_cramjam().snappy.decompress_raw(view))
    out = bytearray()
    position = 0
    end = len(view)
    while position < end:
        # A stream may be several xerial streams concatenated; each starts with the header.
        if end - position >= 16 and view[position:position + 8] == XERIAL_MAGIC:
            position += 16
            continue
        if end - position < 4:
            raise CorruptRecordError(f"snappy (xerial) stream has {end - position} stray bytes at its end")
        (length,) = _INT32.unpack_from(view, position)
        position += 4
        if length < 0 or position + length > end:
            raise CorruptRecordError(
                f"snappy (xerial) block length {length} at {position - 4} runs past the end ({end} bytes)")
        out += _cramjam().snappy.decompress_raw(view[position:position + length])
        position += length
    return bytes(out)


# --- lz4 ----------------------------------------------------------------------------------

def lz4_kafka_encode(data, level: int = 9) -> bytes:
    """An LZ4 frame laid out as Java's KafkaLZ4BlockOutputStream writes it (see the module doc)."""
    view = memoryview(data)
    parts = [LZ4_KAFKA_FRAME_HEADER]
    if level >= 3:
        options = {"mode": "high_compression", "compression": level}
    else:
        options = {"mode": "default"}
    for start in range(0, len(view), LZ4_BLOCK_SIZE):
        chunk = view[start:start + LZ4_BLOCK_SIZE]
        block = bytes(_cramjam().lz4.compress_block(chunk, store_size=False, **options))
        if len(block) >= len(chunk):  # incompressible: store it as is, flagged by the high bit
            parts.append(_UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_FLAG))
            parts.append(bytes(chunk))
        else:
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(block)
    parts.append(LZ4_END_MARK)
    return b"".join(parts)


# --- dispatch -----------------------------------------------------------------------------

def compress(codec: int | str, data, *, level: int | None = None) -> bytes:
    """Compress the records section `data` with `codec`, as a Java producer would."""
    cid = codec_id(codec)
    if cid == NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(cid)
    if cid == GZIP:
        return bytes(_cramjam().gzip.compress(data, level=level))
    if cid == SNAPPY:
        return snappy_xerial_encode(data)
    if cid == LZ4:
        return lz4_kafka_encode(data, level)
    return bytes(_cramjam().zstd.compress(data, level=level))


def decompress(codec: int | str, data) -> bytes:
    """Decompress a records section written with `codec` by any Kafka client."""
    cid = codec_id(codec)
    if cid == NONE:
        return bytes(data)
    try:
        if cid == GZIP:
            return bytes(_cramjam().gzip.decompress(data))
        if cid == SNAPPY:
            return snappy_decode(data)
        if cid == LZ4:
            return bytes(_cramjam().lz4.decompress(data))
        return bytes(_cramjam().zstd.decompress(data))
    except CorruptRecordError:
        raise
    except (_cramjam().DecompressionError, ValueError, OSError) as e:
        raise CorruptRecordError(f"{CODEC_NAMES[cid]} records do not decompress: {e}") from None
