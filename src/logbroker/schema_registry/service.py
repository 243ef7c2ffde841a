"""What the registry does for each REST call, as Confluent's KafkaSchemaRegistry does it: reads from
the RegistryState every broker keeps, writes as records for the `_schemas` topic.

A write runs on the leader only (the broker leading `_schemas` partition 0; others forward the HTTP
request), inside `store.exclusive()`: that waits until the state has applied every record in the
leader's log, then holds off any other write until this one's records are appended with acks=all
and applied — so an id is chosen knowing every id written before, and two writes never pick the
same one. Parsed schemas are cached by their text, type and references.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from logbroker.schema_registry import errors
from logbroker.schema_registry.formats import (
    COMPATIBILITY_LEVELS,
    SCHEMA_TYPES,
    InvalidSchemaError,
    ResolvedReference,
    UnknownSchemaTypeError,
    check_compatibility,
    parse_schema,
)
from logbroker.schema_registry.records import (
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    ConfigValue,
    DeleteSubjectValue,
    ModeValue,
    RecordKey,
    SchemaReference,
    SchemaValue,
)
from logbroker.schema_registry.state import RegistryState

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = (1 << 31) - 1


def parse_version(text: str | int) -> int | None:
    """A version path parameter: a number in [1, 2^31-1], or None for "latest" (and -1)."""
    if text in ("latest", "-1", -1):
        return None
    try:
        version = int(text)
    except (TypeError, ValueError):
        raise errors.InvalidVersion(str(text)) from None
    if not 1 <= version <= MAX_VERSION:
        raise errors.InvalidVersion(str(text))
    return version


def schema_json(schema: SchemaValue, *, with_subject: bool = True) -> dict[str, Any]:
    """A version as GET /subjects/{s}/versions/{v} answers it (Confluent's Schema entity)."""
    body: dict[str, Any] = {"subject": schema.subject, "version": schema.version, "id": schema.id} \
        if with_subject else {}
    if schema.schema_type != "AVRO":
        body["schemaType"] = schema.schema_type
    if schema.references:
        body["references"] = [r.as_json() for r in schema.references]
    body["schema"] = schema.schema
    return body


class SchemaRegistry:
    """`store` is the KafkaStore (its `state`, `exclusive()` and `write(records)`)."""

    def __init__(self, store) -> None:
        self.store = store

    @property
    def state(self) -> RegistryState:
        return self.store.state

    # -- parsing ------------------------------------------------------------------------------
    def parse(self, schema_type: str, text: str, references: Sequence[SchemaReference], *, new: bool = True):
        """The parsed schema; 422/42201 when it or a reference is not valid. `new=False` for a
        stored schema: checked as Confluent checks one read back (Avro defaults not rechecked)."""
        resolved = tuple(self._resolve(r, ()) for r in references)
        return _parse_cached(schema_type, text, resolved, new)

    def _resolve(self, ref: SchemaReference, seen: tuple) -> ResolvedReference:
        if (ref.subject, ref.version) in seen:
            raise errors.InvalidSchema(f"Invalid schema: circular reference to {ref.subject} version {ref.version}")
        versions = self.state.versions(ref.subject, deleted=True)
        target = next((v for v in versions if v.version == ref.version), None) if ref.version != -1 \
            else next((v for v in reversed(versions) if not v.deleted), None)
        if target is None:
            raise errors.InvalidSchema(f"Invalid schema: reference {ref.name} to subject {ref.subject} "
                                       f"version {ref.version} does not exist")
        inner = tuple(self._resolve(r, seen + ((ref.subject, ref.version),)) for r in target.references)
        return ResolvedReference(ref.name, ref.subject, target.version, target.schema_type,
                                 target.schema, inner)

    def _parsed(self, schema: SchemaValue):
        return self.parse(schema.schema_type, schema.schema, schema.references, new=False)

    # -- reads --------------------------------------------------------------------------------
    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.state.subject_names(deleted=deleted) if s.startswith(prefix)]

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        versions = self.state.versions(subject, deleted=deleted)
        if not versions:
            raise errors.SubjectNotFound(subject)
        return [v.version for v in versions]

    def version(self, subject: str, version_text: str, *, deleted: bool = False) -> SchemaValue:
        version = parse_version(version_text)
        all_versions = self.state.versions(subject, deleted=True)
        if not any(not v.deleted for v in all_versions) and not (deleted and all_versions):
            raise errors.SubjectNotFound(subject)
        if version is None:
            live = [v for v in all_versions if deleted or not v.deleted]
            return live[-1]
        found = next((v for v in all_versions if v.version == version), None)
        if found is None or (found.deleted and not deleted):
            raise errors.VersionNotFound(version)
        return found

    def schema_by_id(self, schema_id: int, fmt: str = "") -> dict[str, Any]:
        schema = self.state.schema_by_id(schema_id)
        if schema is None:
            raise errors.SchemaNotFound(schema_id)
        body = schema_json(schema, with_subject=False)
        if fmt:
            body["schema"] = self._parsed(schema).formatted(fmt)
        return body

    def id_versions(self, schema_id: int, *, deleted: bool = False) -> list[dict[str, Any]]:
        holders = self.state.subject_versions_of_id(schema_id, deleted=deleted)
        if self.state.schema_by_id(schema_id) is None:
            raise errors.SchemaNotFound(schema_id)
        return [{"subject": s.subject, "version": s.version} for s in holders]

    def id_subjects(self, schema_id: int, *, deleted: bool = False) -> list[str]:
        return sorted({v["subject"] for v in self.id_versions(schema_id, deleted=deleted)})

    def referenced_by(self, subject: str, version_text: str) -> list[int]:
        schema = self.version(subject, version_text)
        return self.state.referenced_by(subject, schema.version)

    def lookup(self, subject: str, body: dict, *, normalize: bool, deleted: bool) -> dict[str, Any]:
        """POST /subjects/{s}: the version of `subject` holding this schema."""
        schema_type, text, refs = _schema_fields(body)
        if not self.state.versions(subject, deleted=deleted):
            raise errors.SubjectNotFound(subject)
        parsed = self._normalized(self.parse(schema_type, text, refs), subject, normalize)
        for existing in reversed(self.state.versions(subject, deleted=deleted)):
            if existing.schema_type == schema_type and self._parsed(existing) == parsed:
                return schema_json(existing)
        raise errors.SchemaNotFound()

    def config(self, subject: str | None, *, default_to_global: bool = False) -> dict[str, Any]:
        config = self.state.configs.get(subject)
        if subject is not None and config is None and not default_to_global:
            raise errors.SubjectCompatibilityNotConfigured(subject)
        body: dict[str, Any] = {}
        normalize = self.state.normalize(subject) if config is None else config.normalize
        if normalize is not None and (config is not None or self.state.configs.get(None)):
            body["normalize"] = normalize
        body["compatibilityLevel"] = self.state.compatibility(subject)
        return body

    def mode(self, subject: str | None, *, default_to_global: bool = False) -> dict[str, str]:
        if subject is not None and subject not in self.state.modes and not default_to_global:
            raise errors.SubjectModeNotConfigured(subject)
        return {"mode": self.state.mode(subject)}

    def test_compatibility(self, subject: str, version_text: str | None, body: dict, *,
                           normalize: bool = False, verbose: bool = False) -> dict[str, Any]:
        """POST /compatibility/subjects/{s}/versions/{v} (`version_text` None: against all)."""
        schema_type, text, refs = _schema_fields(body)
        parsed = self._normalized(self.parse(schema_type, text, refs), subject, normalize)
        live = self.state.versions(subject)
        if version_text is None:
            previous, level = live, self.state.compatibility(subject)
        else:
            if not live and parse_version(version_text) is None:
                previous = []
            else:
                previous = [self.version(subject, version_text)]
            level = self.state.compatibility(subject).removesuffix("_TRANSITIVE")
        messages = self._incompatibilities(level, schema_type, parsed, previous)
        answer: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            answer["messages"] = messages
        return answer

    def _incompatibilities(self, level: str, schema_type: str, parsed, previous: list[SchemaValue]) -> list[str]:
        """Confluent's messages for `parsed` against `previous` (oldest first) at `level`, with
        its closing `{validateFields: …, compatibility: …}` entry; empty when compatible."""
        if level == "NONE" or not previous:
            return []
        if not level.endswith("_TRANSITIVE"):
            previous = previous[-1:]  # only the latest counts: parse no other
        if any(p.schema_type != schema_type for p in previous):
            messages = ["Incompatible because of different schema type"]
        else:
            messages = check_compatibility(level, parsed, [self._parsed(p) for p in previous])
        return messages + [f"{{validateFields: 'false', compatibility: '{level}'}}"] if messages else []

    def _normalized(self, parsed, subject: str | None, normalize: bool):
        return parsed.normalized() if normalize or self.state.normalize(subject) else parsed

    # -- writes (on the leader) ----------------------------------------------------------------
    async def register(self, subject: str, body: dict, *, normalize: bool = False) -> dict[str, int]:
        schema_type, text, refs = _schema_fields(body)
        wanted_id = _optional_int(body, "id")
        wanted_version = _optional_int(body, "version")
        async with self.store.exclusive():
            state = self.state
            mode = state.mode(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise errors.OperationNotPermitted(f"Subject {subject} in context  is in read-only mode")
            if wanted_id is not None and wanted_id >= 0 and mode != "IMPORT":
                raise errors.OperationNotPermitted(f"Subject {subject} is not in import or forward mode")
            if (wanted_id is None or wanted_id < 0) and mode != "READWRITE":
                raise errors.OperationNotPermitted(f"Subject {subject} in context  is not in read-write mode")
            parsed = self._normalized(self.parse(schema_type, text, refs), subject, normalize)
            everything = state.versions(subject, deleted=True)
            live = [v for v in everything if not v.deleted]
            schema_id = self._existing_id(schema_type, parsed, refs)
            if schema_id is not None and wanted_id in (None, -1, schema_id) \
                    and any(v.id == schema_id for v in live):
                return {"id": schema_id}  # already a live version of this subject
            if wanted_id is not None and wanted_id >= 0:
                holder = state.schema_by_id(wanted_id)
                if holder is not None and (holder.schema_type != schema_type or self._parsed(holder) != parsed):
                    raise errors.OperationNotPermitted(
                        f"Overwrite new schema with id {wanted_id} in context  is not permitted.")
                schema_id = wanted_id
            if mode != "IMPORT":
                messages = self._incompatibilities(state.compatibility(subject), schema_type, parsed, live)
                if messages:
                    raise errors.IncompatibleSchema(
                        f"Schema being registered is incompatible with an earlier schema for subject "
                        f"\"{subject}\", details: [{', '.join(messages)}]")
            next_version = max((v.version for v in everything), default=0) + 1
            if wanted_version not in (None, 0, -1):
                if wanted_version != next_version and mode != "IMPORT":
                    raise errors.InvalidSchema("Version is not one more than previous version")
                next_version = wanted_version
            if schema_id is None:
                schema_id = state.max_id + 1
            records: list[tuple[RecordKey, Any]] = [
                (RecordKey(SCHEMA, subject, v.version), None) for v in everything
                if v.deleted and v.id == schema_id and v.version < next_version]
            records.append((RecordKey(SCHEMA, subject, next_version),
                            SchemaValue(subject, next_version, schema_id, parsed.canonical(), schema_type,
                                        tuple(refs))))
            await self.store.write(records)
            return {"id": schema_id}

    def _existing_id(self, schema_type: str, parsed, references: tuple[SchemaReference, ...]) -> int | None:
        """The id any subject registered this schema under (Confluent reuses it), or None."""
        return self.state.ids_by_schema.get((schema_type, parsed.canonical(), references))

    async def delete_version(self, subject: str, version_text: str, *, permanent: bool) -> int:
        async with self.store.exclusive():
            self._check_writable(subject)
            schema = self.version(subject, version_text, deleted=True)
            if not permanent and schema.deleted:
                raise errors.VersionSoftDeleted(subject, schema.version)
            if self.state.referenced_by(subject, schema.version):
                raise errors.ReferenceExists(_key_text(subject, schema.version))
            if permanent and not schema.deleted:
                raise errors.VersionNotSoftDeleted(subject, schema.version)
            key = RecordKey(SCHEMA, subject, schema.version)
            records = [(key, None)] if permanent else [(key, SchemaValue(
                subject, schema.version, schema.id, schema.schema, schema.schema_type,
                schema.references, True))]
            if permanent and len(self.state.versions(subject, deleted=True)) == 1:
                records += self._subject_settings_removed(subject)
            await self.store.write(records)
            return schema.version

    async def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        async with self.store.exclusive():
            self._check_writable(subject)
            everything = self.state.versions(subject, deleted=True)
            live = [v for v in everything if not v.deleted]
            if not everything:
                raise errors.SubjectNotFound(subject)
            if not permanent and not live:
                raise errors.SubjectSoftDeleted(subject)
            doomed = everything if permanent else live
            for schema in doomed:
                if self.state.referenced_by(subject, schema.version):
                    raise errors.ReferenceExists(_key_text(subject, schema.version))
            if permanent and live:
                raise errors.SubjectNotSoftDeleted(subject)
            if permanent:
                records = [(RecordKey(SCHEMA, subject, v.version), None) for v in doomed]
                records += self._subject_settings_removed(subject)
            else:
                records = [(RecordKey(DELETE_SUBJECT, subject),
                            DeleteSubjectValue(subject, doomed[-1].version))]
            await self.store.write(records)
            return [v.version for v in doomed]

    def _subject_settings_removed(self, subject: str) -> list[tuple[RecordKey, None]]:
        return [(RecordKey(keytype, subject), None) for keytype, table in
                ((MODE, self.state.modes), (CONFIG, self.state.configs)) if subject in table]

    def _check_writable(self, subject: str) -> None:
        if self.state.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.OperationNotPermitted(f"Subject {subject} in context  is in read-only mode")

    async def set_config(self, subject: str | None, body: dict) -> dict[str, Any]:
        level = body.get("compatibility", body.get("compatibilityLevel"))
        normalize = body.get("normalize")
        if level is not None and (not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS):
            raise errors.InvalidCompatibilityLevel()
        if normalize is not None and not isinstance(normalize, bool):
            raise errors.UnprocessableBody("normalize must be true or false")
        if level is None and normalize is None:
            raise errors.InvalidCompatibilityLevel()
        async with self.store.exclusive():
            await self.store.write([(RecordKey(CONFIG, subject), ConfigValue(
                subject, level.upper() if level else None, normalize))])
        answer: dict[str, Any] = {}
        if level is not None:
            answer["compatibility"] = level.upper()
        if normalize is not None:
            answer["normalize"] = normalize
        return answer

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        async with self.store.exclusive():
            previous = self.config(subject, default_to_global=subject is None)
            if subject is not None and not self.state.versions(subject, deleted=True) \
                    and subject not in self.state.configs:
                raise errors.SubjectNotFound(subject)
            await self.store.write([(RecordKey(CONFIG, subject), None)])
            return previous

    async def set_mode(self, subject: str | None, body: dict, *, force: bool = False) -> dict[str, str]:
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.InvalidMode()
        mode = mode.upper()
        async with self.store.exclusive():
            if mode == "IMPORT" and self.state.mode(subject) != "IMPORT" and not force:
                names = self.state.subject_names() if subject is None else \
                    [subject] if self.state.versions(subject) else []
                if names:
                    raise errors.OperationNotPermitted("Cannot import since found existing subjects")
            await self.store.write([(RecordKey(MODE, subject), ModeValue(subject, mode))])
        return {"mode": mode}

    async def delete_mode(self, subject: str) -> dict[str, str]:
        async with self.store.exclusive():
            previous = self.mode(subject)
            await self.store.write([(RecordKey(MODE, subject), None)])
            return previous


@functools.lru_cache(maxsize=4096)
def _parse_cached(schema_type: str, text: str, references: tuple[ResolvedReference, ...], new: bool):
    try:
        return parse_schema(schema_type, text, references, new=new)
    except UnknownSchemaTypeError:
        raise errors.InvalidSchema(f"Unknown schema type {schema_type}") from None
    except InvalidSchemaError as exc:
        raise errors.InvalidSchema(f"Invalid schema {exc}") from None


def _key_text(subject: str, version: int) -> str:
    return f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}"


def _optional_int(body: dict, name: str) -> int | None:
    value = body.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise errors.UnprocessableBody(f"{name} must be an integer")
    return value


def _schema_fields(body: dict) -> tuple[str, str, tuple[SchemaReference, ...]]:
    """The schemaType, schema text and references of a register / lookup / compatibility body."""
    text = body.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise errors.InvalidSchema("Empty schema")
    schema_type = body.get("schemaType") or "AVRO"
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise errors.InvalidSchema(f"Unknown schema type {schema_type}")
    refs = []
    listed = body.get("references") or []
    if not isinstance(listed, list):
        raise errors.UnprocessableBody("references must be a list")
    for ref in listed:
        if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) \
                or not isinstance(ref.get("subject"), str) or not isinstance(ref.get("version"), int):
            raise errors.InvalidSchema("Invalid schema: a reference needs a name, subject and version")
        refs.append(SchemaReference(ref["name"], ref["subject"], ref["version"]))
    return schema_type.upper(), text, tuple(refs)
