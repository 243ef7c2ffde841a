"""Reads: the typed Spark schema (planned on the driver) and Arrow batches whose binary `key` /
`value` columns are decoded into it (in the read tasks).

A framed record is magic byte 0, the writer's 4-byte big-endian schema id, then the body
(Protobuf: message indexes first). Avro bodies are read with the writer's schema (fetched by
id, cached per worker) resolved to the reader's: fields the writer lacked get the reader's
defaults. A null stays null. A record that is not framed, names an id the registry does not
have, or does not decode is a bad record: with mode=PERMISSIVE its column is null (one warning
per batch counts them); with FAILFAST the task fails naming its topic, partition and offset.

The reader schema is pinned on the driver (`pin_versions`: "latest" becomes the version it is
at planning), so every task of a query decodes to the schema Spark was told.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pyarrow as pa
from confluent_kafka.schema_registry.error import SchemaRegistryError
from pyspark.sql.types import DataType, StructField, StructType

from logbroker.schema_registry import wire
from logbroker.spark.errors import OptionError
from logbroker.spark.typed import avro_codec, json_codec, protobuf_codec, registry
from logbroker.spark.typed.options import ColumnFormat, TypedOptions

log = logging.getLogger(__name__)


class MalformedRecordError(RuntimeError):
    """mode=FAILFAST met a record its column cannot decode; the message says which and why."""


class BadRecord(ValueError):
    """A record no decoder of its column reads; the message says why."""


def _failing(why: str) -> Callable[[bytes], Any]:
    """The decoder of a schema id that cannot decode anything (kept, so the registry is asked
    once per id, not once per record)."""

    def fail(body: bytes) -> Any:
        raise BadRecord(why)

    return fail


class ColumnDecoder:
    """Decodes one column's framed bytes to the reader schema's Python values. One per worker,
    reader schema and column; writer codecs are kept by schema id."""

    def __init__(self, typed: TypedOptions, column: ColumnFormat) -> None:
        self.typed = typed
        self.column = column
        found = registry.subject_schema(typed, column)
        self.reader_id = found.schema_id
        references = registry.resolved_references(typed, found.schema)
        text = found.schema.schema_str
        if column.format == "avro":
            self.reader, named = wire.avro_schema(text, references)
            self.spark_type: DataType = avro_codec.spark_type(self.reader, named)
        elif column.format == "protobuf":
            try:
                descriptor = wire.message_by_name(wire.protobuf_file(text, references),
                                                  column.message_name)
            except KeyError as e:
                raise OptionError(f"{column.column}: {e.args[0]}") from None
            self.spark_type = protobuf_codec.spark_type(descriptor)
            self._shared = protobuf_codec.decoder(descriptor)
        else:
            self.spark_type = json_codec.spark_type(json_codec.parse(text))
            self._shared = json_codec.decoder(self.spark_type)
        self._by_id: dict[int, Callable[[bytes], Any]] = {}

    def _decoder(self, schema_id: int) -> Callable[[bytes], Any]:
        try:
            writer = registry.schema_by_id(self.typed, schema_id)
        except SchemaRegistryError as e:
            if e.error_code in registry.NOT_FOUND_CODES:
                return _failing(f"schema id {schema_id} is not in the registry")
            raise
        if (writer.schema_type or "AVRO") != self.column.schema_type:
            return _failing(f"schema id {schema_id} is a {writer.schema_type or 'AVRO'} schema")
        if self.column.format == "avro":
            if schema_id == self.reader_id:
                return avro_codec.decoder(self.reader, None)
            parsed, _ = wire.avro_schema(writer.schema_str,
                                         registry.resolved_references(self.typed, writer))
            return avro_codec.decoder(parsed, self.reader)
        if self.column.format == "protobuf":
            shared = self._shared
            return lambda body: shared(wire.message_indexes(body)[1])
        return self._shared

    def decode_all(self, raw: list[bytes | None]) -> tuple[list[Any], list[tuple[int, str]]]:
        """The decoded values of `raw` (None for a null and for a bad record) and the bad
        records as (row, why). One tight loop: this is the per-record cost of a typed read."""
        values: list[Any] = [None] * len(raw)
        bad: list[tuple[int, str]] = []
        by_id = self._by_id
        for row, data in enumerate(raw):
            if data is None:
                continue
            try:
                schema_id, body = wire.split_frame(data)
                decode = by_id.get(schema_id)
                if decode is None:
                    decode = by_id[schema_id] = self._decoder(schema_id)
            except wire.FramingError as e:
                bad.append((row, str(e)))
                continue
            try:
                values[row] = decode(body)
            except BadRecord as e:
                bad.append((row, str(e)))
            except Exception as e:  # fastavro, protobuf and json raise many kinds
                bad.append((row, f"does not decode with schema id {schema_id}: "
                                 f"{type(e).__name__}: {e}"))
        return values, bad


def _decoder(typed: TypedOptions, column: ColumnFormat) -> ColumnDecoder:
    return registry.cached(typed, ("decoder", column),
                           lambda: ColumnDecoder(typed, column))


def pin_versions(typed: TypedOptions) -> TypedOptions:
    """The options with every column's version made concrete (driver side)."""
    columns = tuple(replace(c, version=registry.subject_schema(typed, c).version)
                    for c in typed.columns)
    return replace(typed, columns=columns)


def typed_schema(base: StructType, typed: TypedOptions) -> StructType:
    """Spark's Kafka schema with the typed columns' types in place of binary."""
    return StructType([StructField(f.name, _decoder(typed, column).spark_type, True)
                       if (column := typed.column(f.name)) is not None else f
                       for f in base.fields])


def decoded(typed: TypedOptions | None, schema: StructType | None,
            batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`batches` with their typed columns decoded to `schema` (the query's Spark schema);
    `batches` itself when no column is typed."""
    if typed is None:
        return batches
    from pyspark.sql.pandas.types import to_arrow_schema

    return _decode_batches(typed, to_arrow_schema(schema, timezone="UTC"), batches)


def _decode_batches(typed: TypedOptions, schema: pa.Schema,
                    batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    decoders = [(schema.get_field_index(c.column), _decoder(typed, c)) for c in typed.columns]
    for batch in batches:
        arrays = list(batch.columns)
        for index, decoder in decoders:
            arrays[index] = _decode_column(decoder, typed.failfast, batch, index,
                                           schema.field(index).type)
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _decode_column(decoder: ColumnDecoder, failfast: bool, batch: pa.RecordBatch, index: int,
                   arrow_type: pa.DataType) -> pa.Array:
    raw = batch.column(index).to_pylist()
    values, bad_rows = decoder.decode_all(raw)
    if bad_rows and failfast:
        row, why = bad_rows[0]
        raise MalformedRecordError(_where(batch, row, decoder.column.column, why))
    bad = len(bad_rows)
    try:
        array = pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        array, more_bad = _array_row_by_row(values, arrow_type, failfast, batch, decoder)
        bad += more_bad
    if bad:
        log.warning("%d of %d records of %s-%s had a %s that does not decode (mode=PERMISSIVE: "
                    "null)", bad, len(raw), batch.column(batch.schema.get_field_index("topic"))[0],
                    batch.column(batch.schema.get_field_index("partition"))[0],
                    decoder.column.column)
    return array


def _array_row_by_row(values: list, arrow_type: pa.DataType, failfast: bool,
                      batch: pa.RecordBatch, decoder: ColumnDecoder) -> tuple[pa.Array, int]:
    """The slow path when a decoded value does not fit the column type (JSON records that
    break their schema): find the rows that do not fit."""
    bad = 0
    for row, value in enumerate(values):
        try:
            pa.array([value], type=arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
            if failfast:
                raise MalformedRecordError(_where(batch, row, decoder.column.column,
                                                  f"does not fit the column type: {e}")) from None
            values[row] = None
            bad += 1
    return pa.array(values, type=arrow_type), bad


def _where(batch: pa.RecordBatch, row: int, column: str, why: str) -> str:
    def at(name: str) -> Any:
        return batch.column(batch.schema.get_field_index(name))[row].as_py()

    return (f"the {column} of {at('topic')}-{at('partition')} at offset {at('offset')} {why} "
            "(mode=FAILFAST; PERMISSIVE reads it as null)")
