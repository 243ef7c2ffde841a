"""SchemasTopicReader: following the `_schemas` topic as a consumer would, on the event loop.

Fetch requests (as a consumer: replica id -1, read up to the high watermark) go to the partition's
leader over the broker's own client connection with the inter-broker listener's security, from
`position` on; each answer's records (control batches skipped, offsets below `position` dropped)
go to `on_records` with the position after them and the leader's high watermark. A failure (no
leader yet, a closed connection, an error code) is logged once per change and retried after
BACKOFF_S with a fresh connection; a leader change is followed by asking `leader_address` again.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable

from kio.schema.fetch.v12 import request as fetch_request

from logbroker.client import ClientSecurity, ConnectionClosedError, KafkaConnection
from logbroker.errors import KafkaError, error_for_code
from logbroker.log_limits import StateChangeLog
from logbroker.records.record_batch import iter_record_batches
from logbroker.types import TopicPartition

log = logging.getLogger("io.confluent.kafka.schemaregistry.storage.KafkaStoreReaderThread")

BACKOFF_S = 0.2
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 16 * 1024 * 1024

Records = list[tuple[int, bytes | None, bytes | None]]


class SchemasTopicReader:
    """`leader_address()` is (host, port) of the partition's leader, None while it has none;
    `on_records(records, next_position, high_watermark)` runs on the event loop."""

    def __init__(self, tp: TopicPartition, *, leader_address: Callable[[], tuple[str, int] | None],
                 security: ClientSecurity, client_id: str,
                 on_records: Callable[[Records, int, int], None]) -> None:
        self.tp = tp
        self.leader_address = leader_address
        self.security = security
        self.client_id = client_id
        self.on_records = on_records
        self.position = 0
        self._caught_up = False  # long-poll only once there is nothing left to read
        self._connection: KafkaConnection | None = None
        self._failures = StateChangeLog(log, f"Reading {tp}")

    async def run(self) -> None:
        """Follow the topic until cancelled."""
        try:
            while True:
                try:
                    await self._fetch_once()
                except (ConnectionClosedError, OSError, KafkaError, TimeoutError) as exc:
                    self._failures.failed(exc, logging.INFO)
                    await self._disconnect()
                    await asyncio.sleep(BACKOFF_S)
        finally:
            await self._disconnect()

    async def _fetch_once(self) -> None:
        address = self.leader_address()
        if address is None:
            raise KafkaError(f"{self.tp} has no leader yet")
        if self._connection is None or (self._connection.host, self._connection.port) != address:
            await self._disconnect()
            self._connection = KafkaConnection(*address, client_id=self.client_id, security=self.security)
        partition = fetch_request.FetchPartition(
            partition=self.tp.partition, current_leader_epoch=-1, fetch_offset=self.position,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=FETCH_MAX_BYTES)
        response = await self._connection.request(fetch_request.FetchRequest(
            cluster_id=None, replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=FETCH_MAX_WAIT_MS if self._caught_up else 0),
            min_bytes=1, max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
            topics=(fetch_request.FetchTopic(topic=self.tp.topic, partitions=(partition,)),),
            forgotten_topics_data=(), rack_id=""))
        data = response.responses[0].partitions[0]
        error = error_for_code(int(data.error_code))
        if error is not None:
            raise error
        records: Records = []
        next_position = self.position
        for batch in iter_record_batches(data.records or b""):
            if batch.last_offset < self.position:
                continue
            if not batch.header.is_control:
                records.extend((r.offset, r.key, r.value) for r in batch.records() if r.offset >= self.position)
            next_position = max(next_position, batch.next_offset)
        self._failures.succeeded()
        self.position = next_position
        self._caught_up = next_position >= int(data.high_watermark)
        self.on_records(records, next_position, int(data.high_watermark))

    async def _disconnect(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()
