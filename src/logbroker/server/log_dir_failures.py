"""The controller's record of replicas lost with a failed log dir (Kafka's ZooKeeper-mode
LogDirEventNotification handling).

A broker whose log dir fails stops hosting that dir's partitions and leaves a notice under
`/log_dir_event_notification` (metadata/zk_log_dir_events.py). The controller takes each notice
and asks that broker, with DescribeLogDirs over the inter-broker listener, what it still holds:
every partition assigned to it that is in none of its online dirs is offline there — Kafka's
controller learns the same from the broker's KAFKA_STORAGE_ERROR answers to LeaderAndIsr. Its
elections then treat the broker as dead for those partitions only: it leaves their ISR, and
where it led, an in-sync replica on another broker takes over. The rest of the broker serves on.

The record holds until the broker registers again (a restart brings the dir back or moves its
partitions to the remaining dirs): an entry is kept with the broker epoch it was made under and
ignored once the broker's epoch has moved. Worker thread only (the cluster's controller thread).
"""

from __future__ import annotations

import asyncio
import logging

from logbroker.client import PLAINTEXT, KafkaConnection
from logbroker.errors import KafkaError
from logbroker.log_dir_usage import describe_log_dirs
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.controller.KafkaController")

DESCRIBE_TIMEOUT_S = 30.0


class LogDirFailures:
    def __init__(self, cluster) -> None:  # server.zk_cluster.ZooKeeperCluster
        self._cluster = cluster
        self._offline: dict[int, tuple[int, frozenset[TopicPartition]]] = {}  # broker → (epoch, partitions)
        self.pending: list[str] = []  # the notices last seen, for a broker that becomes controller

    def handle(self, names: list[str]) -> bool:
        """Take the notices `names` (controller only) and record what each broker lost; True if
        the record changed (the caller then runs an election pass)."""
        zk = self._cluster.zk
        changed = False
        for name in names:
            broker_id = zk.take_log_dir_event(name)
            if broker_id is None:
                continue
            epoch = zk.broker_epochs().get(broker_id)
            if epoch is None:
                continue  # gone: its registration's end moves everything it led anyway
            lost = self._offline_partitions(broker_id)
            if lost is None:
                continue
            log.info("Broker %d has a failed log dir: its replicas of %d partition(s) are offline (%s)",
                     broker_id, len(lost), ", ".join(map(str, sorted(lost)[:10])))
            self._offline[broker_id] = (epoch, frozenset(lost))
            changed = True
        return changed

    def offline_brokers(self, tp: TopicPartition, broker_epochs: dict[int, int]) -> set[int]:
        """The brokers whose replica of `tp` is offline in their current registration."""
        return {b for b, (epoch, lost) in self._offline.items()
                if tp in lost and broker_epochs.get(b) == epoch}

    def _offline_partitions(self, broker_id: int) -> set[TopicPartition] | None:
        """The partitions assigned to `broker_id` that none of its online log dirs holds; None
        when it cannot be asked (logged; a later notice or its restart settles it)."""
        cluster = self._cluster
        future = asyncio.run_coroutine_threadsafe(self._describe(broker_id), cluster.loop)
        try:
            results = future.result(DESCRIBE_TIMEOUT_S)
        except (KafkaError, OSError, TimeoutError, asyncio.TimeoutError) as e:
            future.cancel()
            log.warning("Could not ask broker %d for its log dirs after its log dir failure notice: %s",
                        broker_id, e)
            return None
        online = {TopicPartition(t.name, p.partition_index)
                  for d in results if not int(d.error_code) for t in d.topics for p in t.partitions}
        assigned = {TopicPartition(name, partition) for name, info in cluster.zk.topics().items()
                    for partition, replicas in info.assignment.items() if broker_id in replicas}
        return assigned - online

    async def _describe(self, broker_id: int) -> list:
        broker = self._cluster.broker
        address = broker.inter_broker_endpoint(broker_id)
        if address is None:
            raise KafkaError(f"broker {broker_id} has no inter-broker endpoint")
        connection = KafkaConnection(address.host, address.port, client_id=f"controller-{broker.broker_id}",
                                     timeout_s=DESCRIBE_TIMEOUT_S, security=broker.inter_broker_security or PLAINTEXT)
        try:
            return await describe_log_dirs(connection)
        finally:
            await connection.close()
