"""SCRAM user names as znode names: Kafka's Sanitizer (URL-encoding), so no user name from a client
can put a '/', a newline or a path component ZooKeeper refuses into /config/users/<name>."""

from __future__ import annotations

import pytest

from logbroker.metadata.zk_users import desanitize, sanitize


@pytest.mark.parametrize("name, znode", [
    ("alice", "alice"), ("a/b", "a%2Fb"), ("evil\n", "evil%0A"), ("a b", "a%20b"), ("a*", "a%2A"),
    ("caf\u00e9", "caf%C3%A9"), ("a~b", "a%7Eb"), ("a.b-c_d", "a.b-c_d"), (".", "%2E"), ("..", "%2E%2E"),
])
def test_user_names_become_kafkas_sanitized_znode_names(name, znode):
    assert sanitize(name) == znode
    assert desanitize(znode) == name
    assert "/" not in znode and znode not in (".", "..") and znode.isascii() and znode.isprintable()
