"""AlterClientQuotas / DescribeClientQuotas against a real broker, over raw requests: Kafka's
validation errors, filters, defaults, and quotas kept across a restart."""

from __future__ import annotations

import pytest

from clients import RawClient

pytestmark = pytest.mark.timeout(60)

INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35


def alter(client: RawClient, entity: dict, ops: list[tuple[str, float | None]], *, validate_only=False,
          version: int = 1):
    response = client.request(49, version, validate_only=validate_only, entries=[{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
        "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None} for k, v in ops]}])
    [entry] = response.entries
    return int(entry.error_code), entry.error_message


def describe(client: RawClient, components: list[tuple[str, int, str | None]], *, strict=False,
             version: int = 1):
    response = client.request(48, version, strict=strict, components=[
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components])
    if int(response.error_code):
        return int(response.error_code), response.error_message
    return 0, {tuple((e.entity_type, e.entity_name) for e in entry.entity):
               {v.key: v.value for v in entry.values} for entry in response.entries}


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ({}, [("producer_byte_rate", 1000.0)], "empty"),
    ({"user": ""}, [("producer_byte_rate", 1000.0)], "Empty user"),
    ({"group": "g"}, [("producer_byte_rate", 1000.0)], "Unhandled client quota entity type"),
    ({"user": "a"}, [("no_such_quota", 1000.0)], "Invalid configuration key"),
    ({"user": "a"}, [("producer_byte_rate", 0.0)], "must be greater than 0"),
    ({"user": "a"}, [("consumer_byte_rate", -5.0)], "must be greater than 0"),
    ({"client-id": "c"}, [("producer_byte_rate", 10.5)], "fractional"),
    ({"ip": "1.2.3.4", "user": "a"}, [("producer_byte_rate", 10.0)], "IP entity"),
])
def test_alter_client_quotas_validation_errors_are_invalid_request(shared_broker, entity, ops, message):
    with RawClient(shared_broker.bootstrap) as client:
        code, text = alter(client, entity, ops)
    assert code == INVALID_REQUEST
    assert message.lower() in (text or "").lower()


def test_duplicate_entity_type_is_invalid_request(shared_broker):
    with RawClient(shared_broker.bootstrap) as client:
        response = client.request(49, 1, validate_only=False, entries=[{
            "entity": [{"entity_type": "user", "entity_name": "a"}, {"entity_type": "user", "entity_name": "b"}],
            "ops": [{"key": "producer_byte_rate", "value": 100.0, "remove": False}]}])
    assert int(response.entries[0].error_code) == INVALID_REQUEST


def test_validate_only_stores_nothing(shared_broker):
    with RawClient(shared_broker.bootstrap) as client:
        assert alter(client, {"user": "validate-only"}, [("producer_byte_rate", 1000.0)], validate_only=True)[0] == 0
        assert describe(client, [("user", 0, "validate-only")]) == (0, {})


@pytest.mark.parametrize("version", [0, 1])
def test_set_describe_and_remove_quotas_of_every_entity_kind(shared_broker, version):
    u, c = f"user-v{version}", f"client-v{version}"
    with RawClient(shared_broker.bootstrap) as client:
        entities = [{"user": u}, {"client-id": c}, {"user": u, "client-id": c}, {"user": None},
                    {"client-id": None}, {"user": u, "client-id": None}]
        for i, entity in enumerate(entities):
            assert alter(client, entity, [("producer_byte_rate", 1000.0 + i), ("request_percentage", 12.5)],
                         version=version) == (0, None)
        code, found = describe(client, [("user", 0, u)], version=version)
        assert code == 0
        assert found[(("user", u),)] == {"producer_byte_rate": 1000.0, "request_percentage": 12.5}
        assert found[(("user", u), ("client-id", c))]["producer_byte_rate"] == 1002.0
        assert found[(("user", u), ("client-id", None))]["producer_byte_rate"] == 1005.0
        assert (("client-id", c),) not in found
        # strict: only entities with exactly the filtered types
        assert set(describe(client, [("user", 0, u)], strict=True)[1]) == {(("user", u),)}
        assert set(describe(client, [("user", 1, None)], strict=True)[1]) == {(("user", None),)}
        assert set(describe(client, [("client-id", 1, None)], strict=True)[1]) == {(("client-id", None),)}
        specified = describe(client, [("client-id", 2, None)], strict=True)[1]
        assert {(("client-id", c),), (("client-id", None),)} <= set(specified)
        # remove one key, then the other: the entity disappears
        assert alter(client, {"user": u}, [("producer_byte_rate", None)])[0] == 0
        assert describe(client, [("user", 0, u)], strict=True)[1] == {(("user", u),): {"request_percentage": 12.5}}
        assert alter(client, {"user": u}, [("request_percentage", None)])[0] == 0
        assert describe(client, [("user", 0, u)], strict=True)[1] == {}
        for entity in entities[1:]:
            assert alter(client, entity, [("producer_byte_rate", None), ("request_percentage", None)])[0] == 0


@pytest.mark.parametrize(("components", "code"), [
    ([("user", 0, "a"), ("user", 0, "b")], INVALID_REQUEST),
    ([("", 0, "a")], INVALID_REQUEST),
    ([("group", 0, "a")], UNSUPPORTED_VERSION),
    ([("ip", 0, "1.2.3.4"), ("user", 0, "a")], INVALID_REQUEST),
])
def test_describe_client_quotas_filter_errors(shared_broker, components, code):
    with RawClient(shared_broker.bootstrap) as client:
        assert describe(client, components)[0] == code


def test_quotas_survive_a_restart(broker_process):
    with RawClient(broker_process.bootstrap) as client:
        assert alter(client, {"user": "kept", "client-id": "app"}, [("consumer_byte_rate", 4096.0)])[0] == 0
    broker_process.restart()
    with RawClient(broker_process.bootstrap) as client:
        found = describe(client, [("user", 0, "kept")])[1]
    assert found == {(("user", "kept"), ("client-id", "app")): {"consumer_byte_rate": 4096.0}}


THROTTLING_QUOTA_EXCEEDED = 89


def create_topics(bootstrap: str, client_id: str, version: int, name: str, partitions: int):
    with RawClient(bootstrap, client_id=client_id) as client:  # a new connection: the last one may be muted
        response = client.request(19, version, timeout=30000, validate_only=False, topics=[{
            "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
            "configs": []}])
    [topic] = response.topics
    return int(topic.error_code), int(response.throttle_time.total_seconds() * 1000)


def test_controller_mutation_rate_refuses_topic_creation_once_exhausted(shared_broker, topic):
    client_id = f"mutator-{topic}"
    with RawClient(shared_broker.bootstrap) as client:
        # 1 partition a second: a burst of 11 (quota.window.num × 1 s)
        assert alter(client, {"client-id": client_id}, [("controller_mutation_rate", 1.0)])[0] == 0
    b = shared_broker.bootstrap
    assert create_topics(b, client_id, 7, f"{topic}-a", 20) == (0, 9000)  # may go below zero once
    code, throttle_ms = create_topics(b, client_id, 7, f"{topic}-b", 1)
    assert code == THROTTLING_QUOTA_EXCEEDED and 8000 <= throttle_ms <= 9000
    code, throttle_ms = create_topics(b, client_id, 5, f"{topic}-c", 1)  # v5: counted, not refused
    assert code == 0 and throttle_ms > 8000
    assert create_topics(b, f"other-{topic}", 7, f"{topic}-d", 1) == (0, 0)
    with RawClient(b, client_id=client_id) as client:
        response = client.request(20, 6, timeout_ms=30000, topics=[{"name": f"{topic}-a", "topic_id": None}])
    assert int(response.responses[0].error_code) == THROTTLING_QUOTA_EXCEEDED
    assert response.throttle_time.total_seconds() > 0
