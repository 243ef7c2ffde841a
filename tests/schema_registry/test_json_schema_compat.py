"""JSON Schema compatibility verdicts, one case a line: Confluent's JSON Schema diff rules
(strict policy) for types, bounds, enums, content models, required properties, arrays,
combinations and $refs."""

import json

import pytest

from logbroker.schema_registry.formats import ResolvedReference, check_compatibility, parse_schema


def obj(props, **extra):
    return json.dumps({"type": "object", "properties": props, **extra})


OPEN = obj({"a": {"type": "string"}})
CLOSED = obj({"a": {"type": "string"}}, additionalProperties=False)
STR = {"type": "string"}

# (level, old versions oldest first, new, error types of the answer in order)
CASES = [
    ("BACKWARD", [OPEN], OPEN, []),
    # types: changing breaks; integer may widen to number, not the other way; empty takes all
    ("BACKWARD", ['{"type":"string"}'], '{"type":"integer"}', ["TYPE_CHANGED"]),
    ("BACKWARD", ['{"type":"integer"}'], '{"type":"number"}', []),
    ("BACKWARD", ['{"type":"number"}'], '{"type":"integer"}', ["TYPE_NARROWED"]),
    ("BACKWARD", ['{"type":"string"}'], "{}", []),
    ("BACKWARD", ['{"type":"string"}'], '{"type":["string","null"]}', []),
    ("BACKWARD", ['{"type":["string","null"]}'], '{"type":"string"}', ["TYPE_CHANGED"]),
    # bounds and patterns
    ("BACKWARD", ['{"type":"string"}'], '{"type":"string","maxLength":5}', ["MAX_LENGTH_ADDED"]),
    ("BACKWARD", ['{"type":"string","maxLength":5}'], '{"type":"string","maxLength":3}', ["MAX_LENGTH_DECREASED"]),
    ("BACKWARD", ['{"type":"string","maxLength":5}'], '{"type":"string","maxLength":9}', []),
    ("BACKWARD", ['{"type":"string","minLength":1}'], '{"type":"string","minLength":2}', ["MIN_LENGTH_INCREASED"]),
    ("BACKWARD", ['{"type":"string","pattern":"a"}'], '{"type":"string","pattern":"b"}', ["PATTERN_CHANGED"]),
    ("BACKWARD", ['{"type":"string","pattern":"a"}'], '{"type":"string"}', []),
    ("BACKWARD", ['{"type":"number","maximum":10}'], '{"type":"number","maximum":5}', ["MAXIMUM_DECREASED"]),
    ("BACKWARD", ['{"type":"number","minimum":0}'], '{"type":"number","minimum":-5}', []),
    ("BACKWARD", ['{"type":"number","multipleOf":2}'], '{"type":"number","multipleOf":4}', ["MULTIPLE_OF_EXPANDED"]),
    ("BACKWARD", ['{"type":"number","multipleOf":4}'], '{"type":"number","multipleOf":2}', []),
    # enums
    ("BACKWARD", ['{"enum":["A","B"]}'], '{"enum":["A","B","C"]}', []),
    ("BACKWARD", ['{"enum":["A","B"]}'], '{"enum":["A"]}', ["ENUM_ARRAY_NARROWED"]),
    ("BACKWARD", ['{"enum":["A","B"]}'], '{"enum":["A","C"]}', ["ENUM_ARRAY_CHANGED"]),
    ("FORWARD", ['{"enum":["A","B"]}'], '{"enum":["A","B","C"]}', ["ENUM_ARRAY_NARROWED"]),
    # open content model: adding a typed property breaks BACKWARD, removing one is fine
    ("BACKWARD", [OPEN], obj({"a": STR, "b": STR}), ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ("BACKWARD", [OPEN], obj({"a": STR, "b": {}}), []),
    ("BACKWARD", [obj({"a": STR, "b": STR})], OPEN, []),
    ("FORWARD", [obj({"a": STR, "b": STR})], OPEN, ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    # closed content model: adding an optional property is fine, removing one breaks
    ("BACKWARD", [CLOSED], obj({"a": STR, "b": STR}, additionalProperties=False), []),
    ("BACKWARD", [obj({"a": STR, "b": STR}, additionalProperties=False)], CLOSED,
     ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    ("BACKWARD", [CLOSED], obj({"a": STR, "b": STR}, additionalProperties=False, required=["b"]),
     ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]),
    ("BACKWARD", [CLOSED], obj({"a": STR, "b": {"type": "string", "default": "x"}},
                               additionalProperties=False, required=["b"]), []),
    ("BACKWARD", [OPEN], CLOSED, ["ADDITIONAL_PROPERTIES_REMOVED"]),
    ("BACKWARD", [CLOSED], OPEN, []),
    ("BACKWARD", [OPEN], obj({"a": STR}, additionalProperties=STR), ["ADDITIONAL_PROPERTIES_NARROWED"]),
    # partially open: a property the additionalProperties schema covers may come and go
    ("BACKWARD", [obj({"a": STR}, additionalProperties=STR)],
     obj({"a": STR, "b": STR}, additionalProperties=STR), []),
    ("BACKWARD", [obj({"a": STR}, additionalProperties=STR)],
     obj({"a": STR, "b": {"type": "integer"}}, additionalProperties=STR),
     ["TYPE_CHANGED", "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]),
    # required
    ("BACKWARD", [OPEN], obj({"a": STR}, required=["a"]), ["REQUIRED_ATTRIBUTE_ADDED"]),
    ("BACKWARD", [obj({"a": STR}, required=["a"])], OPEN, []),
    ("BACKWARD", [OPEN], obj({"a": {"type": "string", "default": ""}}, required=["a"]), []),
    ("BACKWARD", [OPEN], obj({"a": {"type": "integer"}}), ["TYPE_CHANGED"]),
    ("BACKWARD", [obj({"a": STR}, maxProperties=5)], obj({"a": STR}, maxProperties=3), ["MAX_PROPERTIES_DECREASED"]),
    # arrays
    ('BACKWARD', ['{"type":"array","items":{"type":"integer"}}'], '{"type":"array","items":{"type":"number"}}', []),
    ('BACKWARD', ['{"type":"array","items":{"type":"number"}}'], '{"type":"array","items":{"type":"integer"}}',
     ["TYPE_NARROWED"]),
    ('BACKWARD', ['{"type":"array"}'], '{"type":"array","items":{"type":"string"}}', ["SCHEMA_ADDED"]),
    ('BACKWARD', ['{"type":"array","maxItems":3}'], '{"type":"array","maxItems":2}', ["MAX_ITEMS_DECREASED"]),
    ('BACKWARD', ['{"type":"array"}'], '{"type":"array","uniqueItems":true}', ["UNIQUE_ITEMS_ADDED"]),
    ('BACKWARD', ['{"type":"array","items":[{"type":"string"}]}'],
     '{"type":"array","items":[{"type":"string"},{"type":"integer"}]}', ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ('BACKWARD', ['{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}'],
     '{"type":"array","items":[{"type":"string"}],"additionalItems":false}', ["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    # combinations
    ("BACKWARD", ['{"oneOf":[{"type":"string"},{"type":"integer"}]}'],
     '{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"boolean"}]}', []),
    ("BACKWARD", ['{"oneOf":[{"type":"string"},{"type":"integer"}]}'], '{"oneOf":[{"type":"string"}]}',
     ["SUM_TYPE_NARROWED"]),
    ("BACKWARD", ['{"oneOf":[{"type":"string"},{"type":"integer"}]}'],
     '{"allOf":[{"type":"string"},{"type":"integer"}]}', ["COMBINED_TYPE_CHANGED"]),
    ("BACKWARD", ['{"anyOf":[{"type":"string"},{"type":"integer"}]}'],
     '{"anyOf":[{"type":"string"},{"type":"boolean"}]}', ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]),
    # $refs are followed, a recursive one too
    ("BACKWARD", ['{"definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s"}'], '{"type":"string"}', []),
    ("BACKWARD", ['{"definitions":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}}}'],
     '{"definitions":{"s":{"type":"integer"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}}}',
     ["TYPE_CHANGED"]),
    ("FULL", ['{"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"string"}}}'],
     '{"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"string"}}}', []),
    # levels
    ("BACKWARD_TRANSITIVE", ['{"type":"string"}', '{"type":"integer"}'], '{"type":"number"}', ["TYPE_CHANGED"]),
    ("BACKWARD", ['{"type":"string"}', '{"type":"integer"}'], '{"type":"number"}', []),
    ("BACKWARD", ["{}"], '{"type":"integer"}', ["TYPE_CHANGED"]),
    ("FULL", [OPEN], obj({"a": STR, "b": STR}), ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
]


def error_types(messages):
    return [m.split('"')[1] for m in messages if m.startswith("{errorType:")]


@pytest.mark.parametrize(("level", "old", "new", "expected"), CASES)
def test_compatibility_verdict(level, old, new, expected):
    previous = [parse_schema("JSON", text) for text in old]
    messages = check_compatibility(level, parse_schema("JSON", new), previous)
    assert error_types(messages) == expected
    assert bool(messages) == bool(expected)


def test_message_says_what_broke_where():
    old = parse_schema("JSON", '{"type":"object","properties":{"n":{"type":"string","maxLength":9}}}')
    new = parse_schema("JSON", '{"type":"object","properties":{"n":{"type":"string","maxLength":4}}}')
    assert check_compatibility("BACKWARD", new, [old]) == [
        '{errorType:"MAX_LENGTH_DECREASED", description:"The value at path '
        "'#/properties/n/maxLength' in the new schema is less than its value in the old schema'}",
        "{oldSchema: '" + old.canonical() + "'}",
    ]


def test_a_referenced_subjects_schema_is_compared_through_its_ref():
    v1 = ResolvedReference("address.json", "address", 1, "JSON", '{"type":"object","properties":{"city":{"type":"string"}}}')
    v2 = ResolvedReference("address.json", "address", 2, "JSON", '{"type":"object","properties":{"city":{"type":"integer"}}}')
    text = '{"type":"object","properties":{"ship_to":{"$ref":"address.json"}}}'
    messages = check_compatibility("BACKWARD", parse_schema("JSON", text, (v2,)), [parse_schema("JSON", text, (v1,))])
    assert error_types(messages) == ["TYPE_CHANGED"]
    assert "#/properties/ship_to/properties/city" in messages[0]
