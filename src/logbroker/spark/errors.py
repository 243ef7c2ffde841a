"""Errors the data source raises, each with a message a Spark user can act on."""

from __future__ import annotations


class OptionError(ValueError):
    """An option is missing, malformed or contradicts another one; the message names it."""


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (deleted by retention, a topic deleted, a log truncated).

    Raised only with failOnDataLoss=true (the default); with false the source skips ahead and
    logs a warning, as Spark's Kafka source does.
    """


class KafkaClientError(RuntimeError):
    """The Kafka client reported an error the source cannot work around (timeout, unknown topic)."""
