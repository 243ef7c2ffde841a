"""`logbroker status`: the cluster on one screen — brokers, topics, partitions and groups.

    logbroker status [--bootstrap-server HOST:PORT] [--watch [--interval 2]] [--include-internal]

Partitions show leader, replicas, ISR, the log start and end offsets and whether the partition is
under-replicated (ISR smaller than its replica set). The end offset is what ListOffsets gives a
client for "latest": the high watermark, which is the leader's log end offset whenever the ISR has
caught up. Consumer groups show their state and, per committed partition, the committed offset and
the lag behind that end offset; a broker that does not serve groups (ListGroups / OffsetFetch) gets
one line saying so instead of the table. `--watch` redraws the screen every `--interval` seconds
until Ctrl-C.

Like the other tools it speaks only the Kafka protocol, through confluent-kafka (AdminClient for
metadata and groups, Consumer.get_watermark_offsets for the offsets), so it works against any Kafka
cluster too.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import click

from logbroker.admin_client import client_config, error_sentence, is_internal
from logbroker.cli.common import (
    bootstrap_option,
    ensure_reachable,
    fail_with,
    load_properties_file,
)

TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start_offset: int | None
    end_offset: int | None
    error: str | None = None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True, slots=True)
class GroupLag:
    topic: str
    partition: int
    committed: int
    end_offset: int | None

    @property
    def lag(self) -> int | None:
        return None if self.end_offset is None or self.committed < 0 else max(self.end_offset - self.committed, 0)


@dataclass(frozen=True, slots=True)
class GroupStatus:
    group_id: str
    state: str
    members: int | None
    offsets: tuple[GroupLag, ...]

    @property
    def total_lag(self) -> int:
        return sum(o.lag or 0 for o in self.offsets)


@dataclass(slots=True)
class ClusterStatus:
    cluster_id: str | None
    controller_id: int
    brokers: list[tuple[int, str, int]]
    partitions: list[PartitionStatus]
    groups: list[GroupStatus] = field(default_factory=list)
    groups_unavailable: str | None = None  # why groups could not be listed
    log_dirs: list = field(default_factory=list)  # logbroker.log_dir_usage.LogDirUsage of every broker
    log_dirs_unavailable: str | None = None  # why DescribeLogDirs gave nothing
    taken_at: float = field(default_factory=time.time)


class StatusClient:
    """The clients one status screen needs, kept across `--watch` refreshes."""

    def __init__(self, config: dict) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        from logbroker.client import client_security

        self.admin = AdminClient(config)
        ensure_reachable(self.admin, config)
        self.bootstrap = config["bootstrap.servers"]
        self.security = client_security(config)
        self.consumer = Consumer({**config, "group.id": "logbroker-status", "enable.auto.commit": False})

    def close(self) -> None:
        self.consumer.close()

    def gather(self, *, include_internal: bool) -> ClusterStatus:
        from confluent_kafka import TopicPartition

        metadata = self.admin.list_topics(timeout=TIMEOUT_S)
        brokers = sorted((b.id, b.host, b.port) for b in metadata.brokers.values())
        partitions = []
        ends: dict[tuple[str, int], int] = {}
        for name in sorted(metadata.topics):
            if is_internal(name) and not include_internal:
                continue
            topic = metadata.topics[name]
            for pid in sorted(topic.partitions):
                p = topic.partitions[pid]
                start = end = None
                error = error_sentence(p.error) if p.error is not None else None
                try:
                    start, end = self.consumer.get_watermark_offsets(TopicPartition(name, pid),
                                                                     timeout=TIMEOUT_S, cached=False)
                    ends[(name, pid)] = end
                except Exception as exc:  # noqa: BLE001 - one bad partition must not hide the rest
                    error = error or error_sentence(exc)
                partitions.append(PartitionStatus(name, pid, p.leader, tuple(p.replicas), tuple(p.isrs),
                                                  start, end, error))
        status = ClusterStatus(metadata.cluster_id, metadata.controller_id, brokers, partitions)
        try:
            status.groups = self._groups(ends)
        except Exception as exc:  # noqa: BLE001 - groups may not exist on this broker yet
            status.groups_unavailable = error_sentence(exc)
        from logbroker.log_dir_usage import log_dir_usage
        try:
            status.log_dirs = log_dir_usage(self.bootstrap, self.security)
        except Exception as exc:  # noqa: BLE001 - a broker without DescribeLogDirs, or not allowed
            status.log_dirs_unavailable = error_sentence(exc)
        return status

    def _groups(self, ends: dict[tuple[str, int], int]) -> list[GroupStatus]:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        listed = self.admin.list_consumer_groups(request_timeout=TIMEOUT_S).result()
        if not listed.valid and listed.errors:
            raise listed.errors[0]
        ids = sorted(g.group_id for g in listed.valid)
        members: dict[str, int] = {}
        if ids:
            try:
                for group_id, future in self.admin.describe_consumer_groups(ids, request_timeout=TIMEOUT_S).items():
                    members[group_id] = len(future.result().members)
            except Exception:  # noqa: BLE001 - member counts are a nicety
                pass
        states = {g.group_id: getattr(g.state, "name", str(g.state)) for g in listed.valid}
        groups = []
        for group_id in ids:
            future = self.admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group_id)], request_timeout=TIMEOUT_S)[group_id]
            offsets = []
            for tp in sorted(future.result().topic_partitions, key=lambda t: (t.topic, t.partition)):
                end = ends.get((tp.topic, tp.partition))
                if end is None:
                    try:
                        end = self.consumer.get_watermark_offsets(
                            TopicPartition(tp.topic, tp.partition), timeout=TIMEOUT_S, cached=False)[1]
                    except Exception:  # noqa: BLE001
                        end = None
                offsets.append(GroupLag(tp.topic, tp.partition, tp.offset, end))
            groups.append(GroupStatus(group_id, states.get(group_id, "?"), members.get(group_id), tuple(offsets)))
        return groups


def _offset(value: int | None) -> str:
    return "?" if value is None else str(value)


def render(status: ClusterStatus, bootstrap: str):
    """The screen: a rich renderable, pure function of `status`."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    stamp = time.strftime("%H:%M:%S", time.localtime(status.taken_at))
    under = sum(p.under_replicated for p in status.partitions)
    header = Text.assemble(("logbroker status", "bold"), f"  {bootstrap}  cluster {status.cluster_id}  "
                           f"{len(status.brokers)} broker(s), {len({p.topic for p in status.partitions})} topic(s), "
                           f"{len(status.partitions)} partition(s), ",
                           (f"{under} under-replicated", "bold red" if under else "green"), f"  at {stamp}")

    brokers = Table(title="Brokers", title_justify="left", expand=False)
    for column in ("Id", "Host", "Port", "Controller"):
        brokers.add_column(column, no_wrap=True)
    for broker_id, host, port in status.brokers:
        brokers.add_row(str(broker_id), host, str(port), "yes" if broker_id == status.controller_id else "")

    partitions = Table(title="Partitions", title_justify="left")
    for column, justify in (("Topic", "left"), ("Partition", "right"), ("Leader", "right"),
                            ("Replicas", "left"), ("ISR", "left"), ("Start", "right"),
                            ("End", "right"), ("Under-replicated", "left")):
        partitions.add_column(column, justify=justify, no_wrap=True)
    for p in status.partitions:
        flag = Text("yes", style="bold red") if p.under_replicated else Text("no", style="green")
        if p.error:
            flag = Text(p.error, style="red")
        partitions.add_row(p.topic, str(p.partition), "none" if p.leader < 0 else str(p.leader),
                           ",".join(map(str, p.replicas)), ",".join(map(str, p.isr)),
                           _offset(p.log_start_offset), _offset(p.end_offset), flag)

    parts = [header, brokers, partitions, _log_dirs_table(status)]
    if status.groups_unavailable is not None:
        parts.append(Text(f"Groups: not available from this broker: {status.groups_unavailable}", style="yellow"))
    else:
        groups = Table(title="Consumer groups", title_justify="left")
        for column, justify in (("Group", "left"), ("State", "left"), ("Members", "right"),
                                ("Topic", "left"), ("Partition", "right"), ("Committed", "right"),
                                ("End offset", "right"), ("Lag", "right")):
            groups.add_column(column, justify=justify, no_wrap=True)
        for g in status.groups:
            members = "?" if g.members is None else str(g.members)
            if not g.offsets:
                groups.add_row(g.group_id, g.state, members, "", "", "", "", "")
            for i, o in enumerate(g.offsets):
                first = i == 0
                groups.add_row(g.group_id if first else "", g.state if first else "", members if first else "",
                               o.topic, str(o.partition), _offset(o.committed), _offset(o.end_offset),
                               _offset(o.lag))
        if not status.groups:
            groups.caption = "no consumer groups"
        parts.append(groups)
    return Group(*parts)


def _log_dirs_table(status: ClusterStatus):
    from rich.table import Table
    from rich.text import Text

    from logbroker.webconsole.render import human_bytes

    if status.log_dirs_unavailable is not None:
        return Text(f"Log dirs: not available: {status.log_dirs_unavailable}", style="yellow")
    table = Table(title="Log dirs", title_justify="left")
    for column, justify in (("Broker", "right"), ("Log dir", "left"), ("Size", "right"),
                            ("Usable", "right"), ("Total", "right")):
        table.add_column(column, justify=justify, no_wrap=True)
    for d in status.log_dirs:
        table.add_row(str(d.broker_id), d.log_dir, human_bytes(d.size_bytes),
                      human_bytes(d.usable_bytes if d.usable_bytes >= 0 else None),
                      human_bytes(d.total_bytes if d.total_bytes >= 0 else None))
    return table


@click.command()
@bootstrap_option
@click.option("--command-config", "command_config", metavar="FILE",
              help="Client properties file (security settings and the like).")
@click.option("--watch", is_flag=True, help="Redraw the screen every --interval seconds until Ctrl-C.")
@click.option("--interval", default=2.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between refreshes with --watch.")
@click.option("--include-internal", is_flag=True, help="Also show internal topics (__consumer_offsets).")
def status(bootstrap_server: str, command_config: str | None, watch: bool, interval: float,
           include_internal: bool) -> None:
    """Show brokers, topics, partitions and consumer groups with their lag on one screen."""
    from rich.console import Console

    config = client_config(bootstrap_server, load_properties_file(command_config, "--command-config"))
    client = StatusClient(config)
    # Piped output is not cut at 80 columns: the tables take the width they need.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    try:
        if not watch:
            console.print(render(client.gather(include_internal=include_internal), bootstrap_server))
            return
        from rich.live import Live

        with Live(render(client.gather(include_internal=include_internal), bootstrap_server),
                  console=console, screen=console.is_terminal, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                live.update(render(client.gather(include_internal=include_internal), bootstrap_server),
                            refresh=True)
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # noqa: BLE001 - one sentence, as the other tools fail
        fail_with(exc, bootstrap_server)
    finally:
        client.close()
