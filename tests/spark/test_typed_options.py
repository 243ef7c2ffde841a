"""The typed-column options, parsed without Spark or a registry: names, defaults and refusals."""

from __future__ import annotations

import pytest

from logbroker.spark.errors import OptionError
from logbroker.spark.options import parse_sink_options, parse_source_options

BASE = {"kafka.bootstrap.servers": "b:9092", "subscribe": "orders",
        "schema.registry.url": "http://r:8081"}


def test_value_format_defaults_to_the_topic_name_strategy_latest_and_permissive():
    typed = parse_source_options({**BASE, "valueFormat": "AVRO"}, streaming=False).typed
    [column] = typed.columns
    assert (column.column, column.format, column.subject, column.version) == (
        "value", "avro", "orders-value", None)
    assert typed.failfast is False
    assert typed.registry_config() == {"url": "http://r:8081"}


def test_key_and_value_subjects_versions_auth_and_failfast():
    typed = parse_source_options({**BASE, "keyFormat": "json", "keySubject": "k", "valueFormat":
                                  "protobuf", "valueSchemaVersion": "3", "valueMessageName": "A.B",
                                  "mode": "failfast",
                                  "schema.registry.basic.auth.user.info": "u:p"},
                                 streaming=True).typed
    key, value = typed.columns
    assert (key.subject, key.format) == ("k", "json")
    assert (value.version, value.message_name, value.schema_type) == (3, "A.B", "PROTOBUF")
    assert typed.failfast is True
    assert typed.registry_config()["basic.auth.user.info"] == "u:p"


def test_no_format_means_no_typed_columns():
    assert parse_source_options(BASE, streaming=False).typed is None
    assert parse_sink_options({"kafka.bootstrap.servers": "b", "topic": "t"}).typed is None


@pytest.mark.parametrize("options, message", [
    ({"valueFormat": "xml"}, "'valueFormat' must be avro, protobuf or json"),
    ({"valueFormat": "avro", "schema.registry.url": ""}, "'schema.registry.url' must be set"),
    ({"valueFormat": "avro", "mode": "DROPMALFORMED"}, "'mode' must be PERMISSIVE or FAILFAST"),
    ({"valueFormat": "avro", "valueSchemaVersion": "two"}, "'valueSchemaVersion' must be"),
    ({"valueFormat": "avro", "subscribe": "a,b"}, "'valueSubject' must be set"),
    ({"valueFormat": "avro", "valueSchemaAutoRegister": "yes"}, "must be true or false"),
])
def test_bad_typed_options_are_refused_naming_the_option(options, message):
    with pytest.raises(OptionError, match=message):
        parse_source_options({**BASE, **options}, streaming=False)


def test_sink_subject_follows_the_topic_option():
    typed = parse_sink_options({"kafka.bootstrap.servers": "b", "topic": "out",
                                "schema.registry.url": "http://r", "valueFormat": "avro",
                                "valueSchemaAutoRegister": "true"}).typed
    assert typed.columns[0].subject == "out-value" and typed.columns[0].auto_register
