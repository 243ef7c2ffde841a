"""AclAuthorizer's rules as pure checks over the file store: Kafka's implied operations, deny over
allow, wildcards, prefixes, super users, allow.everyone.if.no.acl.found, authorize by resource
type, filters; and the store's file keeping ACLs across a reload."""

from __future__ import annotations

import logging

import pytest

from logbroker.metadata.acl_json import change_notice, pattern_from_notice, resource_path
from logbroker.metadata.local_store import LocalMetadataStore
from logbroker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_error,
)
from logbroker.security.authorizer import AclAuthorizer, parse_super_users

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
HOST = "10.0.0.1"


def binding(principal, operation, name, *, permission=ALLOW, pattern=LITERAL, resource=TOPIC,
            host="*") -> AclBinding:
    return AclBinding(ResourcePattern(resource, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


@pytest.fixture
def make(tmp_path):
    def make(*bindings, **options) -> AclAuthorizer:
        """An authorizer over a new, empty store holding `bindings`."""
        authorizer = AclAuthorizer(**options)
        log_dir = tmp_path / f"store-{len(list(tmp_path.iterdir()))}"
        log_dir.mkdir()
        authorizer.load(LocalMetadataStore(log_dir))
        authorizer.create_acls(list(bindings))
        return authorizer
    return make


def can(authorizer, principal, operation, name, resource=TOPIC, host=HOST) -> bool:
    return authorizer.authorize(principal, host, operation, resource, name)


@pytest.mark.parametrize("granted, asked, expected", [
    (Op.READ, Op.DESCRIBE, True), (Op.WRITE, Op.DESCRIBE, True), (Op.DELETE, Op.DESCRIBE, True),
    (Op.ALTER, Op.DESCRIBE, True), (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
    (Op.ALL, Op.WRITE, True), (Op.ALL, Op.ALTER_CONFIGS, True),
    (Op.DESCRIBE, Op.READ, False), (Op.READ, Op.WRITE, False),
    (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False), (Op.CREATE, Op.DESCRIBE, False),
])
def test_implied_operations(make, granted, asked, expected):
    assert can(make(binding("User:alice", granted, "t")), "User:alice", asked, "t") is expected


def test_deny_wins_over_allow_and_wildcards_match_everyone(make):
    authorizer = make(binding("User:*", Op.ALL, "t"), binding("User:bob", Op.WRITE, "t", permission=DENY))
    assert can(authorizer, "User:alice", Op.WRITE, "t")
    assert not can(authorizer, "User:bob", Op.WRITE, "t")
    assert can(authorizer, "User:bob", Op.READ, "t")  # the deny names Write only
    assert not can(authorizer, "User:bob", Op.WRITE, "t", host="*")


def test_deny_of_all_denies_implied_describe_but_deny_of_read_does_not(make):
    authorizer = make(binding("User:alice", Op.READ, "t"),
                      binding("User:alice", Op.WRITE, "t"),
                      binding("User:alice", Op.READ, "t", permission=DENY))
    assert not can(authorizer, "User:alice", Op.READ, "t")
    assert can(authorizer, "User:alice", Op.DESCRIBE, "t")
    assert not can(make(binding("User:alice", Op.READ, "u"), binding("User:alice", Op.ALL, "u", permission=DENY)),
                   "User:alice", Op.DESCRIBE, "u")


def test_literal_wildcard_and_prefixed_patterns(make):
    authorizer = make(binding("User:alice", Op.READ, "*"),
                      binding("User:bob", Op.WRITE, "pay", pattern=PREFIXED),
                      binding("User:bob", Op.WRITE, "payroll-secret", permission=DENY),
                      binding("User:carol", Op.WRITE, "p", pattern=PREFIXED),
                      binding("User:carol", Op.WRITE, "pay-x", pattern=PREFIXED, permission=DENY))
    assert can(authorizer, "User:alice", Op.READ, "anything")
    assert can(authorizer, "User:bob", Op.WRITE, "payments") and can(authorizer, "User:bob", Op.WRITE, "pay")
    assert not can(authorizer, "User:bob", Op.WRITE, "pa")
    assert not can(authorizer, "User:bob", Op.WRITE, "payroll-secret")
    assert can(authorizer, "User:carol", Op.WRITE, "pay-y")
    assert not can(authorizer, "User:carol", Op.WRITE, "pay-x1")


def test_host_must_match_unless_wildcard(make):
    authorizer = make(binding("User:alice", Op.READ, "t", host=HOST))
    assert can(authorizer, "User:alice", Op.READ, "t", host=HOST)
    assert not can(authorizer, "User:alice", Op.READ, "t", host="10.0.0.2")


def test_super_users_and_allow_everyone_if_no_acl_found(make):
    authorizer = make(binding("User:alice", Op.READ, "guarded"), super_users=parse_super_users(
        " User:admin ;User:ops;"), allow_everyone_if_no_acl_found=True)
    assert authorizer.super_users == {"User:admin", "User:ops"}
    assert can(authorizer, "User:ops", Op.ALTER, "guarded")
    assert can(authorizer, "User:bob", Op.WRITE, "no-acls-here")
    assert not can(authorizer, "User:bob", Op.READ, "guarded")  # an ACL applies: not everyone
    assert not can(make(), "User:bob", Op.WRITE, "no-acls-here")  # the default is false


def test_authorize_by_resource_type(make):
    assert make(binding("User:alice", Op.WRITE, "t")).authorize_by_resource_type(
        "User:alice", HOST, Op.WRITE, TOPIC)
    assert not make(binding("User:alice", Op.READ, "t")).authorize_by_resource_type(
        "User:alice", HOST, Op.WRITE, TOPIC)
    denied_by_prefix = make(binding("User:alice", Op.WRITE, "ab"),
                            binding("User:alice", Op.WRITE, "a", pattern=PREFIXED, permission=DENY))
    assert not denied_by_prefix.authorize_by_resource_type("User:alice", HOST, Op.WRITE, TOPIC)
    denied_all = make(binding("User:alice", Op.WRITE, "t"),
                      binding("User:*", Op.WRITE, "*", permission=DENY))
    assert not denied_all.authorize_by_resource_type("User:alice", HOST, Op.WRITE, TOPIC)


def test_denial_log_line_is_kafkas(make, caplog):
    with caplog.at_level(logging.INFO, logger="kafka.authorizer.logger"):
        make().authorize("User:bob", HOST, Op.DESCRIBE_CONFIGS, ResourceType.TRANSACTIONAL_ID, "tx",
                         request_name="DescribeConfigs")
    assert caplog.messages == [
        "Principal = User:bob is Denied Operation = DescribeConfigs from host = 10.0.0.1 on resource "
        "= TransactionalId:LITERAL:tx for request = DescribeConfigs with resourceRefCount = 1"]


def test_filters_select_and_delete(make):
    authorizer = make(binding("User:alice", Op.READ, "orders"),
                      binding("User:bob", Op.READ, "ord", pattern=PREFIXED),
                      binding("User:bob", Op.READ, "*"),
                      binding("User:bob", Op.READ, "g", resource=GROUP))
    match = AclBindingFilter(TOPIC, "orders", PatternType.MATCH)
    assert {b.pattern.name for b in authorizer.acls(match)} == {"orders", "ord", "*"}
    assert len(authorizer.acls(AclBindingFilter(TOPIC, "orders", PatternType.ANY))) == 1
    assert len(authorizer.acls(AclBindingFilter(principal="User:bob"))) == 3
    [removed] = authorizer.delete_acls([AclBindingFilter(principal="User:bob", pattern_type=PatternType.ANY)])
    assert len(removed) == 3
    assert [b.entry.principal for b in authorizer.acls(AclBindingFilter())] == ["User:alice"]
    assert not can(authorizer, "User:bob", Op.READ, "anything")


def test_file_store_keeps_acls(make):
    first = make(binding("User:alice", Op.READ, "t"), binding("User:bob", Op.WRITE, "p", pattern=PREFIXED))
    reloaded = AclAuthorizer()
    reloaded.load(LocalMetadataStore(first.store.path.parent))
    assert can(reloaded, "User:alice", Op.READ, "t") and can(reloaded, "User:bob", Op.WRITE, "pq")


@pytest.mark.parametrize("bad, message", [
    (binding("User:a", Op.ANY, "t"), "unknown or ANY"),
    (binding("User:a", Op.READ, "t", pattern=PatternType.MATCH), "unknown or ANY"),
    (binding("User:a", Op.ALTER, "my-cluster", resource=CLUSTER), "kafka-cluster"),
    (binding("User:a", Op.READ, ""), "empty resource name"),
    (binding("alice", Op.READ, "t"), "<type>:<name>"),
    (binding("User:a", Op.READ, "a/b"), "invalid resource name"),
    (binding("User:a", Op.READ, ".."), "invalid resource name"),
    (binding("User:a", Op.READ, "evil\n"), "invalid resource name"),
    (binding("User:a", Op.READ, "nul\x00"), "invalid resource name"),
])
def test_invalid_bindings_are_refused(bad, message):
    assert message in binding_error(bad)


def test_znode_paths_and_change_notices_are_kafkas():
    prefixed = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PREFIXED)
    assert resource_path(ResourcePattern(TOPIC, "orders")) == "/kafka-acl/Topic/orders"
    assert resource_path(prefixed) == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    path, payload = change_notice(ResourcePattern(GROUP, "g:1"))
    assert (path, payload) == ("/kafka-acl-changes/acl_changes_", b"Group:g:1")
    assert pattern_from_notice("/kafka-acl-changes", payload) == ResourcePattern(GROUP, "g:1")
    path, payload = change_notice(prefixed)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert pattern_from_notice("/kafka-acl-extended-changes", payload) == prefixed
