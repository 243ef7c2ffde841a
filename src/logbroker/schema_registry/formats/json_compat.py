"""JSON Schema compatibility as Confluent's registry judges it (its json `diff` rules, strict
policy): the differences from an original schema (the writer's) to an update (the reader's)
that let the original accept a document the update refuses.

The rules by schema kind (a kind is what the keywords describe: object, array, string, number
(integer is a number that must be whole), boolean, null, enum, const, not, a combination
(allOf/anyOf/oneOf, or a list of types), empty (accepts anything) and false (accepts nothing)):

- kinds differ: TYPE_CHANGED, unless the original is false or the update is empty; a
  combination in the update that accepts the original through one branch is SUM_TYPE_EXTENDED,
  an allOf original with a branch like the update is PRODUCT_TYPE_NARROWED (both fine);
- numbers: a new or tighter maximum/minimum/exclusive bound, a new or coarser multipleOf,
  number narrowed to integer (TYPE_NARROWED); strings: a new or tighter maxLength/minLength, a new
  or changed pattern; enum values narrowed or changed;
- objects, by content model (open: additionalProperties absent or true and no
  patternProperties): a property added to an open model (unless its schema is empty), a
  property removed from a closed one, a property added or removed that a partially open model
  (patternProperties or an additionalProperties schema) does not cover, a property becoming
  required without a default, additionalProperties turned off or narrowed to a schema, new or
  tighter min/maxProperties, a new dependency;
- arrays: items compared; a tuple item added to an open model or removed from a closed one,
  additionalItems turned off or narrowed, new or tighter min/maxItems, uniqueItems added;
- combinations: a changed criterion, fewer branches of a sum (SUM_TYPE_NARROWED) or more of a
  product (PRODUCT_TYPE_EXTENDED), or branches that cannot be paired one to one compatibly.

`$ref`s are followed (to the document itself or to a referenced schema); a pair of schemas met
again while being compared is taken as compatible there. Paths are "#/properties/a/maxLength".
"""

from __future__ import annotations

from dataclasses import dataclass

from logbroker.schema_registry.formats import json_object_compat
from logbroker.schema_registry.formats.json_nodes import SchemaNode, branches, kind

# Confluent's descriptions by group; the two %s are the reader's and the writer's role.
_DESCRIPTIONS = {
    "KEYWORD": "The keyword at path '{path}' in the %s schema is not present in the %s schema",
    "INCREASED": "The value at path '{path}' in the %s schema is more than its value in the %s schema",
    "DECREASED": "The value at path '{path}' in the %s schema is less than its value in the %s schema",
    "CHANGED": "The value at path '{path}' is different between the %s and %s schema",
    "NARROWED": "An array or combined type at path '{path}' has fewer elements in the %s schema "
    "than the %s schema",
    "EXTENDED": "An array or combined type at path '{path}' has more elements in the %s schema "
    "than the %s schema",
    "TYPE": "A type at path '{path}' is different between the %s schema and the %s schema",
    "ADDED_TO_OPEN": "The %s schema has an open content model and has a property or item at path "
    "'{path}' which is missing in the %s schema",
    "REQUIRED_TO_UNOPEN": "The %s schema has an unopen content model and has a required property at "
    "path '{path}' which is missing in the %s schema",
    "REMOVED_FROM_CLOSED": "The %s has a closed content model and is missing a property or item "
    "present at path '{path}' in the %s schema",
    "REMOVED_NOT_COVERED": "A property or item is missing in the %s schema but present at path "
    "'{path}' in the %s schema and is not covered by its partially open content model",
    "ADDED_NOT_COVERED": "The %s schema has a property or item at path '{path}' which is missing "
    "in the %s schema and is not covered by its partially open content model",
}
# Every incompatible difference and the group its description comes from.
_INCOMPATIBLE = {
    **dict.fromkeys(
        ("MAXIMUM_ADDED", "MINIMUM_ADDED", "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MINIMUM_ADDED",
         "MULTIPLE_OF_ADDED", "MAX_LENGTH_ADDED", "MIN_LENGTH_ADDED", "PATTERN_ADDED",
         "REQUIRED_ATTRIBUTE_ADDED", "MAX_PROPERTIES_ADDED", "MIN_PROPERTIES_ADDED",
         "DEPENDENCY_ARRAY_ADDED", "DEPENDENCY_SCHEMA_ADDED", "MAX_ITEMS_ADDED", "MIN_ITEMS_ADDED",
         "UNIQUE_ITEMS_ADDED", "ADDITIONAL_ITEMS_REMOVED", "ADDITIONAL_PROPERTIES_REMOVED"),
        "KEYWORD"),
    **dict.fromkeys(
        ("MIN_LENGTH_INCREASED", "MINIMUM_INCREASED", "EXCLUSIVE_MINIMUM_INCREASED",
         "MIN_PROPERTIES_INCREASED", "MULTIPLE_OF_EXPANDED", "MIN_ITEMS_INCREASED"), "INCREASED"),
    **dict.fromkeys(
        ("MAX_LENGTH_DECREASED", "MAXIMUM_DECREASED", "MAX_ITEMS_DECREASED",
         "EXCLUSIVE_MAXIMUM_DECREASED", "MAX_PROPERTIES_DECREASED"), "DECREASED"),
    **dict.fromkeys(("PATTERN_CHANGED", "MULTIPLE_OF_CHANGED", "DEPENDENCY_ARRAY_CHANGED"), "CHANGED"),
    **dict.fromkeys(
        ("ADDITIONAL_ITEMS_NARROWED", "ENUM_ARRAY_NARROWED", "SUM_TYPE_NARROWED",
         "ADDITIONAL_PROPERTIES_NARROWED"), "NARROWED"),
    **dict.fromkeys(("DEPENDENCY_ARRAY_EXTENDED", "PRODUCT_TYPE_EXTENDED", "NOT_TYPE_EXTENDED"), "EXTENDED"),
    **dict.fromkeys(
        ("TYPE_CHANGED", "TYPE_NARROWED", "COMBINED_TYPE_CHANGED", "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
         "ENUM_ARRAY_CHANGED", "SCHEMA_ADDED"), "TYPE"),
    **dict.fromkeys(("REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                     "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
                     "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"), "ADDED_TO_OPEN"),
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": "REQUIRED_TO_UNOPEN",
    **dict.fromkeys(("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                     "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"), "REMOVED_FROM_CLOSED"),
    **dict.fromkeys(("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                     "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"), "REMOVED_NOT_COVERED"),
    **dict.fromkeys(("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                     "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"), "ADDED_NOT_COVERED"),
}
@dataclass(frozen=True)
class Difference:
    error_type: str
    path: str

    def describe(self) -> str:
        description = _DESCRIPTIONS[_INCOMPATIBLE[self.error_type]].format(path=self.path)
        return f'{{errorType:"{self.error_type}", description:"{description}\'}}'


def differences(original: SchemaNode, update: SchemaNode) -> list[Difference]:
    diff = _Diff(set())
    diff.compare(original, update, [])
    return list(dict.fromkeys(diff.found))


class _Diff:
    def __init__(self, comparing: set[tuple[int, int]]) -> None:
        self.comparing = comparing
        self.found: list[Difference] = []

    def add(self, error_type: str, path: list[str]) -> None:
        if error_type in _INCOMPATIBLE:
            self.found.append(Difference(error_type, "#/" + "/".join(path)))

    def sub(self) -> _Diff:
        return _Diff(self.comparing)

    def compare(self, original: SchemaNode | None, update: SchemaNode | None, path: list[str]) -> None:
        if original is None or update is None:
            if original is None and update is not None:
                self.add("SCHEMA_ADDED", path)
            return
        original, update = original.resolved(), update.resolved()
        pair = (id(original.contents), id(update.contents))
        if pair in self.comparing:
            return
        self.comparing.add(pair)
        try:
            self._compare_kinds(original, update, path)
        finally:
            self.comparing.discard(pair)

    def _compare_kinds(self, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
        old_kind, new_kind = kind(original), kind(update)
        if old_kind != "COMBINED" and new_kind == "COMBINED":
            criterion, options = branches(update)
            if len(options) == 1 or criterion in ("anyOf", "oneOf"):
                for option in options:
                    sub = self.sub()
                    sub.compare(original, option, path)
                    if not sub.found:
                        return
        elif old_kind == "COMBINED" and new_kind != "COMBINED":
            criterion, options = branches(original)
            if len(options) == 1 or criterion == "allOf":
                for option in options:
                    sub = self.sub()
                    sub.compare(option, update, path)
                    if not sub.found:
                        return
        if old_kind != new_kind:
            if old_kind == "FALSE" or new_kind == "EMPTY":
                return
            if original.get("connect.type") == "bytes" == update.get("connect.type"):
                return
            self.add("TYPE_CHANGED", path)
            return
        rules = {
            "STRING": self._string, "NUMBER": self._number, "ENUM": self._enum, "CONST": self._const,
            "NOT": self._not, "OBJECT": self._object, "ARRAY": self._array, "COMBINED": self._combined,
        }
        if old_kind in rules:
            rules[old_kind](original, update, path)

    def _string(self, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
        self.bound(original, update, path, "maxLength", upper=True)
        self.bound(original, update, path, "minLength", upper=False)
        old, new = original.get("pattern"), update.get("pattern")
        if old is None and new is not None:
            self.add("PATTERN_ADDED", path + ["pattern"])
        elif old is not None and new is not None and old != new:
            self.add("PATTERN_CHANGED", path + ["pattern"])

    def _number(self, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
        self.bound(original, update, path, "maximum", upper=True)
        self.bound(original, update, path, "minimum", upper=False)
        self.bound(original, update, path, "exclusiveMaximum", upper=True)
        self.bound(original, update, path, "exclusiveMinimum", upper=False)
        old, new = original.get("multipleOf"), update.get("multipleOf")
        if old is None and new is not None:
            self.add("MULTIPLE_OF_ADDED", path + ["multipleOf"])
        elif old is not None and new is not None and old != new:
            if new % old == 0:
                self.add("MULTIPLE_OF_EXPANDED", path + ["multipleOf"])
            elif old % new != 0:
                self.add("MULTIPLE_OF_CHANGED", path + ["multipleOf"])
        if _is_integer(update) and not _is_integer(original):
            self.add("TYPE_NARROWED", path)

    def bound(self, original: SchemaNode, update: SchemaNode, path: list[str], word: str, *, upper: bool) -> None:
        """A limit added, or moved so that fewer values pass (booleans are draft 4's flags)."""
        old, new = original.get(word), update.get(word)
        name = _CONSTANT_NAMES[word]
        if isinstance(old, bool) or isinstance(new, bool) or new is None or old == new:
            return
        if old is None:
            self.add(f"{name}_ADDED", path + [word])
        elif upper and new < old:
            self.add(f"{name}_DECREASED", path + [word])
        elif not upper and new > old:
            self.add(f"{name}_INCREASED", path + [word])

    def _enum(self, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
        old, new = original.get("enum") or [], update.get("enum") or []
        if all(v in new for v in old):
            return
        kind_ = "ENUM_ARRAY_NARROWED" if all(v in old for v in new) else "ENUM_ARRAY_CHANGED"
        self.add(kind_, path + ["enum"])

    def _const(self, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
        if original.get("const") != update.get("const"):
            self.add("ENUM_ARRAY_CHANGED", path + ["const"])

    def _not(self, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
        sub = self.sub()
        sub.compare(update.child(update.get("not")), original.child(original.get("not")), path + ["not"])
        if sub.found:
            self.add("NOT_TYPE_EXTENDED", path + ["not"])

    def _object(self, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
        json_object_compat.compare_objects(self, original, update, path)

    def _array(self, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
        json_object_compat.compare_arrays(self, original, update, path)

    def _combined(self, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
        old_criterion, old_branches = branches(original)
        new_criterion, new_branches = branches(update)
        if old_criterion != new_criterion and not (old_criterion == "oneOf" and new_criterion == "anyOf"):
            if len(old_branches) > 1 or len(new_branches) > 1:
                self.add("COMBINED_TYPE_CHANGED", path)
                return
        if len(old_branches) < len(new_branches) and new_criterion == "allOf":
            self.add("PRODUCT_TYPE_EXTENDED", path)
        elif len(old_branches) > len(new_branches) and old_criterion != "allOf":
            self.add("SUM_TYPE_NARROWED", path)
        compatible: dict[int, list[int]] = {}
        for i, old in enumerate(old_branches):
            for j, new in enumerate(new_branches):
                sub = self.sub()
                sub.compare(old, new, path + [f"{old_criterion}/{i}"])
                if not sub.found:
                    compatible.setdefault(i, []).append(j)
        if _max_matching(compatible) < min(len(old_branches), len(new_branches)):
            self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", path)


_CONSTANT_NAMES = {
    "maxLength": "MAX_LENGTH", "minLength": "MIN_LENGTH", "maximum": "MAXIMUM", "minimum": "MINIMUM",
    "exclusiveMaximum": "EXCLUSIVE_MAXIMUM", "exclusiveMinimum": "EXCLUSIVE_MINIMUM",
    "maxProperties": "MAX_PROPERTIES", "minProperties": "MIN_PROPERTIES",
    "maxItems": "MAX_ITEMS", "minItems": "MIN_ITEMS",
}


def _is_integer(node: SchemaNode) -> bool:
    types = node.get("type")
    return types == "integer" or types == ["integer"]


def _max_matching(edges: dict[int, list[int]]) -> int:
    """Size of a maximum matching of left to right vertices (Kuhn's augmenting paths)."""
    owner: dict[int, int] = {}

    def augment(left: int, seen: set[int]) -> bool:
        for right in edges.get(left, []):
            if right not in seen:
                seen.add(right)
                if right not in owner or augment(owner[right], seen):
                    owner[right] = left
                    return True
        return False

    return sum(augment(left, set()) for left in edges)
