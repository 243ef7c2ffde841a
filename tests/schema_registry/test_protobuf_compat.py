"""Protobuf compatibility verdicts, one case a line: Confluent's protobuf diff rules (which
changes break a reader, by field number, kind, scalar group, label, message type, oneof)."""

import pytest

from logbroker.schema_registry.formats import check_compatibility, parse_schema


def p3(body, package="p"):
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def p2(body):
    return f'syntax = "proto2";\npackage p;\n{body}\n'


M1 = p3("message M { int32 a = 1; string s = 2; }")

# (level, old versions oldest first, new, error types of the answer in order)
CASES = [
    ("BACKWARD", [M1], M1, []),
    ("BACKWARD", [M1], p3("message M { int32 a = 1; string s = 2; bool b = 3; }"), []),
    ("BACKWARD", [M1], p3("message M { int32 a = 1; }"), []),
    ("BACKWARD", [M1], p3("message M { int32 renamed = 1; string s = 2; }"), []),
    ("BACKWARD", [M1], p3("message M { int64 a = 1; string s = 2; }"), []),
    ("BACKWARD", [M1], p3("message M { bool a = 1; string s = 2; }"), []),
    ("BACKWARD", [M1], p3("message M { int32 a = 1; bytes s = 2; }"), []),
    ("BACKWARD", [M1], p3("message M { sint32 a = 1; string s = 2; }"), ["FIELD_SCALAR_KIND_CHANGED"]),
    ("BACKWARD", [M1], p3("message M { fixed32 a = 1; string s = 2; }"), ["FIELD_SCALAR_KIND_CHANGED"]),
    ("BACKWARD", [M1], p3("message M { string a = 1; string s = 2; }"), ["FIELD_SCALAR_KIND_CHANGED"]),
    ("BACKWARD", [M1], p3("message M { N a = 1; string s = 2; } message N {}"), ["FIELD_KIND_CHANGED"]),
    ("BACKWARD", [M1], p3("message M { map<string, int32> a = 1; string s = 2; }"), ["FIELD_KIND_CHANGED"]),
    ("BACKWARD", [M1], p3("message M { repeated int32 a = 1; string s = 2; }"), []),
    ("BACKWARD", [M1], p3("message M { int32 a = 1; string s = 2; }", package="q"), ["PACKAGE_CHANGED"]),
    ("BACKWARD", [p3("message M {} message N {}")], p3("message M {}"), ["MESSAGE_REMOVED"]),
    ("BACKWARD", [p3("message M {}")], p3("message M {} message N {}"), []),
    ("BACKWARD", [p3("message M {} message N {}")], p3("message N {} message M {}"), []),
    # enums are numbers: constants may come and go, an enum field may become an int32
    ("BACKWARD", [p3("enum E { A = 0; B = 1; } message M { E e = 1; }")],
     p3("enum E { A = 0; } message M { E e = 1; }"), []),
    ("BACKWARD", [p3("enum E { A = 0; } message M { E e = 1; }")], p3("message M { int32 e = 1; }"), []),
    ("BACKWARD", [p3("enum E { A = 0; } message M { E e = 1; }")], p3("message M { string e = 1; }"),
     ["FIELD_SCALAR_KIND_CHANGED"]),
    # message-typed fields: another type, or the same type changed incompatibly
    ("BACKWARD", [p3("message M { N n = 1; } message N {} message O {}")],
     p3("message M { O n = 1; } message N {} message O {}"), ["FIELD_NAMED_TYPE_CHANGED"]),
    ("BACKWARD", [p3("message M { N n = 1; } message N { int32 x = 1; }")],
     p3("message M { N n = 1; } message N { string x = 1; }"),
     ["FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"]),
    ("BACKWARD", [p3("message M { message In { int32 x = 1; } In n = 1; }")],
     p3("message M { message In { int32 x = 1; int32 y = 2; } In n = 1; }"), []),
    ("BACKWARD", [p3("message M { M next = 1; int32 v = 2; }")],
     p3("message M { M next = 1; int64 v = 2; }"), []),
    # maps compare keys and values
    ("BACKWARD", [p3("message M { map<string, int32> m = 1; }")], p3("message M { map<string, int64> m = 1; }"), []),
    ("BACKWARD", [p3("message M { map<string, int32> m = 1; }")], p3("message M { map<string, string> m = 1; }"),
     ["FIELD_SCALAR_KIND_CHANGED"]),
    # labels: proto2 numeric label changes break, string/bytes ones do not; proto3 singular has none
    ("BACKWARD", [p2("message M { optional int32 a = 1; }")], p2("message M { repeated int32 a = 1; }"),
     ["FIELD_NUMERIC_LABEL_CHANGED"]),
    ("BACKWARD", [p2("message M { optional string a = 1; }")], p2("message M { repeated string a = 1; }"), []),
    ("BACKWARD", [p3("message M { optional int32 a = 1; }")], p3("message M { repeated int32 a = 1; }"),
     ["FIELD_NUMERIC_LABEL_CHANGED"]),
    ("BACKWARD", [p2("message M { optional int32 a = 1; }")],
     p2("message M { optional int32 a = 1; required int32 b = 2; }"), ["REQUIRED_FIELD_ADDED"]),
    ("BACKWARD", [p2("message M { optional int32 a = 1; required int32 b = 2; }")],
     p2("message M { optional int32 a = 1; }"), ["REQUIRED_FIELD_REMOVED"]),
    ("FORWARD", [p2("message M { optional int32 a = 1; }")],
     p2("message M { optional int32 a = 1; required int32 b = 2; }"), ["REQUIRED_FIELD_REMOVED"]),
    # oneofs
    ("BACKWARD", [p3("message M { oneof o { int32 a = 1; string b = 2; } }")],
     p3("message M { oneof o { int32 a = 1; } }"), ["ONEOF_FIELD_REMOVED"]),
    ("BACKWARD", [p3("message M { oneof o { int32 a = 1; string b = 2; } }")], p3("message M { }"), []),
    ("BACKWARD", [p3("message M { oneof o { int32 a = 1; } }")],
     p3("message M { oneof o { int32 a = 1; string b = 2; } }"), []),
    ("BACKWARD", [p3("message M { oneof o { int32 a = 1; string b = 2; } }")],
     p3("message M { int32 a = 1; oneof o { string b = 2; } }"), []),
    ("BACKWARD", [p3("message M { int32 a = 1; string b = 2; }")],
     p3("message M { oneof o { int32 a = 1; string b = 2; } }"), ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]),
    ("BACKWARD", [p3("message M { int32 a = 1; oneof o { string b = 2; } }")],
     p3("message M { oneof o { int32 a = 1; string b = 2; } }"), ["FIELD_MOVED_TO_EXISTING_ONEOF"]),
    ("BACKWARD", [p3("message M { int32 a = 1; }")], p3("message M { oneof o { int32 a = 1; } }"), []),
    ("BACKWARD", [p3("message M { oneof o { int32 a = 1; } }")], p3("message M { oneof o { string a = 1; } }"),
     ["FIELD_SCALAR_KIND_CHANGED"]),
    # levels: latest only, or every version
    ("BACKWARD", [p3("message M { int32 a = 1; }"), p3("message M { }")], p3("message M { string a = 1; }"), []),
    ("BACKWARD_TRANSITIVE", [p3("message M { int32 a = 1; }"), p3("message M { }")],
     p3("message M { string a = 1; }"), ["FIELD_SCALAR_KIND_CHANGED"]),
    ("FULL", [M1], p3("message M { sint32 a = 1; string s = 2; }"),
     ["FIELD_SCALAR_KIND_CHANGED", "FIELD_SCALAR_KIND_CHANGED"]),
    ("NONE", [M1], p3("message M { string a = 1; }", package="q"), []),
]


def error_types(messages):
    return [m.split('"')[1] for m in messages if m.startswith("{errorType:")]


@pytest.mark.parametrize(("level", "old", "new", "expected"), CASES)
def test_compatibility_verdict(level, old, new, expected):
    previous = [parse_schema("PROTOBUF", text) for text in old]
    messages = check_compatibility(level, parse_schema("PROTOBUF", new), previous)
    assert error_types(messages) == expected
    assert bool(messages) == bool(expected)


def test_message_says_what_broke_where():
    old = parse_schema("PROTOBUF", p3("message M { message In { int32 x = 1; } In n = 1; }"))
    new = parse_schema("PROTOBUF", p3("message M { message In { double x = 1; } In n = 1; }"))
    messages = check_compatibility("BACKWARD", new, [old])
    assert messages[:2] == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '
        "'#/M/In/1' in the new schema does not match its kind in the old schema\"}",
        '{errorType:"FIELD_NAMED_TYPE_CHANGED", description:"The type of a MESSAGE field at path '
        "'#/M/1' in the new schema does not match its type in the old schema\"}",
    ]
    assert messages[-1] == "{oldSchema: '" + old.canonical() + "'}"
    removed = check_compatibility(
        "BACKWARD", parse_schema("PROTOBUF", p3("message M {}")),
        [parse_schema("PROTOBUF", p3("message M {} message Gone {}"))],
    )
    assert removed[0] == (
        '{errorType:"MESSAGE_REMOVED", description:"The new schema is missing a MESSAGE type at '
        "path '#/Gone' in the old schema\"}"
    )
