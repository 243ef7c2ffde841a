"""Protobuf schemas turned into FileDescriptorProtos, with protoc (grpcio-tools, in process).

A schema is `.proto` text, or a base64 serialized FileDescriptorProto as confluent-kafka's
Protobuf serializer registers it. Each import is found among the schema's references (a
reference's name is the import path) or among the files every Confluent client knows without
registering them: Google's well-known types (google/protobuf/*.proto, shipped with grpcio-tools),
Google's common types (google/type/*.proto) and Confluent's own (confluent/meta.proto,
confluent/type/decimal.proto...), the last two taken from the descriptors their Python packages
carry. The schema itself is the file `default`, as Confluent names it.

Confluent's registry writes a map field of a schema it was given as a descriptor as the map entry
message it is (`option map_entry = true;` and a repeated field of it), which protoc refuses; such
text compiles here with the option taken out and put back into the descriptor, so a history
written by Confluent's registry loads.

protoc reads files, so each compilation writes the schema and its references into a fresh
temporary directory and removes it after; the common types are written once into a directory
of their own that later compilations and processes share.
"""

from __future__ import annotations

import ast
import base64
import binascii
import functools
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path, PurePosixPath

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from grpc_tools import _protoc_compiler

from logbroker.schema_registry.formats.model import InvalidSchemaError
from logbroker.schema_registry.formats.protobuf_text import proto_text

MAIN_FILE = "default"
_WELL_KNOWN_ROOT = Path(str(resources.files("grpc_tools") / "_proto"))

_COMMON_TYPE_DIRECTORIES = (
    ("google.type", ()),
    ("confluent_kafka", ("schema_registry", "confluent")),
    ("confluent_kafka", ("schema_registry", "confluent", "type")),
    ("confluent_kafka", ("schema_registry", "confluent", "types")),
)

_MAP_ENTRY_OPTION = re.compile(r"\boption\s+map_entry\s*=\s*true\s*;")

FileDescriptorSet = dict[str, descriptor_pb2.FileDescriptorProto]


@functools.cache
def common_type_files() -> dict[str, str]:
    """google/type/*.proto and confluent/*.proto as text, by import path, from the descriptors
    in the generated modules of the installed packages (read, not imported: confluent-kafka's
    schema_registry package needs its client's dependencies to import)."""
    files = {}
    for package, parts in _COMMON_TYPE_DIRECTORIES:
        directory = resources.files(package)
        for part in parts:
            directory = directory / part
        if not directory.is_dir():
            continue
        for module in sorted(directory.iterdir(), key=lambda m: m.name):
            if module.name.endswith("_pb2.py"):
                serialized = _serialized_file(module.read_bytes())
                file = descriptor_pb2.FileDescriptorProto.FromString(serialized)
                files[file.name] = proto_text(file)
    return files


@functools.cache
def _common_type_root() -> str:
    """The directory holding common_type_files: one per content under the temporary directory,
    shared by every process of this user (written once, renamed into place whole), so that a
    broker killed with -9 leaves nothing new behind."""
    files = common_type_files()
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:16]
    root = os.path.join(tempfile.gettempdir(), f"logbroker-proto-types-{os.getuid()}-{digest}")
    if os.path.isdir(root) and os.stat(root).st_uid == os.getuid():
        return root
    staging = tempfile.mkdtemp(prefix=f"{os.path.basename(root)}.", dir=os.path.dirname(root))
    for name, text in files.items():
        _write(staging, name, text)
    try:
        os.rename(staging, root)
    except OSError:  # another process put it in place first
        shutil.rmtree(staging, ignore_errors=True)
    if os.path.isdir(root) and os.stat(root).st_uid == os.getuid():
        return root
    private = tempfile.mkdtemp(prefix="logbroker-proto-types-")  # someone else's is in the way
    for name, text in files.items():
        _write(private, name, text)
    return private


def decode_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto that `text` is the base64 of, or None when it is not one."""
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped):
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
        file = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return file if file.ByteSize() and (file.message_type or file.enum_type or file.name) else None


def compile_files(main_text: str, dependencies: Sequence[tuple[str, str]]) -> FileDescriptorSet:
    """Compiles `.proto` text with its dependencies ((import path, .proto text) pairs) and
    returns every file's descriptor by name, the schema's own under MAIN_FILE. Raises
    InvalidSchemaError with protoc's message."""
    main_name = _unused_name(dependencies)
    explicit_map_entries = set()
    with tempfile.TemporaryDirectory(prefix="logbroker-proto-") as root:
        for name, text in [*dependencies, (main_name, main_text)]:
            if _MAP_ENTRY_OPTION.search(text):
                explicit_map_entries.add(name)
                text = _MAP_ENTRY_OPTION.sub(lambda m: " " * len(m.group()), text)
            _write(root, _checked_import_path(name), text)
        try:
            generated = _protoc_compiler.get_protos(
                main_name.encode(),
                [root.encode(), _common_type_root().encode(), str(_WELL_KNOWN_ROOT).encode()],
            )
        except _protoc_compiler.ProtocErrors as errors:
            message = str(errors).replace(main_name, MAIN_FILE)
            raise InvalidSchemaError(f"Invalid schema: {message}") from None
    files: FileDescriptorSet = {}
    for _module, code in generated:
        file = descriptor_pb2.FileDescriptorProto.FromString(_serialized_file(code))
        if file.name in explicit_map_entries:
            _mark_map_entries(file.message_type)
        if file.name == main_name:
            file.name = MAIN_FILE
        files[file.name] = file
    return files


def _mark_map_entries(messages) -> None:
    """Sets map_entry on each nested message shaped and named as protoc makes a map field's
    entry: `<Field>Entry` with fields key = 1 and value = 2, the type of a repeated field."""
    for message in messages:
        nested = {n.name: n for n in message.nested_type}
        for field in message.field:
            entry = nested.get(_entry_name(field.name))
            if (
                entry is not None
                and field.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
                and field.type_name.endswith(f"{message.name}.{entry.name}")
                and [(f.name, f.number) for f in entry.field] == [("key", 1), ("value", 2)]
            ):
                entry.options.map_entry = True
        _mark_map_entries(message.nested_type)


def _entry_name(field_name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in field_name.split("_")) + "Entry"


def _unused_name(dependencies: Sequence[tuple[str, str]]) -> str:
    taken = {name for name, _ in dependencies}
    name = f"{MAIN_FILE}.proto"
    while name in taken:
        name = "_" + name
    return name


def _checked_import_path(name: str) -> str:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\\" in name:
        raise InvalidSchemaError(f"Invalid schema: reference name {name!r} is not an import path")
    return name


def _write(root: str, name: str, text: str) -> None:
    path = os.path.join(root, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


def _serialized_file(code: bytes) -> bytes:
    """The serialized FileDescriptorProto inside protoc's generated Python module: the bytes
    literal passed to `AddSerializedFile`."""
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, bytes)
        ):
            return node.args[0].value
    raise InvalidSchemaError("Invalid schema: protoc produced no descriptor")
