"""Protobuf schemas turned into FileDescriptorProtos, with protoc (grpcio-tools, in process).

A schema is `.proto` text, or a base64 serialized FileDescriptorProto as confluent-kafka's
Protobuf serializer registers it. Each import is found among the schema's references (a
reference's name is the import path) or among the files every Confluent client knows without
registering them: Google's well-known types (google/protobuf/*.proto, shipped with grpcio-tools),
Google's common types (google/type/*.proto) and Confluent's own (confluent/meta.proto,
confluent/type/decimal.proto...), the last two taken from the descriptors their Python packages
carry. The schema itself is the file `default`, as Confluent names it.

protoc reads files, so each compilation writes the schema and its references into a fresh
temporary directory and removes it after; the common types are written once per process into
another, removed at exit.
"""

from __future__ import annotations

import ast
import atexit
import base64
import binascii
import functools
import os
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
WELL_KNOWN_FILES = frozenset(
    f"google/protobuf/{p.name}" for p in (_WELL_KNOWN_ROOT / "google" / "protobuf").glob("*.proto")
)

_COMMON_TYPE_DIRECTORIES = (
    ("google.type", ()),
    ("confluent_kafka", ("schema_registry", "confluent")),
    ("confluent_kafka", ("schema_registry", "confluent", "type")),
    ("confluent_kafka", ("schema_registry", "confluent", "types")),
)

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
    root = tempfile.mkdtemp(prefix="logbroker-proto-types-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    for name, text in common_type_files().items():
        _write(root, name, text)
    return root


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
    with tempfile.TemporaryDirectory(prefix="logbroker-proto-") as root:
        for name, text in dependencies:
            _write(root, _checked_import_path(name), text)
        main_name = _unused_name(dependencies)
        _write(root, main_name, main_text)
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
        if file.name == main_name:
            file.name = MAIN_FILE
        files[file.name] = file
    return files


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
