"""Confluent's wire framing of a serialized key or value, and Protobuf message types compiled
from registered schemas: what readers of registry-framed records share (the Spark data source,
the web console). No pyspark; the only network use is through a registry client handed in.

A framed record is magic byte 0, the writer's schema id (4 bytes, big-endian), then the body.
A Protobuf body starts with the message indexes: a zigzag varint count, then that many zigzag
varint indexes into the schema's (nested) message types; a single 0 byte stands for [0], the
schema's first message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor

from logbroker.records.varint import encode_varint
from logbroker.schema_registry.formats import ResolvedReference
from logbroker.schema_registry.formats.model import flatten_references
from logbroker.schema_registry.formats.protobuf_compile import MAIN_FILE, compile_files
from logbroker.schema_registry.formats.protobuf_schema import _as_text

HEADER_SIZE = 5


class FramingError(ValueError):
    """The bytes are not a registry-framed record."""


def frame_header(schema_id: int) -> bytes:
    """The header a framed record starts with: magic byte 0 and the writer's schema id."""
    return b"\x00" + schema_id.to_bytes(HEADER_SIZE - 1, "big")


def split_frame(data: bytes) -> tuple[int, bytes]:
    """(schema id, body) of a framed record; raises FramingError for anything else."""
    if len(data) < HEADER_SIZE or data[0] != 0:
        raise FramingError("not framed by a schema registry serializer (no magic byte 0)")
    return int.from_bytes(data[1:HEADER_SIZE], "big"), data[HEADER_SIZE:]


def message_indexes(body: bytes) -> tuple[list[int], bytes]:
    """The Protobuf message indexes at the start of `body`, and the message bytes after them."""
    count, position = _zigzag(body, 0)
    if count == 0:
        return [0], body[position:]
    if count < 0 or count > 100:
        raise FramingError(f"{count} Protobuf message indexes")
    indexes = []
    for _ in range(count):
        index, position = _zigzag(body, position)
        indexes.append(index)
    return indexes, body[position:]


def message_index_bytes(message: Descriptor) -> bytes:
    """The message indexes a Protobuf body written as `message` starts with, as Confluent's
    serializer writes them: a single 0 for the file's first message, else the zigzag count and
    the zigzag indexes from the top level down through nested types."""
    indexes = []
    while message.containing_type is not None:
        indexes.append(message.containing_type.nested_types.index(message))
        message = message.containing_type
    indexes.append(list(message.file.message_types_by_name.values()).index(message))
    indexes.reverse()
    if indexes == [0]:
        return b"\x00"
    return b"".join(encode_varint(n) for n in (len(indexes), *indexes))


def _zigzag(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise FramingError("truncated Protobuf message indexes")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position


def resolved_references(client, schema) -> tuple[ResolvedReference, ...]:
    """A registered schema's references (confluent-kafka `Schema.references`) with the schemas
    they point to, recursively, fetched with `client` (a SchemaRegistryClient)."""
    resolved = []
    for ref in schema.references or ():
        target = client.get_version(ref.subject, ref.version).schema
        resolved.append(ResolvedReference(
            name=ref.name, subject=ref.subject, version=ref.version,
            schema_type=target.schema_type or "AVRO", schema=target.schema_str,
            references=resolved_references(client, target)))
    return tuple(resolved)


def avro_schema(text: str, references: Sequence[ResolvedReference] = ()) -> tuple[Any, dict]:
    """fastavro's parsed schema and its named types (the references parsed first)."""
    named: dict = {}
    for ref in flatten_references(references):
        fastavro.parse_schema(json.loads(ref.schema), named_schemas=named)
    return fastavro.parse_schema(json.loads(text), named_schemas=named), named


def protobuf_file(text: str, references: Sequence[ResolvedReference]):
    """The schema compiled into a descriptor pool with its references and Google's well-known
    types; returns the schema's FileDescriptor."""
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
    return pool.FindFileByName(MAIN_FILE)


def message_by_name(file, name: str | None) -> Descriptor:
    """The message `name` (full, or relative to the file's package), or the file's first.
    Raises KeyError when there is none."""
    if name is None:
        if not file.message_types_by_name:
            raise KeyError("the Protobuf schema defines no message")
        return next(iter(file.message_types_by_name.values()))
    for candidate in (name, f"{file.package}.{name}"):
        try:
            return file.pool.FindMessageTypeByName(candidate)
        except KeyError:
            continue
    raise KeyError(f"the Protobuf schema has no message {name!r}")


def message_by_indexes(file, indexes: Sequence[int]) -> Descriptor:
    """The message the indexes point to. Raises KeyError when they point nowhere."""
    try:
        message = file.message_types_by_name[list(file.message_types_by_name)[indexes[0]]]
        for index in indexes[1:]:
            message = message.nested_types[index]
    except IndexError:
        raise KeyError(f"no Protobuf message at indexes {list(indexes)}") from None
    return message


def _import_well_known_types() -> None:
    from google.protobuf import (any_pb2, duration_pb2, empty_pb2, struct_pb2,  # noqa: F401
                                 timestamp_pb2, wrappers_pb2)
