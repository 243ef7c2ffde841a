"""Avro schema resolution as compatibility rules: can data written with `writer` be read with
`reader`? The rules and their words are Java Avro's SchemaCompatibility, which Confluent's
registry runs and whose findings it reports through its `Difference` messages:

- same type: primitives match; arrays and maps compare their items/values; records, enums and
  fixed must have the same unqualified name (or the reader an alias for the writer's full
  name); fixed sizes must be equal; the reader enum must hold every writer symbol unless it has
  a default; every reader field must be in the writer (by name or alias) with a readable type,
  or have a default.
- a writer union: every branch must be readable. A reader union: some branch must read the
  writer's type.
- promotions: int -> long, float, double; long -> float, double; float -> double;
  string <-> bytes. Any other pair is a TYPE_MISMATCH.

Each finding keeps its location as a path of steps ("/fields/1/type", "/items", "/0"), a
record's fields by position, as Java reports it. A pair of types met again while being compared
(a recursive schema) is taken as compatible there.
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.schema_registry.formats.avro_types import AvroType, Container, Field, Named

_PROMOTIONS = {
    "long": {"int"},
    "float": {"int", "long"},
    "double": {"int", "long", "float"},
    "bytes": {"string"},
    "string": {"bytes"},
}

# Confluent's Difference descriptions; the two %s are the reader's and the writer's role.
_DESCRIPTIONS = {
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{path}' in the %s schema "
    "does not match with the %s schema",
    "TYPE_MISMATCH": "The type (path '{path}') of a field in the %s schema does not match with "
    "the %s schema",
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": "The %s schema is missing enum symbols '{info}' at path '{path}' "
    "in the %s schema",
    "MISSING_UNION_BRANCH": "The %s schema is missing a type inside a union field at path "
    "'{path}' in the %s schema",
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{info}' at path '{path}' in the %s schema "
    "has no default value and is missing in the %s schema",
}


@dataclass(frozen=True)
class Incompatibility:
    error_type: str
    location: str
    message: str

    def describe(self) -> str:
        """Confluent's message, with `%s` left for the reader's and the writer's role."""
        description = _DESCRIPTIONS[self.error_type].format(path=self.location, info=self.message)
        return (
            f"{{errorType:'{self.error_type}', description:'{description}', "
            f"additionalInfo:'{self.message}'}}"
        )


def incompatibilities(reader: AvroType, writer: AvroType) -> list[Incompatibility]:
    return _Checker().check(reader, writer, [])


class _Checker:
    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], list[Incompatibility]] = {}

    def check(self, reader: AvroType, writer: AvroType, path: list[str]) -> list[Incompatibility]:
        key = (id(reader), id(writer))
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = []  # recursion in progress: compatible here
        found = self._calculate(reader, writer, path)
        self.memo[key] = found
        return found

    def _calculate(self, reader: AvroType, writer: AvroType, path: list[str]) -> list[Incompatibility]:
        if reader.type == writer.type:
            return self._same_type(reader, writer, path)
        if isinstance(writer, Container) and writer.type == "union":
            return self._each_writer_branch(reader, writer, path)
        if isinstance(reader, Container) and reader.type == "union":
            if any(not self.check(branch, writer, path) for branch in reader.branches):
                return []
            info = f"reader union lacking writer type: {writer.type.upper()}"
            return [_at("MISSING_UNION_BRANCH", path, info)]
        if writer.type in _PROMOTIONS.get(reader.type, ()):
            return []
        return [_type_mismatch(reader, writer, path)]

    def _same_type(self, reader: AvroType, writer: AvroType, path: list[str]) -> list[Incompatibility]:
        if isinstance(reader, Container) and isinstance(writer, Container):
            if reader.type == "union":
                return self._each_writer_branch(reader, writer, path)
            assert reader.element is not None and writer.element is not None
            step = "items" if reader.type == "array" else "values"
            return self.check(reader.element, writer.element, path + [step])
        if not (isinstance(reader, Named) and isinstance(writer, Named)):
            return []
        found = _names(reader, writer, path)
        if reader.type == "fixed" and reader.size != writer.size:
            info = f"expected: {writer.size}, found: {reader.size}"
            found.append(_at("FIXED_SIZE_MISMATCH", path + ["size"], info))
        if reader.type == "enum":
            found += _enum_symbols(reader, writer, path)
        if reader.type == "record":
            found += self._fields(reader, writer, path)
        return found

    def _each_writer_branch(self, reader: AvroType, writer: Container, path: list[str]) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        for index, branch in enumerate(writer.branches):
            found += self.check(reader, branch, path + [str(index)])
        return found

    def _fields(self, reader: Named, writer: Named, path: list[str]) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        for field in reader.fields:
            field_path = path + ["fields", str(field.position)]
            writer_field = _writer_field(writer, field)
            if writer_field is not None:
                found += self.check(field.schema, writer_field.schema, field_path + ["type"])
            elif field.has_default:
                continue
            elif isinstance(field.schema, Named) and field.schema.enum_default is not None:
                found += self.check(field.schema, writer, field_path + ["type"])
            else:
                found.append(_at("READER_FIELD_MISSING_DEFAULT_VALUE", field_path, field.name))
        return found


def _writer_field(writer: Named, reader_field: Field) -> Field | None:
    by_name = {f.name: f for f in writer.fields}
    for name in [reader_field.name] + reader_field.aliases:
        if name in by_name:
            return by_name[name]
    return None


def _names(reader: Named, writer: Named, path: list[str]) -> list[Incompatibility]:
    if reader.name == writer.name or writer.fullname in reader.aliases:
        return []
    return [_at("NAME_MISMATCH", path + ["name"], f"expected: {writer.fullname}")]


def _enum_symbols(reader: Named, writer: Named, path: list[str]) -> list[Incompatibility]:
    missing = sorted(set(writer.symbols) - set(reader.symbols))
    if not missing or reader.enum_default is not None:
        return []
    return [_at("MISSING_ENUM_SYMBOLS", path + ["symbols"], "[" + ", ".join(missing) + "]")]


def _type_mismatch(reader: AvroType, writer: AvroType, path: list[str]) -> Incompatibility:
    info = f"reader type: {reader.type.upper()} not compatible with writer type: {writer.type.upper()}"
    return _at("TYPE_MISMATCH", path, info)


def _at(error_type: str, path: list[str], message: str) -> Incompatibility:
    steps = [step.replace("~", "~0").replace("/", "~1") for step in path]
    return Incompatibility(error_type, "/" + "/".join(steps), message)
