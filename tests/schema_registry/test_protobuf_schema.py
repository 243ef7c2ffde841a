"""Protobuf schemas: `.proto` text or confluent-kafka's base64 descriptors, imports from
references and from the types every client knows, and the `serialized` form its deserializer
loads."""

import base64

import pytest
from confluent_kafka.schema_registry.common.protobuf import _init_pool, _schema_to_str, _str_to_proto
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from logbroker.schema_registry.formats import (
    InvalidSchemaError,
    ResolvedReference,
    check_compatibility,
    parse_schema,
)

ADDRESS = 'syntax = "proto3";\npackage shop;\n\nmessage Address {\n  string city = 1;\n}\n'
ORDER = """syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";
import "shop/address.proto";

// an order
message Order {
  int64 id = 1;
  google.protobuf.Timestamp placed = 2;
  Address ship_to = 3;
  map<string, int32> quantities = 4;
  oneof payment {
    string card = 5;
    string voucher = 6;
  }
}
"""
ADDRESS_REF = ResolvedReference("shop/address.proto", "address", 1, "PROTOBUF", ADDRESS)


def test_text_is_kept_as_given_and_compiled_with_its_references():
    schema = parse_schema("PROTOBUF", ORDER, (ADDRESS_REF,))
    assert schema.canonical() == ORDER
    file = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(schema.formatted("serialized"))
    )
    assert file.name == "default"
    assert list(file.dependency) == ["google/protobuf/timestamp.proto", "shop/address.proto"]
    assert [f.name for f in file.message_type[0].field] == [
        "id", "placed", "ship_to", "quantities", "card", "voucher",
    ]
    assert parse_schema("PROTOBUF", ORDER, (ADDRESS_REF,)) == schema
    assert parse_schema("PROTOBUF", ORDER.replace("// an order\n", ""), (ADDRESS_REF,)) != schema


def test_normalized_form_ignores_layout_and_comments():
    a = parse_schema("PROTOBUF", ORDER, (ADDRESS_REF,))
    b = parse_schema("PROTOBUF", " ".join(ORDER.replace("// an order", "").split()), (ADDRESS_REF,))
    assert a != b
    assert a.normalized() == b.normalized()
    assert "message Order {\n  int64 id = 1;\n" in a.normalized().canonical()


def message_class(proto_text, name, refs=()):
    """A message class built the way a generated _pb2 module builds it: protoc's descriptor
    added to a pool."""
    schema = parse_schema("PROTOBUF", proto_text, refs)
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    for ref in refs:
        pool.Add(_str_to_proto(ref.name, parse_schema("PROTOBUF", ref.schema).formatted("serialized")))
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.formatted("serialized")))
    file.name = "shop/order.proto"
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def test_descriptor_as_confluent_kafkas_serializer_registers_it_is_stored_as_text():
    order = message_class(ORDER, "shop.Order", (ADDRESS_REF,))
    registered = _schema_to_str(order.DESCRIPTOR.file)  # what ProtobufSerializer sends
    schema = parse_schema("PROTOBUF", registered, (ADDRESS_REF,))
    text = schema.canonical()
    assert text.startswith('syntax = "proto3";\npackage shop;\n\nimport "google/protobuf/timestamp.proto";')
    assert "  map<string, int32> quantities = 4;\n  oneof payment {\n    string card = 5;" in text
    assert schema == parse_schema("PROTOBUF", registered, (ADDRESS_REF,))
    assert schema == parse_schema("PROTOBUF", text, (ADDRESS_REF,))

    # what ProtobufDeserializer fetches (?format=serialized) loads into its pool and decodes
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    pool.Add(_str_to_proto(ADDRESS_REF.name, parse_schema("PROTOBUF", ADDRESS).formatted("serialized")))
    pool.Add(_str_to_proto("order", schema.formatted("serialized")))
    reader = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    written = order(id=7, voucher="V1", quantities={"apple": 3})
    written.placed.seconds = 1700000000
    written.ship_to.city = "Oslo"
    decoded = reader.FromString(written.SerializeToString())
    assert (decoded.id, decoded.voucher, dict(decoded.quantities), decoded.ship_to.city) == (
        7, "V1", {"apple": 3}, "Oslo",
    )
    assert decoded.placed.seconds == 1700000000


@pytest.mark.parametrize("path", [
    "google/protobuf/any.proto", "google/protobuf/duration.proto", "google/protobuf/empty.proto",
    "google/protobuf/struct.proto", "google/protobuf/wrappers.proto", "google/protobuf/field_mask.proto",
    "google/type/date.proto", "google/type/money.proto", "confluent/meta.proto",
    "confluent/type/decimal.proto",
])
def test_types_every_client_knows_need_no_reference(path):
    text = f'syntax = "proto3";\nimport "{path}";\nmessage M {{ int32 a = 1; }}\n'
    assert parse_schema("PROTOBUF", text).canonical() == text


def test_a_reference_of_a_reference_is_found():
    inner = ResolvedReference("a/inner.proto", "inner", 2, "PROTOBUF",
                              'syntax = "proto3"; package a; message Inner {}')
    outer = ResolvedReference("a/outer.proto", "outer", 1, "PROTOBUF",
                              'syntax = "proto3"; package a; import "a/inner.proto"; '
                              "message Outer { Inner i = 1; }", (inner,))
    schema = parse_schema("PROTOBUF", 'syntax = "proto3"; import "a/outer.proto"; '
                                      "message M { a.Outer o = 1; }", (outer,))
    assert list(schema.file.dependency) == ["a/outer.proto"]


def test_ignore_extensions_format_leaves_out_extend_blocks():
    text = ('syntax = "proto2";\npackage p;\nmessage A {\n  optional int32 a = 1;\n'
            "  extensions 100 to 199;\n}\nextend A {\n  optional int32 b = 100;\n}\n")
    schema = parse_schema("PROTOBUF", text)
    assert "extend" in schema.formatted("")
    assert "extend p.A" not in schema.formatted("ignore_extensions")
    assert "extensions 100 to 199;" in schema.formatted("ignore_extensions")


INVALID = [
    ('syntax = "proto3"; message M { int32 a = 1 }', "default:0:"),
    ('syntax = "proto3"; message M { Nope a = 1; }', '"Nope" is not defined'),
    ('syntax = "proto3"; import "missing.proto"; message M {}', "missing.proto"),
    ('syntax = "proto3"; message M { int32 a = 1; int32 b = 1; }', "has already been used"),
    ("  \n", "empty"),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_invalid_schema_is_refused_with_protocs_message(text, message):
    with pytest.raises(InvalidSchemaError) as raised:
        parse_schema("PROTOBUF", text)
    assert message in str(raised.value)


def test_a_reference_name_that_is_not_an_import_path_is_refused():
    bad = ResolvedReference("../etc/x.proto", "x", 1, "PROTOBUF", 'syntax = "proto3";')
    with pytest.raises(InvalidSchemaError, match="not an import path"):
        parse_schema("PROTOBUF", 'syntax = "proto3";', (bad,))


CONFLUENT_WRITTEN = """syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

message Basket {
  .google.protobuf.Timestamp at = 1;
  repeated .shop.Basket.QuantitiesEntry quantities = 2;

  message QuantitiesEntry {
    option map_entry = true;
  
    string key = 1;
    int32 value = 2;
  }
}
"""


def test_a_map_as_confluents_registry_writes_it_loads_as_a_map():
    """How Confluent's registry stores a schema a descriptor-sending client registered: the map
    entry message with `option map_entry = true`, which protoc alone refuses."""
    schema = parse_schema("PROTOBUF", CONFLUENT_WRITTEN)
    assert schema.canonical() == CONFLUENT_WRITTEN
    mapped = parse_schema("PROTOBUF", 'syntax = "proto3";\npackage shop;\nimport "google/protobuf/timestamp.proto";\n'
                                      "message Basket {\n  google.protobuf.Timestamp at = 1;\n"
                                      "  map<string, int32> quantities = 2;\n}\n")
    assert schema.formatted("serialized") == mapped.formatted("serialized")
    assert check_compatibility("FULL", schema, [mapped]) == []
