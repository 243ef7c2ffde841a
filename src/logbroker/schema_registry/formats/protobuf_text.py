"""A FileDescriptorProto written back as `.proto` text.

The text compiles to the same descriptor: syntax, package, imports, file options, then each
message and enum with its fields (labels as the syntax writes them: proto3 singular fields bare,
`optional` for explicit presence), oneofs, maps, nested types, reserved ranges and names,
extension ranges, options and `extend` blocks, then services. Type names are written
fully qualified (without the leading dot). Options are those the descriptor's option messages
hold; custom options defined in other files are not kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from google.protobuf import descriptor_pb2 as pb
from google.protobuf.message import Message

_F = pb.FieldDescriptorProto
_MAX_FIELD_NUMBER = 536870911
_SCALAR_NAMES = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in _F.Type.items()
    if name not in ("TYPE_MESSAGE", "TYPE_ENUM", "TYPE_GROUP")
}


def proto_text(file: pb.FileDescriptorProto, *, with_extensions: bool = True) -> str:
    lines: list[str] = []
    syntax = file.syntax or "proto2"
    if syntax == "editions":
        lines.append(f'edition = "{pb.Edition.Name(file.edition).removeprefix("EDITION_")}";')
    else:
        lines.append(f'syntax = "{syntax}";')
    if file.package:
        lines.append(f"package {file.package};")
    public, weak = set(file.public_dependency), set(file.weak_dependency)
    if file.dependency:
        lines.append("")
    for index, dependency in enumerate(file.dependency):
        modifier = "public " if index in public else "weak " if index in weak else ""
        lines.append(f"import {modifier}{json.dumps(dependency)};")
    options = _options(file.options)
    if options:
        lines.append("")
        lines += [f"option {option};" for option in options]
    writer = _Writer(syntax, with_extensions)
    for message in file.message_type:
        lines.append("")
        lines += writer.message(message, 0)
    for enum in file.enum_type:
        lines.append("")
        lines += writer.enum(enum, 0)
    if with_extensions:
        for block in writer.extends(file.extension, 0):
            lines.append("")
            lines += block
    for service in file.service:
        lines.append("")
        lines += _service(service)
    return "\n".join(lines) + "\n"


class _Writer:
    def __init__(self, syntax: str, with_extensions: bool) -> None:
        self.proto3 = syntax == "proto3"
        self.with_extensions = with_extensions

    def message(self, message: pb.DescriptorProto, depth: int) -> list[str]:
        pad = "  " * (depth + 1)
        maps = {n.name: n for n in message.nested_type if n.options.map_entry}
        body = [f"{pad}option {option};" for option in _options(message.options)]
        synthetic = {f.oneof_index for f in message.field if f.proto3_optional}
        written_oneofs: set[int] = set()
        for field in message.field:
            in_oneof = field.HasField("oneof_index") and field.oneof_index not in synthetic
            if not in_oneof:
                body.append(pad + self.field(field, maps))
            elif field.oneof_index not in written_oneofs:
                written_oneofs.add(field.oneof_index)
                body += self._oneof(message, field.oneof_index, maps, depth + 1)
        for nested in message.nested_type:
            if not nested.options.map_entry:
                body += self.message(nested, depth + 1)
        for enum in message.enum_type:
            body += self.enum(enum, depth + 1)
        body += _reserved(message.reserved_range, message.reserved_name, pad, exclusive_end=True)
        for extension_range in message.extension_range:
            end = _range_end(extension_range.start, extension_range.end - 1)
            body.append(f"{pad}extensions {extension_range.start}{end};")
        if self.with_extensions:
            for block in self.extends(message.extension, depth + 1):
                body += block
        return [f"{'  ' * depth}message {message.name} {{", *body, f"{'  ' * depth}}}"]

    def _oneof(
        self, message: pb.DescriptorProto, index: int, maps: dict[str, pb.DescriptorProto], depth: int
    ) -> list[str]:
        pad = "  " * depth
        oneof = message.oneof_decl[index]
        lines = [f"{pad}oneof {oneof.name} {{"]
        lines += [f"{pad}  option {option};" for option in _options(oneof.options)]
        for field in message.field:
            if field.HasField("oneof_index") and field.oneof_index == index:
                lines.append(f"{pad}  {self.field(field, maps, in_oneof=True)}")
        return lines + [f"{pad}}}"]

    def field(
        self, field: pb.FieldDescriptorProto, maps: dict[str, pb.DescriptorProto], in_oneof: bool = False
    ) -> str:
        entry = maps.get(field.type_name.rpartition(".")[2]) if field.type == _F.TYPE_MESSAGE else None
        if entry is not None and field.label == _F.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            declaration = f"map<{type_name(key)}, {type_name(value)}>"
        else:
            declaration = f"{self._label(field, in_oneof)}{type_name(field)}"
        options = _options(field.options)
        if field.HasField("default_value"):
            options.insert(0, f"default = {_default_text(field)}")
        if field.HasField("json_name") and field.json_name != _default_json_name(field.name):
            options.append(f"json_name = {json.dumps(field.json_name)}")
        suffix = f" [{', '.join(options)}]" if options else ""
        return f"{declaration} {field.name} = {field.number}{suffix};"

    def _label(self, field: pb.FieldDescriptorProto, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if field.label == _F.LABEL_REPEATED:
            return "repeated "
        if field.label == _F.LABEL_REQUIRED:
            return "required "
        if self.proto3 and not field.proto3_optional:
            return ""
        return "optional "

    def enum(self, enum: pb.EnumDescriptorProto, depth: int) -> list[str]:
        pad = "  " * (depth + 1)
        body = [f"{pad}option {option};" for option in _options(enum.options)]
        for value in enum.value:
            options = _options(value.options)
            suffix = f" [{', '.join(options)}]" if options else ""
            body.append(f"{pad}{value.name} = {value.number}{suffix};")
        body += _reserved(enum.reserved_range, enum.reserved_name, pad, exclusive_end=False)
        return [f"{'  ' * depth}enum {enum.name} {{", *body, f"{'  ' * depth}}}"]

    def extends(self, fields: Iterable[pb.FieldDescriptorProto], depth: int) -> list[list[str]]:
        by_extendee: dict[str, list[pb.FieldDescriptorProto]] = {}
        for field in fields:
            by_extendee.setdefault(field.extendee.lstrip("."), []).append(field)
        pad = "  " * depth
        return [
            [f"{pad}extend {extendee} {{"]
            + [f"{pad}  {self.field(field, {})}" for field in group]
            + [f"{pad}}}"]
            for extendee, group in by_extendee.items()
        ]


def type_name(field: pb.FieldDescriptorProto) -> str:
    if field.type in _SCALAR_NAMES:
        return _SCALAR_NAMES[field.type]
    return field.type_name.lstrip(".")


def _service(service: pb.ServiceDescriptorProto) -> list[str]:
    lines = [f"service {service.name} {{"]
    lines += [f"  option {option};" for option in _options(service.options)]
    for method in service.method:
        request = ("stream " if method.client_streaming else "") + method.input_type.lstrip(".")
        response = ("stream " if method.server_streaming else "") + method.output_type.lstrip(".")
        options = _options(method.options)
        head = f"  rpc {method.name}({request}) returns ({response})"
        if options:
            lines += [head + " {", *[f"    option {o};" for o in options], "  }"]
        else:
            lines.append(head + ";")
    return lines + ["}"]


def _reserved(ranges: Iterable, names: Iterable[str], pad: str, *, exclusive_end: bool) -> list[str]:
    parts = []
    for reserved in ranges:
        end = reserved.end - 1 if exclusive_end else reserved.end
        parts.append(f"{reserved.start}{_range_end(reserved.start, end)}")
    lines = [f"{pad}reserved {', '.join(parts)};"] if parts else []
    if names:
        lines.append(f"{pad}reserved {', '.join(json.dumps(n) for n in names)};")
    return lines


def _range_end(start: int, end: int) -> str:
    if end >= _MAX_FIELD_NUMBER:
        return " to max"
    return "" if end == start else f" to {end}"


def _options(options: Message) -> list[str]:
    written = []
    for descriptor, value in options.ListFields():
        if descriptor.name == "map_entry":
            continue
        name = f"({descriptor.full_name})" if descriptor.is_extension else descriptor.name
        values = value if descriptor.is_repeated else [value]
        written += [f"{name} = {_option_value(descriptor, v)}" for v in values]
    return written


def _option_value(descriptor, value) -> str:
    if descriptor.enum_type is not None:
        return descriptor.enum_type.values_by_number[value].name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return json.dumps(value.decode("latin-1"))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Message):
        return "{ " + " ".join(f"{f.name}: {_option_value(f, v)}" for f, v in value.ListFields()) + " }"
    return str(value)


def _default_text(field: pb.FieldDescriptorProto) -> str:
    if field.type in (_F.TYPE_STRING, _F.TYPE_BYTES):
        return json.dumps(field.default_value)
    return field.default_value


def _default_json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])
