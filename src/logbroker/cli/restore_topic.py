"""`logbroker restore-topic`: recreate a deleted or lost tiered topic from its remote segments
(remote/restore.py does the copying). Kafka has no such tool; the options follow its style."""

from __future__ import annotations

import asyncio
import time

import click

from logbroker.cli.common import (
    admin_client,
    bootstrap_option,
    fail,
    fail_with,
    load_properties_file,
    parse_key_values,
)
from logbroker.errors import KafkaError
from logbroker.types import TopicPartition

WAIT_S = 60.0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--topic", required=True, help="The topic to restore (it must not exist).")
@click.option("--topic-id", metavar="ID", help="The old topic id, when the store holds the topic under several.")
@click.option("--replication-factor", type=int, default=-1, show_default=True,
              help="Replicas of each partition (-1: the broker's default.replication.factor).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE",
              help="A topic config of the restored topic (remote.storage.enable=true is always set).")
@click.option("--store-config", "store_configs", multiple=True, metavar="KEY=VALUE",
              help="The brokers' remote store settings: remote.log.storage.manager.class.name and rsm.config.*.")
@click.option("--store-config-file", metavar="FILE",
              help="A properties file with those settings (the brokers' server.properties will do).")
@click.option("--command-config", metavar="FILE", help="Admin client properties (security).")
def restore_topic(bootstrap_server: str, topic: str, topic_id: str | None, replication_factor: int,
                  configs: tuple[str, ...], store_configs: tuple[str, ...], store_config_file: str | None,
                  command_config: str | None) -> None:
    """Create TOPIC again and give it the segments the remote store holds of it: consumers then
    read its whole history, and new records follow on after the last restored offset."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import NewTopic

    from logbroker.remote import restore
    from logbroker.remote.storage_manager import RemoteStorageManager

    store = {**load_properties_file(store_config_file, "--store-config-file"),
             **parse_key_values(store_configs, "--store-config")}
    try:
        rsm = RemoteStorageManager.from_config(
            store.get("remote.log.storage.manager.class.name"),
            {k[len("rsm.config."):]: v for k, v in store.items() if k.startswith("rsm.config.")})
        old_id, partitions = asyncio.run(restore.find_topic(rsm, topic, topic_id))
    except KafkaError as exc:
        fail(str(exc))
    count = max(partitions) + 1
    admin = admin_client(bootstrap_server, command_config)
    topic_configs = {**parse_key_values(configs, "--config"), "remote.storage.enable": "true"}
    try:
        admin.create_topics([NewTopic(topic, count, replication_factor, config=topic_configs)])[topic].result(30)
        new_id = _kafka_id(admin.describe_topics(TopicCollection([topic]))[topic].result(30).topic_id)
    except Exception as exc:  # noqa: BLE001 - the admin client's KafkaException, in one sentence
        fail_with(exc.args[0] if exc.args else exc, bootstrap_server, what=f"Creating topic {topic}")
    restored = {}
    try:
        for partition in partitions:
            tp = TopicPartition(topic, partition)
            restored[partition] = asyncio.run(restore.copy_partition(rsm, tp, old_id, new_id))
    except KafkaError as exc:
        fail(f"Copying the segments of {topic} failed: {exc}")
    _wait_until_served(admin, topic, partitions)
    click.echo(f"Restored topic {topic} (topic id {new_id}, was {old_id}) with {count} partition(s): "
               + ", ".join(f"{p}: {n} segment(s)" for p, n in sorted(restored.items())))


def _kafka_id(value) -> str:
    """A confluent-kafka Uuid in Kafka's form (URL-safe base64; its str() is the standard one)."""
    import uuid

    from logbroker.storage.checkpoints import uuid_to_kafka_str
    bits = ((value.get_most_significant_bits() & (1 << 64) - 1) << 64) | (value.get_least_significant_bits() & (1 << 64) - 1)
    return uuid_to_kafka_str(uuid.UUID(int=bits))


def _wait_until_served(admin, topic: str, partitions: list[int]) -> None:
    """Until every restored partition's leader has found its segments (its earliest offset is
    below its latest), or WAIT_S."""
    from confluent_kafka import TopicPartition as CkTopicPartition
    from confluent_kafka.admin import OffsetSpec

    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        earliest = {tp.partition: f.result(10).offset for tp, f in admin.list_offsets(
            {CkTopicPartition(topic, p): OffsetSpec.earliest() for p in partitions}).items()}
        latest = {tp.partition: f.result(10).offset for tp, f in admin.list_offsets(
            {CkTopicPartition(topic, p): OffsetSpec.latest() for p in partitions}).items()}
        if all(latest[p] > earliest[p] for p in partitions):
            return
        time.sleep(0.2)
    fail(f"The leaders of {topic} did not pick up the restored segments within {WAIT_S:.0f} s")
