"""The registry's state: what the `_schemas` topic says, applied record by record in offset order.

Every broker builds the same state from the same records, so every broker answers reads alike.
Invariants: `max_id` is the largest id any SCHEMA record read so far carried (a hard delete does
not lower it), so an id handed out as `max_id + 1` was never used before in the records read; a
subject's versions are keyed by their number. `ids_by_schema` finds the id of a schema text as
stored (the canonical form, as Confluent's registry stores it too). A record that is not
Confluent's JSON is skipped (the reader logs it once). Pure computation, event loop only.
"""

from __future__ import annotations

from collections.abc import Iterator

from logbroker.schema_registry.records import (
    CLEAR_SUBJECT,
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    ConfigValue,
    RecordKey,
    SchemaValue,
)

DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaValue]] = {}
        self.by_id: dict[int, SchemaValue] = {}
        # (schema type, schema text, references) → the id first registered for it
        self.ids_by_schema: dict[tuple, int] = {}
        self.configs: dict[str | None, ConfigValue] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0

    def apply(self, key: RecordKey, value) -> None:
        """Apply the next record (`value` decoded; None is a tombstone)."""
        if key.keytype == SCHEMA:
            self._apply_schema(key, value)
        elif key.keytype == CONFIG:
            self._put(self.configs, key.subject, value)
        elif key.keytype == MODE:
            self._put(self.modes, key.subject, value.mode if value is not None else None)
        elif key.keytype == DELETE_SUBJECT and value is not None:
            versions = self.subjects.get(key.subject, {})
            for number, schema in list(versions.items()):
                if number <= value.version and not schema.deleted:
                    versions[number] = _deleted(schema)
        elif key.keytype == CLEAR_SUBJECT and value is not None:
            versions = self.subjects.get(key.subject, {})
            for number in [n for n, s in versions.items() if s.deleted]:
                del versions[number]

    @staticmethod
    def _put(table: dict, subject: str | None, value) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    def _apply_schema(self, key: RecordKey, value: SchemaValue | None) -> None:
        versions = self.subjects.setdefault(key.subject, {})
        if value is None:
            versions.pop(key.version, None)
            if not versions:
                del self.subjects[key.subject]
            return
        versions[key.version] = value
        self.max_id = max(self.max_id, value.id)
        self.by_id.setdefault(value.id, value)
        self.ids_by_schema.setdefault((value.schema_type, value.schema, value.references), value.id)

    # -- reads ----------------------------------------------------------------------------------
    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaValue]:
        """The subject's versions, oldest first; soft-deleted ones only with `deleted`."""
        versions = self.subjects.get(subject, {})
        return [versions[n] for n in sorted(versions) if deleted or not versions[n].deleted]

    def subject_names(self, *, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted=deleted))

    def all_schemas(self) -> Iterator[SchemaValue]:
        for versions in self.subjects.values():
            yield from versions.values()

    def schema_by_id(self, schema_id: int) -> SchemaValue | None:
        """A live registration of `schema_id` (the text, type and references of that id), else
        any registration of it, else None once every registration is hard-deleted."""
        first = self.by_id.get(schema_id)
        if first is not None and self._still_registered(first):
            return first
        holders = [s for s in self.all_schemas() if s.id == schema_id]
        if not holders:
            self.by_id.pop(schema_id, None)
            return None
        self.by_id[schema_id] = holders[0]
        return holders[0]

    def _still_registered(self, schema: SchemaValue) -> bool:
        current = self.subjects.get(schema.subject, {}).get(schema.version)
        return current is not None and current.id == schema.id

    def subject_versions_of_id(self, schema_id: int, *, deleted: bool = False) -> list[SchemaValue]:
        return sorted((s for s in self.all_schemas() if s.id == schema_id and (deleted or not s.deleted)),
                      key=lambda s: (s.subject, s.version))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas whose references name `subject` version `version`."""
        return sorted({s.id for s in self.all_schemas() if not s.deleted and any(
            r.subject == subject and r.version == version for r in s.references)})

    def compatibility(self, subject: str | None) -> str:
        """The level in force for `subject`: its own, else the global one, else BACKWARD."""
        for scope in (subject, None):
            config = self.configs.get(scope)
            if config is not None and config.compatibility_level:
                return config.compatibility_level
        return DEFAULT_COMPATIBILITY

    def normalize(self, subject: str | None) -> bool:
        for scope in (subject, None):
            config = self.configs.get(scope)
            if config is not None and config.normalize is not None:
                return config.normalize
        return False

    def mode(self, subject: str | None) -> str:
        if self.modes.get(None) == "READONLY_OVERRIDE":
            return "READONLY_OVERRIDE"
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE


def _deleted(schema: SchemaValue) -> SchemaValue:
    return SchemaValue(schema.subject, schema.version, schema.id, schema.schema, schema.schema_type,
                       schema.references, True)
