"""What the ACL tests share: PLAIN users (admin is the super user), client configs for
confluent-kafka and kafka-python, and short ways to create topics and ACLs and to produce."""

from __future__ import annotations

import uuid

import confluent_kafka
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from logbroker.testing import BrokerProcess

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
SASL_OVERRIDES = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "security.inter.broker.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "group.initial.rebalance.delay.ms": "0",
    "authorizer.class.name": AUTHORIZER,
    "super.users": "User:admin",
}
ANY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)


def sasl(broker: BrokerProcess, user: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user]}


def kafka_python_sasl(broker: BrokerProcess, user: str) -> dict:
    return {"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user]}


_ADMINS: dict[tuple[str, str], AdminClient] = {}


def admin(broker: BrokerProcess, user: str = "admin") -> AdminClient:
    """One AdminClient per broker and user, kept alive: librdkafka fails the futures of a client
    that is destroyed before they complete."""
    key = (broker.bootstrap, user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(sasl(broker, user))
    return _ADMINS[key]


def forget_admins() -> None:
    """Drop the cached AdminClients (before their brokers go, so they do not log reconnects)."""
    _ADMINS.clear()


def new_topic(broker: BrokerProcess, prefix: str = "t") -> str:
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    admin(broker).create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def allow(principal: str, operation: AclOperation, name: str, *,
          resource: ResourceType = ResourceType.TOPIC,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


def create_acls(broker: BrokerProcess, *bindings: AclBinding) -> None:
    for future in admin(broker).create_acls(list(bindings), request_timeout=30).values():
        future.result()


def produce(broker: BrokerProcess, user: str, topic: str, count: int = 3) -> list[int]:
    """The delivery error code of each record a confluent producer sends (0: delivered). (Codes,
    not KafkaError objects: comparing one of those with None leaves a Python error set.)"""
    producer = confluent_kafka.Producer({**sasl(broker, user), "message.timeout.ms": 15_000,
                                         "enable.idempotence": False})
    codes = []
    for i in range(count):
        producer.produce(topic, f"{user}-{i}".encode(),
                         on_delivery=lambda e, m: codes.append(e.code() if e is not None else 0))
    producer.flush(30)
    return codes


def end_offset(broker: BrokerProcess, topic: str) -> int:
    consumer = confluent_kafka.Consumer({**sasl(broker, "admin"), "group.id": "offsets-reader"})
    try:
        return consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=30)[1]
    finally:
        consumer.close()


def failure_code(future) -> int:
    """The error code an admin future failed with (0 if it succeeded)."""
    try:
        future.result()
    except confluent_kafka.KafkaException as exc:
        return exc.args[0].code()
    return 0
