"""The keys and values of the `_schemas` topic, byte for byte as Confluent's registry writes them.

Confluent's SchemaRegistrySerializer writes each key and value with Jackson (no spaces, UTF-8,
`@JsonInclude(NON_EMPTY)`: null fields and empty lists left out), fields in this order:

    key   {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
          {"keytype":"CONFIG"|"MODE"|"DELETE_SUBJECT"|"CLEAR_SUBJECT","subject":S,"magic":0}
          (the global CONFIG and MODE have no subject)   {"keytype":"NOOP","magic":0}
    SCHEMA         {"subject":S,"version":V,"id":I,"schemaType":T,"references":[{"name":N,
                    "subject":S,"version":V}],"schema":TEXT,"deleted":false}
                   (schemaType left out for AVRO, as SchemaTypeConverter does)
    CONFIG         {"subject":S,"alias":…,"normalize":B,"compatibilityLevel":L}
    MODE           {"subject":S,"mode":M}
    DELETE_SUBJECT {"subject":S,"version":V}        (soft delete of every version up to V)
    CLEAR_SUBJECT  {"subject":S}
    a null value (tombstone): the hard delete of a SCHEMA, or the removal of a CONFIG or MODE.

Jackson escapes `"`, `\\` and the control characters (`\\b \\t \\n \\f \\r`, others `\\u00XX` with
upper-case hex) and writes every other character as UTF-8; `jackson_json` does the same. Reading is
lenient as Jackson's is (unknown fields ignored). Pure functions, no I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"
KEY_TYPES = (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP)

_LOWER_HEX_ESCAPE = re.compile(r"\\u00[0-9a-f]{2}")


class MalformedRecordError(ValueError):
    """A `_schemas` record that is not Confluent's JSON (the reader skips it with one log line)."""


def jackson_json(value: object) -> bytes:
    """`value` (dicts in field order) as Jackson writes it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _LOWER_HEX_ESCAPE.sub(lambda m: m.group().upper().replace("\\U", "\\u"), text).encode()


@dataclass(frozen=True, slots=True)
class RecordKey:
    """A `_schemas` key: `keytype`, `subject` (None: the global CONFIG/MODE, or NOOP) and, for
    SCHEMA keys, `version`."""

    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        fields: dict[str, object] = {"keytype": self.keytype}
        if self.subject:
            fields["subject"] = self.subject
        if self.keytype == SCHEMA:
            fields["version"] = self.version
        fields["magic"] = 1 if self.keytype == SCHEMA else 0
        return jackson_json(fields)


@dataclass(frozen=True, slots=True)
class SchemaReference:
    name: str
    subject: str
    version: int

    def as_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaValue:
    """One version of a subject: its global `id`, the schema text as registered, its references."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False

    def encode(self) -> bytes:
        fields: dict[str, object] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            fields["schemaType"] = self.schema_type
        if self.references:
            fields["references"] = [r.as_json() for r in self.references]
        fields["schema"] = self.schema
        fields["deleted"] = self.deleted
        return jackson_json(fields)


@dataclass(frozen=True, slots=True)
class ConfigValue:
    subject: str | None
    compatibility_level: str | None = None
    normalize: bool | None = None
    alias: str | None = None

    def encode(self) -> bytes:
        fields: dict[str, object] = {}
        for name, value in (("subject", self.subject or None), ("alias", self.alias or None),
                            ("normalize", self.normalize),
                            ("compatibilityLevel", self.compatibility_level)):
            if value is not None:
                fields[name] = value
        return jackson_json(fields)


@dataclass(frozen=True, slots=True)
class ModeValue:
    subject: str | None
    mode: str

    def encode(self) -> bytes:
        return jackson_json({"subject": self.subject, "mode": self.mode} if self.subject else {"mode": self.mode})


@dataclass(frozen=True, slots=True)
class DeleteSubjectValue:
    subject: str
    version: int

    def encode(self) -> bytes:
        return jackson_json({"subject": self.subject, "version": self.version})


@dataclass(frozen=True, slots=True)
class ClearSubjectValue:
    subject: str

    def encode(self) -> bytes:
        return jackson_json({"subject": self.subject})


RecordValue = SchemaValue | ConfigValue | ModeValue | DeleteSubjectValue | ClearSubjectValue


def _object(data: bytes, what: str) -> dict:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise MalformedRecordError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise MalformedRecordError(f"{what} is not a JSON object")
    return value


def decode_key(data: bytes) -> RecordKey:
    fields = _object(data, "key")
    keytype = fields.get("keytype")
    if keytype not in KEY_TYPES:
        raise MalformedRecordError(f"unknown keytype {keytype!r}")
    subject = fields.get("subject")
    version = fields.get("version")
    if keytype == SCHEMA and (not isinstance(subject, str) or not isinstance(version, int)):
        raise MalformedRecordError("a SCHEMA key needs a subject and a version")
    return RecordKey(keytype, subject or None, version if keytype == SCHEMA else None)


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    """The value of `key`'s record; None for a tombstone and for NOOP."""
    if data is None or key.keytype == NOOP:
        return None
    f = _object(data, f"{key.keytype} value")
    try:
        if key.keytype == SCHEMA:
            refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"]))
                         for r in f.get("references") or ())
            return SchemaValue(f.get("subject", key.subject), int(f["version"]), int(f["id"]),
                               f["schema"], f.get("schemaType") or "AVRO", refs, bool(f.get("deleted", False)))
        if key.keytype == CONFIG:
            return ConfigValue(key.subject, f.get("compatibilityLevel"), f.get("normalize"), f.get("alias"))
        if key.keytype == MODE:
            return ModeValue(key.subject, f["mode"])
        if key.keytype == DELETE_SUBJECT:
            return DeleteSubjectValue(f.get("subject", key.subject), int(f["version"]))
        return ClearSubjectValue(f.get("subject", key.subject))
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedRecordError(f"{key.keytype} value lacks or mistypes {exc}") from None
