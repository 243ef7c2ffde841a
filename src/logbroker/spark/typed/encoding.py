"""Writes: struct `key` / `value` columns encoded as Confluent's serializers frame them (magic
byte 0, the schema's 4-byte id, then the body: Avro; Protobuf after its message indexes; JSON
text validated against the schema), before the rows reach the producer.

The schema is settled once on the driver (`settle_schemas`): the subject's latest (or the
`<column>SchemaVersion` one), or with `<column>SchemaAutoRegister=true` one derived from the
column's Spark type and registered (re-registering an equal schema returns its existing id, as
the registry guarantees); the column's encoder is built there once too, so a schema that cannot
encode it (no such Protobuf message, a type with no mapping) fails the query before any task
runs. Tasks fetch the schema by id, once per worker. Encoding happens in the task before
producing, so the exactly-once path writes exactly the bytes the at-least-once one does.

A row whose value does not fit the schema fails its task (UnencodableRowError naming the
column, the field and why), whatever `mode` says: a write never drops or nulls a row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pyarrow as pa
from confluent_kafka.schema_registry import Schema
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type
from pyspark.sql.types import StructType

from logbroker.schema_registry import wire
from logbroker.schema_registry.formats.json_schema import JsonSchema
from logbroker.spark.errors import FieldMismatch, OptionError, UnencodableRowError
from logbroker.spark.typed import avro_codec, json_codec, protobuf_codec, registry
from logbroker.spark.typed.options import ColumnFormat, TypedOptions

# The message a Protobuf schema derived from a Spark type defines, unless <column>MessageName.
DERIVED_MESSAGE = "TopLevelRecord"


def settle_schemas(typed: TypedOptions, schema: StructType) -> TypedOptions:
    """Driver side: every typed column's writer schema id, registering where asked."""
    columns = []
    for column in typed.columns:
        if column.column not in schema.fieldNames():
            raise OptionError(f"option '{column.column}Format' is set but the DataFrame has no "
                              f"'{column.column}' column")
        data_type = schema[column.column].dataType
        if not isinstance(data_type, StructType):
            raise OptionError(f"option '{column.column}Format' needs a struct "
                              f"'{column.column}' column, got {data_type.simpleString()}")
        if column.auto_register:
            schema_id = registry.register(typed, column.subject, _derived(column, data_type))
        else:
            schema_id = registry.subject_schema(typed, column).schema_id
        settled = replace(column, schema_id=schema_id)
        _encoder(typed, settled, to_arrow_type(data_type, timezone="UTC"))
        columns.append(settled)
    return replace(typed, columns=tuple(columns))


def _derived(column: ColumnFormat, data_type: StructType) -> Schema:
    try:
        if column.format == "avro":
            return Schema(json.dumps(avro_codec.avro_schema(data_type)), "AVRO")
        if column.format == "protobuf":
            return Schema(protobuf_codec.proto_schema(
                data_type, column.message_name or DERIVED_MESSAGE), "PROTOBUF")
        return Schema(json.dumps(json_codec.json_schema(data_type)), "JSON")
    except OptionError as e:
        raise OptionError(f"{column.column}SchemaAutoRegister: {e}") from None


def _encoder(typed: TypedOptions, column: ColumnFormat,
             arrow_type: pa.DataType) -> Callable[[Any], bytes]:
    """The column's encoder: value → framed bytes (header included)."""
    def build():
        schema = registry.schema_by_id(typed, column.schema_id)
        references = registry.resolved_references(typed, schema)
        header = wire.frame_header(column.schema_id)
        spark_type = from_arrow_type(arrow_type)
        if column.format == "avro":
            parsed, named = wire.avro_schema(schema.schema_str, references)
            _refuse_unknown(column, avro_codec.unknown_fields(spark_type, parsed, named))
            encode = avro_codec.encoder(parsed)
        elif column.format == "protobuf":
            try:
                message = wire.message_by_name(wire.protobuf_file(schema.schema_str, references),
                                               column.message_name)
            except KeyError as e:
                raise OptionError(f"{column.column}: {e.args[0]}") from None
            _refuse_unknown(column, protobuf_codec.unknown_fields(spark_type, message))
            header += wire.message_index_bytes(message)
            encode = protobuf_codec.encoder(message)
        else:
            validator = JsonSchema(schema.schema_str, references).validator()
            encode = json_codec.encoder(spark_type, validator)
        return lambda value: header + encode(value)

    return registry.cached(typed, ("encoder", column, str(arrow_type)), build)


def _refuse_unknown(column: ColumnFormat, missing: list[str]) -> None:
    """A column field the writer schema lacks would not be written: refuse it (JSON needs no
    such check: its properties are written whatever the schema lists, and validated)."""
    if missing:
        raise OptionError(f"{column.column}: {column.format} schema id {column.schema_id} "
                          f"(subject {column.subject!r}) has no field for "
                          f"{', '.join(f'{column.column}.{m}' for m in missing)}; its values "
                          "would not be written")


def encoded(typed: TypedOptions | None,
            batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`batches` with each typed column replaced by its framed bytes (a null stays null);
    `batches` itself when no column is typed."""
    return batches if typed is None else _encode_batches(typed, batches)


def _encode_batches(typed: TypedOptions,
                    batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        arrays, fields = list(batch.columns), list(batch.schema)
        for column in typed.columns:
            index = batch.schema.get_field_index(column.column)
            encode = _encoder(typed, column, fields[index].type)
            values = arrays[index].to_pylist(maps_as_pydicts="strict")
            arrays[index] = pa.array([_encode_row(encode, column, row, value)
                                      for row, value in enumerate(values)], pa.binary())
            fields[index] = pa.field(column.column, pa.binary())
        yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _encode_row(encode: Callable[[Any], bytes], column: ColumnFormat, row: int,
                value: Any) -> bytes | None:
    if value is None:
        return None
    try:
        return encode(value)
    except FieldMismatch as e:
        field = f"{column.column}.{e.path}" if e.path else column.column
        raise UnencodableRowError(
            f"row {row} of a batch: {field} does not fit {column.format} schema id "
            f"{column.schema_id} (subject {column.subject!r}): {e.why}; the write fails rather "
            "than drop the row") from None
