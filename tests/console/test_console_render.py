"""The console's pure parts: how keys and values are shown, the message filter, form parsers,
and the guard's credential and origin checks."""

from __future__ import annotations

import base64

import pytest

from logbroker.webconsole import render
from logbroker.webconsole.guard import Credentials, cross_site
from logbroker.webconsole.model import Message


def message(key=b"k", value=b"v", headers=()):
    return Message(0, 0, 0, "CreateTime", key, value, tuple(headers))


def test_json_object_is_pretty_printed():
    shown = render.show(b'{"id":1,"tags":["a"]}')
    assert shown.kind == "json"
    assert shown.text == '{\n  "id": 1,\n  "tags": [\n    "a"\n  ]\n}'


def test_plain_text_is_text_and_binary_is_hex():
    assert render.show(b"hello world") == render.Shown("text", "hello world", 11)
    shown = render.show(b"\x00\x01\xffA")
    assert shown.kind == "hex" and shown.text.startswith("00000000  00 01 ff 41")
    assert shown.text.endswith("...A")


def test_null_and_explicit_formats():
    assert render.show(None).kind == "null"
    assert render.show(b'{"a":1}', "text").text == '{"a":1}'
    assert render.show(b"abc", "hex").text.startswith("00000000  61 62 63")
    assert render.show(b"42", "json") == render.Shown("json", "42", 2)
    assert render.show(b"not json", "json").kind == "text"


def test_large_value_is_cut_for_display():
    shown = render.show(b"x" * (render.MAX_SHOWN_BYTES + 10))
    assert shown.truncated and shown.size == render.MAX_SHOWN_BYTES + 10
    assert len(shown.text) == render.MAX_SHOWN_BYTES


def test_filter_looks_in_key_value_and_headers_case_insensitively():
    assert render.matches(message(value=b'{"Item": "Book"}'), "book")
    assert render.matches(message(key=b"order-7"), "ORDER-7")
    assert render.matches(message(headers=[("trace", b"abc123")]), "abc1")
    assert render.matches(message(headers=[("Trace-Id", None)]), "trace")
    assert render.matches(message(value=b"\xff\xfe"), "fffe")
    assert not render.matches(message(key=None, value=None), "x")


def test_datetime_fields_are_utc_unless_a_zone_is_given():
    assert render.parse_datetime("1970-01-01T00:00:01") == 1000
    assert render.parse_datetime("1970-01-01T01:00:00+01:00") == 0
    assert render.parse_datetime("1970-01-01T00:00:00.5Z") == 500
    with pytest.raises(ValueError, match="not a date"):
        render.parse_datetime("yesterday")
    assert render.format_timestamp(1500) == "1970-01-01 00:00:01.500Z"
    assert render.format_timestamp(None) == "-"


def test_properties_lines():
    assert render.parse_properties("a=1\n\n# note\n b = x=y \n") == {"a": "1", "b": "x=y"}
    with pytest.raises(ValueError, match="Line 2"):
        render.parse_properties("a=1\nnope")


def test_human_numbers():
    assert render.human_count(1234567) == "1,234,567"
    assert render.human_bytes(1536) == "1.5 KiB"
    assert render.human_rate(2500) == "2.5k/s"
    assert render.human_rate(None) == "-"


def test_basic_credentials_check():
    credentials = Credentials("ops", "pa:ss")
    header = "Basic " + base64.b64encode(b"ops:pa:ss").decode()
    assert credentials.check(header)
    assert not credentials.check("Basic " + base64.b64encode(b"ops:pa").decode())
    assert not credentials.check("Basic !!!")
    assert not credentials.check(None)
    assert not credentials.check("Bearer x")


def test_cross_site_writes_are_recognised():
    assert not cross_site({"host": "127.0.0.1:9021"})
    assert not cross_site({"host": "127.0.0.1:9021", "origin": "http://127.0.0.1:9021"})
    assert cross_site({"host": "127.0.0.1:9021", "origin": "http://evil.example"})
    assert cross_site({"host": "127.0.0.1:9021", "origin": "null"})
    assert cross_site({"host": "x", "sec-fetch-site": "cross-site"})
