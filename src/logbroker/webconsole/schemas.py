"""The console's view of a schema registry (any Confluent-compatible one, over its REST API with
confluent-kafka's SchemaRegistryClient): subjects, their versions and compatibility level, a
side-by-side diff of two versions, and registry-framed record values decoded to JSON for the
message browser.

Blocking (HTTP); the app calls it from worker threads. Schemas by id are cached by the client;
decoders built from them are cached here (a schema id never changes its schema).
"""

from __future__ import annotations

import difflib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fastavro
from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from google.protobuf import json_format, message_factory

from logbroker.schema_registry import wire
from logbroker.webconsole.cluster import ConsoleError, NotFoundError
from logbroker.webconsole.render import Shown

SUBJECT_NOT_CONFIGURED = 40408  # Confluent: the subject has no compatibility level of its own
MAX_SUBJECTS_SHOWN = 500


@dataclass(frozen=True)
class SubjectRow:
    name: str
    latest: RegisteredSchema


@dataclass(frozen=True)
class DiffRow:
    """One line of the side-by-side diff: `tag` is equal, replace, delete or insert."""

    tag: str
    left_number: int | None
    left: str
    right_number: int | None
    right: str


class SchemaBrowser:
    def __init__(self, url: str, config: dict[str, str] | None = None) -> None:
        """`config`: more SchemaRegistryClient settings (basic.auth.user.info, ssl.*)."""
        self.url = url
        self.client = SchemaRegistryClient({**(config or {}), "url": url})
        self._decoders: dict[int, Callable[[bytes], Any] | None] = {}

    def _ask(self, what: str, fn, *args):
        try:
            return fn(*args)
        except SchemaRegistryError as e:
            if e.http_status_code == 404:
                raise NotFoundError(f"{what}: {e.error_message} (error {e.error_code})") from None
            raise ConsoleError(f"{what}: {e.error_message} (error {e.error_code})") from None
        except Exception as e:  # httpx's connection errors
            raise ConsoleError(f"The schema registry at {self.url} did not answer: {e}") from None

    def subjects(self) -> list[SubjectRow]:
        names = self._ask("Listing subjects", self.client.get_subjects)
        return [SubjectRow(name, self._ask(name, self.client.get_latest_version, name))
                for name in sorted(names)[:MAX_SUBJECTS_SHOWN]]

    def global_compatibility(self) -> str:
        return self._ask("Reading the global compatibility level", self.client.get_compatibility)

    def compatibility(self, subject: str) -> tuple[str, bool]:
        """The subject's compatibility level and whether it is the subject's own (else the
        global level applies)."""
        try:
            return self.client.get_compatibility(subject), True
        except SchemaRegistryError as e:
            if e.error_code != SUBJECT_NOT_CONFIGURED:
                raise ConsoleError(f"Reading the compatibility of {subject}: {e.error_message}") \
                    from None
        return self.global_compatibility(), False

    def versions(self, subject: str) -> list[int]:
        return self._ask(f"Subject '{subject}'", self.client.get_versions, subject)

    def version(self, subject: str, version: int) -> RegisteredSchema:
        return self._ask(f"Subject '{subject}' version {version}", self.client.get_version,
                         subject, version)

    def decode(self, data: bytes | None) -> Shown | None:
        """A registry-framed value as pretty JSON (kind "json", `schema` naming the type and
        id), or None when `data` is not framed or its schema cannot decode it."""
        if data is None:
            return None
        try:
            schema_id, body = wire.split_frame(data)
        except wire.FramingError:
            return None
        if schema_id not in self._decoders:
            self._decoders[schema_id] = self._decoder(schema_id)
        decode = self._decoders[schema_id]
        if decode is None:
            return None
        try:
            value = decode(body)
        except Exception:  # bytes the schema does not read: show them as they are
            return None
        kind = self.client.get_schema(schema_id).schema_type or "AVRO"
        return Shown("json", json.dumps(value, indent=2, ensure_ascii=False, default=str),
                     len(data), schema=f"{kind.lower()} schema {schema_id}")

    def _decoder(self, schema_id: int) -> Callable[[bytes], Any] | None:
        try:
            schema = self.client.get_schema(schema_id)
            references = wire.resolved_references(self.client, schema)
        except Exception:  # an id the registry does not have, or a registry not answering
            return None
        kind = schema.schema_type or "AVRO"
        if kind == "AVRO":
            parsed, _ = wire.avro_schema(schema.schema_str, references)
            return lambda body: fastavro.schemaless_reader(io.BytesIO(body), parsed, None)
        if kind == "JSON":
            return json.loads
        file = wire.protobuf_file(schema.schema_str, references)

        def decode_protobuf(body: bytes) -> Any:
            indexes, rest = wire.message_indexes(body)
            message = message_factory.GetMessageClass(wire.message_by_indexes(file, indexes))()
            message.ParseFromString(rest)
            return json_format.MessageToDict(message, preserving_proto_field_name=True)

        return decode_protobuf


def pretty(schema: Schema) -> str:
    """The schema text as the page shows it: Avro and JSON Schema indented, .proto as is."""
    if (schema.schema_type or "AVRO") == "PROTOBUF":
        return schema.schema_str
    try:
        return json.dumps(json.loads(schema.schema_str), indent=2, ensure_ascii=False)
    except ValueError:
        return schema.schema_str


def side_by_side(left: str, right: str) -> list[DiffRow]:
    """The lines of two texts aligned: equal lines beside each other, changed lines beside
    their replacements, deleted lines with nothing on the right and inserted ones on the left."""
    a, b = left.splitlines(), right.splitlines()
    rows = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            rows.append(DiffRow(tag, i + 1 if i < i2 else None, a[i] if i < i2 else "",
                                j + 1 if j < j2 else None, b[j] if j < j2 else ""))
    return rows
