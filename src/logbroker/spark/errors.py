"""Errors the data source raises, each with a message a Spark user can act on."""

from __future__ import annotations

from confluent_kafka import KafkaError


class OptionError(ValueError):
    """An option is missing, malformed or contradicts another one; the message names it."""


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (deleted by retention, a topic deleted, a log truncated).

    Raised only with failOnDataLoss=true (the default); with false the source skips ahead and
    logs a warning, as Spark's Kafka source does.
    """


class KafkaClientError(RuntimeError):
    """The Kafka client reported an error the source cannot work around (timeout, unknown topic)."""


# Broker error codes Kafka's Java clients retry (their exceptions are RetriableException): a
# partition without a leader for a moment, a leader that moved, a request that timed out on a
# busy broker. librdkafka flags its own errors retriable, but not the per-partition codes it hands
# back from a broker's answer (`KafkaError.retriable()` is False for those).
RETRIABLE_BROKER_CODES = frozenset({
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.REPLICA_NOT_AVAILABLE, KafkaError.NETWORK_EXCEPTION,
    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.KAFKA_STORAGE_ERROR, KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE,
})


def retriable(error: KafkaError) -> bool:
    """Whether a client or broker error is one to retry (with fresh metadata) until a deadline."""
    return error.retriable() or error.code() in RETRIABLE_BROKER_CODES


class FieldMismatch(ValueError):
    """A value does not fit the schema it is encoded with; `path` names the field inside the
    column (e.g. `items[2].price`, empty for the column itself)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}" if path else why)
        self.path = path
        self.why = why


class UnencodableRowError(ValueError):
    """A row's key or value does not fit its writer schema. Writes never drop or null such a
    row: the task fails, and the message names the column, the field, the schema and why."""
