"""The confluent-kafka side shared by the Kafka-style tools (`logbroker.cli`) and the web
console: client configs built from Kafka properties, the client errors a tool reports, and
client errors as one sentence.

Both talk to any Kafka cluster through confluent-kafka (librdkafka), never through logbroker's
own code, so they are as good a check of a broker as any other client.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from logbroker.errors import BY_CODE

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# librdkafka logs every failed connection attempt; a tool reports the failure once, itself.
_librdkafka_log = logging.getLogger("logbroker.admin_client.librdkafka")
_librdkafka_log.addHandler(logging.NullHandler())
_librdkafka_log.propagate = False

# Java client property names that librdkafka spells differently or does not have. A value of
# None drops the property (it has no meaning here); a tuple renames it, converting the value.
_JAVA_ONLY_PROPERTIES: dict[str, tuple[str, object] | None] = {
    "key.serializer": None,
    "value.serializer": None,
    "key.deserializer": None,
    "value.deserializer": None,
    "max.block.ms": None,
    "buffer.memory": ("queue.buffering.max.kbytes", lambda v: str(max(1, int(v) // 1024))),
}


class ClientErrors:
    """librdkafka's `error_cb`: keeps the client-level errors (a broker down, all brokers down)
    that it reports while the client polls."""

    def __init__(self) -> None:
        self.errors: list[object] = []

    def __call__(self, error: object) -> None:
        self.errors.append(error)


def client_config(bootstrap: str, *layers: Mapping[str, str]) -> dict[str, object]:
    """A confluent-kafka config: bootstrap servers, then each layer of properties on top (later
    layers win), with Java-only property names translated or dropped. Its `error_cb` is a
    ClientErrors, which `ensure_reachable` reads."""
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "logger": _librdkafka_log,
                                 "error_cb": ClientErrors()}
    for layer in layers:
        for key, value in layer.items():
            if key in _JAVA_ONLY_PROPERTIES:
                translation = _JAVA_ONLY_PROPERTIES[key]
                if translation is None:
                    continue
                key, convert = translation
                value = convert(value)
            config[key] = value
    return config


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


def error_sentence(error: object) -> str:
    """A confluent-kafka error (KafkaError, KafkaException, or anything else) as one sentence that
    ends with Kafka's name for it: `Topic 't' already exists (TOPIC_ALREADY_EXISTS).`"""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        code = error.code()
        name = BY_CODE[code].name if code > 0 and code in BY_CODE else error.name()
        message = error.str().removeprefix("Broker: ").rstrip(". ") or name
        return f"{message} ({name})."
    message = str(error).rstrip(". ") or type(error).__name__
    return f"{message}."


def unreachable(error: object, bootstrap: str) -> bool:
    """Whether an error means no broker answered at all."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    return isinstance(error, KafkaError) and error.code() in (
        KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE)
