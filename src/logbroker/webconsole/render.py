"""Pure functions between Kafka's bytes and the console's text: how a key or value is shown
(pretty JSON, text or hex), the message filter, and the parsers of form fields. No I/O here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from logbroker.webconsole.model import Message

FORMATS = ("auto", "json", "text", "hex")
# A value longer than this is cut for display (the page says so); the record is untouched.
MAX_SHOWN_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Shown:
    """A key, value or header as the page shows it: `kind` is json, text, hex or null;
    `schema` names the registry schema a framed value was decoded with."""

    kind: str
    text: str
    size: int
    truncated: bool = False
    schema: str | None = None


def show(data: bytes | None, fmt: str = "auto") -> Shown:
    """`data` as `fmt`; "auto" picks JSON when the bytes parse as a JSON object or array, text
    when they are printable UTF-8, hex otherwise. An explicit format that does not fit falls
    back the same way (JSON → text → hex)."""
    if data is None:
        return Shown("null", "null", 0)
    size = len(data)
    cut = data[:MAX_SHOWN_BYTES]
    truncated = size > MAX_SHOWN_BYTES
    if fmt == "hex":
        return Shown("hex", _hex(cut), size, truncated)
    text = _utf8(cut, truncated)
    if fmt in ("auto", "json") and text is not None and not truncated:
        stripped = text.strip()
        if stripped[:1] in "{[" or (fmt == "json" and stripped):
            try:
                parsed = json.loads(stripped)
            except ValueError:
                parsed = None
            else:
                return Shown("json", json.dumps(parsed, indent=2, ensure_ascii=False), size)
    if text is not None and (fmt == "text" or text.isprintable() or _printable_lines(text)):
        return Shown("text", text, size, truncated)
    return Shown("hex", _hex(cut), size, truncated)


def _utf8(data: bytes, truncated: bool) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if truncated and e.start >= len(data) - 3:  # a character cut at the truncation point
            return data[:e.start].decode("utf-8")
        return None


def _printable_lines(text: str) -> bool:
    return all(line.isprintable() for line in text.replace("\t", " ").splitlines())


def _hex(data: bytes) -> str:
    """Rows of 16 bytes: offset, hex pairs, and the printable ASCII beside them."""
    rows = []
    for at in range(0, len(data), 16):
        chunk = data[at:at + 16]
        pairs = " ".join(f"{b:02x}" for b in chunk)
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        rows.append(f"{at:08x}  {pairs:<47}  {ascii_}")
    return "\n".join(rows)


def matches(message: Message, needle: str) -> bool:
    """Whether `needle` occurs (case-insensitively) in the record's key, value, or a header's
    name or value, each read as UTF-8 (bytes that are not UTF-8 are compared as hex)."""
    needle = needle.lower()
    parts = [message.key, message.value]
    for name, value in message.headers:
        parts += [name.encode(), value]
    for part in parts:
        if part is None:
            continue
        try:
            text = part.decode("utf-8")
        except UnicodeDecodeError:
            text = part.hex()
        if needle in text.lower():
            return True
    return False


def format_timestamp(timestamp_ms: int | None) -> str:
    """ISO 8601 in UTC with milliseconds, or "-" for none."""
    if timestamp_ms is None or timestamp_ms < 0:
        return "-"
    moment = datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{timestamp_ms % 1000:03d}Z"


def parse_datetime(text: str) -> int:
    """A datetime-local field (`2024-05-01T12:30`, seconds optional) or ISO 8601 with a zone →
    epoch milliseconds; naive times are UTC, as Kafka's tools take them."""
    text = text.strip()
    if not text:
        raise ValueError("Enter a date and time, e.g. 2024-05-01T12:30:00.")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"'{text}' is not a date and time like 2024-05-01T12:30:00.") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def parse_properties(text: str) -> dict[str, str]:
    """`key=value` lines (blank lines and `#` comments skipped) → dict, for topic configs and
    record headers typed into a form."""
    result = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"Line {number} is not key=value: '{line}'.")
        result[key.strip()] = value.strip()
    return result


def human_bytes(size: int | None) -> str:
    if size is None:
        return "n/a"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def human_count(count: int | None) -> str:
    """Thousands separated with a thin space, as the tables show counts and offsets."""
    return "-" if count is None else f"{count:,}"


def human_rate(per_second: float | None) -> str:
    if per_second is None:
        return "-"
    if per_second >= 1000:
        return f"{per_second / 1000:.1f}k/s"
    return f"{per_second:.1f}/s" if per_second < 10 else f"{per_second:.0f}/s"
