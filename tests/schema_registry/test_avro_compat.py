"""Avro compatibility verdicts, one case a line: Avro's schema resolution rules as Confluent's
registry applies them per level (cases after Confluent's AvroCompatibilityTest and the Avro
specification's resolution rules)."""

import json

import pytest

from logbroker.schema_registry.formats import check_compatibility, parse_schema


def rec(*fields, name="R"):
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


def f(name, type_, **extra):
    return {"name": name, "type": type_, **extra}


def enum(*symbols, default=None):
    e = {"type": "enum", "name": "E", "symbols": list(symbols)}
    return e | ({"default": default} if default else {})


S1 = rec(f("f1", "string"))
S2 = rec(f("f1", "string"), f("f2", "string", default="foo"))  # adds a field with a default
S3 = rec(f("f1", "string"), f("f2", "string"))  # adds a field without one
S4 = rec(f("f1_new", "string", aliases=["f1"]))  # renames with an alias
S6 = rec(f("f1", ["null", "string", "int"]))  # widens to a union
S7 = rec(f("f1", ["null", "string"]))
S8 = rec(f("f1", "string"), f("f2", "string", default="foo"), f("f3", "string", default="bar"))

# (level, old versions oldest first, new, error types of the answer in order)
CASES = [
    ("BACKWARD", [S1], S2, []),
    ("BACKWARD", [S2], S1, []),
    ("BACKWARD", [S1], S3, ["READER_FIELD_MISSING_DEFAULT_VALUE"]),
    ("BACKWARD", [S1], S4, []),
    ("BACKWARD", [S6], S7, ["MISSING_UNION_BRANCH"]),
    ("BACKWARD", [S7], S6, []),
    ("FORWARD", [S1], S3, []),
    ("FORWARD", [S3], S1, ["READER_FIELD_MISSING_DEFAULT_VALUE"]),
    ("FORWARD", [S7], S6, ["MISSING_UNION_BRANCH"]),
    ("FULL", [S1], S2, []),
    ("FULL", [S1], S3, ["READER_FIELD_MISSING_DEFAULT_VALUE"]),
    ("FULL", [S3], S1, ["READER_FIELD_MISSING_DEFAULT_VALUE"]),
    ("FULL", [S6], S7, ["MISSING_UNION_BRANCH"]),
    # non-transitive levels look at the latest version only; transitive ones at all
    ("BACKWARD", [S1, S2], S3, []),
    ("BACKWARD_TRANSITIVE", [S1, S2], S3, ["READER_FIELD_MISSING_DEFAULT_VALUE"]),
    ("FORWARD", [S3, S2], S1, []),
    ("FORWARD_TRANSITIVE", [S3, S2], S1, ["READER_FIELD_MISSING_DEFAULT_VALUE"]),
    ("FULL", [S1, S2], S8, []),
    ("FULL_TRANSITIVE", [S1, S2], S8, []),
    ("FULL", [S3, S2], S1, []),
    ("FULL_TRANSITIVE", [S3, S2], S1, ["READER_FIELD_MISSING_DEFAULT_VALUE"]),
    ("NONE", [S6], S7, []),
    ("BACKWARD", [], S3, []),
    # promotions: int -> long -> float -> double, string <-> bytes; nothing narrows
    ("BACKWARD", [rec(f("a", "int"))], rec(f("a", "long")), []),
    ("BACKWARD", [rec(f("a", "int"))], rec(f("a", "double")), []),
    ("BACKWARD", [rec(f("a", "long"))], rec(f("a", "float")), []),
    ("BACKWARD", [rec(f("a", "string"))], rec(f("a", "bytes")), []),
    ("BACKWARD", [rec(f("a", "bytes"))], rec(f("a", "string")), []),
    ("BACKWARD", [rec(f("a", "long"))], rec(f("a", "int")), ["TYPE_MISMATCH"]),
    ("BACKWARD", [rec(f("a", "double"))], rec(f("a", "float")), ["TYPE_MISMATCH"]),
    ("BACKWARD", [rec(f("a", "int"))], rec(f("a", "string")), ["TYPE_MISMATCH"]),
    ("FULL", [rec(f("a", "int"))], rec(f("a", "long")), ["TYPE_MISMATCH"]),
    # a union reader takes a writer type one branch reads; a union writer needs every branch
    ("BACKWARD", [rec(f("a", "int"))], rec(f("a", ["null", "long"])), []),
    ("BACKWARD", [rec(f("a", ["null", "int"]))], rec(f("a", "int")), ["TYPE_MISMATCH"]),
    # enums: the reader holds every writer symbol, or has a default
    ("BACKWARD", [rec(f("e", enum("A")))], rec(f("e", enum("A", "B"))), []),
    ("BACKWARD", [rec(f("e", enum("A", "B", "C")))], rec(f("e", enum("A"))), ["MISSING_ENUM_SYMBOLS"]),
    ("BACKWARD", [rec(f("e", enum("A", "B")))], rec(f("e", enum("A", "U", default="U"))), []),
    # named types keep their unqualified name unless the reader aliases the writer's
    ("BACKWARD", [rec(f("a", "int"))], rec(f("a", "int"), name="S"), ["NAME_MISMATCH"]),
    ("BACKWARD", [rec(f("a", "int"), name="x.R")], rec(f("a", "int"), name="y.R"), []),
    ("BACKWARD", [rec(f("a", "int"))], json.dumps({"type": "record", "name": "S", "aliases": ["R"],
                                                   "fields": [f("a", "int")]}), []),
    ("BACKWARD", [rec(f("x", {"type": "fixed", "name": "F", "size": 4}))],
     rec(f("x", {"type": "fixed", "name": "F", "size": 8})), ["FIXED_SIZE_MISMATCH"]),
    ("BACKWARD", [rec(f("m", {"type": "map", "values": "int"}))],
     rec(f("m", {"type": "map", "values": "long"})), []),
    ("BACKWARD", [rec(f("m", {"type": "array", "items": "long"}))],
     rec(f("m", {"type": "array", "items": "int"})), ["TYPE_MISMATCH"]),
    ("BACKWARD", [rec(f("m", {"type": "array", "items": "long"}))],
     rec(f("m", {"type": "map", "values": "long"})), ["TYPE_MISMATCH"]),
    # a recursive record compares with itself without looping
    ("FULL", [rec(f("next", ["null", "R"]))], rec(f("next", ["null", "R"]), f("v", "int", default=0)), []),
    # every finding is reported, not only the first
    ("BACKWARD", [rec(f("a", "long"))], rec(f("a", "int"), f("b", "int")),
     ["TYPE_MISMATCH", "READER_FIELD_MISSING_DEFAULT_VALUE"]),
]


def error_types(messages):
    return [m.split("'")[1] for m in messages if m.startswith("{errorType:")]


@pytest.mark.parametrize(("level", "old", "new", "expected"), CASES)
def test_compatibility_verdict(level, old, new, expected):
    previous = [parse_schema("AVRO", text) for text in old]
    messages = check_compatibility(level, parse_schema("AVRO", new), previous)
    assert error_types(messages) == expected
    assert bool(messages) == bool(expected)


def test_backward_message_says_what_broke_where_and_against_which_schema():
    messages = check_compatibility("BACKWARD", parse_schema("AVRO", S3), [parse_schema("AVRO", S1)])
    assert messages == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path "
        "'/fields/1' in the new schema has no default value and is missing in the old schema', "
        "additionalInfo:'f2'}",
        "{oldSchema: '" + parse_schema("AVRO", S1).canonical() + "'}",
    ]


def test_forward_messages_put_old_schema_as_the_reader():
    old = parse_schema("AVRO", rec(f("e", enum("A"))))
    new = parse_schema("AVRO", rec(f("e", enum("A", "B", "C"))))
    messages = check_compatibility("FORWARD", new, [old])
    assert messages[0] == (
        "{errorType:'MISSING_ENUM_SYMBOLS', description:'The old schema is missing enum symbols "
        "'[B, C]' at path '/fields/0/type/symbols' in the new schema', additionalInfo:'[B, C]'}"
    )
    union = check_compatibility("BACKWARD", parse_schema("AVRO", rec(f("a", "int"))),
                                [parse_schema("AVRO", rec(f("a", ["null", "int"])))])
    assert union[0] == (
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type/0') of a field "
        "in the new schema does not match with the old schema', additionalInfo:'reader type: INT "
        "not compatible with writer type: NULL'}"
    )


def test_a_different_schema_type_is_incompatible():
    class Other:
        schema_type = "JSON"

    messages = check_compatibility("BACKWARD", parse_schema("AVRO", S1), [Other()])
    assert messages == ["Incompatible because of different schema type"]


def test_unknown_level_is_refused():
    with pytest.raises(ValueError, match="Invalid compatibility level"):
        check_compatibility("SIDEWAYS", parse_schema("AVRO", S1), [])
