"""Client quotas on a ZooKeeper cluster: altered through one broker, stored in Kafka's znodes
(/config/users|clients, /config/changes notices, next to a user's SCRAM credentials), enforced by
every broker within seconds, and read again by a broker that was down."""

from __future__ import annotations

import asyncio
import json
import time

from kio.index import load_request_schema

from cluster_helpers import start_cluster, wait_for
from logbroker.client import KafkaConnection
from logbroker.server.responses import build


def request(broker, api_key: int, version: int, fields: dict, *, client_id: str = "logbroker"):
    async def round_trip():
        connection = KafkaConnection(broker.host, broker.port, client_id=client_id)
        try:
            return await connection.request(build(load_request_schema(api_key, version), fields))
        finally:
            await connection.close()
    return asyncio.run(round_trip())


def alter(broker, entity: dict, **quotas) -> None:
    response = request(broker, 49, 1, {"validate_only": False, "entries": [{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
        "ops": [{"key": k, "value": float(v or 0), "remove": v is None} for k, v in quotas.items()]}]})
    assert int(response.entries[0].error_code) == 0, response


def throttled(broker, client_id: str) -> bool:
    """Whether Metadata requests from `client_id` come back throttled on `broker` (a few tries:
    a request quota lets the first requests through)."""
    async def probe():
        connection = KafkaConnection(broker.host, broker.port, client_id=client_id)
        try:
            body = build(load_request_schema(3, 12), {"topics": None, "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
            for _ in range(20):
                response = await connection.request(body)
                if response.throttle_time.total_seconds() > 0:
                    return True
            return False
        finally:
            await connection.close()
    return asyncio.run(probe())


def znode(zk_client, path: str):
    data = zk_client.get(path)[0]
    return json.loads(data) if data else None


def test_a_quota_set_through_one_broker_applies_on_every_broker(tmp_path, zk_connect, zk_client):
    b1, b2, b3 = start_cluster(tmp_path, zk_connect)
    try:
        assert not any(throttled(b, "hot-app") for b in (b1, b2, b3))
        started = time.monotonic()
        alter(b1, {"client-id": "hot-app"}, request_percentage=0.0001)
        for broker in (b2, b3, b1):
            wait_for(lambda b=broker: throttled(b, "hot-app"), timeout_s=10, what=f"throttling on {broker}")
        assert time.monotonic() - started < 10
        assert not throttled(b2, "other-app")
        assert znode(zk_client, "/config/clients/hot-app") == {"version": 1, "config": {"request_percentage": "0.0001"}}
        notices = [znode(zk_client, f"/config/changes/{c}") for c in zk_client.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "clients/hot-app"} in notices
    finally:
        for broker in (b1, b2, b3):
            broker.stop()


def test_quota_znodes_are_kafkas_and_keep_scram_credentials(tmp_path, zk_connect, zk_client):
    b1, b2, b3 = start_cluster(tmp_path, zk_connect)
    try:
        upsert = request(b2, 51, 0, {"deletions": [], "upsertions": [{
            "name": "alice", "mechanism": 1, "iterations": 4096, "salt": b"0123456789abcdef",
            "salted_password": b"p" * 32}]})
        assert int(upsert.results[0].error_code) == 0
        alter(b1, {"user": "alice"}, producer_byte_rate=1048576)
        alter(b3, {"user": "alice", "client-id": "app one"}, consumer_byte_rate=2048)
        alter(b2, {"user": None, "client-id": None}, request_percentage=50)
        config = znode(zk_client, "/config/users/alice")["config"]
        assert config["producer_byte_rate"] == "1048576" and "SCRAM-SHA-256" in config
        assert znode(zk_client, "/config/users/alice/clients/app%20one")["config"] == {"consumer_byte_rate": "2048"}
        assert znode(zk_client, "/config/users/<default>/clients/<default>")["config"] == {"request_percentage": "50.0"}
        notices = [znode(zk_client, f"/config/changes/{c}") for c in zk_client.get_children("/config/changes")]
        for path in ("users/alice", "users/alice/clients/app%20one", "users/<default>/clients/<default>"):
            assert {"version": 2, "entity_path": path} in notices
        # Removing the quota keeps the credentials (and SCRAM logins).
        alter(b2, {"user": "alice"}, producer_byte_rate=None)
        config = znode(zk_client, "/config/users/alice")["config"]
        assert "producer_byte_rate" not in config and "SCRAM-SHA-256" in config
        described = request(b3, 48, 1, {"strict": False, "components": [
            {"entity_type": "user", "match_type": 0, "match": "alice"}]})
        found = {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
                 for entry in described.entries}
        assert found == {(("user", "alice"), ("client-id", "app one")): {"consumer_byte_rate": 2048.0}}
    finally:
        for broker in (b1, b2, b3):
            broker.stop()


def test_a_broker_that_was_down_reads_the_quotas_when_it_starts(tmp_path, zk_connect, zk_client):
    b1, b2, b3 = start_cluster(tmp_path, zk_connect)
    try:
        b3.stop()
        alter(b1, {"client-id": "late-app"}, request_percentage=0.0001)
        b3.start()
        assert throttled(b3, "late-app")
    finally:
        for broker in (b1, b2, b3):
            if broker.running:
                broker.stop()
