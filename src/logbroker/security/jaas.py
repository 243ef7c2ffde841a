"""The one part of a JAAS setting the broker reads: PlainLoginModule's `user_<name>="<password>"`.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

`username`/`password` are the broker's own (inter-broker) identity; every `user_<name>` option is
a user PLAIN accepts. Values are quoted strings (a backslash escapes the next character) or bare
words; the entry ends at ';'.
"""

from __future__ import annotations

import re

_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class JaasConfigError(ValueError):
    pass


def parse_jaas(text: str) -> tuple[str, str, dict[str, str]]:
    """(login module class, control flag, options). Raises JaasConfigError."""
    text = text.strip()
    head = re.match(r"([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b", text)
    if head is None:
        raise JaasConfigError("expected '<LoginModule class> required key=\"value\" …;'")
    pos, options = head.end(), {}
    while True:
        match = _OPTION.match(text, pos)
        if match is None:
            break
        value = match[2] if match[2] is not None else match[3]
        options[match[1]] = re.sub(r"\\(.)", r"\1", value)
        pos = match.end()
    rest = text[pos:].strip()
    if rest != ";":
        raise JaasConfigError(f"unexpected text {rest[:30]!r}; a JAAS entry ends with ';'")
    return head[1], head[2], options


def plain_users(text: str) -> dict[str, str]:
    """The `user_<name>` options of a PlainLoginModule entry."""
    _, _, options = parse_jaas(text)
    return {key[5:]: value for key, value in options.items() if key.startswith("user_")}
