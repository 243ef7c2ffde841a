"""The `_schemas` topic on a real broker: Confluent's bytes, a history written by another registry
read back, and a kill -9 that loses no acknowledged registration and reuses no id."""

from __future__ import annotations

import json

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic
from registry_http import Registry

from logbroker.testing import SCHEMA_REGISTRY_OVERRIDES, TEST_OVERRIDES, BrokerProcess


def read_topic(bootstrap: str, topic: str = "_schemas") -> list[tuple[bytes, bytes | None]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10)
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        records = []
        while len(records) < high:
            message = consumer.poll(10)
            assert message is not None and message.error() is None, message and message.error()
            records.append((message.key(), message.value()))
        return records
    finally:
        consumer.close()


def registry_broker(tmp_path, **overrides) -> BrokerProcess:
    return BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, **SCHEMA_REGISTRY_OVERRIDES, **overrides})


def test_the_topic_holds_confluents_bytes(tmp_path):
    with registry_broker(tmp_path) as broker:
        registry = Registry(broker.schema_registry_url())
        registry.register("orders-value", '{"type": "string"}')
        registry.put("/config", {"compatibility": "FULL"})
        registry.put("/mode/orders-value", {"mode": "READONLY"})
        registry.delete("/mode/orders-value")
        registry.delete("/subjects/orders-value")
        assert read_topic(broker.bootstrap) == [
            (b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}',
             b'{"subject":"orders-value","version":1,"id":1,"schema":"\\"string\\"","deleted":false}'),
            (b'{"keytype":"CONFIG","magic":0}', b'{"compatibilityLevel":"FULL"}'),
            (b'{"keytype":"MODE","subject":"orders-value","magic":0}', b'{"subject":"orders-value","mode":"READONLY"}'),
            (b'{"keytype":"MODE","subject":"orders-value","magic":0}', None),
            (b'{"keytype":"DELETE_SUBJECT","subject":"orders-value","magic":0}', b'{"subject":"orders-value","version":1}'),
        ]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = confluent_kafka.admin.ConfigResource("topic", "_schemas")
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
        assert configs["cleanup.policy"].value == "compact"
        metadata = admin.list_topics("_schemas", timeout=10)
        assert len(metadata.topics["_schemas"].partitions) == 1


def test_a_history_written_by_confluents_registry_is_served(tmp_path):
    """Records as Confluent's registry writes them, produced before the registry starts."""
    history = [
        (b'{"keytype":"SCHEMA","subject":"a","version":1,"magic":1}',
         b'{"subject":"a","version":1,"id":21,"schema":"\\"string\\"","deleted":false}'),
        (b'{"keytype":"SCHEMA","subject":"b","version":1,"magic":1}',
         b'{"subject":"b","version":1,"id":40,"schemaType":"JSON","schema":"{\\"type\\":\\"object\\"}","deleted":false}'),
        (b'{"keytype":"NOOP","magic":0}', None),
        (b'{"keytype":"CONFIG","subject":"a","magic":0}', b'{"subject":"a","compatibilityLevel":"NONE"}'),
        (b'{"keytype":"SCHEMA","subject":"a","version":2,"magic":1}',
         b'{"subject":"a","version":2,"id":22,"schema":"\\"int\\"","deleted":false}'),
        (b'{"keytype":"DELETE_SUBJECT","subject":"b","magic":0}', b'{"subject":"b","version":1}'),
        (b"not json", b"{}"),
        # a default Confluent's registry accepted before it checked defaults: it still loads
        (b'{"keytype":"SCHEMA","subject":"old","version":1,"magic":1}',
         b'{"subject":"old","version":1,"id":30,"schema":"{\\"type\\":\\"record\\",\\"name\\":\\"R\\",'
         b'\\"fields\\":[{\\"name\\":\\"a\\",\\"type\\":\\"int\\",\\"default\\":\\"x\\"}]}","deleted":false}'),
    ]
    broker = BrokerProcess(tmp_path, overrides=TEST_OVERRIDES).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("_schemas", 1, 1, config={"cleanup.policy": "compact"})])["_schemas"].result(10)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for key, value in history:
            producer.produce("_schemas", value, key)
        assert producer.flush(10) == 0
        broker.stop()
        broker.overrides.update(SCHEMA_REGISTRY_OVERRIDES)
        broker.start()
        registry = Registry(broker.schema_registry_url())
        assert registry.get("/subjects") == (200, ["a", "old"])
        assert registry.get("/subjects?deleted=true") == (200, ["a", "b", "old"])
        assert registry.get("/subjects/a/versions/2")[1] == {"subject": "a", "version": 2, "id": 22, "schema": '"int"'}
        assert registry.get("/schemas/ids/40") == (200, {"schemaType": "JSON", "schema": '{"type":"object"}'})
        assert registry.get("/config/a") == (200, {"compatibilityLevel": "NONE"})
        assert registry.register("c", '"long"') == 41  # past the largest id read
        evolved = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": 0}]})
        assert registry.register("old", evolved) == 42
        assert "Skipping the record at offset 6 of _schemas" in broker.new_log_text()
    finally:
        broker.kill()


def test_kill_9_loses_no_acknowledged_registration_and_reuses_no_id(tmp_path):
    broker = registry_broker(tmp_path).start()
    try:
        registry = Registry(broker.schema_registry_url())
        registry.put("/config", {"compatibility": "NONE"})  # each version is another enum
        ids = {}
        for n in range(30):
            subject = f"subject-{n % 4}"
            ids[(subject, n)] = registry.register(subject, json.dumps({"type": "enum", "name": f"E{n}", "symbols": ["A"]}))
        broker.kill()
        broker.start()
        registry = Registry(broker.schema_registry_url())
        for (subject, n), schema_id in ids.items():
            status, body = registry.post(f"/subjects/{subject}",
                                         {"schema": json.dumps({"type": "enum", "name": f"E{n}", "symbols": ["A"]})})
            assert (status, body["id"]) == (200, schema_id)
        assert sorted(ids.values()) == list(range(1, 31))
        assert registry.register("after", '"bytes"') == 31
        assert registry.get("/subjects/subject-0/versions") == (200, list(range(1, 9)))
    finally:
        broker.kill()
