"""Compatibility levels over a format's reader/writer rules, as Confluent's CompatibilityChecker.

BACKWARD: the new schema reads data written with the old one. FORWARD: the old schema reads
data written with the new one. FULL: both. The plain levels compare with the latest version
only; the _TRANSITIVE ones with every version, newest first, and answer with the first
version's findings. NONE checks nothing. A message carries "new"/"old" for the roles and, for
the direction in which the new schema reads, the old schema it was checked against.
"""

from __future__ import annotations

from collections.abc import Sequence

from logbroker.schema_registry.formats.model import ParsedSchema

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
_DIFFERENT_TYPE = "Incompatible because of different schema type"
_MAX_SCHEMA_CHARS_SHOWN = 10 * 1024


def check_compatibility(level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
    """Messages saying why `new` may not follow `previous` (oldest first) at `level`; empty
    when it may. Raises ValueError for a level that is not one of COMPATIBILITY_LEVELS."""
    if level not in COMPATIBILITY_LEVELS:
        raise ValueError(f"Invalid compatibility level {level!r}")
    if level == "NONE" or not previous:
        return []
    against = list(reversed(previous)) if level.endswith("_TRANSITIVE") else [previous[-1]]
    direction = level.removesuffix("_TRANSITIVE")
    for old in against:
        if old.schema_type != new.schema_type:
            return [_DIFFERENT_TYPE]
        try:
            messages = _check(direction, new, old)
        except RecursionError:
            return ["Unexpected exception during compatibility check: schemas nested too deeply"]
        if messages:
            return messages
    return []


def _check(direction: str, new: ParsedSchema, old: ParsedSchema) -> list[str]:
    messages: list[str] = []
    if direction in ("FORWARD", "FULL"):
        with_old = direction == "FORWARD"
        messages += _worded(old.read_differences(new), "old", "new", old, with_old)
    if direction in ("BACKWARD", "FULL"):
        messages += _worded(new.read_differences(old), "new", "old", old, True)
    return messages


def _worded(
    found: list[str], reader: str, writer: str, old: ParsedSchema, with_old: bool
) -> list[str]:
    """Each `%s` pair filled with the roles (a message may use fewer), and the old schema."""
    messages = []
    for message in found:
        for role in (reader, writer):
            message = message.replace("%s", role, 1)
        messages.append(message)
    if messages and with_old:
        shown = old.canonical()
        if len(shown) <= _MAX_SCHEMA_CHARS_SHOWN:
            messages.append(f"{{oldSchema: '{shown}'}}")
        else:
            messages.append(f"{{oldSchema: <truncated> '{shown[:_MAX_SCHEMA_CHARS_SHOWN]}...'}}")
    return messages
