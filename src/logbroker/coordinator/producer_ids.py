"""Producer ids for InitProducerId, handed out from blocks claimed in the metadata store.

Kafka's ProducerIdManager: ids come in blocks (PRODUCER_ID_BLOCK_SIZE, 1000); a block is claimed in
the store (a file on one node, /latest_producer_id_block in ZooKeeper) before any id of it is
given out, so no id is ever handed out twice, across restarts and brokers alike.
"""

from __future__ import annotations

from logbroker.metadata.local_store import LocalMetadataStore

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: LocalMetadataStore) -> None:
        self._store = store
        self._next = 0
        self._end = 0

    def generate_producer_id(self) -> int:
        if self._next >= self._end:
            self._next = self._store.claim_producer_id_block(PRODUCER_ID_BLOCK_SIZE)
            self._end = self._next + PRODUCER_ID_BLOCK_SIZE
        producer_id = self._next
        self._next += 1
        return producer_id
