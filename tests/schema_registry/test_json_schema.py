"""JSON Schemas: the drafts Confluent's serializers use, `$ref`s to referenced subjects, the
compacted canonical string and the normalized one."""

import pytest

from logbroker.schema_registry.formats import InvalidSchemaError, ResolvedReference, parse_schema

ADDRESS = ResolvedReference("address.json", "address", 1, "JSON",
                            '{"type": "object", "properties": {"city": {"type": "string"}}}')


@pytest.mark.parametrize("draft", [
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
])
def test_each_draft_confluents_serializers_use_parses(draft):
    text = f'{{"$schema": "{draft}", "title": "T", "type": "object", "properties": {{"a": {{"type": "integer"}}}}}}'
    schema = parse_schema("JSON", text)
    assert schema.canonical() == text.replace(": ", ":").replace(", ", ",")


def test_canonical_is_the_json_compacted_with_keys_as_given():
    schema = parse_schema("JSON", '{ "type" : "object",\n "properties": {"é": {"type": "number", '
                                  '"maximum": 1e10, "minimum": 1.50, "multipleOf": 0.0000001}}}')
    assert schema.canonical() == (
        '{"type":"object","properties":{"é":{"type":"number","maximum":1E+10,"minimum":1.50,'
        '"multipleOf":1E-7}}}'
    )
    assert schema.formatted("") == schema.canonical()


def test_normalized_sorts_keys():
    a = parse_schema("JSON", '{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}')
    b = parse_schema("JSON", '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}')
    assert a != b
    assert a.normalized() == b.normalized()
    assert a.normalized().canonical() == (
        '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}'
    )


def test_refs_to_referenced_subjects_and_within_the_document_resolve():
    text = ('{"type":"object","properties":{"ship_to":{"$ref":"address.json"},'
            '"bill_to":{"$ref":"#/definitions/a"}},"definitions":{"a":{"$ref":"address.json"}}}')
    assert parse_schema("JSON", text, (ADDRESS,)).references == (ADDRESS,)
    nested = ResolvedReference("order.json", "order", 1, "JSON",
                               '{"properties":{"to":{"$ref":"address.json"}}}', (ADDRESS,))
    parse_schema("JSON", '{"$ref":"order.json"}', (nested,))


def test_a_ref_resolves_against_the_schemas_id_as_confluent_registers_references():
    text = ('{"$id": "http://example.com/order.json", "type": "object", "properties": '
            '{"to": {"$ref": "address.json"}, "note": {"$ref": "#/definitions/n"}}, '
            '"definitions": {"n": {"type": "string"}}}')
    parse_schema("JSON", text, (ADDRESS,))
    absolute = ResolvedReference("http://example.com/address.json", "address", 1, "JSON", ADDRESS.schema)
    parse_schema("JSON", text, (absolute,))


INVALID = [
    ("{", "not JSON"),
    ("[1]", "is an object or a boolean"),
    ('{"type": "strin"}', "Invalid schema: 'strin' is not valid"),
    ('{"type": "object", "properties": {"a": {"minLength": -1}}}', "at /properties/a/minLength"),
    ('{"properties": {"a": {"$ref": "missing.json"}}}', "$ref 'missing.json' cannot be resolved"),
    ('{"$ref": "#/definitions/nope"}', "$ref '#/definitions/nope' cannot be resolved"),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_invalid_schema_is_refused_with_what_is_wrong(text, message):
    with pytest.raises(InvalidSchemaError) as raised:
        parse_schema("JSON", text)
    assert message in str(raised.value)


def test_boolean_schemas_are_schemas():
    assert parse_schema("JSON", "true").canonical() == "true"
