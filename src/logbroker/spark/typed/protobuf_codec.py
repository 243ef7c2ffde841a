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
from collections.abc import Callable
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DoubleType,
                               FloatType, IntegerType, LongType, MapType, StringType, StructField,
                               StructType, TimestampType)

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
