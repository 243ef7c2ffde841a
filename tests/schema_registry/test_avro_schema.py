"""Avro schemas parse, print and normalize as Confluent's registry does.

The expected strings come from Confluent's own tests of AvroSchema (canonicalString, normalize,
the `resolved` format) and from Java Avro's Schema.toString rules."""

import io
import json

import fastavro
import pytest

from logbroker.schema_registry.formats import (
    InvalidSchemaError,
    check_compatibility,
    ResolvedReference,
    UnknownSchemaTypeError,
    parse_schema,
)

USER = (
    '{"namespace": "example.avro", "type": "record", "name": "User",'
    '"fields": [{"name": "name", "type": "string"}]}'
)
ACCOUNT = (
    '{"namespace": "example.avro", "type": "record", "name": "Account",'
    '"fields": [{"name": "accountNumber", "type": "string"}]}'
)
REFS = (
    ResolvedReference("example.avro.User", "user", 1, "AVRO", USER),
    ResolvedReference("example.avro.Account", "account", 1, "AVRO", ACCOUNT),
)

CANONICAL = [
    # Confluent AvroSchemaTest.testNormalization: keys in Java's order, escapes kept
    (
        '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":'
        '[{"type":"string","name":"f1","doc":"bye\\"now"}]}',
        '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":'
        '[{"name":"f1","type":"string","doc":"bye\\"now"}]}',
    ),
    # spacing goes, a primitive without properties is a bare string
    ('{ "type" : "string" }', '"string"'),
    ('{"type": "long", "logicalType": "timestamp-millis"}',
     '{"type":"long","logicalType":"timestamp-millis"}'),
    # a nested type in the same namespace writes no namespace; one in another does;
    # a type without one inside a namespaced record writes "namespace":""
    (
        '{"type":"record","name":"a.R","fields":[{"name":"x","type":{"type":"fixed",'
        '"name":"F","size":2}},{"name":"y","type":{"type":"enum","name":"b.E","symbols":["A"]}},'
        '{"name":"z","type":{"type":"record","name":"N","namespace":"","fields":[]}},'
        '{"name":"w","type":"F"},{"name":"v","type":"b.E"}]}',
        '{"type":"record","name":"R","namespace":"a","fields":[{"name":"x","type":{"type":'
        '"fixed","name":"F","size":2}},{"name":"y","type":{"type":"enum","name":"E",'
        '"namespace":"b","symbols":["A"]}},{"name":"z","type":{"type":"record","name":"N",'
        '"namespace":"","fields":[]}},{"name":"w","type":"F"},{"name":"v","type":"b.E"}]}',
    ),
    # field attributes in Java's order, custom properties last in the order written
    (
        '{"type":"record","name":"R","fields":[{"x-prop":1,"aliases":["old"],"order":"DESCENDING",'
        '"default":{"a":[1,2]},"doc":"d","type":{"type":"map","values":{"type":"array",'
        '"items":"int"}},"name":"m"}],"aliases":["Q"],"zz":true,"doc":""}',
        '{"type":"record","name":"R","doc":"","fields":[{"name":"m","type":{"type":"map",'
        '"values":{"type":"array","items":"int"}},"doc":"d","default":{"a":[1,2]},'
        '"order":"descending","aliases":["old"],"x-prop":1}],"zz":true,"aliases":["Q"]}',
    ),
    # enum default after the symbols; non-ASCII text unescaped as Jackson writes it
    (
        '{"type":"enum","name":"Suit","symbols":["SPADES","HEARTS"],"default":"SPADES",'
        '"doc":"é"}',
        '{"type":"enum","name":"Suit","doc":"é","symbols":["SPADES","HEARTS"],'
        '"default":"SPADES"}',
    ),
    ('{"type":"error","name":"Oops","fields":[]}', '{"type":"error","name":"Oops","fields":[]}'),
]


@pytest.mark.parametrize(("given", "canonical"), CANONICAL)
def test_canonical_string_is_java_avros_to_string(given, canonical):
    assert parse_schema("AVRO", given).canonical() == canonical


def test_referenced_types_stay_names_and_resolved_format_inlines_them():
    # Confluent KafkaAvroSerializerTest.testResolvedFormat
    schema = parse_schema("AVRO", '[ "example.avro.User", "example.avro.Account" ]', REFS)
    assert schema.canonical() == '["example.avro.User","example.avro.Account"]'
    assert schema.formatted("resolved") == (
        '[{"type":"record","name":"User","namespace":"example.avro",'
        '"fields":[{"name":"name","type":"string"}]}'
        ',{"type":"record","name":"Account","namespace":"example.avro",'
        '"fields":[{"name":"accountNumber","type":"string"}]}]'
    )
    assert schema.formatted("") == schema.canonical()
    assert schema.formatted("serialized") == schema.canonical()


def test_a_reference_of_a_reference_is_known():
    inner = ResolvedReference("a.Inner", "inner", 3, "AVRO",
                              '{"type":"record","name":"a.Inner","fields":[]}')
    outer = ResolvedReference("a.Outer", "outer", 1, "AVRO",
                              '{"type":"record","name":"a.Outer","fields":[{"name":"i","type":"a.Inner"}]}',
                              (inner,))
    schema = parse_schema("AVRO", '{"type":"array","items":"a.Outer"}', (outer,))
    assert schema.canonical() == '{"type":"array","items":"a.Outer"}'
    assert json.loads(schema.formatted("resolved"))["items"]["fields"][0]["type"]["name"] == "Inner"


def test_normalize_sorts_properties_and_qualifies_names():
    # Confluent AvroSchemaTest.testNormalizationPreservesMetadataForPrimitiveTypes
    given = json.dumps({
        "connect.name": "some.scope.Envelope",
        "fields": [
            {"default": None, "name": "before", "type": ["null", {
                "connect.name": "some.scope.Value",
                "fields": [
                    {"name": "created_at", "type": {"connect.name": "io.debezium.time.Timestamp",
                                                    "connect.version": 1, "type": "long"}},
                    {"name": "normal_long", "type": "long"},
                ],
                "name": "Value", "type": "record"}]},
            {"default": None, "name": "after", "type": ["null", "Value"]},
        ],
        "name": "Envelope", "namespace": "some.scope", "type": "record",
    })
    expected = (
        '{"type":"record","name":"Envelope","namespace":"some.scope","fields":['
        '{"name":"before","type":["null",{"type":"record","name":"Value","fields":['
        '{"name":"created_at","type":{"type":"long","connect.name":"io.debezium.time.Timestamp",'
        '"connect.version":1}},{"name":"normal_long","type":"long"}],'
        '"connect.name":"some.scope.Value"}],"default":null},'
        '{"name":"after","type":["null","Value"],"default":null}],'
        '"connect.name":"some.scope.Envelope"}'
    )
    schema = parse_schema("AVRO", given)
    assert schema.canonical() == expected
    assert schema.normalized().canonical() == expected


def test_normalize_orders_what_canonical_keeps_as_written():
    a = parse_schema("AVRO", '{"type":"record","name":"R","b":1,"a":2,"aliases":["Z","Y"],'
                             '"fields":[{"name":"d","type":"double","default":1}]}')
    b = parse_schema("AVRO", '{"type":"record","name":"R","a":2,"b":1,"aliases":["Y","Z"],'
                             '"fields":[{"name":"d","type":"double","default":1.0}]}')
    assert a != b
    assert a.normalized() == b.normalized()
    assert a.normalized().canonical() == (
        '{"type":"record","name":"R","fields":[{"name":"d","type":"double","default":1.0}],'
        '"a":2,"b":1,"aliases":["Y","Z"]}'
    )
    decimal = parse_schema("AVRO", '{"scale":2,"type":"bytes","precision":4,"logicalType":"decimal"}')
    assert decimal.normalized().canonical() == (
        '{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}'
    )


def test_equal_schemas_compare_and_hash_equal():
    a = parse_schema("AVRO", '{"type" : "record", "name": "R", "fields": []}')
    b = parse_schema("AVRO", '{"name":"R","fields":[],"type":"record"}')
    assert a == b and hash(a) == hash(b)
    assert a != parse_schema("AVRO", '{"type":"record","name":"R","fields":[],"doc":"x"}')


INVALID = [
    ("{", "not JSON"),
    ('{"type":"record","name":"R"}', "Record has no fields"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"Nope"}]}', 'Undefined name: "Nope"'),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
     'Invalid default for field a: "x" not a int'),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"],"default":1}]}',
     "Invalid default for field a: 1 not a union null|int"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":3000000000}]}',
     "Invalid default for field a"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"a","type":"int"}]}',
     "Duplicate field a in record R"),
    ('{"type":"record","name":"1R","fields":[]}', "Illegal name"),
    ('{"type":"enum","name":"E","symbols":["A","A"]}', "Duplicate enum symbol"),
    ('{"type":"enum","name":"E","symbols":["A"],"default":"B"}', "The Enum Default: B"),
    ('{"type":"fixed","name":"F"}', "Invalid or no size"),
    ('["int","int"]', "Duplicate in union: int"),
    ('[["int"]]', "Nested union"),
    ('{"type":"array"}', "array has no items"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"record","name":"R","fields":[]}}]}',
     "Can't redefine: R"),
    ('{"type":"record","name":"int","fields":[]}', "may not be named after primitives"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"int","order":"up"}]}', "Invalid order"),
    ('42', "is not a schema"),
]


@pytest.mark.parametrize(("given", "message"), INVALID)
def test_invalid_schema_is_refused_with_what_is_wrong(given, message):
    with pytest.raises(InvalidSchemaError, match=None) as raised:
        parse_schema("AVRO", given)
    assert message in str(raised.value)


def test_a_reference_of_another_type_or_redefined_name_is_refused():
    with pytest.raises(InvalidSchemaError, match="Can't redefine: example.avro.User"):
        parse_schema("AVRO", USER, REFS)
    other = ResolvedReference("x", "x", 1, "JSON", "{}")
    with pytest.raises(InvalidSchemaError, match="is a JSON schema"):
        parse_schema("AVRO", '"string"', (other,))


def test_unknown_schema_type_is_its_own_error():
    with pytest.raises(UnknownSchemaTypeError, match="Unknown schema type: XML"):
        parse_schema("XML", "<a/>")


WIRE_CASES = [
    (USER, {"name": "ann"}),
    (CANONICAL[3][0], {"x": b"ab", "y": "A", "z": {}, "w": b"cd", "v": "A"}),
    (CANONICAL[4][0], {"m": {"k": [1, 2]}}),
    ('{"type":"record","name":"T","fields":[{"name":"ts","type":{"type":"long",'
     '"logicalType":"timestamp-millis"}},{"name":"u","type":["null",{"type":"map","values":"double"}],'
     '"default":null}]}', {"ts": 1700000000000, "u": {"a": 1.5}}),
]


@pytest.mark.parametrize(("given", "record"), WIRE_CASES)
def test_data_written_with_the_given_schema_reads_with_the_stored_one(given, record):
    """What a consumer's AvroDeserializer does: decode bytes a producer wrote with the schema
    text it registered, using the string the registry answers GET /schemas/ids/{id} with."""
    stored = parse_schema("AVRO", given).canonical()
    written = io.BytesIO()
    fastavro.schemaless_writer(written, fastavro.parse_schema(json.loads(given)), record)
    written.seek(0)
    read = fastavro.schemaless_reader(written, fastavro.parse_schema(json.loads(stored)), None)
    assert written.tell() == len(written.getvalue())
    if "ts" in read:
        read["ts"] = int(read["ts"].timestamp() * 1000)
    assert read == record


def test_normalized_schema_keeps_referenced_types_as_names():
    schema = parse_schema("AVRO", '{"type":"record","name":"Holder","namespace":"example.avro",'
                                  '"fields":[{"name":"u","type":"User"}]}', REFS)
    assert schema.canonical() == (
        '{"type":"record","name":"Holder","namespace":"example.avro",'
        '"fields":[{"name":"u","type":"User"}]}'
    )
    assert schema.normalized() == schema
    assert schema.normalized().references == REFS


def test_a_schema_nested_too_deeply_is_refused_not_crashed_on():
    for depth, refusal in ((150, None), (400, "nested more than 200 levels deep"), (5000, "not JSON")):
        arrays = '{"type":"array","items":' * depth + '"int"' + "}" * depth
        properties = '{"properties":{"a":' * (depth // 2) + "{}" + "}}" * (depth // 2)
        for schema_type, text in (("AVRO", arrays), ("JSON", properties)):
            if refusal is None:
                schema = parse_schema(schema_type, text)
                assert check_compatibility("FULL_TRANSITIVE", schema, [schema, schema]) == []
            else:
                with pytest.raises(InvalidSchemaError, match=refusal):
                    parse_schema(schema_type, text)


def test_a_stored_schema_with_an_invalid_default_still_loads():
    text = '{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"],"default":1}]}'
    with pytest.raises(InvalidSchemaError, match="Invalid default for field a"):
        parse_schema("AVRO", text)
    stored = parse_schema("AVRO", text, new=False)
    assert stored.canonical() == text
    assert stored.normalized().canonical() == text
