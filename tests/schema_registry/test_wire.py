"""Confluent's framing of Protobuf bodies: the message indexes a writer puts before the message,
byte for byte what confluent-kafka's serializer writes for the same indexes, and read back."""

import pytest
from confluent_kafka.schema_registry.common.serde import SchemaId
from hypothesis import given
from hypothesis import strategies as st

from logbroker.schema_registry import wire

# 70 top-level messages (index 69 zigzags past one varint byte); M1 nests A, and A nests B.
SCHEMA = 'syntax = "proto3";\npackage p;\n' + "".join(
    f"message M{i} {{ int32 x = 1; }}\n" for i in range(70) if i != 1) + """
message M1 {
  message A {
    message B { int32 y = 1; }
    B b = 1;
  }
  message C { int32 z = 1; }
  A a = 1;
}
"""


@pytest.fixture(scope="module")
def file():
    return wire.protobuf_file(SCHEMA, ())


@pytest.mark.parametrize("name, indexes", [
    ("p.M0", [0]), ("p.M1", [69]), ("p.M2", [1]), ("p.M69", [68]),
    ("p.M1.A", [69, 0]), ("p.M1.C", [69, 1]), ("p.M1.A.B", [69, 0, 0]),
])
def test_message_indexes_are_written_as_confluents_serializer_writes_them(file, name, indexes):
    message = file.pool.FindMessageTypeByName(name)
    confluent = SchemaId("PROTOBUF", 7, message_indexes=indexes).id_to_bytes()
    assert b"\x00" + (7).to_bytes(4, "big") + wire.message_index_bytes(message) == confluent
    assert wire.message_by_indexes(file, indexes) is message
    assert wire.message_indexes(wire.message_index_bytes(message) + b"body") == (indexes, b"body")


def test_the_first_message_is_a_single_zero_byte(file):
    assert wire.message_index_bytes(file.pool.FindMessageTypeByName("p.M0")) == b"\x00"


@given(st.lists(st.integers(min_value=0, max_value=2**31 - 1), min_size=1, max_size=6))
def test_any_index_list_reads_back_from_confluents_bytes(indexes):
    framed = SchemaId("PROTOBUF", 1, message_indexes=indexes).id_to_bytes()
    assert wire.message_indexes(framed[wire.HEADER_SIZE:]) == (indexes, b"")
