"""map_append_error: what a client hears when an append to __consumer_offsets fails (Kafka's
GroupMetadataManager mapping for offset commits and for group metadata)."""

from __future__ import annotations

import pytest

from logbroker.coordinator.offsets_log import map_append_error
from logbroker.errors import (
    CorruptMessageError,
    KafkaStorageError,
    MessageTooLargeError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)


@pytest.mark.parametrize("error, for_offsets, expected", [
    (NotEnoughReplicasError(), True, "COORDINATOR_NOT_AVAILABLE"),
    (NotEnoughReplicasAfterAppendError(), False, "COORDINATOR_NOT_AVAILABLE"),
    (UnknownTopicOrPartitionError(), True, "COORDINATOR_NOT_AVAILABLE"),
    (NotLeaderOrFollowerError(), True, "NOT_COORDINATOR"),
    (KafkaStorageError(), False, "NOT_COORDINATOR"),
    (MessageTooLargeError(), True, "INVALID_COMMIT_OFFSET_SIZE"),
    (MessageTooLargeError(), False, "UNKNOWN_SERVER_ERROR"),
    (RequestTimedOutError(), True, "REQUEST_TIMED_OUT"),
    (RequestTimedOutError(), False, "REBALANCE_IN_PROGRESS"),
    (CorruptMessageError(), True, "CORRUPT_MESSAGE"),
])
def test_append_errors_map_as_kafkas_group_metadata_manager(error, for_offsets, expected):
    assert map_append_error(error, for_offsets=for_offsets).name == expected
