"""Confluent's JSON Schema rules for objects and arrays, called by json_compat's comparison
(`diff` is its _Diff: `compare`, `add`, `sub`, `bound`).

A content model decides what a property (or tuple item) that only one side names means:
open (additionalProperties absent or true, no patternProperties: anything goes), closed
(additionalProperties false: nothing else goes) or partially open (patternProperties or an
additionalProperties schema: what that schema takes goes).
"""

from __future__ import annotations

import re
from typing import Any

from logbroker.schema_registry.formats.json_nodes import SchemaNode, kind


def compare_objects(diff: Any, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
    old_props, new_props = original.get("properties") or {}, update.get("properties") or {}
    old_required, new_required = set(original.get("required") or []), set(update.get("required") or [])
    for key in old_props:
        if key in new_props and key in new_required and key not in old_required:
            if not _has_default(update.child(new_props[key])):
                diff.add("REQUIRED_ATTRIBUTE_ADDED", path + ["required", key])
    for key in list(old_props) + [k for k in new_props if k not in old_props]:
        where = path + ["properties", key]
        if key not in new_props:
            _property_removed(diff, original.child(old_props[key]), update, key, where)
        elif key not in old_props:
            _property_added(diff, original, update.child(new_props[key]), key in new_required, key, where)
        else:
            diff.compare(original.child(old_props[key]), update.child(new_props[key]), where)
    _compare_dependencies(diff, original, update, path + ["dependencies"])
    _compare_additional(diff, original, update, "additionalProperties", path, "PROPERTIES")
    diff.bound(original, update, path, "maxProperties", upper=True)
    diff.bound(original, update, path, "minProperties", upper=False)


def _property_removed(diff, old: SchemaNode, update: SchemaNode, key: str, where: list[str]) -> None:
    if _is_open(update):
        return
    partial = _partial_schema(update, key)
    if partial is not None:
        _covered(diff, old, partial, where, "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif kind(old.resolved()) != "FALSE":
        diff.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)


def _property_added(diff, original: SchemaNode, new: SchemaNode, required: bool, key: str,
                    where: list[str]) -> None:
    if _is_open(original):
        if kind(new.resolved()) == "EMPTY":
            return
        if required:
            with_default = _has_default(new)
            diff.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL" if with_default
                     else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)
        else:
            diff.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)
        return
    partial = _partial_schema(original, key)
    if partial is not None:
        _covered(diff, partial, new, where, "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if required and not _has_default(new):
        diff.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)


def _covered(diff, original: SchemaNode, update: SchemaNode, where: list[str], uncovered: str) -> None:
    """Compares a property or item that only one side names with the schema the other side's
    partially open model has for it; what breaks is reported, and then `uncovered`."""
    sub = diff.sub()
    sub.compare(original, update, where)
    diff.found += sub.found
    if sub.found:
        diff.add(uncovered, where)


def _compare_dependencies(diff, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
    old_arrays, old_schemas = _dependencies(original)
    new_arrays, new_schemas = _dependencies(update)
    for key, new in new_arrays.items():
        old = old_arrays.get(key)
        if old is None:
            diff.add("DEPENDENCY_ARRAY_ADDED", path + [key])
        elif set(old) != set(new):
            if set(new) >= set(old):
                diff.add("DEPENDENCY_ARRAY_EXTENDED", path + [key])
            elif not set(new) <= set(old):
                diff.add("DEPENDENCY_ARRAY_CHANGED", path + [key])
    for key, new in new_schemas.items():
        if key not in old_schemas:
            diff.add("DEPENDENCY_SCHEMA_ADDED", path + [key])
        else:
            diff.compare(original.child(old_schemas[key]), update.child(new), path + [key])


def _dependencies(node: SchemaNode) -> tuple[dict[str, list], dict[str, Any]]:
    """Property dependencies (names) and schema dependencies, draft 7's `dependencies` or
    2019-09's `dependentRequired`/`dependentSchemas`."""
    arrays = dict(node.get("dependentRequired") or {})
    schemas = dict(node.get("dependentSchemas") or {})
    for key, value in (node.get("dependencies") or {}).items():
        (arrays if isinstance(value, list) else schemas)[key] = value
    return arrays, schemas


def compare_arrays(diff: Any, original: SchemaNode, update: SchemaNode, path: list[str]) -> None:
    old_tuple, new_tuple = _tuple_items(original), _tuple_items(update)
    if old_tuple is None and new_tuple is None:
        old_items, new_items = original.get("items"), update.get("items")
        diff.compare(None if old_items is None else original.child(old_items),
                     None if new_items is None else update.child(new_items), path + ["items"])
    else:
        _compare_tuples(diff, original, update, old_tuple or [], new_tuple or [], path)
        _compare_additional(diff, original, update, _additional_items_word(original), path, "ITEMS")
    diff.bound(original, update, path, "maxItems", upper=True)
    diff.bound(original, update, path, "minItems", upper=False)
    if update.get("uniqueItems") is True and original.get("uniqueItems") is not True:
        diff.add("UNIQUE_ITEMS_ADDED", path + ["uniqueItems"])


def _compare_tuples(diff, original: SchemaNode, update: SchemaNode, old: list, new: list,
                    path: list[str]) -> None:
    for index in range(max(len(old), len(new))):
        where = path + ["items", str(index)]
        if index < len(old) and index < len(new):
            diff.compare(original.child(old[index]), update.child(new[index]), where)
            continue
        added = index >= len(old)
        side = original if added else update
        permits, schema = _additional(side, _additional_items_word(side))
        item = update.child(new[index]) if added else original.child(old[index])
        if permits and schema is None:
            if added and kind(item.resolved()) != "EMPTY":
                diff.add("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", where)
        elif added and schema is not None:
            _covered(diff, side.child(schema), item, where, "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        elif schema is not None:
            _covered(diff, item, side.child(schema), where, "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        elif not added and kind(item.resolved()) != "FALSE":
            diff.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)


def _tuple_items(node: SchemaNode) -> list | None:
    if isinstance(node.get("prefixItems"), list):
        return node.get("prefixItems")
    items = node.get("items")
    return items if isinstance(items, list) else None


def _additional_items_word(node: SchemaNode) -> str:
    return "items" if "prefixItems" in (node.contents or {}) else "additionalItems"


def _compare_additional(diff, original: SchemaNode, update: SchemaNode, word: str, path: list[str],
                        what: str) -> None:
    old_permits, old_schema = _additional(original, word)
    new_permits, new_schema = _additional(update, _additional_items_word(update) if what == "ITEMS" else word)
    where = path + [word if what == "PROPERTIES" else "additionalItems"]
    if old_permits != new_permits:
        if not new_permits:
            diff.add(f"ADDITIONAL_{what}_REMOVED", where)
    elif old_schema is None and new_schema is not None:
        diff.add(f"ADDITIONAL_{what}_NARROWED", where)
    elif old_schema is not None and new_schema is not None:
        diff.compare(original.child(old_schema), update.child(new_schema), where)


def _additional(node: SchemaNode, word: str) -> tuple[bool, Any]:
    """(whether more properties or items may come, the schema they must meet if any)."""
    value = node.get(word)
    if value is False:
        return False, None
    return True, value if isinstance(value, dict) else None


def _is_open(node: SchemaNode) -> bool:
    permits, schema = _additional(node, "additionalProperties")
    return permits and schema is None and not node.get("patternProperties")


def _partial_schema(node: SchemaNode, key: str) -> SchemaNode | None:
    for pattern, schema in (node.get("patternProperties") or {}).items():
        if re.search(pattern, key):
            return node.child(schema)
    _, schema = _additional(node, "additionalProperties")
    return None if schema is None else node.child(schema)


def _has_default(node: SchemaNode) -> bool:
    resolved = node.resolved()
    return isinstance(resolved.contents, dict) and "default" in resolved.contents
