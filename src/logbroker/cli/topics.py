"""`logbroker topics`: kafka-topics.sh — create, list, describe, alter and delete topics.

Same options and output as Kafka's tool, against logbroker or any Kafka cluster:

    logbroker topics --create --topic t --partitions 3 --config retention.ms=60000
    logbroker topics --describe --topic t
    Topic: t	TopicId: …	PartitionCount: 3	ReplicationFactor: 1	Configs: retention.ms=60000
    	Topic: t	Partition: 0	Leader: 1	Replicas: 1	Isr: 1
    	…

A tiered topic's partition lines (remote.storage.enable=true) go on with the leader's local and
remote log: `LocalSize` (bytes of the `.log` files on the leader's disk), `RemoteSize` (bytes of
its segments in the remote store), `RemoteSegments` and `RemoteOffsets` (first-last offset held
remotely, `none` without remote segments), all from DescribeLogDirs (log_dir_usage.py; the
remote fields are a tagged field of logbroker's, `unknown` from a broker that does not send it).
Other topics' lines are Kafka's.

`--topic` names one topic for --create; for the other actions it is a regular expression (with
',' meaning '|'), matched against whole names, as Kafka's include lists are. Errors are one line
on stderr, `Error: <what happened> (<KAFKA_ERROR_NAME>).`, with exit code 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import click

from logbroker.admin_client import error_sentence, is_internal, unreachable
from logbroker.cli.topic_partitions import DEFAULT_PARTITION_SIZE_LIMIT, describe_topic_partitions
from logbroker.cli.common import (
    admin_client,
    bootstrap_option,
    fail,
    fail_with,
    load_properties_file,
    one_action,
    parse_key_values,
)

if TYPE_CHECKING:
    from logbroker.protocol.responses.describe_log_dirs import LogDirPartition

TIMEOUT_S = 15.0
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') or "
                     "underscore ('_') could collide. To avoid issues it is best to use either, "
                     "but not both.")


@dataclass(frozen=True, slots=True)
class PartitionView:
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    sizes: LogDirPartition | None = None  # the leader's replica, for a tiered topic's partition


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    topic_id: str
    partitions: tuple[PartitionView, ...]
    configs: tuple[tuple[str, str], ...]  # the non-default configs, as kafka-topics shows them


def topic_line(topic: TopicView) -> str:
    replication_factor = len(topic.partitions[0].replicas) if topic.partitions else 0
    configs = ",".join(f"{name}={value}" for name, value in topic.configs)
    topic_id = f"\tTopicId: {topic.topic_id}" if topic.topic_id != ZERO_TOPIC_ID else ""
    return (f"Topic: {topic.name}{topic_id}\tPartitionCount: {len(topic.partitions)}"
            f"\tReplicationFactor: {replication_factor}\tConfigs: {configs}")


def partition_line(topic: str, p: PartitionView) -> str:
    leader = "none" if p.leader is None else str(p.leader)
    return (f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            + ("" if p.sizes is None else size_fields(p.sizes)))


def size_fields(sizes: LogDirPartition) -> str:
    """The local and remote log fields of a tiered partition's line."""
    remote = sizes.remote
    if remote is None:
        return f"\tLocalSize: {sizes.partition_size}\tRemoteSize: unknown"
    offsets = "none" if remote.segment_count == 0 else f"{remote.start_offset}-{remote.end_offset}"
    return (f"\tLocalSize: {sizes.partition_size}\tRemoteSize: {remote.size_bytes}"
            f"\tRemoteSegments: {remote.segment_count}\tRemoteOffsets: {offsets}")


def describe_lines(topic: TopicView, *, under_replicated: bool = False,
                   unavailable: bool = False) -> list[str]:
    """kafka-topics --describe output for one topic. The partition filters, like Kafka's, print
    only the partitions they select and no topic line."""
    partitions = sorted(topic.partitions, key=lambda p: p.partition)
    if under_replicated or unavailable:
        selected = [p for p in partitions
                    if (under_replicated and len(p.isr) < len(p.replicas))
                    or (unavailable and p.leader is None)]
        return [partition_line(topic.name, p) for p in selected]
    return [topic_line(topic)] + [partition_line(topic.name, p) for p in partitions]


def include_pattern(expression: str) -> re.Pattern[str]:
    """Kafka's IncludeList: a regex where ',' also separates alternatives; quotes are stripped."""
    cleaned = expression.strip().strip("'\"").replace(",", "|")
    try:
        return re.compile(cleaned)
    except re.error as e:
        raise click.BadParameter(f"{expression!r} is not a valid regular expression: {e}",
                                 param_hint="--topic") from None


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="A properties file of admin client configs.")
@click.option("--create", is_flag=True, help="Create a topic.")
@click.option("--list", "list_", is_flag=True, help="List topics.")
@click.option("--describe", is_flag=True, help="Describe topics.")
@click.option("--alter", is_flag=True, help="Add partitions to topics.")
@click.option("--delete", is_flag=True, help="Delete topics.")
@click.option("--topic", help="The topic (for --create), else a regular expression of topics.")
@click.option("--partitions", type=int, help="Partitions of the topic (--create, --alter).")
@click.option("--replication-factor", type=int, help="Replication factor (--create).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE",
              help="A topic config override (--create). Repeatable.")
@click.option("--if-not-exists", is_flag=True, help="--create: do nothing if the topic exists.")
@click.option("--if-exists", is_flag=True,
              help="--alter, --delete, --describe: do nothing if no topic matches.")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
@click.option("--under-replicated-partitions", is_flag=True,
              help="--describe: only partitions whose ISR is smaller than their replicas.")
@click.option("--unavailable-partitions", is_flag=True,
              help="--describe: only partitions without a leader.")
@click.option("--partition-size-limit-per-response", type=click.IntRange(min=1),
              default=DEFAULT_PARTITION_SIZE_LIMIT, show_default=True,
              help="--describe: the most partitions one DescribeTopicPartitions answer may hold.")
def topics(bootstrap_server: str, command_config: str | None, create: bool, list_: bool,
           describe: bool, alter: bool, delete: bool, topic: str | None, partitions: int | None, replication_factor: int | None,
           configs: tuple[str, ...], if_not_exists: bool, if_exists: bool, exclude_internal: bool,
           under_replicated_partitions: bool, unavailable_partitions: bool,
           partition_size_limit_per_response: int) -> None:
    """Create, delete, describe, or change a topic (kafka-topics.sh)."""
    action = one_action({"create": create, "list": list_, "describe": describe, "alter": alter,
                         "delete": delete},
                        usage="--list, --describe, --create, --alter or --delete")
    if action in ("create", "alter", "delete") and not topic:
        raise click.UsageError(f"--topic is required with --{action}")
    if action == "alter" and partitions is None:
        raise click.UsageError("--partitions is required with --alter")
    if configs and action != "create":
        raise click.UsageError("--config is only for --create; change the configs of an existing "
                               "topic with a configs tool (IncrementalAlterConfigs)")
    topic_configs = parse_key_values(configs, "--config")

    admin = admin_client(bootstrap_server, command_config)
    if action == "create":
        _create(admin, bootstrap_server, topic, partitions, replication_factor, topic_configs,
                if_not_exists)
    elif action == "list":
        for name in _matching_topics(admin, bootstrap_server, topic, exclude_internal):
            click.echo(name)
    elif action == "describe":
        _describe(admin, bootstrap_server, topic, exclude_internal, if_exists,
                  under_replicated_partitions, unavailable_partitions,
                  paging=(command_config, partition_size_limit_per_response))
    elif action == "alter":
        names = _existing(admin, bootstrap_server, topic, exclude_internal, if_exists)
        if names:
            from confluent_kafka.admin import NewPartitions
            futures = admin.create_partitions([NewPartitions(n, partitions) for n in names],
                                              request_timeout=TIMEOUT_S)
            _wait_all(futures, bootstrap_server)
    else:
        names = _existing(admin, bootstrap_server, topic, exclude_internal, if_exists)
        if names:
            _wait_all(admin.delete_topics(names, request_timeout=TIMEOUT_S), bootstrap_server)


def _create(admin, bootstrap: str, topic: str, partitions: int | None,
            replication_factor: int | None, configs: dict[str, str], if_not_exists: bool) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    from logbroker.errors import KafkaError, TopicAlreadyExistsError
    from logbroker.metadata.controller import validate_topic_name

    if replication_factor is not None and not 1 <= replication_factor <= 32767:
        fail("The replication factor must be between 1 and 32767 inclusive.")
    if partitions is not None and partitions < 1:
        fail("The partitions must be greater than 0.")
    try:  # as kafka-topics.sh (Topic.validate), before asking the broker, which refuses it too
        validate_topic_name(topic)
    except KafkaError as e:
        fail(f"{e} (INVALID_TOPIC_EXCEPTION).")
    if "." in topic or "_" in topic:
        click.echo(COLLISION_WARNING)
    new_topic = NewTopic(topic, num_partitions=-1 if partitions is None else partitions,
                         replication_factor=-1 if replication_factor is None else replication_factor,
                         config=configs)
    future = admin.create_topics([new_topic], request_timeout=TIMEOUT_S)[topic]
    try:
        future.result()
    except KafkaException as e:
        if if_not_exists and e.args[0].code() == TopicAlreadyExistsError.code:
            return
        fail_with(e, bootstrap)
    click.echo(f"Created topic {topic}.")


def _all_topics(admin, bootstrap: str):
    from confluent_kafka import KafkaException
    try:
        return admin.list_topics(timeout=TIMEOUT_S).topics
    except KafkaException as e:
        fail_with(e, bootstrap)


def _matching_topics(admin, bootstrap: str, expression: str | None,
                     exclude_internal: bool) -> list[str]:
    names = sorted(_all_topics(admin, bootstrap))
    if exclude_internal:
        names = [n for n in names if not is_internal(n)]
    if expression:
        pattern = include_pattern(expression)
        names = [n for n in names if pattern.fullmatch(n)]
    return names


def _existing(admin, bootstrap: str, expression: str, exclude_internal: bool,
              if_exists: bool) -> list[str]:
    names = _matching_topics(admin, bootstrap, expression, exclude_internal)
    if not names and not if_exists:
        fail(f"Topic '{expression}' does not exist (UNKNOWN_TOPIC_OR_PARTITION).")
    return names


def _wait_all(futures: dict, bootstrap: str) -> None:
    from confluent_kafka import KafkaException
    for future in futures.values():
        try:
            future.result()
        except KafkaException as e:
            fail_with(e, bootstrap)


def _describe(admin, bootstrap: str, expression: str | None, exclude_internal: bool,
              if_exists: bool, under_replicated: bool, unavailable: bool,
              paging: tuple[str | None, int]) -> None:
    """`paging`: the --command-config and partitions per answer of DescribeTopicPartitions,
    which describes the partitions when the broker offers it (else Metadata does)."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    if expression:
        names = _existing(admin, bootstrap, expression, exclude_internal, if_exists)
    else:
        names = _matching_topics(admin, bootstrap, None, exclude_internal)
    if not names:
        return
    command_config, limit = paging
    paged = describe_topic_partitions(bootstrap, command_config, names, limit)
    descriptions = (admin.describe_topics(TopicCollection(names), request_timeout=TIMEOUT_S)
                    if paged is None else None)
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    config_futures = admin.describe_configs(resources, request_timeout=TIMEOUT_S)
    configs_by_topic = {}
    for resource, future in config_futures.items():
        try:
            entries = future.result()
        except KafkaException as e:
            if unreachable(e, bootstrap):
                fail_with(e, bootstrap)
            # A cluster that refuses DescribeConfigs still gets its topics described.
            click.echo(f"WARNING: cannot read the configs of {resource.name}: {error_sentence(e)}",
                       err=True)
            entries = {}
        configs_by_topic[resource.name] = tuple(sorted(
            (entry.name, entry.value) for entry in entries.values()
            if _source(entry) != ConfigSource.DEFAULT_CONFIG.value and not entry.is_default
            and entry.value is not None))
    tiered = {name for name in names
              if dict(configs_by_topic.get(name, ())).get("remote.storage.enable", "").lower() == "true"}
    sizes = _replica_sizes(bootstrap, command_config, tiered) if tiered else {}
    for name in names:
        if paged is not None:
            topic_id, found = paged[name]
            partitions = tuple(PartitionView(p.partition_index, p.leader_id if p.leader_id >= 0 else None,
                                             tuple(p.replica_nodes), tuple(p.isr_nodes)) for p in found)
        else:
            try:
                description = descriptions[name].result()
            except KafkaException as e:
                fail_with(e, bootstrap)
            topic_id = kafka_uuid(str(description.topic_id))
            partitions = tuple(
                PartitionView(p.id, None if p.leader is None or p.leader.id < 0 else p.leader.id,
                              tuple(n.id for n in p.replicas), tuple(n.id for n in p.isr))
                for p in description.partitions)
        if name in tiered:
            partitions = tuple(replace(p, sizes=sizes.get((p.leader, name, p.partition)))
                               for p in partitions)
        view = TopicView(name=name, topic_id=topic_id, partitions=partitions,
                         configs=configs_by_topic.get(name, ()))
        for line in describe_lines(view, under_replicated=under_replicated,
                                   unavailable=unavailable):
            click.echo(line)


def _replica_sizes(bootstrap: str, command_config: str | None,
                   topics: set[str]) -> dict[tuple[int, str, int], LogDirPartition]:
    """Every broker's replicas of `topics` with their local and remote sizes; {} with a warning
    when a broker cannot say (the lines are then printed without sizes)."""
    from logbroker.client import client_security
    from logbroker.log_dir_usage import replica_sizes
    try:
        return replica_sizes(bootstrap, client_security(load_properties_file(command_config, "--command-config")),
                             topics=topics)
    except Exception as e:  # noqa: BLE001 — the topics are still described, without sizes
        click.echo(f"WARNING: cannot read the log sizes (DescribeLogDirs): {error_sentence(e)}", err=True)
        return {}


def _source(entry) -> int:
    """A config entry's source as its protocol code (confluent-kafka gives an enum or an int)."""
    return int(getattr(entry.source, "value", entry.source))


def kafka_uuid(text: str) -> str:
    """librdkafka prints topic ids in standard base64; Kafka's tools print the URL-safe form."""
    return text.replace("+", "-").replace("/", "_")
