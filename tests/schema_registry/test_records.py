"""`_schemas` keys and values, byte for byte as Confluent's registry (7.x, Jackson) writes them."""

from __future__ import annotations

import pytest

from logbroker.schema_registry.records import (
    CLEAR_SUBJECT,
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    NOOP,
    SCHEMA,
    ClearSubjectValue,
    ConfigValue,
    DeleteSubjectValue,
    MalformedRecordError,
    ModeValue,
    RecordKey,
    SchemaReference,
    SchemaValue,
    decode_key,
    decode_value,
)

# (what, key, value, Confluent's key bytes, Confluent's value bytes)
GOLDEN = [
    ("avro schema", RecordKey(SCHEMA, "orders-value", 1),
     SchemaValue("orders-value", 1, 1, '{"type":"string"}'),
     b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}',
     b'{"subject":"orders-value","version":1,"id":1,"schema":"{\\"type\\":\\"string\\"}","deleted":false}'),
    ("protobuf with a reference", RecordKey(SCHEMA, "p", 2),
     SchemaValue("p", 2, 7, 'syntax = "proto3";\nimport "a.proto";', "PROTOBUF",
                 (SchemaReference("a.proto", "a", 1),)),
     b'{"keytype":"SCHEMA","subject":"p","version":2,"magic":1}',
     b'{"subject":"p","version":2,"id":7,"schemaType":"PROTOBUF","references":[{"name":"a.proto",'
     b'"subject":"a","version":1}],"schema":"syntax = \\"proto3\\";\\nimport \\"a.proto\\";","deleted":false}'),
    ("soft-deleted json schema", RecordKey(SCHEMA, "j", 1),
     SchemaValue("j", 1, 3, '{"type":"object"}', "JSON", (), True),
     b'{"keytype":"SCHEMA","subject":"j","version":1,"magic":1}',
     b'{"subject":"j","version":1,"id":3,"schemaType":"JSON","schema":"{\\"type\\":\\"object\\"}","deleted":true}'),
    ("global config", RecordKey(CONFIG), ConfigValue(None, "FULL"),
     b'{"keytype":"CONFIG","magic":0}', b'{"compatibilityLevel":"FULL"}'),
    ("subject config with normalize", RecordKey(CONFIG, "s"), ConfigValue("s", "NONE", True),
     b'{"keytype":"CONFIG","subject":"s","magic":0}', b'{"subject":"s","normalize":true,"compatibilityLevel":"NONE"}'),
    ("global mode", RecordKey(MODE), ModeValue(None, "IMPORT"),
     b'{"keytype":"MODE","magic":0}', b'{"mode":"IMPORT"}'),
    ("subject mode", RecordKey(MODE, "s"), ModeValue("s", "READONLY"),
     b'{"keytype":"MODE","subject":"s","magic":0}', b'{"subject":"s","mode":"READONLY"}'),
    ("soft delete of a subject", RecordKey(DELETE_SUBJECT, "s"), DeleteSubjectValue("s", 4),
     b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}', b'{"subject":"s","version":4}'),
    ("clear of a subject", RecordKey(CLEAR_SUBJECT, "s"), ClearSubjectValue("s"),
     b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}', b'{"subject":"s"}'),
    ("non-ascii and control characters", RecordKey(SCHEMA, "ünï/\tx", 1),
     SchemaValue("ünï/\tx", 1, 2, '"\x01é"'),
     '{"keytype":"SCHEMA","subject":"ünï/\\tx","version":1,"magic":1}'.encode(),
     '{"subject":"ünï/\\tx","version":1,"id":2,"schema":"\\"\\u0001é\\"","deleted":false}'.encode()),
]


@pytest.mark.parametrize(("what", "key", "value", "key_bytes", "value_bytes"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_records_encode_as_confluent_writes_them_and_decode_back(what, key, value, key_bytes, value_bytes):
    assert key.encode() == key_bytes
    assert value.encode() == value_bytes
    assert decode_key(key_bytes) == key
    assert decode_value(key, value_bytes) == value


def test_noop_key_and_tombstones():
    assert RecordKey(NOOP).encode() == b'{"keytype":"NOOP","magic":0}'
    assert decode_value(decode_key(b'{"keytype":"NOOP","magic":0}'), None) is None
    assert decode_value(RecordKey(SCHEMA, "s", 1), None) is None


def test_unknown_fields_are_ignored_as_jackson_does():
    key = decode_key(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1,"extra":true}')
    value = decode_value(key, b'{"subject":"s","version":1,"id":9,"md5":"abc","schema":"\\"int\\"","deleted":false}')
    assert value == SchemaValue("s", 1, 9, '"int"')


@pytest.mark.parametrize("data", [b"", b"[]", b'{"keytype":"PLAN"}', b'{"keytype":"SCHEMA","subject":"s"}', b"\xff"])
def test_malformed_keys_are_refused(data):
    with pytest.raises(MalformedRecordError):
        decode_key(data)


def test_a_schema_value_without_an_id_is_refused():
    with pytest.raises(MalformedRecordError):
        decode_value(RecordKey(SCHEMA, "s", 1), b'{"subject":"s","version":1,"schema":"x"}')
