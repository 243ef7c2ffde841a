"""Protobuf columns: the reader's message type compiled from the registered `.proto` (with its
references; Google's well-known types need no registering), its Spark type (as Spark's
`from_protobuf` maps it), and messages decoded into Python values for Arrow.

Records are parsed with the reader's message class: Protobuf's wire format is the evolution
mechanism (fields by number; fields the writer did not know read as their defaults), so a
record written with an older compatible schema reads without resolution.

Type mapping: message → struct, int32/sint32/sfixed32 → int, uint32 and the 64-bit integers →
long, float, double, bool, string, bytes → binary, enum → string (the value's name), repeated →
array, map → map, google.protobuf.Timestamp → timestamp. Recursive messages are refused. A
field with presence (a message, a proto3 `optional` or proto2 field) that is not set reads null.

Writes build the message from a struct value by field name (`encoder`). A schema registered
from a Spark type (`proto_schema`) maps it back the same way: every scalar field `optional`, so
a null stays null; nested structs are nested messages named after their field.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DoubleType,
                               FloatType, IntegerType, LongType, MapType, StringType, StructField,
                               StructType, TimestampType)

from logbroker.spark.errors import FieldMismatch, OptionError

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
    return ArrayType(single) if field.is_repeated else single


def _single_type(field: FieldDescriptor, seen: tuple[str, ...]) -> DataType:
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        if field.message_type.full_name == TIMESTAMP:
            return TimestampType()
        return spark_type(field.message_type, seen)
    return _SCALARS[field.type]


def _is_map(field: FieldDescriptor) -> bool:
    return (field.type == FieldDescriptor.TYPE_MESSAGE
            and field.message_type.GetOptions().map_entry)


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
    if field.is_repeated:
        return [_single_value(field, v) for v in value]
    if field.has_presence and not message.HasField(field.name):
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


_PROTO_SCALARS = ((BooleanType, "bool"), (IntegerType, "int32"), (LongType, "int64"),
                  (FloatType, "float"), (DoubleType, "double"), (StringType, "string"),
                  (BinaryType, "bytes"))
_MAP_KEYS = (StringType, IntegerType, LongType, BooleanType)


def proto_schema(data_type: StructType, name: str) -> str:
    """The .proto text (proto3, no package) of message `name` for a Spark struct."""
    body = _message(data_type, name, "")
    imports = 'import "google/protobuf/timestamp.proto";\n\n' if TIMESTAMP in body else ""
    return f'syntax = "proto3";\n\n{imports}{body}'


def _message(data_type: StructType, name: str, indent: str) -> str:
    lines, nested = [], []
    for number, f in enumerate(data_type.fields, start=1):
        inner = indent + "  "
        kind = f.dataType
        if isinstance(kind, MapType):
            if not isinstance(kind.keyType, _MAP_KEYS):
                raise OptionError(f"field {f.name}: a Protobuf map key cannot be "
                                  f"{kind.keyType.simpleString()}")
            key = _proto_type(kind.keyType, f.name, nested, inner)
            lines.append(f"{inner}map<{key}, {_proto_type(kind.valueType, f.name, nested, inner)}>"
                         f" {f.name} = {number};")
        elif isinstance(kind, ArrayType):
            lines.append(f"{inner}repeated {_proto_type(kind.elementType, f.name, nested, inner)}"
                         f" {f.name} = {number};")
        else:
            single = _proto_type(kind, f.name, nested, inner)
            label = "" if isinstance(kind, (StructType, TimestampType)) else "optional "
            lines.append(f"{inner}{label}{single} {f.name} = {number};")
    return "\n".join([f"{indent}message {name} {{", *nested, *lines, f"{indent}}}"]) + "\n"


def _proto_type(data_type: DataType, field: str, nested: list[str], indent: str) -> str:
    for spark_class, proto in _PROTO_SCALARS:
        if isinstance(data_type, spark_class):
            return proto
    if isinstance(data_type, TimestampType):
        return f".{TIMESTAMP}"
    if isinstance(data_type, StructType):
        name = field[:1].upper() + field[1:]
        nested.append(_message(data_type, name, indent))
        return name
    if isinstance(data_type, ArrayType | MapType):
        raise OptionError(f"field {field}: {data_type.simpleString()} cannot be a list element "
                          "or map value in Protobuf (arrays and maps cannot nest directly)")
    raise OptionError(f"field {field}: {data_type.simpleString()} has no Protobuf type")


def unknown_fields(data_type: StructType, descriptor: Descriptor, path: str = "") -> list[str]:
    """The paths of struct fields (nested ones too) that `descriptor`'s message has no field
    for. Fields whose types differ are found per row instead."""
    missing = []
    for f in data_type.fields:
        where = f"{path}.{f.name}" if path else f.name
        field = descriptor.fields_by_name.get(f.name)
        if field is None:
            missing.append(where)
            continue
        inner, spark = field, f.dataType
        if _is_map(field) and isinstance(spark, MapType):
            inner, spark, where = (field.message_type.fields_by_name["value"], spark.valueType,
                                   f"{where}[]")
        elif field.is_repeated and isinstance(spark, ArrayType):
            spark, where = spark.elementType, f"{where}[]"
        if (inner.type == FieldDescriptor.TYPE_MESSAGE and isinstance(spark, StructType)
                and inner.message_type.full_name != TIMESTAMP):
            missing += unknown_fields(spark, inner.message_type, where)
    return missing


def encoder(descriptor: Descriptor) -> Callable[[dict], bytes]:
    """Encodes a struct value (a dict by field name) as `descriptor`'s message. Raises
    FieldMismatch for a field the message lacks, a value of the wrong kind, or a null the
    message cannot hold (a field without presence, a list element, a map value)."""
    message_class = message_factory.GetMessageClass(descriptor)

    def encode(value: dict) -> bytes:
        message = message_class()
        _fill(message, value, "")
        return message.SerializeToString()

    return encode


def _fill(message: Any, value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise FieldMismatch(path, f"a struct is needed for {message.DESCRIPTOR.full_name}")
    message.SetInParent()
    fields = message.DESCRIPTOR.fields_by_name
    for name, item in value.items():
        where = f"{path}.{name}" if path else name
        field = fields.get(name)
        if field is None:
            raise FieldMismatch(where, f"message {message.DESCRIPTOR.full_name} has no such field")
        if item is None:
            if not field.has_presence and not field.is_repeated:
                raise FieldMismatch(where, "null, but the Protobuf field has no presence (declare "
                                           "it optional)")
            continue
        try:
            _set(message, field, item, where)
        except FieldMismatch:
            raise
        except (TypeError, ValueError) as e:
            kind = descriptor_pb2.FieldDescriptorProto.Type.Name(field.type)[5:].lower()
            raise FieldMismatch(where, f"{item!r} does not fit the Protobuf {kind} field: {e}"
                                ) from None


def _set(message: Any, field: FieldDescriptor, item: Any, where: str) -> None:
    target = getattr(message, field.name)
    if _is_map(field):
        value_field = field.message_type.fields_by_name["value"]
        for key, entry in (item.items() if isinstance(item, dict) else item):
            if entry is None:
                raise FieldMismatch(f"{where}[{key!r}]", "null, but a Protobuf map value cannot be")
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                _single_message(target[key], value_field, entry, f"{where}[{key!r}]")
            else:
                target[key] = _scalar(value_field, entry)
    elif field.is_repeated:
        for index, entry in enumerate(item):
            if entry is None:
                raise FieldMismatch(f"{where}[{index}]", "null, but a Protobuf list element "
                                                         "cannot be")
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                _single_message(target.add(), field, entry, f"{where}[{index}]")
            else:
                target.append(_scalar(field, entry))
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        _single_message(target, field, item, where)
    else:
        setattr(message, field.name, _scalar(field, item))


def _single_message(target: Any, field: FieldDescriptor, item: Any, where: str) -> None:
    if field.message_type.full_name != TIMESTAMP:
        _fill(target, item, where)
        return
    if not isinstance(item, datetime.datetime):
        raise FieldMismatch(where, f"a timestamp is needed, got {type(item).__name__}")
    delta = (item if item.tzinfo else item.replace(tzinfo=datetime.UTC)) - _EPOCH
    target.seconds = delta.days * 86400 + delta.seconds
    target.nanos = delta.microseconds * 1000


def _scalar(field: FieldDescriptor, item: Any) -> Any:
    if field.type != FieldDescriptor.TYPE_ENUM or not isinstance(item, str):
        return item
    number = field.enum_type.values_by_name.get(item)
    if number is None:
        raise ValueError(f"{item!r} is not a value of enum {field.enum_type.full_name}")
    return number.number
