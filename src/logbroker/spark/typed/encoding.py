"""Writes: struct `key` / `value` columns encoded as Confluent's Avro serializer frames them
(magic byte 0, the schema's 4-byte id, the Avro body), before the rows reach the producer.

The schema is settled once on the driver (`settle_schemas`): the subject's latest (or the
`<column>SchemaVersion` one), or with `<column>SchemaAutoRegister=true` one derived from the
column's Spark type and registered (re-registering an equal schema returns its existing id, as
the registry guarantees). Tasks fetch it by id, once per worker. Encoding happens in the task
before producing, so the exactly-once path writes exactly the bytes the at-least-once one does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa
from confluent_kafka.schema_registry import Schema
from pyspark.sql.types import StructType

from logbroker.schema_registry import wire
from logbroker.spark.errors import OptionError
from logbroker.spark.typed import avro_codec, registry
from logbroker.spark.typed.options import TypedOptions


def settle_schemas(typed: TypedOptions, schema: StructType) -> TypedOptions:
    """Driver side: every typed column's writer schema id, registering where asked."""
    columns = []
    for column in typed.columns:
        if column.format != "avro":
            raise OptionError(f"option '{column.column}Format': writes encode avro only, "
                              f"not {column.format}")
        if column.column not in schema.fieldNames():
            raise OptionError(f"option '{column.column}Format' is set but the DataFrame has no "
                              f"'{column.column}' column")
        data_type = schema[column.column].dataType
        if not isinstance(data_type, StructType):
            raise OptionError(f"option '{column.column}Format' needs a struct "
                              f"'{column.column}' column, got {data_type.simpleString()}")
        if column.auto_register:
            derived = Schema(json.dumps(avro_codec.avro_schema(data_type)), "AVRO")
            schema_id = registry.register(typed, column.subject, derived)
        else:
            schema_id = registry.subject_schema(typed, column).schema_id
        columns.append(replace(column, schema_id=schema_id))
    return replace(typed, columns=tuple(columns))


def _encoder(typed: TypedOptions, schema_id: int):
    def build():
        schema = registry.schema_by_id(typed, schema_id)
        parsed, _ = wire.avro_schema(schema.schema_str, registry.resolved_references(typed, schema))
        return avro_codec.encoder(parsed)

    return registry.cached(typed, ("avro-encoder", schema_id), build)


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
            encode = _encoder(typed, column.schema_id)
            header = b"\x00" + column.schema_id.to_bytes(4, "big")
            arrays[index] = pa.array([None if value is None else header + encode(value)
                                      for value in arrays[index].to_pylist()], pa.binary())
            fields[index] = pa.field(column.column, pa.binary())
        yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
