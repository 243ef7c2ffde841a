"""JSON written as Jackson, the JSON library of Confluent's registry, writes it by default:
compact, keys in the order given, non-ASCII characters as they are, control characters as
upper-case \\u escapes, doubles as Java's Double.toString prints them, and decimals (what
Confluent's JSON Schema mapper reads fractions as) as Java's BigDecimal.toString, which is
Python's Decimal str. The registry stores schema strings this way, so equal schemas give equal
strings.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from logbroker.schema_registry.formats.model import InvalidSchemaError

# Deeper documents are refused: the parsers and compatibility rules recurse once or a few
# times per level, and no real schema comes near this.
MAX_NESTING = 200


def load_json(text: str, *, decimals: bool = False) -> Any:
    """Parses a schema's JSON (fractions as Decimal if `decimals`), refusing text that is not
    JSON or nests deeper than MAX_NESTING, with InvalidSchemaError."""
    try:
        document = json.loads(text, parse_float=Decimal if decimals else float)
    except (json.JSONDecodeError, RecursionError) as error:
        raise InvalidSchemaError(f"Invalid schema: not JSON ({error})") from None
    level = [document]
    for _ in range(MAX_NESTING + 1):
        level = [child for value in level for child in _children(value)]
        if not level:
            return document
    raise InvalidSchemaError(f"Invalid schema: nested more than {MAX_NESTING} levels deep")


def json_text(value: Any) -> str:
    """`value` as Jackson writes it: compact, non-ASCII unescaped, doubles as Java prints them."""
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_text(k)}:{json_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(json_text(item) for item in value) + "]"
    text = json.dumps(value, ensure_ascii=False)
    return re.sub(r"\\u00([0-9a-f]{2})", lambda m: "\\u00" + m.group(1).upper(), text)


def java_double(value: float) -> str:
    """Java's Double.toString: plain between 10^-3 and 10^7, else d.dddE±n; shortest digits."""
    if value != value or value in (float("inf"), float("-inf")):
        return json.dumps(str(value).replace("inf", "Infinity").replace("nan", "NaN"))
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "e" not in text else format(Decimal(text), "f")
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    mantissa = "".join(map(str, digits))
    power = len(mantissa) - 1 + int(exponent)
    fraction = mantissa[1:] or "0"
    return f"{'-' if sign else ''}{mantissa[0]}.{fraction}E{power}"


def _children(value: Any) -> Any:
    if isinstance(value, dict):
        return value.values()
    return value if isinstance(value, list) else ()
