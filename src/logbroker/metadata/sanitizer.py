"""Kafka's Sanitizer: user names and client ids as znode names and metric tags (pure).

`sanitize` is Java's URLEncoder (UTF-8) with '+' as %20, '*' as %2A and '~' as %7E — so a name
never holds '/' and a quota entity's `<default>` (which sanitizes to %3Cdefault%3E) cannot be
forged. "." and ".." alone, which Kafka leaves as they are and ZooKeeper refuses as node names,
are percent-encoded too ("%2E"; Kafka's desanitize reads them back).
"""

from __future__ import annotations

import urllib.parse


def sanitize(name: str) -> str:
    if name in (".", ".."):
        return "%2E" * len(name)
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)
