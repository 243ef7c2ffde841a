"""Every Kafka request the console makes, through confluent-kafka (librdkafka): one AdminClient,
one Producer and one Consumer, created once and shared by all requests.

The methods block (each for at most `timeout_s`) and must run off the event loop: the web
handlers call them in a worker thread. They answer with the value types of `model.py`, or raise
ConsoleError with one sentence that ends with Kafka's error name. The admin client and the
producer are thread-safe; the consumer is not, so the message browser holds `_consumer_lock`
while it assigns, reads and unassigns.

Reading a page of a topic reads only that page: ListOffsets gives each partition's start and end,
the consumer is assigned at `end - limit` (or the offset or timestamp asked for), and it stops
each partition at the offset where the page ends, with librdkafka's prefetch bounded to 1 MiB
per partition and fetch (16 MiB queued in all).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping

from logbroker.admin_client import INTERNAL_TOPICS, client_config, error_sentence
from logbroker.webconsole import paging
from logbroker.webconsole.model import (
    Acl,
    Broker,
    ClusterHealth,
    ConfigItem,
    GroupInfo,
    GroupListing,
    GroupOffset,
    Member,
    Message,
    MessagePage,
    PartitionInfo,
    PartitionSizes,
    ScramUser,
    TopicInfo,
)

SECURITY_DISABLED = 54
GROUP_ID_NOT_FOUND = 69
TIMESTAMP_TYPES = {0: "NoTimestamp", 1: "CreateTime", 2: "LogAppendTime"}
GROUP_STATES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
                "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable",
                "DEAD": "Dead", "EMPTY": "Empty"}
# How far the browser reads, whatever it is asked: records per partition, and wall time.
MAX_SCAN_PER_PARTITION = 5000
READ_DEADLINE_S = 5.0


class ConsoleError(Exception):
    """A request failed; `str()` is one sentence for the page."""


class NotFoundError(ConsoleError):
    """The topic or group asked for does not exist."""


def _sentence(error: BaseException, what: str | None = None) -> str:
    sentence = error_sentence(error)
    return f"{what}: {sentence}" if what else sentence


class Cluster:
    def __init__(self, bootstrap: str, properties: Mapping[str, str], *,
                 timeout_s: float = 10.0) -> None:
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.properties = dict(properties)
        self.timeout_s = timeout_s
        self.admin = AdminClient(client_config(bootstrap, properties))
        self.producer = Producer(client_config(bootstrap, properties, {
            "linger.ms": "0", "client.id": "logbroker-console"}))
        # The browser's consumer never joins its group (assign, not subscribe) nor commits.
        self.consumer = Consumer(client_config(bootstrap, properties, {
            "group.id": f"logbroker-console-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": "false", "enable.auto.offset.store": "false",
            "enable.partition.eof": "true", "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": "10", "fetch.max.bytes": "8388608",
            "max.partition.fetch.bytes": "1048576", "queued.max.messages.kbytes": "16384",
            # librdkafka waits this long (default 1 s) before fetching again once its queue is
            # full, which a page that reads past the first fetch would wait for.
            "fetch.queue.backoff.ms": "5",
            "client.id": "logbroker-console"}))
        self._consumer_lock = threading.Lock()

    def warm_up(self) -> None:
        """Connect the browser's consumer and the producer now, not on the first page."""
        for client in (self.consumer, self.producer):
            try:
                client.list_topics(timeout=self.timeout_s)
            except Exception:  # noqa: BLE001 — the pages report an unreachable cluster
                pass

    def close(self) -> None:
        self.producer.flush(1)
        self.consumer.close()

    def _result(self, future, what: str | None = None):
        from confluent_kafka import KafkaException
        try:
            return future.result(timeout=self.timeout_s + 5)
        except KafkaException as e:
            raise ConsoleError(_sentence(e, what)) from None
        except TimeoutError:
            raise ConsoleError(f"{what or 'The request'}: no answer from {self.bootstrap} "
                               f"within {self.timeout_s:g} s.") from None

    # -- cluster and topics ------------------------------------------------------------------

    def metadata(self):
        from confluent_kafka import KafkaException
        try:
            return self.admin.list_topics(timeout=self.timeout_s)
        except KafkaException as e:
            raise ConsoleError(f"Cannot reach a broker at {self.bootstrap}: "
                               f"{error_sentence(e)}") from None

    def brokers(self, metadata=None) -> tuple[Broker, ...]:
        """The brokers with their racks (DescribeCluster), or from Metadata when the cluster
        does not answer DescribeCluster."""
        metadata = metadata or self.metadata()
        try:
            described = self.admin.describe_cluster(request_timeout=self.timeout_s).result(
                timeout=self.timeout_s + 5)
            controller = described.controller.id if described.controller else -1
            return tuple(sorted((Broker(n.id, n.host, n.port, n.rack, n.id == controller)
                                 for n in described.nodes), key=lambda b: b.id))
        except Exception:  # noqa: BLE001 — older brokers: Metadata has no racks
            return tuple(sorted((Broker(b.id, b.host, b.port, None, b.id == metadata.controller_id)
                                 for b in metadata.brokers.values()), key=lambda b: b.id))

    def topic_names(self, metadata=None) -> list[str]:
        metadata = metadata or self.metadata()
        return sorted(metadata.topics)

    def topics(self, names: Iterable[str] | None = None, *, offsets: bool = True,
               metadata=None) -> list[TopicInfo]:
        """The topics named (all when None), sorted by name, with each partition's start and end
        offsets when `offsets`."""
        metadata = metadata or self.metadata()
        wanted = sorted(metadata.topics) if names is None else [n for n in names
                                                               if n in metadata.topics]
        ends: dict[tuple[str, int], int] = {}
        starts: dict[tuple[str, int], int] = {}
        if offsets:
            partitions = [(t, p) for t in wanted for p in metadata.topics[t].partitions]
            starts, ends = self.watermarks(partitions)
        result = []
        for name in wanted:
            topic = metadata.topics[name]
            parts = tuple(PartitionInfo(p.id, p.leader, tuple(p.replicas), tuple(p.isrs),
                                        starts.get((name, p.id)), ends.get((name, p.id)))
                          for p in sorted(topic.partitions.values(), key=lambda p: p.id))
            result.append(TopicInfo(name, parts, name in INTERNAL_TOPICS or name.startswith("__"),
                                    error_sentence(topic.error) if topic.error else None))
        return result

    def topic(self, name: str, *, sizes: bool = False) -> TopicInfo:
        """One topic with its offsets and, with `sizes` when it is tiered (remote.storage.enable),
        each partition's local and remote size from its leader."""
        found = self.topics([name])
        if not found:
            raise NotFoundError(f"Topic '{name}' does not exist (UNKNOWN_TOPIC_OR_PARTITION).")
        topic = found[0]
        if not sizes or (self.config_values([name], "remote.storage.enable").get(name) or "").lower() != "true":
            return topic
        by_replica = self.partition_sizes(name)
        return dataclasses.replace(topic, partitions=tuple(
            dataclasses.replace(p, sizes=by_replica.get((p.leader, p.partition))) for p in topic.partitions))

    def partition_sizes(self, topic: str) -> dict[tuple[int, int], PartitionSizes]:
        """(broker id, partition) → that broker's replica's sizes; {} when the brokers cannot
        say (the page then shows the partitions without them)."""
        from logbroker.client import client_security
        from logbroker.log_dir_usage import replica_sizes
        try:
            replicas = replica_sizes(self.bootstrap, client_security(self.properties), topics={topic})
        except Exception:  # noqa: BLE001 — DescribeLogDirs refused or a broker unreachable
            return {}
        sizes = {}
        for (broker_id, _, partition), r in replicas.items():
            remote = r.remote
            sizes[(broker_id, partition)] = PartitionSizes(r.partition_size) if remote is None else PartitionSizes(
                r.partition_size, remote.size_bytes, remote.segment_count,
                remote.start_offset if remote.segment_count else None,
                remote.end_offset if remote.segment_count else None)
        return sizes

    def list_offsets(self, partitions: Iterable[tuple[str, int]], spec) -> dict[tuple[str, int], int]:
        """(topic, partition) → the offset `spec` (an OffsetSpec) names; partitions whose answer
        is an error or -1 are left out."""
        from confluent_kafka import KafkaException, TopicPartition
        request = {TopicPartition(t, p): spec for t, p in partitions}
        if not request:
            return {}
        futures = self.admin.list_offsets(request, request_timeout=self.timeout_s)
        offsets = {}
        for tp, future in futures.items():
            try:
                offset = future.result(timeout=self.timeout_s + 5).offset
            except (KafkaException, TimeoutError):
                continue
            if offset >= 0:
                offsets[(tp.topic, tp.partition)] = offset
        return offsets

    def watermarks(self, partitions: list[tuple[str, int]]):
        """(start offsets, end offsets) of `partitions`, each a dict by (topic, partition)."""
        from confluent_kafka.admin import OffsetSpec
        return (self.list_offsets(partitions, OffsetSpec.earliest()),
                self.list_offsets(partitions, OffsetSpec.latest()))

    def health(self) -> ClusterHealth:
        metadata = self.metadata()
        brokers = self.brokers(metadata)
        topics = self.topics(offsets=False, metadata=metadata)
        under = [(t.name, p.partition) for t in topics for p in t.partitions
                 if p.under_replicated]
        offline = [(t.name, p.partition) for t in topics for p in t.partitions if p.offline]
        # min.insync.replicas only matters for partitions that lost a replica: ask only their topics.
        below_min = []
        suspects = sorted({t for t, _ in under})
        if suspects:
            mins = self.config_values(suspects, "min.insync.replicas")
            by_name = {t.name: t for t in topics}
            for name in suspects:
                minimum = int(mins.get(name) or 1)
                below_min += [(name, p.partition) for p in by_name[name].partitions
                              if len(p.isr) < minimum]
        replicas = Counter(b for t in topics for p in t.partitions for b in p.replicas)
        leaders = Counter(p.leader for t in topics for p in t.partitions if not p.offline)
        sizes, why = self.log_dir_bytes()
        return ClusterHealth(brokers, metadata.cluster_id,
                             metadata.controller_id if metadata.controller_id >= 0 else None,
                             len(topics), sum(len(t.partitions) for t in topics),
                             tuple(under), tuple(offline), tuple(below_min),
                             dict(replicas), dict(leaders), sizes, why)

    def log_dir_bytes(self) -> tuple[dict[int, int] | None, str | None]:
        """The bytes of the partitions in each broker's log dirs (DescribeLogDirs), or None and
        why not (a broker without the API, a principal without DESCRIBE on the cluster)."""
        from logbroker.client import client_security
        from logbroker.log_dir_usage import log_dir_usage
        try:
            usage = log_dir_usage(self.bootstrap, client_security(self.properties))
        except Exception as e:  # noqa: BLE001 — the overview shows why instead of the sizes
            return None, _sentence(e)
        sizes: dict[int, int] = {}
        for d in usage:
            sizes[d.broker_id] = sizes.get(d.broker_id, 0) + d.size_bytes
        return sizes, None

    def create_topic(self, name: str, *, partitions: int, replication_factor: int,
                     config: Mapping[str, str]) -> None:
        from confluent_kafka.admin import NewTopic
        futures = self.admin.create_topics(
            [NewTopic(name, partitions, replication_factor, config=dict(config))],
            request_timeout=self.timeout_s, operation_timeout=self.timeout_s)
        self._result(futures[name], f"Cannot create topic '{name}'")

    def delete_topic(self, name: str) -> None:
        futures = self.admin.delete_topics([name], request_timeout=self.timeout_s,
                                           operation_timeout=self.timeout_s)
        self._result(futures[name], f"Cannot delete topic '{name}'")

    def configs(self, topic: str) -> list[ConfigItem]:
        from confluent_kafka.admin import ConfigResource, ResourceType
        resource = ConfigResource(ResourceType.TOPIC, topic)
        entries = self._result(self.admin.describe_configs(
            [resource], request_timeout=self.timeout_s)[resource],
            f"Cannot describe the configs of '{topic}'")
        return sorted((ConfigItem(e.name, e.value, _source_name(e.source), e.is_default,
                                  e.is_read_only, e.is_sensitive)
                       for e in entries.values()), key=lambda c: c.name)

    def config_values(self, topics: list[str], name: str) -> dict[str, str | None]:
        from confluent_kafka.admin import ConfigResource, ResourceType
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        futures = self.admin.describe_configs(resources, request_timeout=self.timeout_s)
        values = {}
        for resource, future in futures.items():
            try:
                entry = future.result(timeout=self.timeout_s + 5).get(name)
            except Exception:  # noqa: BLE001 — a topic deleted meanwhile
                continue
            values[resource.name] = entry.value if entry else None
        return values

    def alter_configs(self, topic: str, *, set_: Mapping[str, str],
                      delete: Iterable[str] = ()) -> None:
        """IncrementalAlterConfigs: SET each of `set_`, DELETE (back to the default) `delete`."""
        from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                           ResourceType)
        ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in set_.items()]
        ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in delete]
        if not ops:
            return
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=ops)
        futures = self.admin.incremental_alter_configs([resource], request_timeout=self.timeout_s)
        for future in futures.values():
            self._result(future, f"Cannot change the configs of '{topic}'")

    # -- messages ----------------------------------------------------------------------------

    def read_messages(self, topic: str, *, partitions: list[int], start: str, limit: int,
                      offset: int | None = None, timestamp_ms: int | None = None,
                      cursor: dict[int, int] | None = None, matches=None) -> MessagePage:
        """A page of `topic`: `limit` records from each of `partitions` (merged and cut to
        `limit`), starting at `start`: "newest" (the last ones, shown newest first), "oldest",
        "offset" (`offset` in each partition) or "timestamp" (the first at or after
        `timestamp_ms`), or continuing from a previous page's `cursor` (paging.py). With
        `matches` (a predicate on Message), records that fail it are skipped, reading at most
        MAX_SCAN_PER_PARTITION records per partition."""
        from confluent_kafka.admin import OffsetSpec
        tps = [(topic, p) for p in partitions]
        starts, ends = self.watermarks(tps)
        low = {p: o for (_, p), o in starts.items()}
        high = {p: o for (_, p), o in ends.items()}
        at = None
        if start == "timestamp" and cursor is None:
            at = {p: o for (_, p), o in self.list_offsets(
                tps, OffsetSpec.for_timestamp(int(timestamp_ms or 0))).items()}
        newest = start == "newest"
        ranges = paging.ranges_for(start, partitions=partitions, low=low, high=high,
                                   scan=limit if matches is None else MAX_SCAN_PER_PARTITION,
                                   offset=int(offset or 0), at=at, cursor=cursor)
        found, reached, scanned, timed_out = self._read_ranges(
            topic, ranges, matches, forward_limit=None if newest else limit)
        messages = [m for p in found for m in found[p]]
        if newest:
            messages.sort(key=lambda m: (m.timestamp_ms or 0, m.offset), reverse=True)
        else:
            messages.sort(key=lambda m: (m.timestamp_ms or 0, m.partition, m.offset))
        shown = tuple(messages[:limit])
        watermarks = {p: (low.get(p, 0), high.get(p, 0)) for p in partitions}
        return MessagePage(shown, scanned, watermarks, timed_out, paging.next_cursor(
            newest=newest, ranges=ranges, found=found, shown=shown, reached=reached, low=low,
            high=high))

    def _read_ranges(self, topic: str, ranges: dict[int, tuple[int, int]], matches, *,
                     forward_limit: int | None):
        """Read [from, to) of each partition: (the matching records by partition, the offset
        after the last record scanned in each, records scanned, whether the deadline cut the
        read short). Reading forward, a partition also stops once it has `forward_limit`
        matching records."""
        from confluent_kafka import KafkaError, TopicPartition
        pending = {p: r for p, r in ranges.items() if r[0] < r[1]}
        found: dict[int, list[Message]] = {p: [] for p in ranges}
        reached = {p: r[0] if r[0] < r[1] else r[1] for p, r in ranges.items()}
        scanned = 0
        if not pending:
            return found, reached, 0, False
        deadline = time.monotonic() + READ_DEADLINE_S
        with self._consumer_lock:
            self.consumer.assign([TopicPartition(topic, p, r[0]) for p, r in pending.items()])
            try:
                while pending and time.monotonic() < deadline:
                    # consume(n, timeout) waits for all n or the timeout; poll returns at the
                    # first record, then consume(…, 0) drains what is already queued.
                    first = self.consumer.poll(0.1)
                    if first is None:
                        continue
                    for record in [first, *self.consumer.consume(1000, timeout=0)]:
                        p = record.partition()
                        error = record.error()
                        if error is not None:
                            if error.code() != KafkaError._PARTITION_EOF:
                                raise ConsoleError(f"Cannot read {topic}-{p}: "
                                                   f"{error_sentence(error)}")
                            if p in pending:  # at the log's end: nothing more to read now
                                end = pending.pop(p)[1]
                                reached[p] = max(reached[p], min(record.offset(), end))
                            continue
                        if p not in pending:
                            continue
                        offset = record.offset()
                        end = pending[p][1]
                        if offset >= end:
                            reached[p] = pending.pop(p)[1]
                            continue
                        scanned += 1
                        reached[p] = offset + 1
                        message = _message(record)
                        if matches is None or matches(message):
                            found[p].append(message)
                        if offset >= end - 1 or (forward_limit is not None
                                                 and len(found[p]) >= forward_limit):
                            pending.pop(p)
            finally:
                self.consumer.unassign()
        return found, reached, scanned, bool(pending)

    def produce(self, topic: str, *, value: bytes | None, key: bytes | None,
                headers: list[tuple[str, bytes]], partition: int | None) -> tuple[int, int]:
        """Produce one record and wait for its acknowledgement: (partition, offset)."""
        outcome: dict[str, object] = {}

        def delivered(error, message) -> None:
            outcome["error"] = error
            outcome["message"] = message

        kwargs = {"value": value, "key": key, "headers": headers or None,
                  "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        try:
            self.producer.produce(topic, **kwargs)
        except Exception as e:  # noqa: BLE001 — BufferError, KafkaException: one sentence
            raise ConsoleError(_sentence(e, f"Cannot produce to '{topic}'")) from None
        self.producer.flush(self.timeout_s)
        if "message" not in outcome:
            raise ConsoleError(f"Cannot produce to '{topic}': no acknowledgement within "
                               f"{self.timeout_s:g} s.")
        if outcome["error"] is not None:
            raise ConsoleError(_sentence(outcome["error"], f"Cannot produce to '{topic}'"))
        message = outcome["message"]
        return message.partition(), message.offset()

    # -- consumer groups ---------------------------------------------------------------------

    def groups(self) -> list[GroupListing]:
        result = self._result(self.admin.list_consumer_groups(request_timeout=self.timeout_s),
                              "Cannot list consumer groups")
        if result.errors and not result.valid:  # no broker answered: not "no groups"
            raise ConsoleError(_sentence(result.errors[0], "Cannot list consumer groups"))
        return sorted((GroupListing(g.group_id, _state(g.state), g.is_simple_consumer_group)
                       for g in result.valid), key=lambda g: g.group_id)

    def group(self, group_id: str) -> GroupInfo | None:
        """The group with its members and offsets (and the lag of each), None when unknown."""
        return self.groups_detail([group_id])[group_id]

    def groups_detail(self, group_ids: list[str]) -> dict[str, GroupInfo | None]:
        """Each group with its members, offsets and lag (None for a group that does not exist),
        in a fixed number of rounds however many groups: one DescribeGroups, the OffsetFetch of
        every group at once (librdkafka takes one group per request), one ListOffsets."""
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
        from confluent_kafka.admin import OffsetSpec
        if not group_ids:
            return {}
        described = self.admin.describe_consumer_groups(group_ids, request_timeout=self.timeout_s)
        fetched = {g: self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g)], request_timeout=self.timeout_s)[g]
            for g in group_ids}
        found: dict[str, tuple] = {}
        for group_id in group_ids:
            try:
                description = described[group_id].result(timeout=self.timeout_s + 5)
            except KafkaException as e:
                if e.args[0].code() == GROUP_ID_NOT_FOUND:
                    continue
                raise ConsoleError(_sentence(e, f"Cannot describe group '{group_id}'")) from None
            result = self._result(fetched[group_id],
                                  f"Cannot fetch the offsets of group '{group_id}'")
            committed = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
                         if tp.error is None and tp.offset >= 0}
            if _state(description.state) != "Dead" or committed:
                found[group_id] = (description, committed)
        partitions = {tp for _, committed in found.values() for tp in committed}
        for description, _ in found.values():
            partitions |= {tp for _, tp in _assigned(description)}
        ends = self.list_offsets(sorted(partitions), OffsetSpec.latest())
        return {g: _group_info(g, *found[g], ends) if g in found else None for g in group_ids}

    def groups_of_topic(self, topic: str) -> list[GroupInfo]:
        """The groups with committed offsets on, or members assigned to, `topic`; each with only
        that topic's partitions in its offsets."""
        ids = [g.group_id for g in self.groups()]
        result = []
        for info in self.groups_detail(ids).values():
            if info is None:
                continue
            offsets = tuple(o for o in info.offsets if o.topic == topic)
            if offsets:
                result.append(dataclasses.replace(info, offsets=offsets))
        return result

    def reset_group(self, group_id: str, *, to: str, topic: str | None = None,
                    timestamp_ms: int | None = None) -> dict[tuple[str, int], int]:
        """Commit new offsets for an empty group: its partitions (of `topic` only, when given)
        go to the "earliest", "latest" or "timestamp" offset. Kafka refuses this while the group
        has members, and so does the console, before asking."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        from confluent_kafka.admin import OffsetSpec
        group = self.group(group_id)
        if group is None:
            raise ConsoleError(f"Group '{group_id}' does not exist (GROUP_ID_NOT_FOUND).")
        if not group.empty:
            raise ConsoleError(f"Group '{group_id}' has {len(group.members)} active member(s): "
                               "offsets can only be reset when it is empty, so stop its "
                               "consumers first (NON_EMPTY_GROUP).")
        partitions = [(o.topic, o.partition) for o in group.offsets
                      if topic is None or o.topic == topic]
        if topic is not None and not partitions:
            partitions = [(topic, p.partition) for p in self.topic(topic).partitions]
        spec = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest()}.get(to)
        if spec is None:
            spec = OffsetSpec.for_timestamp(int(timestamp_ms or 0))
        targets = self.list_offsets(partitions, spec)
        if to == "timestamp":  # no record at or after the time: the end, as Kafka's tool does
            latest = self.list_offsets([tp for tp in partitions if tp not in targets],
                                       OffsetSpec.latest())
            targets.update(latest)
        request = ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(t, p, o) for (t, p), o in sorted(targets.items())])
        self._result(self.admin.alter_consumer_group_offsets(
            [request], request_timeout=self.timeout_s)[group_id],
            f"Cannot reset the offsets of group '{group_id}'")
        return targets

    def delete_group(self, group_id: str) -> None:
        futures = self.admin.delete_consumer_groups([group_id], request_timeout=self.timeout_s)
        self._result(futures[group_id], f"Cannot delete group '{group_id}'")

    # -- security ----------------------------------------------------------------------------

    def acls(self) -> list[Acl] | None:
        """Every ACL, or None when the cluster has no authorizer (SECURITY_DISABLED)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType,
                                           ResourcePatternType, ResourceType)
        any_acl = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                   AclOperation.ANY, AclPermissionType.ANY)
        try:
            bindings = self.admin.describe_acls(any_acl, request_timeout=self.timeout_s).result(
                timeout=self.timeout_s + 5)
        except KafkaException as e:
            if e.args[0].code() == SECURITY_DISABLED:
                return None
            raise ConsoleError(_sentence(e, "Cannot list ACLs")) from None
        if not bindings and not self._authorizer_on():
            return None
        return sorted((Acl(b.restype.name, b.name, b.resource_pattern_type.name, b.principal,
                           b.host, b.operation.name, b.permission_type.name) for b in bindings),
                      key=lambda a: (a.resource_type, a.resource_name, a.principal, a.operation))

    def _authorizer_on(self) -> bool:
        """librdkafka answers an empty list, not SECURITY_DISABLED, when DescribeAcls fails as a
        whole; DeleteAcls reports it per filter. So ask to delete an ACL that cannot exist (a
        principal made up here): SECURITY_DISABLED means no authorizer, anything else means one."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType,
                                           ResourcePatternType, ResourceType)
        nothing = AclBindingFilter(ResourceType.TOPIC, f"logbroker-console-probe-{uuid.uuid4().hex}",
                                   ResourcePatternType.LITERAL,
                                   f"User:logbroker-console-probe-{uuid.uuid4().hex}", None,
                                   AclOperation.ANY, AclPermissionType.ANY)
        futures = self.admin.delete_acls([nothing], request_timeout=self.timeout_s)
        for future in futures.values():
            try:
                future.result(timeout=self.timeout_s + 5)
            except KafkaException as e:
                return e.args[0].code() != SECURITY_DISABLED
            except TimeoutError:
                return True
        return True

    def create_acl(self, acl: Acl) -> None:
        futures = self.admin.create_acls([_binding(acl)], request_timeout=self.timeout_s)
        for future in futures.values():
            self._result(future, "Cannot create the ACL")

    def delete_acl(self, acl: Acl) -> None:
        from confluent_kafka.admin import AclBindingFilter
        b = _binding(acl)
        filter_ = AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal,
                                   b.host, b.operation, b.permission_type)
        futures = self.admin.delete_acls([filter_], request_timeout=self.timeout_s)
        for future in futures.values():
            self._result(future, "Cannot delete the ACL")

    def scram_users(self) -> list[ScramUser]:
        result = self._result(self.admin.describe_user_scram_credentials(
            request_timeout=self.timeout_s), "Cannot list SCRAM users")
        return sorted((ScramUser(name, tuple((i.mechanism.name, i.iterations)
                                             for i in d.scram_credential_infos))
                       for name, d in result.items()), key=lambda u: u.name)

    def upsert_scram_user(self, name: str, *, mechanism: str, password: str,
                          iterations: int = 8192) -> None:
        from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                           UserScramCredentialUpsertion)
        info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], iterations)
        futures = self.admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(name, info, password.encode())],
            request_timeout=self.timeout_s)
        for future in futures.values():
            self._result(future, f"Cannot set the SCRAM credential of '{name}'")

    def delete_scram_user(self, name: str, *, mechanism: str) -> None:
        from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion
        futures = self.admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(name, ScramMechanism[mechanism.replace("-", "_")])],
            request_timeout=self.timeout_s)
        for future in futures.values():
            self._result(future, f"Cannot delete the SCRAM credential of '{name}'")


def _assigned(description) -> list[tuple[str, tuple[str, int]]]:
    """(member id, (topic, partition)) for each partition assigned to a member of the group."""
    return [(m.member_id, (tp.topic, tp.partition)) for m in description.members
            for tp in (m.assignment.topic_partitions if m.assignment else [])]


def _group_info(group_id: str, description, committed: dict[tuple[str, int], int],
                ends: dict[tuple[str, int], int]) -> GroupInfo:
    owner = {tp: member for member, tp in _assigned(description)}
    members = tuple(sorted((Member(m.member_id, m.client_id, m.host, m.group_instance_id,
                                   tuple(sorted(tp for member, tp in _assigned(description)
                                                if member == m.member_id)))
                            for m in description.members), key=lambda m: m.member_id))
    offsets = tuple(GroupOffset(t, p, committed.get((t, p)), ends.get((t, p)), owner.get((t, p)))
                    for t, p in sorted(set(committed) | set(owner)))
    coordinator = description.coordinator
    return GroupInfo(group_id, _state(description.state), description.partition_assignor or "",
                     Broker(coordinator.id, coordinator.host, coordinator.port, coordinator.rack,
                            False) if coordinator else None, members, offsets)


def _source_name(source) -> str:
    from confluent_kafka.admin import ConfigSource
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def _state(state) -> str:
    return GROUP_STATES.get(getattr(state, "name", str(state)), "Unknown")


def _message(record) -> Message:
    kind, timestamp = record.timestamp()
    return Message(record.partition(), record.offset(),
                   timestamp if kind != 0 else None, TIMESTAMP_TYPES.get(kind, str(kind)),
                   record.key(), record.value(), tuple(record.headers() or ()))


def _binding(acl: Acl):
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)
    try:
        return AclBinding(ResourceType[acl.resource_type], acl.resource_name,
                          ResourcePatternType[acl.pattern_type], acl.principal, acl.host,
                          AclOperation[acl.operation], AclPermissionType[acl.permission])
    except (KeyError, ValueError, TypeError) as e:
        raise ConsoleError(f"Invalid ACL: {e}.") from None
