"""Protobuf schemas as Confluent's registry keeps them (its ProtobufSchema).

The canonical string is the `.proto` text: as given, or, for a schema given as a base64
FileDescriptorProto, that descriptor written as text. Either way the text is compiled with its
references, so a schema that does not compile is refused with protoc's message.
`formatted("serialized")` is the compiled file `default` as base64, what confluent-kafka's
Protobuf deserializer asks for.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from logbroker.schema_registry.formats.model import (
    CanonicalEquality,
    InvalidSchemaError,
    ResolvedReference,
    same_type_references,
)
from logbroker.schema_registry.formats.protobuf_compat import (
    CompiledSchema,
    differences,
    index_types,
)
from logbroker.schema_registry.formats.protobuf_compile import (
    MAIN_FILE,
    compile_files,
    decode_descriptor,
)
from logbroker.schema_registry.formats.protobuf_text import proto_text


class ProtobufSchema(CanonicalEquality):
    """A compiled Protobuf schema. Raises InvalidSchemaError from the constructor."""

    schema_type = "PROTOBUF"

    def __init__(
        self, text: str, references: Sequence[ResolvedReference] = (), *, new: bool = True
    ) -> None:
        """`new` is Avro's: these formats check a stored schema as they check a new one."""
        self.references = tuple(references)
        dependencies = []
        defined_by = {}
        for ref in same_type_references(self.schema_type, references):
            dependencies.append((ref.name, _as_text(ref.schema)))
            defined_by[ref.name] = (ref.subject, ref.version)
        self._text = _as_text(text)
        files = compile_files(self._text, dependencies)
        self.file = files[MAIN_FILE]
        self.compiled = CompiledSchema(self.file, index_types(files.values(), defined_by))

    def canonical(self) -> str:
        return self._text

    def normalized(self) -> ProtobufSchema:
        return ProtobufSchema(proto_text(self.file), self.references)

    def formatted(self, fmt: str) -> str:
        if fmt == "serialized":
            return base64.b64encode(self.file.SerializeToString()).decode("ascii")
        if fmt == "ignore_extensions":
            return proto_text(self.file, with_extensions=False)
        return self.canonical()

    def read_differences(self, writer: CanonicalEquality) -> list[str]:
        assert isinstance(writer, ProtobufSchema)
        return [found.describe() for found in differences(writer.compiled, self.compiled)]


def _as_text(schema: str) -> str:
    if not schema.strip():
        raise InvalidSchemaError("Invalid schema: empty")
    descriptor = decode_descriptor(schema)
    return schema if descriptor is None else proto_text(descriptor)
