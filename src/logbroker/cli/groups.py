"""`logbroker groups`: kafka-consumer-groups.sh — list, describe, reset offsets of, and delete
consumer groups, against logbroker or any Kafka cluster.

    logbroker groups --list [--state [Stable,Empty]]
    logbroker groups --describe --group g [--members | --state]

    GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG   CONSUMER-ID …
    g               t               0          40              100             60    rdkafka-…

    logbroker groups --reset-offsets --group g --topic t[:0,1] | --all-topics
                     --to-earliest | --to-latest | --to-offset N | --to-current | --shift-by N
                     | --to-datetime 2024-01-01T00:00:00.000 | --by-duration PT1H
                     [--dry-run (the default) | --execute]
    logbroker groups --delete --group g [--group g2]
    logbroker groups --delete-offsets --group g --topic t[:0,1]

Same options, tables and messages as Kafka's tool (the tables are built in `group_views`). As in
Kafka, offsets are reset only for a group without members (Empty, or one that does not exist
yet), and the dry run checks that too, so that a plan that prints is a plan that can execute.
Errors are one line on stderr, `Error: <what happened> (<KAFKA_ERROR_NAME>).`, with exit code 1.
"""

from __future__ import annotations

import time

import click

from logbroker.cli import group_views as views
from logbroker.admin_client import error_sentence
from logbroker.cli.common import admin_client, bootstrap_option, fail, fail_with, one_action
from logbroker.cli.group_admin import Cluster, state_name

# Error codes of OffsetDelete's group-level errors that Kafka's tool explains per partition.
UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, GROUP_SUBSCRIBED_TO_TOPIC = 3, 29, 86
PARTITION_LEVEL_ERRORS = frozenset({UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED,
                                    GROUP_SUBSCRIBED_TO_TOPIC})
RESET_SCENARIOS = ("to_earliest", "to_latest", "to_offset", "to_current", "shift_by",
                   "to_datetime", "by_duration")


def _option_name(name: str) -> str:
    return "--" + name.replace("_", "-")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="A properties file of admin client configs.")
@click.option("--timeout", "timeout_ms", type=int, default=5000, show_default=True,
              help="Milliseconds to wait for the cluster's answers.")
@click.option("--list", "list_", is_flag=True, help="List all consumer groups.")
@click.option("--describe", is_flag=True, help="Describe consumer groups: offsets and lag.")
@click.option("--delete", is_flag=True, help="Delete consumer groups without members.")
@click.option("--reset-offsets", is_flag=True, help="Reset a group's committed offsets.")
@click.option("--delete-offsets", is_flag=True, help="Delete a group's offsets of topics.")
@click.option("--group", "groups", multiple=True, help="The consumer group. Repeatable.")
@click.option("--all-groups", is_flag=True,
              help="Every group (--describe, --delete, --reset-offsets).")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,…]",
              help="A topic, or some of its partitions (--reset-offsets, --delete-offsets).")
@click.option("--all-topics", is_flag=True,
              help="--reset-offsets: every partition the group has an offset for.")
@click.option("--members", is_flag=True, help="--describe: the members, not the offsets.")
@click.option("--offsets", is_flag=True, help="--describe: the offsets (the default).")
@click.option("--state", is_flag=False, flag_value="", default=None, metavar="[STATES]",
              help="--describe: the group's state. --list: show states, only these if given "
                   "(comma-separated).")
@click.option("--type", "type_", is_flag=False, flag_value="", default=None, metavar="[TYPES]",
              help="--list: show group types (Classic, Consumer, Share), only these if given "
                   "(comma-separated).")
@click.option("--to-earliest", is_flag=True, help="Reset to the log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the log end offset.")
@click.option("--to-current", is_flag=True, help="Reset to the current committed offset.")
@click.option("--to-offset", type=int, help="Reset to this offset (clamped to the log).")
@click.option("--shift-by", type=int, help="Move the committed offset by N (may be negative).")
@click.option("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
              help="Reset to the first offset at or after this time (UTC unless a zone is given).")
@click.option("--by-duration", metavar="PnDTnHnMnS",
              help="Reset to the first offset at or after this long ago.")
@click.option("--dry-run", is_flag=True, help="Only print the plan (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
def groups(bootstrap_server: str, command_config: str | None, timeout_ms: int, list_: bool,
           describe: bool, delete: bool, reset_offsets: bool, delete_offsets: bool,
           groups: tuple[str, ...], all_groups: bool, topics: tuple[str, ...], all_topics: bool,
           members: bool, offsets: bool, state: str | None, type_: str | None, to_earliest: bool, to_latest: bool,
           to_current: bool, to_offset: int | None, shift_by: int | None,
           to_datetime: str | None, by_duration: str | None, dry_run: bool,
           execute: bool) -> None:
    """List, describe, reset offsets of, or delete consumer groups (kafka-consumer-groups.sh)."""
    action = one_action({"list": list_, "describe": describe, "delete": delete,
                         "reset_offsets": reset_offsets, "delete_offsets": delete_offsets},
                        usage="--list, --describe, --delete, --reset-offsets, --delete-offsets")
    if action != "list" and not groups and not (all_groups and action != "delete_offsets"):
        raise click.UsageError(f"Option {_option_name(action)} takes one of these options: "
                               "--all-groups, --group")
    if action == "delete_offsets" and (len(groups) != 1 or not topics):
        raise click.UsageError("Option --delete-offsets takes one --group and at least one --topic")
    scenarios = {"to_earliest": to_earliest, "to_latest": to_latest, "to_current": to_current,
                 "to_offset": to_offset is not None, "shift_by": shift_by is not None,
                 "to_datetime": to_datetime is not None, "by_duration": by_duration is not None}
    chosen = [name for name in RESET_SCENARIOS if scenarios[name]]
    if action == "reset_offsets":
        if len(chosen) != 1:
            raise click.UsageError("Option --reset-offsets takes exactly one of: "
                                   + ", ".join(_option_name(n) for n in RESET_SCENARIOS))
        if bool(topics) == all_topics:
            raise click.UsageError("One of the reset scopes should be defined: --all-topics, "
                                   "--topic.")
        if dry_run and execute:
            raise click.UsageError("Option --reset-offsets only accepts one of --execute and "
                                   "--dry-run")
    elif chosen or dry_run or execute or all_topics:
        raise click.UsageError("--to-*, --shift-by, --by-duration, --all-topics, --dry-run and "
                               "--execute are only for --reset-offsets")

    admin = admin_client(bootstrap_server, command_config)
    cluster = Cluster(admin, bootstrap_server, timeout_ms / 1000)
    group_ids = list(groups) if groups else (
        [g.group_id for g in cluster.list_groups()] if all_groups else [])

    if type_ is not None and action != "list":
        raise click.UsageError("Option --type is only for --list")
    if action == "list":
        _list(cluster, state, type_)
    elif action == "describe":
        if sum([members, offsets, state is not None]) > 1:
            raise click.UsageError("Option --describe takes at most one of --members, --offsets, "
                                   "--state")
        for group in sorted(group_ids):
            _describe(cluster, group, members=members, state=state is not None)
    elif action == "delete":
        _delete(cluster, group_ids)
    elif action == "reset_offsets":
        scenario = chosen[0]
        argument = {"to_offset": to_offset, "shift_by": shift_by, "to_datetime": to_datetime,
                    "by_duration": by_duration}.get(scenario)
        plan = {}
        for group in group_ids:
            plan[group] = _reset_offsets(cluster, group, topics, scenario, argument,
                                         execute=execute)
        for line in views.reset_plan_lines(plan):
            click.echo(line)
    else:
        _delete_offsets(cluster, group_ids[0], topics)


def _list(cluster: Cluster, state_filter: str | None, type_filter: str | None) -> None:
    listings = cluster.list_groups()
    if type_filter is not None:  # with types shown, the share groups too (KIP-932)
        listings = sorted(listings + cluster.list_share_groups(), key=lambda g: g.group_id)
    try:
        if state_filter:
            wanted = views.parse_states(state_filter)
            listings = [g for g in listings if g.state in wanted]
        if type_filter:
            types = views.parse_types(type_filter)
            listings = [g for g in listings if g.type in types]
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    for line in views.list_lines(listings, with_state=state_filter is not None, with_type=type_filter is not None):
        click.echo(line)


def _say_state(group: str, state: str) -> None:
    """Kafka's note on stderr before a table of a group that is empty or rebalancing."""
    if state == "Empty":
        click.echo(f"\nConsumer group '{group}' has no active members.", err=True)
    elif state in views.REBALANCING_STATES:
        click.echo(f"\nWarning: Consumer group '{group}' is rebalancing.", err=True)


def _describe(cluster: Cluster, group: str, *, members: bool, state: bool) -> None:
    description = cluster.describe(group)
    if description is None:
        fail(f"Consumer group '{group}' does not exist.")
    current = state_name(description.state)
    if state:
        _say_state(group, current)
        node = description.coordinator
        lines = views.state_lines(views.GroupStateRow(
            group=group, coordinator=f"{node.host}:{node.port}  ({node.id})",
            assignment_strategy=description.partition_assignor or "", state=current,
            members=len(description.members)))
    elif members:
        rows = [views.MemberRow(group=group, consumer_id=m.member_id,
                                group_instance_id=m.group_instance_id or "", host=m.host,
                                client_id=m.client_id,
                                partitions=len(m.assignment.topic_partitions))
                for m in description.members]
        _say_state(group, current)
        lines = views.members_lines(rows) if rows else []
    else:
        rows = _offset_rows(cluster, group, description)
        _say_state(group, current)
        lines = views.offsets_lines(rows) if rows else []
    for line in lines:
        click.echo(line)


def _offset_rows(cluster: Cluster, group: str, description) -> list[views.OffsetRow]:
    """Kafka's order: members with the most partitions first, each member's partitions by topic
    and partition; then the partitions the group has an offset for but nobody is assigned."""
    from confluent_kafka.admin import OffsetSpec

    committed = cluster.committed(group)
    assigned = sorted((m for m in description.members if m.assignment.topic_partitions),
                      key=lambda m: -len(m.assignment.topic_partitions))
    owners: list[tuple[tuple[str, int], object]] = []
    for member in assigned:
        for tp in sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions):
            owners.append((tp, member))
    owned = {tp for tp, _ in owners}
    unowned = sorted(tp for tp in committed if tp not in owned)
    log_end = cluster.list_offsets([tp for tp, _ in owners] + unowned, OffsetSpec.latest())

    def row(tp: tuple[str, int], member) -> views.OffsetRow:
        return views.OffsetRow(
            group=group, topic=tp[0], partition=tp[1], current_offset=committed.get(tp),
            log_end_offset=log_end.get(tp),
            consumer_id=member.member_id if member else views.MISSING,
            host=member.host if member else views.MISSING,
            client_id=member.client_id if member else views.MISSING)

    return [row(tp, member) for tp, member in owners] + [row(tp, None) for tp in unowned]


def _delete(cluster: Cluster, group_ids: list[str]) -> None:
    from confluent_kafka import KafkaException
    if not group_ids:
        return
    futures = cluster.admin.delete_consumer_groups(group_ids, request_timeout=cluster.timeout_s)
    deleted, failed = [], {}
    for group in group_ids:
        try:
            futures[group].result()
            deleted.append(group)
        except KafkaException as e:
            failed[group] = e
    quoted = lambda names: ", ".join(f"'{g}'" for g in names)  # noqa: E731
    if not failed:
        click.echo(f"Deletion of requested consumer groups ({quoted(deleted)}) was successful.")
        return
    click.echo("Error: Deletion of some consumer groups failed:", err=True)
    for group, error in failed.items():
        click.echo(f"* Group '{group}' could not be deleted due to: {error_sentence(error)}",
                   err=True)
    if deleted:
        click.echo(f"\nThese consumer groups were deleted successfully: {quoted(deleted)}")
    raise SystemExit(1)


def _partitions_to_reset(cluster: Cluster, group: str,
                         topics: tuple[str, ...]) -> list[tuple[str, int]]:
    """--topic t (every partition) and --topic t:0,2 (those), or with no --topic the partitions
    the group has offsets for (--all-topics). Fails on partitions the cluster does not have."""
    if not topics:
        return sorted(cluster.committed(group))
    named: list[tuple[str, int]] = []
    whole: list[str] = []
    for argument in topics:
        topic, sep, partitions = argument.partition(":")
        if not sep:
            whole.append(topic)
            continue
        for text in partitions.split(","):
            try:
                named.append((topic, int(text)))
            except ValueError:
                raise click.UsageError(f"Invalid partition '{text}' specified in topic arg "
                                       f"'{argument}'") from None
    existing = cluster.partitions_of(sorted({t for t, _ in named} | set(whole)))
    for topic in whole:
        named += [(topic, p) for p in existing[topic] or ()]
    missing = [f"{t}-{p}" for t, p in named if p not in (existing.get(t) or ())]
    missing += [f"{t}" for t in whole if existing[t] is None]
    if missing:
        fail(f"The partitions \"{','.join(missing)}\" do not exist (UNKNOWN_TOPIC_OR_PARTITION).")
    return sorted(set(named))


def _reset_offsets(cluster: Cluster, group: str, topics: tuple[str, ...], scenario: str,
                   argument: object, *, execute: bool) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    description = cluster.describe(group)
    if description is not None:
        state = state_name(description.state)
        if state not in views.INACTIVE_STATES:
            fail(f"Assignments can only be reset if the group '{group}' is inactive, but the "
                 f"current state is {state}.")
    partitions = _partitions_to_reset(cluster, group, topics)
    plan = _new_offsets(cluster, group, partitions, scenario, argument)
    if execute and plan:
        new_offsets = [TopicPartition(t, p, offset) for (t, p), offset in sorted(plan.items())]
        request = [ConsumerGroupTopicPartitions(group, new_offsets)]
        future = cluster.admin.alter_consumer_group_offsets(
            request, request_timeout=cluster.timeout_s)[group]
        try:
            result = future.result()
        except KafkaException as e:
            fail_with(e, cluster.bootstrap, what=f"Cannot commit the offsets of group '{group}'")
        for tp in result.topic_partitions:
            if tp.error is not None:
                fail(f"Cannot commit the offset of {tp.topic}-{tp.partition} for group "
                     f"'{group}': {error_sentence(tp.error)}")
    return plan


def _new_offsets(cluster: Cluster, group: str, partitions: list[tuple[str, int]], scenario: str,
                 argument: object) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    def known(offsets: dict, what: str) -> dict[tuple[str, int], int]:
        for (topic, partition), offset in offsets.items():
            if offset is None or offset < 0:
                fail(f"Error getting {what} offset of topic partition: {topic}-{partition}")
        return offsets

    if scenario == "to_earliest":
        return known(cluster.list_offsets(partitions, OffsetSpec.earliest()), "starting")
    if scenario == "to_latest":
        return known(cluster.list_offsets(partitions, OffsetSpec.latest()), "ending")
    if scenario in ("to_datetime", "by_duration"):
        try:
            timestamp_ms = (views.parse_datetime_ms(argument) if scenario == "to_datetime"
                            else int(time.time() * 1000) - views.parse_duration_ms(argument))
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint=_option_name(scenario)) from None
        offsets = cluster.list_offsets(partitions, OffsetSpec.for_timestamp(timestamp_ms))
        # No record at or after the time: Kafka falls back to the log end.
        empty = [tp for tp, offset in offsets.items() if offset is None or offset < 0]
        for topic, partition in empty:
            click.echo(f"Warn: Partition {partition} from topic {topic} is empty. Falling back "
                       "to latest known offset.", err=True)
        offsets.update(cluster.list_offsets(empty, OffsetSpec.latest()))
        return known(offsets, "timestamp")
    committed = cluster.committed(group)
    if scenario == "to_current":
        # Partitions without a committed offset start at the log end, as in Kafka.
        latest = cluster.list_offsets([tp for tp in partitions if tp not in committed],
                                      OffsetSpec.latest())
        return known({tp: committed.get(tp, latest.get(tp)) for tp in partitions}, "ending")
    if scenario == "shift_by":
        for topic, partition in partitions:
            if (topic, partition) not in committed:
                fail(f"Cannot shift offset for partition {topic}-{partition} since there is no "
                     "current committed offset")
        requested = {tp: committed[tp] + int(argument) for tp in partitions}
    else:  # to_offset
        requested = {tp: int(argument) for tp in partitions}
    return _clamped(cluster, requested)


def _clamped(cluster: Cluster, requested: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Kafka's checkOffsetsRange: an offset past the log end becomes the log end, one before the
    log start becomes the log start, each with a warning."""
    from confluent_kafka.admin import OffsetSpec
    starts = cluster.list_offsets(list(requested), OffsetSpec.earliest())
    ends = cluster.list_offsets(list(requested), OffsetSpec.latest())
    result = {}
    for (topic, partition), offset in requested.items():
        start, end = starts.get((topic, partition)), ends.get((topic, partition))
        if end is not None and offset > end:
            click.echo(f"WARN New offset ({offset}) is higher than latest offset for topic "
                       f"partition {topic}-{partition}. Value will be set to {end}", err=True)
            offset = end
        elif start is not None and offset < start:
            click.echo(f"WARN New offset ({offset}) is lower than earliest offset for topic "
                       f"partition {topic}-{partition}. Value will be set to {start}", err=True)
            offset = start
        result[(topic, partition)] = offset
    return result


def _delete_offsets(cluster: Cluster, group: str, topics: tuple[str, ...]) -> None:
    """OffsetDelete, sent to the group's coordinator ourselves (see `offset_delete`)."""
    from confluent_kafka import KafkaError

    from logbroker.cli.offset_delete import delete_offsets

    named: list[tuple[str, int]] = []
    whole: list[str] = []
    for argument in topics:
        topic, sep, partitions = argument.partition(":")
        if sep:
            try:
                named += [(topic, int(p)) for p in partitions.split(",")]
            except ValueError:
                raise click.UsageError(f"Invalid topic arg '{argument}', expected topic name and "
                                       "partitions") from None
        else:
            whole.append(topic)
    results: dict[tuple[str, int | None], str | None] = {}
    for topic, partitions in cluster.partitions_of(whole).items():
        if partitions is None:
            results[(topic, None)] = error_sentence(KafkaError(UNKNOWN_TOPIC_OR_PARTITION))
        else:
            named += [(topic, p) for p in partitions]

    from confluent_kafka import KafkaException
    futures = cluster.admin.describe_consumer_groups([group], request_timeout=cluster.timeout_s)
    future = futures[group]
    try:
        coordinator = future.result().coordinator
    except KafkaException as e:
        fail_with(e, cluster.bootstrap)
    try:
        answer = delete_offsets(coordinator.host, coordinator.port, group_id=group,
                                partitions=sorted(set(named)), timeout_s=cluster.timeout_s)
    except (OSError, ValueError) as e:
        fail(f"Cannot delete the offsets of group '{group}' at its coordinator "
             f"{coordinator.host}:{coordinator.port}: {e}.")
    if answer.error_code and answer.error_code not in PARTITION_LEVEL_ERRORS:
        fail(error_sentence(KafkaError(answer.error_code)))
    for tp, code in answer.partition_errors.items():
        results[tp] = error_sentence(KafkaError(code)) if code else None
    failed = answer.error_code != 0 or any(error is not None for error in results.values())
    if failed:
        click.echo("Error: Encountered some partition-level error, see the follow-up details.",
                   err=True)
    else:
        click.echo(f"Request succeeded for deleting offsets from group {group}.")
    for line in views.delete_offsets_lines(results):
        click.echo(line)
    if failed:
        raise SystemExit(1)
