"""Protobuf columns: the reader's message type compiled from the registered `.proto` (with its
references; Google's well-known types need no registering), its Spark type (as Spark's
`from_protobuf` maps it), and messages decoded into Python values for Arrow.

Records are parsed with the reader's message class: Protobuf's wire format is the evolution
mechanism (fields by number; fields the writer did not know read as their defaults), so a
record written with an older compatible schema reads without resolution.

Type mapping: message → struct, int32/sint32/sfixed32 → int, uint32 and the 64-bit integers →
long, float, double, bool, string, bytes → binary, enum → string (the value's name), repeated →
array, map → map, google.protobuf.Timestamp → timestamp. Recursive messages are refused.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DoubleType,
                               FloatType, IntegerType, LongType, MapType, StringType, StructField,
                               StructType, TimestampType)

from logbroker.schema_registry.formats import ResolvedReference
from logbroker.schema_registry.formats.model import flatten_references
from logbroker.schema_registry.formats.protobuf_compile import MAIN_FILE, compile_files
from logbroker.schema_registry.formats.protobuf_schema import _as_text
from logbroker.spark.errors import OptionError

TIMESTAMP = "google.protobuf.Timestamp"
_SCALARS: dict[int, DataType] = {
    FieldDescriptor.TYPE_INT32: IntegerType(), FieldDescriptor.TYPE_SINT32: IntegerType(),
    FieldDescriptor.TYPE_SFIXED32: IntegerType(), FieldDescriptor.TYPE_UINT32: LongType(),
    FieldDescriptor.TYPE_FIXED32: LongType(), FieldDescriptor.TYPE_INT64: LongType(),
    FieldDescriptor.TYPE_SINT64: LongType(), FieldDescriptor.TYPE_SFIXED64: LongType(),
    FieldDescriptor.TYPE_UINT64: LongType(), FieldDescriptor.TYPE_FIXED64: LongType(),
    FieldDescriptor.TYPE_FLOAT: FloatType(), FieldDescriptor.TYPE_DOUBLE: DoubleType(),
    FieldDescriptor.TYPE_BOOL: BooleanType(), FieldDescriptor.TYPE_STRING: StringType(),
    FieldDescriptor.TYPE_BYTES: BinaryType(), FieldDescriptor.TYPE_ENUM: StringType(),
}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def message_descriptor(text: str, references: Sequence[ResolvedReference],
                       message_name: str | None) -> Descriptor:
    """The named message of the schema (full name, or relative to its package), or its first."""
    deps = [(ref.name, _as_text(ref.schema)) for ref in flatten_references(references)]
    files = compile_files(_as_text(text), deps)
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str) -> None:
        if name in added:
            return
        added.add(name)
        file = files.get(name)
        if file is None:  # a well-known type protoc did not hand back
            file = descriptor_pb2.FileDescriptorProto()
            descriptor_pool.Default().FindFileByName(name).CopyToProto(file)
        for dependency in file.dependency:
            add(dependency)
        pool.Add(file)

    _import_well_known_types()
    add(MAIN_FILE)
    main = pool.FindFileByName(MAIN_FILE)
    if message_name is None:
        if not main.message_types_by_name:
            raise OptionError("the Protobuf schema defines no message")
        return next(iter(main.message_types_by_name.values()))
    for candidate in (message_name, f"{main.package}.{message_name}"):
        try:
            return pool.FindMessageTypeByName(candidate)
        except KeyError:
            continue
    raise OptionError(f"the Protobuf schema has no message {message_name!r}")


def _import_well_known_types() -> None:
    from google.protobuf import (any_pb2, duration_pb2, empty_pb2, struct_pb2,  # noqa: F401
                                 timestamp_pb2, wrappers_pb2)


def spark_type(descriptor: Descriptor, seen: tuple[str, ...] = ()) -> StructType:
    if descriptor.full_name in seen:
        raise OptionError(f"Protobuf message {descriptor.full_name} is recursive: Spark has no "
                          "type for it")
    return StructType([StructField(f.name, _field_type(f, (*seen, descriptor.full_name)))
                       for f in descriptor.fields])


def _field_type(field: FieldDescriptor, seen: tuple[str, ...]) -> DataType:
    if _is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return MapType(_single_type(key, seen), _single_type(value, seen))
    single = _single_type(field, seen)
    return ArrayType(single) if _repeated(field) else single


def _single_type(field: FieldDescriptor, seen: tuple[str, ...]) -> DataType:
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        if field.message_type.full_name == TIMESTAMP:
            return TimestampType()
        return spark_type(field.message_type, seen)
    return _SCALARS[field.type]


def _is_map(field: FieldDescriptor) -> bool:
    return (field.type == FieldDescriptor.TYPE_MESSAGE
            and field.message_type.GetOptions().map_entry)


def _repeated(field: FieldDescriptor) -> bool:
    return field.is_repeated


def decoder(descriptor: Descriptor) -> Callable[[bytes], dict]:
    message_class = message_factory.GetMessageClass(descriptor)

    def decode(body: bytes) -> dict:
        message = message_class()
        message.ParseFromString(body)
        return _to_python(message)

    return decode


def _to_python(message: Any) -> dict:
    return {field.name: _field_value(field, getattr(message, field.name), message)
            for field in message.DESCRIPTOR.fields}


def _field_value(field: FieldDescriptor, value: Any, message: Any) -> Any:
    if _is_map(field):
        value_field = field.message_type.fields_by_name["value"]
        return {k: _single_value(value_field, v) for k, v in value.items()}
    if _repeated(field):
        return [_single_value(field, v) for v in value]
    if field.type == FieldDescriptor.TYPE_MESSAGE and not message.HasField(field.name):
        return None
    return _single_value(field, value)


def _single_value(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.full_name == TIMESTAMP:
            return _EPOCH + datetime.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)
        return _to_python(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    return value


def message_body(payload: bytes) -> bytes:
    """The Protobuf body after Confluent's message indexes: a zigzag varint count, then that
    many zigzag varint indexes (a single 0 byte for [0], the first message)."""
    position = 0
    count, position = _varint(payload, position)
    for _ in range((count >> 1) ^ -(count & 1)):
        _, position = _varint(payload, position)
    return payload[position:]


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("truncated Protobuf message indexes")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, position
