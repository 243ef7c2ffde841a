import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.errors import CorruptRecordError
from logbroker.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
    write_varint,
    write_varlong,
)

# (value, encoding) pairs worked out by hand from the zigzag + base-128 definition.
VARINTS = [
    (0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"),
    (-65, "8101"), (150, "ac02"), (8191, "fe7f"), (8192, "808001"),
    (INT32_MAX, "feffffff0f"), (INT32_MIN, "ffffffff0f"),
]
VARLONGS = VARINTS + [
    (1 << 31, "8080808010"), (INT64_MAX, "feffffffffffffffff01"), (INT64_MIN, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize("value, encoded", VARINTS)
def test_varint_known_encodings(value, encoded):
    raw = bytes.fromhex(encoded)
    assert encode_varint(value) == raw
    assert decode_varint(raw) == (value, len(raw))
    assert size_of_varint(value) == len(raw)


@pytest.mark.parametrize("value, encoded", VARLONGS)
def test_varlong_known_encodings(value, encoded):
    raw = bytes.fromhex(encoded)
    assert encode_varlong(value) == raw
    assert decode_varlong(raw) == (value, len(raw))
    assert size_of_varlong(value) == len(raw)


@given(st.integers(INT32_MIN, INT32_MAX), st.binary(max_size=3))
def test_varint_round_trip_at_an_offset(value, prefix):
    out = bytearray(prefix)
    write_varint(out, value)
    out += b"\xff"
    assert decode_varint(out, len(prefix)) == (value, len(out) - 1)
    assert size_of_varint(value) == len(out) - len(prefix) - 1


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip(value):
    out = bytearray()
    write_varlong(out, value)
    assert decode_varlong(bytes(out)) == (value, len(out))
    assert decode_varlong(memoryview(out)) == (value, len(out))
    assert size_of_varlong(value) == len(out)


@given(st.integers(0, (1 << 32) - 1))
def test_unsigned_varint_round_trip(value):
    raw = encode_unsigned_varint(value)
    assert decode_unsigned_varint(raw) == (value, len(raw))


def test_unsigned_varint_has_no_zigzag():
    assert encode_unsigned_varint(1) == b"\x01"
    assert encode_unsigned_varint(300) == b"\xac\x02"


@pytest.mark.parametrize("encode, value", [
    (encode_varint, INT32_MAX + 1), (encode_varint, INT32_MIN - 1),
    (encode_varlong, INT64_MAX + 1), (encode_unsigned_varint, -1),
])
def test_encoding_out_of_range_is_a_value_error(encode, value):
    with pytest.raises(ValueError):
        encode(value)


@pytest.mark.parametrize("decode, raw", [
    (decode_varint, b""), (decode_varint, b"\x80"), (decode_varint, b"\xff\xff"),
    (decode_varlong, b"\x80\x80\x80"), (decode_unsigned_varint, b"\x81"),
])
def test_truncated_varint_is_corrupt(decode, raw):
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode(raw)


@pytest.mark.parametrize("decode, raw", [
    (decode_varint, b"\xff\xff\xff\xff\xff\x01"),  # six bytes
    (decode_varlong, b"\xff" * 10 + b"\x01"),  # eleven bytes
])
def test_overlong_varint_is_corrupt(decode, raw):
    with pytest.raises(CorruptRecordError, match="longer than"):
        decode(raw)


@pytest.mark.parametrize("decode, raw", [
    (decode_varint, b"\xff\xff\xff\xff\x1f"),  # 35 significant bits
    (decode_unsigned_varint, b"\xff\xff\xff\xff\x7f"),
    (decode_varlong, b"\xff" * 9 + b"\x7f"),  # 70 significant bits
])
def test_varint_overflowing_its_width_is_corrupt(decode, raw):
    with pytest.raises(CorruptRecordError, match="overflows"):
        decode(raw)
