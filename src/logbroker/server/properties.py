"""The `.properties` text format, read the way `java.util.Properties.load` reads it.

Kafka loads `server.properties` (and the tools' `--producer.config` files) with
`java.util.Properties`, so an operator's existing files must mean the same here:

- A *natural line* ends at `\\n`, `\\r` or `\\r\\n`. A *logical line* is one or more natural lines
  joined where a line ends in an odd number of backslashes; the backslash, the line break and the
  leading whitespace (space, tab, form feed) of the next line are dropped.
- A natural line whose first non-whitespace character is `#` or `!` is a comment, and a comment
  never continues onto the next line. Lines of only whitespace are skipped. A continuation line is
  never a comment, whatever it starts with.
- The key runs from the first non-whitespace character to the first unescaped `=`, `:` or
  whitespace. Then whitespace, at most one `=` or `:`, and more whitespace are skipped; the rest
  of the logical line is the value (trailing whitespace kept, as Java keeps it; Kafka trims when
  it parses the value). A key alone on its line has the empty value.
- Escapes in keys and values: `\\t \\n \\r \\f`, `\\uXXXX`, and a backslash before any other
  character stands for that character (`\\=`, `\\:`, `\\ `, `\\\\`, `\\#`).
- A key given twice keeps its last value.

Java reads the bytes of a file as ISO-8859-1; we read UTF-8 (what people write today) and fall
back to ISO-8859-1 for a file that is not valid UTF-8.
"""

from __future__ import annotations

import os

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesFormatError(ValueError):
    """The text breaks the format (a malformed `\\uXXXX` escape); the message gives the line."""


def loads(text: str) -> dict[str, str]:
    """Parse properties text into an ordered dict of key → value (file order, last one wins)."""
    props: dict[str, str] = {}
    for line_number, logical in _logical_lines(text):
        key, value = _split_key_value(logical, line_number)
        props.pop(key, None)  # keep the position of the last occurrence, as a reader expects
        props[key] = value
    return props


def load(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a properties file. Blocks on disk. Raises OSError, PropertiesFormatError."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    if text.startswith("\ufeff"):
        text = text[1:]
    return loads(text)


def _natural_lines(text: str) -> list[str]:
    # str.splitlines also splits on \v, \x1c, \u2028, … which Java does not treat as line ends.
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _ends_with_continuation(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _logical_lines(text: str):
    """Yield (first natural line number, logical line) pairs, comments and blanks removed.

    As in Java, a natural line is checked for a comment only while its logical line is still
    empty: after `a=1\\`, a next line `#x` is part of the value; after a lone `\\`, it is a comment.
    """
    lines = _natural_lines(text)
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        parts: list[str] = []
        while True:
            if not any(parts) and line[:1] in ("#", "!"):
                break  # a comment, which never continues
            if not _ends_with_continuation(line):
                parts.append(line)
                break
            parts.append(line[:-1])
            if i == len(lines):
                break
            line = lines[i].lstrip(_WHITESPACE)
            i += 1
        logical = "".join(parts)
        # Java yields an empty-keyed entry for some lone backslashes at the very end of the text,
        # depending on how its reader buffers; an empty logical line is always skipped here.
        if logical:
            yield start + 1, logical


def _split_key_value(line: str, line_number: int) -> tuple[str, str]:
    """Split one logical line (leading whitespace already removed) at its key's end."""
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key_end = min(i, n)
    j = key_end
    while j < n and line[j] in _WHITESPACE:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WHITESPACE:
            j += 1
    return _unescape(line[:key_end], line_number), _unescape(line[j:], line_number)


def _unescape(raw: str, line_number: int) -> str:
    if "\\" not in raw:
        return raw
    out = []
    i = 0
    n = len(raw)
    while i < n:
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:  # a lone trailing backslash (only at the very end of the text)
            i += 1
            continue
        e = raw[i + 1]
        if e == "u":
            digits = raw[i + 2:i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesFormatError(f"Malformed \\uxxxx encoding on line {line_number}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(e, e))
        i += 2
    return "".join(out)
