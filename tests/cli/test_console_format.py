"""The console tools' line reader and record formatter: Kafka's LineMessageReader and
DefaultMessageFormatter rules, without a broker."""

from __future__ import annotations

import click
import pytest

from logbroker.cli.console import LineFormatError, LineReader, RecordFormatter


def reader(**props: str) -> LineReader:
    return LineReader.from_properties({k.replace("_", "."): v for k, v in props.items()})


def test_plain_line_is_the_value():
    assert reader().parse("hello\tworld", 1) == (None, b"hello\tworld", [])


def test_key_before_the_first_separator():
    r = reader(parse_key="true", key_separator=":")
    assert r.parse("k1:v:1", 1) == (b"k1", b"v:1", [])
    assert r.parse(":empty-key", 2) == (b"", b"empty-key", [])


def test_default_key_separator_is_a_tab():
    assert reader(parse_key="TRUE").parse("k\tv", 1) == (b"k", b"v", [])


def test_missing_key_separator_names_the_line():
    with pytest.raises(LineFormatError, match="No key separator found on line number 3: 'novalue'"):
        reader(parse_key="true", key_separator=":").parse("novalue", 3)


def test_ignore_error_sends_the_whole_line_as_value():
    r = reader(parse_key="true", key_separator=":", ignore_error="true")
    assert r.parse("novalue", 1) == (None, b"novalue", [])


def test_headers_then_key_then_value():
    r = reader(parse_headers="true", parse_key="true")
    key, value, headers = r.parse("h1:v1,h2:v2\tkey\tvalue", 1)
    assert (key, value, headers) == (b"key", b"value", [("h1", b"v1"), ("h2", b"v2")])


def test_null_marker_makes_key_value_and_header_values_null():
    r = reader(parse_headers="true", parse_key="true", null_marker="<null>")
    assert r.parse("h:<null>\t<null>\t<null>", 1) == (None, None, [("h", None)])
    assert r.parse("<null>\tk\tv", 2) == (b"k", b"v", [])


def test_header_without_key_separator_is_an_error():
    with pytest.raises(LineFormatError, match="No header key separator found in pair 'oops'"):
        reader(parse_headers="true").parse("oops\tvalue", 1)


def test_equal_separators_are_refused():
    with pytest.raises(click.BadParameter, match="headers.delimiter and headers.separator"):
        reader(headers_delimiter=",")


def test_utf8_is_kept():
    assert reader().parse("grüße", 1) == (None, "grüße".encode(), [])


def record(formatter: RecordFormatter, **overrides) -> bytes:
    fields = dict(timestamp_type=1, timestamp=1700000000000, partition=2, offset=41,
                  headers=[("h1", b"v1"), ("h2", None)], key=b"k", value=b"v")
    fields.update(overrides)
    return formatter.format(**fields)


def test_default_format_is_the_value_and_a_newline():
    assert record(RecordFormatter.from_properties({})) == b"v\n"


def test_every_field_in_kafkas_order():
    f = RecordFormatter.from_properties({"print.timestamp": "true", "print.partition": "true",
                                         "print.offset": "true", "print.headers": "true",
                                         "print.key": "true"})
    assert record(f) == b"CreateTime:1700000000000\tPartition:2\tOffset:41\th1:v1,h2:null\tk\tv\n"


def test_separators_and_null_literal():
    f = RecordFormatter.from_properties({"print.key": "true", "key.separator": " => ",
                                         "line.separator": ";", "null.literal": "-"})
    assert record(f, key=None, value=None) == b"- => -;"


def test_timestamps_and_missing_headers():
    f = RecordFormatter.from_properties({"print.timestamp": "true", "print.headers": "true"})
    assert record(f, timestamp_type=2, headers=None) == b"LogAppendTime:1700000000000\tNO_HEADERS\tv\n"
    assert record(f, timestamp_type=0, headers=[]) == b"NO_TIMESTAMP\tNO_HEADERS\tv\n"


def test_without_the_value_the_last_field_ends_the_line():
    f = RecordFormatter.from_properties({"print.key": "true", "print.offset": "true",
                                         "print.value": "false"})
    assert record(f) == b"Offset:41\tk\n"
