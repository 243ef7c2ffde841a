"""`logbroker share-groups`: kafka-share-groups.sh — list, describe, reset offsets of, and delete
share groups (KIP-932), against logbroker or any Kafka 4 cluster.

    logbroker share-groups --list [--state [Stable,Empty]]
    logbroker share-groups --describe --group g [--members | --state | --offsets]

    GROUP   TOPIC   PARTITION  LEADER-EPOCH  START-OFFSET  LAG
    g       t       0          0             40            60

    logbroker share-groups --reset-offsets --group g --topic t | --all-topics
                           --to-earliest | --to-latest | --to-datetime 2024-01-01T00:00:00.000
                           [--dry-run (the default) | --execute]
    logbroker share-groups --delete-offsets --group g --topic t
    logbroker share-groups --delete --group g [--group g2]

The verbs and columns of Kafka's tool. Offsets are reset and deleted only for a group without
members, as Kafka. Errors are one line on stderr, with exit code 1; a partition whose offsets
cannot be read is still a row of the table (with "-"), and its error such a line. LAG counts the
records below the partition's high watermark not yet acknowledged, wherever the partition is led.
"""

from __future__ import annotations

import datetime

import click

from logbroker.cli.admin_connections import client_security, run_admin
from logbroker.cli.common import bootstrap_option, fail, load_properties_file, one_action, table
from logbroker.errors import error_name

EARLIEST, LATEST = -2, -1


def _run(bootstrap: str, command_config: str | None, work):
    from logbroker.cli.share_group_admin import ShareAdmin
    props = load_properties_file(command_config, "--command-config")

    async def with_metadata(admin):
        await admin.metadata()
        return await work(admin)
    return run_admin(bootstrap, lambda: ShareAdmin(bootstrap, client_security(props)), with_metadata,
                     click_error_prefix="Error: ")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--command-config", type=click.Path(dir_okay=False), help="A properties file of admin configs.")
@click.option("--list", "list_", is_flag=True, help="List all share groups.")
@click.option("--describe", is_flag=True, help="Describe share groups: offsets (the default), members or state.")
@click.option("--reset-offsets", is_flag=True, help="Reset a share group's start offsets.")
@click.option("--delete-offsets", is_flag=True, help="Delete a share group's offsets of topics.")
@click.option("--delete", is_flag=True, help="Delete share groups without members.")
@click.option("--group", "groups", multiple=True, help="The share group. Repeatable.")
@click.option("--all-groups", is_flag=True, help="Every share group (--describe, --delete).")
@click.option("--topic", "topics", multiple=True, help="A topic (--reset-offsets, --delete-offsets).")
@click.option("--all-topics", is_flag=True, help="--reset-offsets: every topic the group has state on.")
@click.option("--members", is_flag=True, help="--describe: the members.")
@click.option("--offsets", is_flag=True, help="--describe: the start offsets and lag (the default).")
@click.option("--state", is_flag=False, flag_value="", default=None, metavar="[STATES]",
              help="--describe: the group's state. --list: show states, only these if given (comma-separated).")
@click.option("--to-earliest", is_flag=True, help="Reset to the log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the log end offset.")
@click.option("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="Reset to the first offset at or after this time.")
@click.option("--dry-run", is_flag=True, help="Only print the plan (the default).")
@click.option("--execute", is_flag=True, help="Store the new offsets.")
def share_groups(bootstrap_server, command_config, list_, describe, reset_offsets, delete_offsets, delete, groups,
                 all_groups, topics, all_topics, members, offsets, state, to_earliest, to_latest, to_datetime,
                 dry_run, execute) -> None:
    """List, describe, reset offsets of, or delete share groups (kafka-share-groups.sh)."""
    action = one_action({"list": list_, "describe": describe, "reset_offsets": reset_offsets,
                         "delete_offsets": delete_offsets, "delete": delete},
                        usage="--list, --describe, --delete, --reset-offsets, --delete-offsets")
    if action != "list" and not groups and not (all_groups and action in ("describe", "delete")):
        raise click.UsageError(f"Option --{action.replace('_', '-')} takes one of these options: --all-groups, --group")
    if action == "reset_offsets":
        if sum([to_earliest, to_latest, to_datetime is not None]) != 1:
            raise click.UsageError("Option --reset-offsets takes exactly one of: --to-earliest, --to-latest, "
                                   "--to-datetime")
        if bool(topics) == all_topics:
            raise click.UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        if dry_run and execute:
            raise click.UsageError("Option --reset-offsets only accepts one of --execute and --dry-run")
    if action == "delete_offsets" and (len(groups) != 1 or not topics):
        raise click.UsageError("Option --delete-offsets takes one --group and at least one --topic")
    if action == "describe" and sum([members, offsets, state is not None]) > 1:
        raise click.UsageError("Option --describe takes at most one of --members, --offsets, --state")

    async def work(admin) -> None:
        group_ids = list(groups) or ([g for g, _ in await admin.list_groups()] if all_groups else [])
        if action == "list":
            await _list(admin, state)
        elif action == "describe":
            for group in sorted(group_ids):
                await _describe(admin, group, members=members, state=state is not None)
        elif action == "reset_offsets":
            timestamp = EARLIEST if to_earliest else LATEST if to_latest else _parse_datetime(to_datetime)
            await _reset(admin, group_ids[0], list(topics), timestamp, execute=execute)
        elif action == "delete_offsets":
            for topic, code in await admin.delete_offsets(group_ids[0], list(topics)):
                click.echo(f"Topic {topic}: {'Successful' if code == 0 else 'Error: ' + error_name(code)}")
        else:
            for group in group_ids:
                code = await admin.delete_group(group)
                if code:
                    fail(f"Error: Deletion of share group '{group}' failed: {error_name(code)}.")
                click.echo(f"Deletion of requested share groups ('{group}') was successful.")

    _run(bootstrap_server, command_config, work)


async def _list(admin, state: str | None) -> None:
    listed = await admin.list_groups()
    if state is None:
        for group, _ in listed:
            click.echo(group)
        return
    wanted = {s.strip().lower() for s in state.split(",") if s.strip()}
    rows = [(g, s) for g, s in listed if not wanted or s.lower() in wanted]
    click.echo(table(("GROUP", "STATE"), rows))


async def _describe(admin, group_id: str, *, members: bool, state: bool) -> None:
    group, node_id = await admin.describe(group_id)
    if state:
        host, port = admin.brokers.get(node_id, ("?", 0))
        click.echo(table(("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"),
                         [(group_id, f"{host}:{port} ({node_id})", group.group_state, group.group_epoch,
                           group.assignment_epoch, len(group.members))]))
        return
    if members:
        rows = []
        for m in group.members:
            assigned = ",".join(f"{t.topic_name}:{','.join(str(p) for p in sorted(t.partitions))}"
                                for t in m.assignment.topic_partitions)
            rows.append((group_id, m.member_id, m.client_host, m.client_id,
                         sum(len(t.partitions) for t in m.assignment.topic_partitions), m.member_epoch, assigned or "-"))
        if not rows:
            click.echo(f"Share group '{group_id}' has no active members.")
            return
        click.echo(table(("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT"),
                         rows))
        return
    offsets = await admin.offsets(group_id)
    rows = [(group_id, t, p, epoch if epoch >= 0 and not error else "-", start if not error else "-",
             lag if lag >= 0 and not error else "-")
            for t, p, start, epoch, lag, error in offsets]
    if not group.members:
        click.echo(f"\nShare group '{group_id}' has no active members.\n")
    click.echo(table(("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"), rows))
    errors = [f"the offsets of partition {t}-{p} of share group '{group_id}' could not be read: {error}"
              for t, p, *_, error in offsets if error]
    for error in errors[:-1]:
        click.echo(f"Error: {error}", err=True)
    if errors:
        fail(errors[-1])


async def _reset(admin, group_id: str, topics: list[str], timestamp: int, *, execute: bool) -> None:
    if topics:
        partitions = []
        for topic in topics:
            if topic not in admin.topic_partitions:
                fail(f"Error: Topic {topic} does not exist.")
            partitions += [(topic, p) for p in admin.topic_partitions[topic]]
    else:
        partitions = [(t, p) for t, p, *_ in await admin.offsets(group_id)]
    targets = await admin.list_offsets(partitions, timestamp)
    if execute:
        await admin.alter(group_id, targets)
    click.echo(table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                     [(group_id, t, p, offset) for (t, p), offset in sorted(targets.items())]))


def _parse_datetime(text: str) -> int:
    """Kafka's --to-datetime formats: YYYY-MM-DDTHH:mm:SS.sss, with an optional zone (UTC by default)."""
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.UsageError(f"--to-datetime {text!r} is not YYYY-MM-DDTHH:mm:SS.sss") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)
