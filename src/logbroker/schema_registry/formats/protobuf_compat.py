"""Protobuf compatibility as Confluent's registry judges it (its protobuf `diff` rules), on
compiled descriptors: the differences from an original (the writer) to an update (the reader)
that make the update unable to read the original's data.

Incompatible, each with where it is ("#/Message/tag", "#/Message/oneof/tag"):
- PACKAGE_CHANGED; MESSAGE_REMOVED (a message, not a map entry, gone by name);
- a field (matched by number, wherever it sits among the message's oneofs) changing kind
  (scalar or enum / message / map: FIELD_KIND_CHANGED), scalar group (FIELD_SCALAR_KIND_CHANGED:
  int32, int64, uint32, uint64, bool and enums are one group; sint32/sint64; string/bytes;
  fixed32/sfixed32; fixed64/sfixed64; float; double), a numeric field's label
  (FIELD_NUMERIC_LABEL_CHANGED; a proto3 singular field has no label), or its message type
  (FIELD_NAMED_TYPE_CHANGED: another name, or a same-named type that itself changed
  incompatibly, unless both come from the same referenced subject version);
- REQUIRED_FIELD_ADDED, REQUIRED_FIELD_REMOVED; ONEOF_FIELD_REMOVED (a oneof member gone while
  its oneof, or a member of it, lives on);
- fields that were independent put into one oneof (MULTIPLE_FIELDS_MOVED_TO_ONEOF when several
  top-level fields moved in, else FIELD_MOVED_TO_EXISTING_ONEOF).

Everything else (added or removed optional fields, messages, enums, enum constants, renames,
moves, string/bytes label changes, a oneof's field moved to the top level) is compatible and
not reported. A message met again while its own comparison is under way is not compared again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf import descriptor_pb2 as pb

_F = pb.FieldDescriptorProto
_SCALAR_GROUPS = {
    **dict.fromkeys((_F.TYPE_INT32, _F.TYPE_INT64, _F.TYPE_UINT32, _F.TYPE_UINT64, _F.TYPE_BOOL,
                     _F.TYPE_ENUM), "GENERAL_NUMBER"),
    **dict.fromkeys((_F.TYPE_SINT32, _F.TYPE_SINT64), "SIGNED_NUMBER"),
    **dict.fromkeys((_F.TYPE_STRING, _F.TYPE_BYTES), "STRING_OR_BYTES"),
    **dict.fromkeys((_F.TYPE_FIXED32, _F.TYPE_SFIXED32), "FIXED32"),
    **dict.fromkeys((_F.TYPE_FIXED64, _F.TYPE_SFIXED64), "FIXED64"),
    _F.TYPE_FLOAT: "FLOAT",
    _F.TYPE_DOUBLE: "DOUBLE",
}

# Confluent's descriptions; the two %s are the reader's and the writer's role.
_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{path}' in the %s schema does not match the package in "
    "the %s schema",
    "MESSAGE_REMOVED": "The %s schema is missing a MESSAGE type at path '{path}' in the %s schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the %s schema does not match "
    "the %s schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}' in the %s schema "
    "does not match its kind in the %s schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}' in the %s schema "
    "does not match its type in the %s schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}' in the %s "
    "schema does not match its label in the %s schema",
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the %s schema is missing in "
    "the %s schema",
    "REQUIRED_FIELD_REMOVED": "The %s schema is missing a required field at path: '{path}' in "
    "the %s schema",
    "ONEOF_FIELD_REMOVED": "The %s schema is missing a oneof field at path '{path}' in the %s "
    "schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the %s "
    "schema are outside a oneof in the %s schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the %s schema is "
    "outside an existing oneof in the %s schema",
}


@dataclass(frozen=True)
class TypeInfo:
    """A message or enum of a compiled schema: its package, and the referenced subject and
    version that defined it (None for the schema's own file and well-known types)."""

    descriptor: pb.DescriptorProto | pb.EnumDescriptorProto
    package: str
    reference: tuple[str, int] | None

    @property
    def is_map(self) -> bool:
        return isinstance(self.descriptor, pb.DescriptorProto) and self.descriptor.options.map_entry


@dataclass(frozen=True)
class CompiledSchema:
    """What the rules need of a schema: its file and every type it can see by full name."""

    file: pb.FileDescriptorProto
    types: dict[str, TypeInfo]


def index_types(
    files: Iterable[pb.FileDescriptorProto], references: dict[str, tuple[str, int]]
) -> dict[str, TypeInfo]:
    types: dict[str, TypeInfo] = {}

    def add(prefix: str, messages, enums, package: str, ref) -> None:
        for message in messages:
            name = f"{prefix}.{message.name}" if prefix else message.name
            types[name] = TypeInfo(message, package, ref)
            add(name, message.nested_type, message.enum_type, package, ref)
        for enum in enums:
            types[f"{prefix}.{enum.name}" if prefix else enum.name] = TypeInfo(enum, package, ref)

    for file in files:
        add(file.package, file.message_type, file.enum_type, file.package, references.get(file.name))
    return types


@dataclass(frozen=True)
class Difference:
    error_type: str
    path: str

    def describe(self) -> str:
        description = _DESCRIPTIONS[self.error_type].format(path=self.path)
        return f'{{errorType:"{self.error_type}", description:"{description}"}}'


def differences(original: CompiledSchema, update: CompiledSchema) -> list[Difference]:
    diff = _Diff(original, update)
    if original.file.package != update.file.package:
        diff.add("PACKAGE_CHANGED", [])
    diff.compare_types(original.file.message_type, update.file.message_type, [], frozenset())
    return list(dict.fromkeys(diff.found))


class _Diff:
    def __init__(self, original: CompiledSchema, update: CompiledSchema) -> None:
        self.original, self.update = original, update
        self.found: list[Difference] = []

    def add(self, error_type: str, path: list[str]) -> None:
        self.found.append(Difference(error_type, "#/" + "/".join(path)))

    def compare_types(self, originals, updates, path: list[str], comparing: frozenset[int]) -> None:
        by_name = {m.name: m for m in updates if not m.options.map_entry}
        for original in originals:
            if original.options.map_entry:
                continue
            update = by_name.get(original.name)
            if update is None:
                self.add("MESSAGE_REMOVED", path + [original.name])
            else:
                self.compare_message(original, update, path + [original.name], comparing)

    def compare_message(self, original: pb.DescriptorProto, update: pb.DescriptorProto,
                        path: list[str], comparing: frozenset[int]) -> None:
        if id(original) not in comparing:
            self._compare_fields(original, update, path, comparing | {id(original)})
        self.compare_types(original.nested_type, update.nested_type, path, comparing)

    def _compare_fields(self, original: pb.DescriptorProto, update: pb.DescriptorProto,
                        path: list[str], comparing: frozenset[int]) -> None:
        old_fields, old_oneof = _fields_by_number(original)
        new_fields, new_oneof = _fields_by_number(update)
        self._new_mutual_exclusions(update, old_fields, old_oneof, path)
        old_oneofs = _oneof_members(original)
        new_oneof_names = set(_oneof_members(update))
        deleted_oneofs = {
            name for name, numbers in old_oneofs.items()
            if name not in new_oneof_names and not any(n in new_fields for n in numbers)
        }
        proto3 = (self.original.file.syntax == "proto3", self.update.file.syntax == "proto3")
        for number in sorted(old_fields.keys() | new_fields.keys()):
            old, new = old_fields.get(number), new_fields.get(number)
            where = [new_oneof[number]] if number in new_oneof else []
            if new is None:
                if number in old_oneof:
                    if old_oneof[number] not in deleted_oneofs:
                        self.add("ONEOF_FIELD_REMOVED", path + [old_oneof[number], str(number)])
                elif old is not None and old.label == _F.LABEL_REQUIRED:
                    self.add("REQUIRED_FIELD_REMOVED", path + [str(number)])
            elif old is None:
                if number not in new_oneof and new.label == _F.LABEL_REQUIRED:
                    self.add("REQUIRED_FIELD_ADDED", path + [str(number)])
            else:
                labels = (_label(old, number in old_oneof, proto3[0]),
                          _label(new, number in new_oneof, proto3[1]))
                self._compare_field_types(old, new, labels, path + where + [str(number)], comparing)

    def _new_mutual_exclusions(self, update, old_fields, old_oneof, path) -> None:
        for name, numbers in _oneof_members(update).items():
            groups, moved_in = set(), 0
            for number in numbers:
                if number in old_oneof:
                    groups.add("oneof:" + old_oneof[number])
                elif number in old_fields:
                    groups.add(f"field:{number}")
                    moved_in += 1
            if len(groups) > 1:
                kind = "MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF"
                self.add(kind, path + [name])

    def _compare_field_types(self, old: pb.FieldDescriptorProto, new: pb.FieldDescriptorProto,
                             labels: tuple[str | None, str | None], path: list[str],
                             comparing: frozenset[int]) -> None:
        old_entry, new_entry = self._map_entry(old, self.original), self._map_entry(new, self.update)
        old_kind, new_kind = _kind(old, old_entry), _kind(new, new_entry)
        if old_kind != new_kind:
            self.add("FIELD_KIND_CHANGED", path)
        elif old_kind == "MAP":
            assert old_entry is not None and new_entry is not None
            for old_part, new_part in zip(old_entry.field[:2], new_entry.field[:2]):
                self._compare_field_types(old_part, new_part, (None, None), path, comparing)
        elif old_kind == "SCALAR":
            group = _SCALAR_GROUPS[old.type]
            if group != _SCALAR_GROUPS[new.type]:
                self.add("FIELD_SCALAR_KIND_CHANGED", path)
            elif None not in labels and labels[0] != labels[1] and group != "STRING_OR_BYTES":
                self.add("FIELD_NUMERIC_LABEL_CHANGED", path)
        else:
            self._compare_message_types(old.type_name.lstrip("."), new.type_name.lstrip("."),
                                        path, comparing)

    def _compare_message_types(self, old_name: str, new_name: str, path: list[str],
                               comparing: frozenset[int]) -> None:
        old_info, new_info = self.original.types.get(old_name), self.update.types.get(new_name)
        if old_info is None or new_info is None:
            if old_name != new_name:
                self.add("FIELD_NAMED_TYPE_CHANGED", path)
            return
        old_local, new_local = _local(old_name, old_info), _local(new_name, new_info)
        if old_local != new_local:
            self.add("FIELD_NAMED_TYPE_CHANGED", path)
            return
        if old_info.reference is not None and old_info.reference == new_info.reference:
            return
        sub = _Diff(self.original, self.update)
        assert isinstance(old_info.descriptor, pb.DescriptorProto)
        assert isinstance(new_info.descriptor, pb.DescriptorProto)
        sub.compare_message(old_info.descriptor, new_info.descriptor, old_local.split("."), comparing)
        self.found += sub.found
        if sub.found:
            self.add("FIELD_NAMED_TYPE_CHANGED", path)

    @staticmethod
    def _map_entry(field: pb.FieldDescriptorProto, schema: CompiledSchema) -> pb.DescriptorProto | None:
        if field.type != _F.TYPE_MESSAGE:
            return None
        info = schema.types.get(field.type_name.lstrip("."))
        if info is None or not info.is_map:
            return None
        assert isinstance(info.descriptor, pb.DescriptorProto)
        return info.descriptor


def _fields_by_number(message: pb.DescriptorProto) -> tuple[dict[int, pb.FieldDescriptorProto], dict[int, str]]:
    """Every field by number, and the oneof (by name) of each field that is in a real one."""
    fields = {f.number: f for f in message.field}
    in_oneof = {}
    for name, numbers in _oneof_members(message).items():
        for number in numbers:
            in_oneof[number] = name
    return fields, in_oneof


def _oneof_members(message: pb.DescriptorProto) -> dict[str, list[int]]:
    """Real oneofs by name with their field numbers; proto3 `optional` makes synthetic ones,
    which are plain fields here, as in the .proto text."""
    members: dict[str, list[int]] = {}
    for field in message.field:
        if field.HasField("oneof_index") and not field.proto3_optional:
            members.setdefault(message.oneof_decl[field.oneof_index].name, []).append(field.number)
    return members


def _label(field: pb.FieldDescriptorProto, in_oneof: bool, proto3: bool) -> str | None:
    """The label as the .proto text writes it: none in a oneof or on a proto3 singular field."""
    if in_oneof:
        return None
    if field.label == _F.LABEL_REPEATED:
        return "REPEATED"
    if field.label == _F.LABEL_REQUIRED:
        return "REQUIRED"
    return "OPTIONAL" if not proto3 or field.proto3_optional else None


def _kind(field: pb.FieldDescriptorProto, map_entry: pb.DescriptorProto | None) -> str:
    if map_entry is not None:
        return "MAP"
    if field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        return "MESSAGE"
    return "SCALAR"


def _local(full_name: str, info: TypeInfo) -> str:
    prefix = info.package + "." if info.package else ""
    return full_name.removeprefix(prefix) if prefix and full_name.startswith(prefix) else full_name
