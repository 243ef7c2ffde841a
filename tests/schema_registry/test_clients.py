"""confluent-kafka's SchemaRegistryClient, AsyncSchemaRegistryClient and Avro serializers against a
real broker serving the registry: records produced and consumed through the broker round-trip."""

from __future__ import annotations

import asyncio
import json
import uuid

import confluent_kafka
import pytest
from confluent_kafka.schema_registry import AsyncSchemaRegistryClient, Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from logbroker.testing import SCHEMA_REGISTRY_OVERRIDES, TEST_OVERRIDES, BrokerProcess

USER = {"type": "record", "name": "User", "namespace": "example",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
USER_V2 = {**USER, "fields": USER["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}


def protobuf_user_class():
    """example.User {string name = 1; int32 age = 2; google.protobuf.Timestamp seen = 3;}, built
    at run time (no protoc): the well-known Timestamp is imported, not registered."""
    file = descriptor_pb2.FileDescriptorProto(name="example/user.proto", package="example", syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    message = file.message_type.add(name="User")
    message.field.add(name="name", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    message.field.add(name="age", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32)
    message.field.add(name="seen", number=3, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                      type_name=".google.protobuf.Timestamp")
    pool = descriptor_pool.DescriptorPool()
    timestamp_file = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp_file)
    pool.Add(timestamp_file)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("example.User"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("clients"),
                            overrides={**TEST_OVERRIDES, **SCHEMA_REGISTRY_OVERRIDES})
    process.start()
    process.registry_url = process.schema_registry_url()
    yield process
    process.kill()


def consume_all(bootstrap: str, topic: str, count: int) -> list:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        messages = []
        while len(messages) < count:
            message = consumer.poll(10)
            assert message is not None, f"got {len(messages)} of {count}"
            assert message.error() is None, message.error()
            messages.append(message)
        return messages
    finally:
        consumer.close()


def test_avro_records_round_trip_through_the_broker(broker):
    topic = f"users-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": broker.registry_url})
    serializer = AvroSerializer(client, json.dumps(USER))
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    users = [{"name": f"user-{n}", "age": n} for n in range(100)]
    for user in users:
        producer.produce(topic, serializer(user, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(10) == 0

    registered = client.get_latest_version(f"{topic}-value")
    assert registered.version == 1
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": broker.registry_url}))
    messages = consume_all(broker.bootstrap, topic, len(users))
    assert all(m.value()[:5] == b"\x00" + registered.schema_id.to_bytes(4, "big") for m in messages)
    assert [deserializer(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in messages] == users


def test_protobuf_records_round_trip_through_the_broker(broker):
    user_class = protobuf_user_class()
    topic = f"pb-users-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": broker.registry_url})
    context = SerializationContext(topic, MessageField.VALUE)
    serializer = ProtobufSerializer(user_class, client, {"use.deprecated.format": False})
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    users = []
    for n in range(50):
        user = user_class(name=f"user-{n}", age=n)
        user.seen.seconds = 1_700_000_000 + n
        users.append(user)
        producer.produce(topic, serializer(user, context))
    assert producer.flush(10) == 0
    registered = client.get_latest_version(f"{topic}-value")
    assert (registered.version, registered.schema.schema_type) == (1, "PROTOBUF")
    assert "google.protobuf.Timestamp seen = 3;" in registered.schema.schema_str
    deserializer = ProtobufDeserializer(user_class, {"use.deprecated.format": False})
    messages = consume_all(broker.bootstrap, topic, len(users))
    assert [deserializer(m.value(), context) for m in messages] == users


def test_json_schema_records_round_trip_through_the_broker(broker):
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "User", "type": "object",
              "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name"]}
    topic = f"json-users-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": broker.registry_url})
    context = SerializationContext(topic, MessageField.VALUE)
    serializer = JSONSerializer(json.dumps(schema), client)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    users = [{"name": f"user-{n}", "age": n} for n in range(50)]
    for user in users:
        producer.produce(topic, serializer(user, context))
    assert producer.flush(10) == 0
    registered = client.get_latest_version(f"{topic}-value")
    assert (registered.version, registered.schema.schema_type) == (1, "JSON")
    deserializer = JSONDeserializer(None, schema_registry_client=client)
    messages = consume_all(broker.bootstrap, topic, len(users))
    assert [deserializer(m.value(), context) for m in messages] == users


def test_an_evolved_writer_is_read_with_the_old_readers_schema(broker):
    topic = f"evolving-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": broker.registry_url})
    context = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(client, json.dumps(USER))(({"name": "a", "age": 1}), context)
    v2 = AvroSerializer(client, json.dumps(USER_V2))({"name": "b", "age": 2, "email": "b@x"}, context)
    assert client.get_versions(f"{topic}-value") == [1, 2]
    reader = AvroDeserializer(client, json.dumps(USER))
    assert reader(v1, context) == {"name": "a", "age": 1}
    assert reader(v2, context) == {"name": "b", "age": 2}


def test_the_client_api_answers_as_confluents_registry(broker):
    client = SchemaRegistryClient({"url": broker.registry_url})
    subject = f"client-{uuid.uuid4().hex[:8]}/value"
    schema = Schema(json.dumps(USER), "AVRO")
    schema_id = client.register_schema(subject, schema)
    assert client.register_schema(subject, schema) == schema_id
    assert subject in client.get_subjects()
    assert client.lookup_schema(subject, schema).version == 1
    assert client.get_schema(schema_id).schema_type == "AVRO"
    assert client.test_compatibility(subject, Schema(json.dumps(USER_V2), "AVRO")) is True
    incompatible = {**USER, "fields": USER["fields"] + [{"name": "x", "type": "int"}]}
    assert client.test_compatibility(subject, Schema(json.dumps(incompatible), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(incompatible), "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    client.set_compatibility(subject, "FULL")
    assert client.get_compatibility(subject) == "FULL"
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_version(subject, 9)
    assert missing.value.error_code == 40402
    assert client.delete_subject(subject) == [1]
    assert client.delete_subject(subject, permanent=True) == [1]
    assert subject not in client.get_subjects()


def test_the_async_client_registers_and_reads(broker):
    async def run():
        client = AsyncSchemaRegistryClient({"url": broker.registry_url})
        subject = f"async-{uuid.uuid4().hex[:8]}"
        schema_id = await client.register_schema(subject, Schema(json.dumps(USER), "AVRO"))
        fetched = await client.get_schema(schema_id)
        latest = await client.get_latest_version(subject)
        return schema_id, fetched, latest
    schema_id, fetched, latest = asyncio.run(run())
    assert json.loads(fetched.schema_str) == USER
    assert (latest.schema_id, latest.version) == (schema_id, 1)
