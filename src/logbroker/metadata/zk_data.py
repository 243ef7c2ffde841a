"""Kafka's ZooKeeper-era znodes: their paths and JSON, as Kafka 3.9's ZkData writes them.

Pure functions, no I/O: `zookeeper_store.py` does the reads and writes. Kafka's tools read what we
write and we read what they write, so every layout and field here is Kafka's:

    /cluster/id                                   {"version":"1","id":"<22 chars>"}
    /controller                  (ephemeral)      {"version":2,"brokerid":1,"timestamp":"<ms>",
                                                   "kraftControllerEpoch":-1}
    /controller_epoch                             1            (a bare integer, no JSON)
    /brokers/ids/<id>            (ephemeral)      {"version":5,"host":…,"port":…,"endpoints":[…],
                                                   "jmx_port":-1,"timestamp":"<ms>","features":{},
                                                   "listener_security_protocol_map":{…},"rack":…}
    /brokers/topics/<topic>                       {"version":3,"topic_id":"…","partitions":{"0":[1,2]},
                                                   "adding_replicas":{},"removing_replicas":{}}
                                                  (during a reassignment of partition 0 from [1] to
                                                   [2,3]: "partitions":{"0":[2,3,1]},
                                                   "adding_replicas":{"0":[2,3]},
                                                   "removing_replicas":{"0":[1]})
    /brokers/topics/<topic>/partitions/<p>/state  {"version":1,"leader":1,"leader_epoch":0,
                                                   "controller_epoch":1,"isr":[1,2]}
    /config/topics/<topic>                        {"version":1,"config":{"retention.ms":"1000"}}
    /config/changes/config_change_<10 digits>     {"version":2,"entity_path":"topics/<topic>"}
    /admin/delete_topics/<topic>                  (no data)
    /latest_producer_id_block                     {"version":1,"broker":1,"block_start":"0",
                                                   "block_end":"999"}

Kafka writes JSON with Jackson: compact (no spaces), numbers as numbers except where Kafka itself
wrote strings (timestamps, block bounds, the cluster id's version). Key order is a Java HashMap's,
so readers must compare structures, never bytes. "rack" is absent when the broker has none.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from logbroker.metadata.model import BrokerInfo, PartitionState, topic_id_from_str, topic_id_to_str
from logbroker.types import TopicPartition

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirUtils.LogDirFailureEvent

# Kafka's KafkaController.InitialControllerEpoch: /controller_epoch starts here, the first
# controller gets 1.
INITIAL_CONTROLLER_EPOCH = 0

# ConfigType.ALL: one /config/<type> per entity type.
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")

# ZkData.PersistentZkPaths: every broker makes sure these exist at startup.
PERSISTENT_PATHS = (
    "/consumers", BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, "/brokers/seqid",
    ISR_CHANGE_NOTIFICATION, PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
) + tuple(f"{CONFIG}/{t}" for t in CONFIG_ENTITY_TYPES)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(tp: TopicPartition) -> str:
    return f"{TOPICS}/{tp.topic}/partitions/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


def config_path(entity_type: str, name: str) -> str:
    return f"{CONFIG}/{entity_type}/{name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _load(data: bytes | None) -> Any:
    """The JSON in a znode, or None for a znode without data (Kafka creates some with null)."""
    if not data:
        return None
    return json.loads(data)


# -- /cluster/id ---------------------------------------------------------------------------------
def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return _load(data)["id"]


# -- /controller, /controller_epoch --------------------------------------------------------------
def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms),
                  "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    return int(_load(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# -- /brokers/ids/<id> ---------------------------------------------------------------------------
def encode_broker(info: BrokerInfo, *, timestamp_ms: int, endpoints: list[str] | None = None,
                  security_protocol_map: dict[str, str] | None = None, jmx_port: int = -1) -> bytes:
    """Registration v5. `endpoints` are connection strings (`LISTENER://host:port`); by default one
    PLAINTEXT listener at the broker's host and port. The top-level host and port are the first
    PLAINTEXT endpoint's (null and -1 without one), for clients older than endpoints."""
    if endpoints is None:
        endpoints = [f"PLAINTEXT://{info.host}:{info.port}"]
    if security_protocol_map is None:
        security_protocol_map = {_listener(e): _listener(e) for e in endpoints}
    host, port = None, -1
    for endpoint in endpoints:
        if security_protocol_map.get(_listener(endpoint)) == "PLAINTEXT":
            host, port = _host_port(endpoint)
            break
    value: dict[str, Any] = {
        "version": 5, "host": host, "port": port, "endpoints": list(endpoints), "jmx_port": jmx_port,
        "timestamp": str(timestamp_ms),
        "listener_security_protocol_map": dict(security_protocol_map), "features": {},
    }
    if info.rack is not None:
        value["rack"] = info.rack
    return _dump(value)


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    """A registration of any version ≥ 1; host and port are the PLAINTEXT ones if there is a
    PLAINTEXT endpoint, else the first endpoint's; every endpoint is kept, by listener name."""
    value = _load(data)
    endpoints = tuple((_listener(e), *_host_port(e)) for e in value.get("endpoints") or ())
    if value.get("host") is not None and value.get("port", -1) >= 0:
        host, port = value["host"], int(value["port"])
    else:
        host, port = endpoints[0][1:]
    return BrokerInfo(broker_id, host, port, value.get("rack"), endpoints)


def _listener(endpoint: str) -> str:
    return endpoint.split("://", 1)[0]


def _host_port(endpoint: str) -> tuple[str, int]:
    address = endpoint.split("://", 1)[1]
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


# -- /brokers/topics/<topic> ---------------------------------------------------------------------
def encode_topic(topic_id: uuid.UUID, assignment: dict[int, tuple[int, ...]], *,
                 adding: dict[int, tuple[int, ...]] | None = None,
                 removing: dict[int, tuple[int, ...]] | None = None) -> bytes:
    """`adding`/`removing`: the replicas an ongoing reassignment adds and removes, per partition;
    as Kafka's TopicZNode, a partition appears in each only with a non-empty list."""
    return _dump({
        "version": 3,
        "topic_id": topic_id_to_str(topic_id),
        "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
        "adding_replicas": {str(p): list(r) for p, r in sorted((adding or {}).items()) if r},
        "removing_replicas": {str(p): list(r) for p, r in sorted((removing or {}).items()) if r},
    })


@dataclass(frozen=True, slots=True)
class TopicReassignment:
    """A topic znode as a reassignment reads it: every partition's full replica set (original
    and target during a reassignment), the replicas being added and removed for the partitions
    under reassignment, and the znode version a conditional write must name."""

    name: str
    topic_id: uuid.UUID | None
    assignment: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]]
    removing: dict[int, tuple[int, ...]]
    zk_version: int


def decode_topic_reassignment(name: str, data: bytes, zk_version: int) -> TopicReassignment:
    value = _load(data) or {}
    topic_id, assignment = decode_topic(data)

    def partitions(key: str) -> dict[int, tuple[int, ...]]:
        return {int(p): tuple(r) for p, r in (value.get(key) or {}).items() if r}
    return TopicReassignment(name, topic_id, assignment, partitions("adding_replicas"),
                             partitions("removing_replicas"), zk_version)


def decode_topic(data: bytes) -> tuple[uuid.UUID | None, dict[int, tuple[int, ...]]]:
    """The topic id (None in a topic written before ids, Kafka < 2.8) and the assignment."""
    value = _load(data) or {}
    text = value.get("topic_id")
    partitions = value.get("partitions") or {}
    return (topic_id_from_str(text) if text else None,
            {int(p): tuple(r) for p, r in sorted(partitions.items(), key=lambda kv: int(kv[0]))})


# -- /brokers/topics/<topic>/partitions/<p>/state ------------------------------------------------
def encode_partition_state(state: PartitionState) -> bytes:
    return _dump({"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
                  "controller_epoch": state.controller_epoch, "isr": list(state.isr)})


def decode_partition_state(data: bytes) -> PartitionState:
    value = _load(data)
    return PartitionState(int(value["leader"]), int(value["leader_epoch"]),
                          tuple(int(r) for r in value["isr"]), int(value["controller_epoch"]))


# -- /config/<type>/<name>, /config/changes ------------------------------------------------------
def encode_config(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(configs)})


def decode_config(data: bytes | None) -> dict[str, str]:
    value = _load(data)
    if not value:
        return {}
    return {k: str(v) for k, v in (value.get("config") or {}).items()}


def encode_config_change(entity_type: str, name: str) -> bytes:
    return _dump({"version": 2, "entity_path": f"{entity_type}/{name}"})


# -- /latest_producer_id_block -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Producer ids `first_producer_id ..= last_producer_id`, claimed by `broker_id`."""

    broker_id: int
    first_producer_id: int
    last_producer_id: int

    @property
    def size(self) -> int:
        return self.last_producer_id - self.first_producer_id + 1


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump({"version": 1, "broker": block.broker_id,
                  "block_start": str(block.first_producer_id),
                  "block_end": str(block.last_producer_id)})


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock | None:
    """The latest claimed block, or None when no block was ever claimed (the znode is empty)."""
    value = _load(data)
    if not value:
        return None
    return ProducerIdBlock(int(value["broker"]), int(value["block_start"]), int(value["block_end"]))
