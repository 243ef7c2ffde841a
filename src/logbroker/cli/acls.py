"""`logbroker acls`: kafka-acls.sh — add, remove and list ACLs through the Admin API (CreateAcls,
DeleteAcls, DescribeAcls), against logbroker or any Kafka cluster.

    logbroker acls --bootstrap-server host:9092 --command-config admin.properties \\
        --add --allow-principal User:alice --operation Read --topic orders
    logbroker acls --list [--topic orders] [--principal User:alice]
    logbroker acls --remove --deny-principal User:bob --topic orders --force
    logbroker acls --add --allow-principal User:alice --consumer --topic orders --group billing

Same options and output as Kafka's tool: `Adding ACLs for resource `ResourcePattern(...)`:` then
each entry, then `Current ACLs for resource ...`. --producer grants Write, Describe and Create on
the topics (and IdempotentWrite on the cluster with --idempotent); --consumer Read and Describe on
the topics and Read on the groups. Errors are one line on stderr with exit code 1.
"""

from __future__ import annotations

import itertools

import click

from logbroker.admin_client import error_sentence
from logbroker.cli.common import admin_client, bootstrap_option, fail
from logbroker.security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

TIMEOUT_S = 30.0
PRODUCER_TOPIC_OPERATIONS = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
CONSUMER_TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.DESCRIBE)


def _enum(kind):
    def convert(ctx, param, values):
        try:
            return tuple(kind.parse(v) for v in values) if isinstance(values, tuple) \
                else kind.parse(values)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return convert


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="A properties file of admin client configs (SASL, TLS).")
@click.option("--add", is_flag=True, help="Add ACLs.")
@click.option("--remove", is_flag=True, help="Remove ACLs.")
@click.option("--list", "list_", is_flag=True, help="List ACLs.")
@click.option("--allow-principal", "allow_principals", multiple=True, metavar="TYPE:NAME",
              help="A principal to allow (User:alice, User:*). Repeatable.")
@click.option("--deny-principal", "deny_principals", multiple=True, metavar="TYPE:NAME",
              help="A principal to deny. Repeatable.")
@click.option("--principal", "principals", multiple=True, metavar="TYPE:NAME",
              help="--list: only ACLs of this principal. Repeatable.")
@click.option("--allow-host", "allow_hosts", multiple=True,
              help="A host allow principals may connect from (default: *). Repeatable.")
@click.option("--deny-host", "deny_hosts", multiple=True,
              help="A host deny principals are denied from (default: *). Repeatable.")
@click.option("--operation", "operations", multiple=True, callback=_enum(AclOperation),
              help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                   "AlterConfigs, IdempotentWrite or All (the default). Repeatable.")
@click.option("--topic", "topics", multiple=True, help="A topic (* for every topic). Repeatable.")
@click.option("--group", "groups", multiple=True, help="A consumer group. Repeatable.")
@click.option("--transactional-id", "transactional_ids", multiple=True,
              help="A transactional id. Repeatable.")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option("--resource-pattern-type", "pattern_type", default="LITERAL", show_default=True,
              callback=_enum(PatternType),
              help="LITERAL or PREFIXED for --add; also ANY or MATCH for --list and --remove.")
@click.option("--producer", is_flag=True, help="Convenience: the ACLs a producer needs.")
@click.option("--consumer", is_flag=True, help="Convenience: the ACLs a consumer needs.")
@click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster.")
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
def acls(bootstrap_server, command_config, add, remove, list_, allow_principals, deny_principals,
         principals, allow_hosts, deny_hosts, operations, topics, groups, transactional_ids, cluster,
         pattern_type, producer, consumer, idempotent, force) -> None:
    """Add, remove or list ACLs (kafka-acls.sh)."""
    if sum((add, remove, list_)) != 1:
        fail("Command must include exactly one action: --list, --add, --remove.")
    patterns = _patterns(topics, groups, transactional_ids, cluster, pattern_type)
    admin = admin_client(bootstrap_server, command_config)
    if list_:
        _list(admin, patterns or [None], principals)
        return
    if (producer or consumer) and not add and not remove:
        fail("--producer and --consumer need --add or --remove.")
    entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts)
    if not entries:
        fail("You must specify one of: --allow-principal, --deny-principal when trying to "
             f"{'add' if add else 'remove'} ACLs.")
    requested = _requested(patterns, operations, producer, consumer, idempotent, pattern_type)
    if not requested:
        fail("You must specify a resource: --topic, --group, --transactional-id or --cluster.")
    if add:
        _add(admin, requested, entries, pattern_type)
    else:
        _remove(admin, requested, entries, force)


def _patterns(topics, groups, transactional_ids, cluster, pattern_type) -> list[ResourcePattern]:
    return ([ResourcePattern(ResourceType.TOPIC, t, pattern_type) for t in topics]
            + [ResourcePattern(ResourceType.GROUP, g, pattern_type) for g in groups]
            + [ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pattern_type) for t in transactional_ids]
            + ([ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)] if cluster else []))


def _entries(allow_principals, deny_principals, allow_hosts, deny_hosts):
    """(principal, host, permission) triples; hosts default to * when principals are given."""
    return ([(p, h, AclPermissionType.ALLOW)
             for p, h in itertools.product(allow_principals, allow_hosts or (WILDCARD_HOST,))]
            + [(p, h, AclPermissionType.DENY)
               for p, h in itertools.product(deny_principals, deny_hosts or (WILDCARD_HOST,))])


def _requested(patterns, operations, producer, consumer, idempotent, pattern_type):
    """Resource pattern → the operations to add or remove there."""
    if not producer and not consumer:
        return {p: operations or (AclOperation.ALL,) for p in patterns}
    requested: dict[ResourcePattern, tuple[AclOperation, ...]] = {}
    for p in patterns:
        ops = ()
        if p.resource_type == ResourceType.TOPIC:
            ops = (PRODUCER_TOPIC_OPERATIONS if producer else ()) + (CONSUMER_TOPIC_OPERATIONS if consumer else ())
        elif p.resource_type == ResourceType.GROUP and consumer:
            ops = (AclOperation.READ,)
        elif p.resource_type == ResourceType.TRANSACTIONAL_ID and producer:
            ops = (AclOperation.WRITE, AclOperation.DESCRIBE)
        if ops:
            requested[p] = tuple(dict.fromkeys(ops))
    if producer and idempotent:
        requested[ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)] = (AclOperation.IDEMPOTENT_WRITE,)
    if consumer and not any(p.resource_type == ResourceType.GROUP for p in patterns):
        fail("With --consumer you must specify a --group.")
    return requested


def _add(admin, requested, entries, pattern_type) -> None:
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        fail(f"A '{pattern_type.name}' resource pattern type is not valid when adding ACLs; "
             f"use LITERAL or PREFIXED.")
    bindings = []
    for pattern, ops in requested.items():
        added = [AccessControlEntry(p, h, op, perm) for (p, h, perm) in entries for op in ops]
        _print_block(f"Adding ACLs for resource `{pattern}`", added)
        bindings += [_to_confluent(AclBinding(pattern, e)) for e in added]
    _wait(admin.create_acls(bindings, request_timeout=TIMEOUT_S).values(), "Cannot add ACLs")
    _list(admin, list(requested), ())


def _remove(admin, requested, entries, force) -> None:
    filters = [AclBindingFilter(pattern.resource_type, pattern.name, pattern.pattern_type, p, h, op, perm)
               for pattern, ops in requested.items() for (p, h, perm) in entries for op in ops]
    if not force and not click.confirm("Are you sure you want to remove ACLs: \n"
                                       + "".join(f" \t{f.principal} {f.permission_type.kafka_name} "
                                                 f"{f.operation.kafka_name} from hosts: {f.host}\n"
                                                 for f in filters)
                                       + " from the given resources?"):
        return
    _wait(admin.delete_acls([_filter_to_confluent(f) for f in filters],
                            request_timeout=TIMEOUT_S).values(), "Cannot remove ACLs")
    _list(admin, list(requested), ())


def _list(admin, patterns, principals) -> None:
    """Print the current ACLs of each pattern (None: all), grouped by resource as Kafka does."""
    found: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for pattern in patterns:
        selector = AclBindingFilter() if pattern is None else AclBindingFilter(
            pattern.resource_type, pattern.name,
            PatternType.ANY if pattern.pattern_type == PatternType.LITERAL else pattern.pattern_type)
        for principal in principals or (None,):
            [bindings] = _wait([admin.describe_acls(_filter_to_confluent(
                AclBindingFilter(selector.resource_type, selector.name, selector.pattern_type,
                                 principal)), request_timeout=TIMEOUT_S)], "Cannot list ACLs")
            for b in bindings:
                found.setdefault(ResourcePattern(ResourceType(b.restype.value), b.name,
                                                 PatternType(b.resource_pattern_type.value)), []).append(
                    AccessControlEntry(b.principal, b.host, AclOperation(b.operation.value),
                                       AclPermissionType(b.permission_type.value)))
    for pattern in sorted(set(found) | {p for p in patterns if p is not None}):
        _print_block(f"Current ACLs for resource `{pattern}`", sorted(set(found.get(pattern, ()))))


def _print_block(title: str, entries) -> None:
    """Kafka's AclCommand layout: the title, then the entries one per line after a tab, then an
    empty line."""
    click.echo(f"{title}: \n " + "\n".join(f"\t{e}" for e in entries) + " \n")


def _wait(futures, what: str) -> list:
    """The futures' results; the first failure ends the tool with one sentence."""
    results = []
    for future in futures:
        try:
            results.append(future.result())
        except Exception as exc:  # noqa: BLE001 - confluent raises KafkaException
            fail(f"{what}: {error_sentence(exc)}")
    return results


def _to_confluent(binding: AclBinding):
    from confluent_kafka import admin as ck
    p, e = binding.pattern, binding.entry
    return ck.AclBinding(ck.ResourceType(int(p.resource_type)), p.name,
                         ck.ResourcePatternType(int(p.pattern_type)), e.principal, e.host,
                         ck.AclOperation(int(e.operation)), ck.AclPermissionType(int(e.permission_type)))


def _filter_to_confluent(f: AclBindingFilter):
    from confluent_kafka import admin as ck
    return ck.AclBindingFilter(ck.ResourceType(int(f.resource_type)), f.name,
                               ck.ResourcePatternType(int(f.pattern_type)), f.principal, f.host,
                               ck.AclOperation(int(f.operation)),
                               ck.AclPermissionType(int(f.permission_type)))
