"""The broker's config keys: Kafka's names, types and defaults (what KafkaConfig parses).

BROKER_CONFIGS holds the keys logbroker implements, with Kafka 3.9's names, types and defaults
(and logbroker's own default where the embedded single node needs one, said in the key's doc);
it includes the broker synonym of every topic config in `storage.log_config.TOPIC_CONFIGS`.
KAFKA_ONLY_CONFIGS holds every other key of Kafka 3.9's broker ConfigDefs (ZooKeeper mode and
KRaft alike): accepted, warned about, not used. `parse_value` turns a value of an implemented key
into its type or raises ConfigError naming the key and what it expects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from logbroker.coordinator.assignors import assignors_from_config
from logbroker.errors import InvalidConfigError
from logbroker.remote.store_names import one_of_store_names
from logbroker.replication.replica_selector import SELECTORS
from logbroker.topic_configs import (
    INT_MAX,
    LONG_MAX,
    TOPIC_CONFIGS,
    at_least,
    between,
    format_value,
    one_of,
    parse_boolean,
)

SHORT_MAX = (1 << 15) - 1
_RANGES = {"short": SHORT_MAX, "int": INT_MAX, "long": LONG_MAX}
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ConfigError(InvalidConfigError):
    """A broker configuration that cannot start a broker. The message is one sentence naming the
    key and what it expects. (An InvalidConfigError, so a rejected broker config change reaches
    clients as INVALID_CONFIG.)"""


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    """One broker key: its type (`short`, `int`, `long`, `double`, `boolean`, `string`, `list`),
    its default (already parsed; None means unset), and an optional check that returns an error
    description for a bad parsed value."""

    name: str
    type: str
    default: object
    doc: str
    check: Callable[[object], str | None] | None = None


# One schema.registry.listeners entry: scheme, host (empty: every interface), port.
REGISTRY_URL = re.compile(r"^(https?)://\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)/?$")


def _registry_urls(urls: object) -> str | None:
    bad = [u for u in urls if not REGISTRY_URL.match(u)]  # type: ignore[union-attr]
    return f"expected http://host:port or https://host:port, not {', '.join(bad)}" if bad else None


def _known_assignors(names: object) -> str | None:
    try:
        assignors_from_config(list(names))  # type: ignore[arg-type]
    except ValueError as exc:
        return str(exc)
    return None if names else "at least one assignor"


HOUR_MS = 3_600_000
MINUTE_MS = 60_000

# Topic config → its broker synonyms in priority order, with each one's factor to milliseconds.
# The first of each is the topic config's `broker_synonym`; the others are the extra time units.
LOG_CONFIG_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    name: ((d.broker_synonym, 1),) for name, d in TOPIC_CONFIGS.items() if d.broker_synonym
} | {
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", MINUTE_MS),
                     ("log.retention.hours", HOUR_MS)),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
}

# Broker synonyms whose default is "unset, fall through to the next synonym" rather than the
# topic default; and log.retention.ms, which Kafka leaves unchecked (negative = unlimited).
_UNSET_BY_DEFAULT = {"log.roll.ms", "log.roll.jitter.ms", "log.retention.ms", "log.flush.interval.ms"}


def _synonym_defs() -> list[BrokerConfigDef]:
    defs = []
    for topic_name, definition in TOPIC_CONFIGS.items():
        if not definition.broker_synonym:
            continue
        name = definition.broker_synonym
        defs.append(BrokerConfigDef(
            name, definition.type,
            None if name in _UNSET_BY_DEFAULT else definition.default,
            f"default of the topic config {topic_name}: {definition.doc}",
            None if name == "log.retention.ms" else definition.check))
    return defs


_D = BrokerConfigDef
_BROKER_ONLY_DEFS = (
    # Server basics
    _D("broker.id", "int", 0, "this broker's id; logbroker's default is 0 (Kafka's -1 asks Kafka to "
       "generate one, which logbroker does not do)", at_least(0)),
    _D("node.id", "int", None, "KRaft's name for broker.id (Kafka 4's stock server.properties "
       "sets it): this broker's id when broker.id is not set; both set must be equal", at_least(0)),
    _D("controller.listener.names", "list", [], "KRaft controller listeners: logbroker has no "
       "KRaft controller, so the listeners named here are left out of listeners and "
       "advertised.listeners (with a warning)"),
    _D("broker.rack", "string", None, "rack of this broker, for rack-aware replica assignment "
       "and for consumers that fetch from the closest replica (KIP-392)"),
    _D("replica.selector.class", "string", None, "KIP-392: unset or "
       "org.apache.kafka.common.replica.LeaderSelector (consumers fetch from leaders), or "
       "org.apache.kafka.common.replica.RackAwareReplicaSelector (a consumer with client.rack is "
       "sent to an in-sync replica in its rack)", one_of(*SELECTORS)),
    _D("listeners", "string", "PLAINTEXT://127.0.0.1:9092",
       "listener_name://host:port entries to listen on; an empty host means every interface. "
       "logbroker's default listens on 127.0.0.1 only (Kafka's is PLAINTEXT://:9092)"),
    _D("advertised.listeners", "string", None,
       "listener_name://host:port entries given to clients; defaults to `listeners`"),
    _D("listener.security.protocol.map", "string",
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
       "listener name → security protocol"),
    _D("inter.broker.listener.name", "string", None,
       "listener brokers use to talk to each other; defaults to security.inter.broker.protocol"),
    _D("security.inter.broker.protocol", "string", "PLAINTEXT",
       "security protocol between brokers (when inter.broker.listener.name is not set)",
       one_of(*SECURITY_PROTOCOLS)),
    # Security: TLS (PEM only) and SASL. Each may also be set per listener as
    # listener.name.<listener>.<key> (server/tls.py, server/broker.py).
    _D("ssl.keystore.type", "string", "PEM", "format of the keystore; logbroker reads PEM only "
       "(Kafka's default is JKS)", one_of("PEM")),
    _D("ssl.keystore.location", "string", None,
       "PEM file with the listener's private key and certificate chain"),
    _D("ssl.keystore.certificate.chain", "string", None,
       "the certificate chain in PEM, inline (with ssl.keystore.key, instead of a file)"),
    _D("ssl.keystore.key", "string", None, "the private key in PEM, inline"),
    _D("ssl.key.password", "string", None, "password of an encrypted private key"),
    _D("ssl.truststore.type", "string", "PEM", "format of the truststore; logbroker reads PEM only "
       "(Kafka's default is JKS)", one_of("PEM")),
    _D("ssl.truststore.location", "string", None,
       "PEM file of the CA certificates client certificates must chain to"),
    _D("ssl.truststore.certificates", "string", None, "those CA certificates in PEM, inline"),
    _D("ssl.client.auth", "string", "none",
       "client certificates: none, requested (checked when sent) or required (mutual TLS); the "
       "certificate subject becomes the principal, User:CN=…", one_of("none", "requested", "required")),
    _D("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions accepted",
       one_of("TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1")),
    _D("ssl.cipher.suites", "list", [], "cipher suites (OpenSSL names); empty: the defaults"),
    _D("sasl.enabled.mechanisms", "list", ["GSSAPI"], "SASL mechanisms of SASL listeners; logbroker "
       "supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (Kafka's default GSSAPI must be replaced "
       "when a SASL listener is configured)"),
    _D("sasl.jaas.config", "string", None, "JAAS entry of every SASL listener and mechanism without "
       "its own listener.name.<listener>.<mechanism>.sasl.jaas.config; PlainLoginModule's "
       "user_<name>=\"<password>\" options are PLAIN's users"),
    _D("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI",
       "SASL mechanism brokers use with each other over a SASL inter-broker listener"),
    _D("sasl.server.max.receive.size", "int", 524_288,
       "largest request accepted before a SASL client has authenticated", at_least(1)),
    _D("connections.max.reauth.ms", "long", 0, "SASL session lifetime; a client must "
       "re-authenticate before it ends (0: sessions do not expire)", at_least(0)),
    _D("connection.failed.authentication.delay.ms", "int", 100, "delay before closing a connection "
       "whose authentication failed", at_least(0)),
    _D("authorizer.class.name", "string", "", "the authorizer: empty (everything is allowed) or "
       "kafka.security.authorizer.AclAuthorizer or org.apache.kafka.metadata.authorizer."
       "StandardAuthorizer (the same here: ACLs in the metadata store)"),
    _D("allow.everyone.if.no.acl.found", "boolean", False,
       "with the AclAuthorizer, allow an operation on a resource no ACL applies to"),
    _D("super.users", "string", None, "principals allowed everything with the AclAuthorizer, "
       "separated by semicolons (User:admin;User:ops)"),
    _D("metrics.port", "int", None, "logbroker only: port of the Prometheus /metrics endpoint "
       "(unset: no endpoint)", between(0, 65535)),
    # Schema registry (logbroker only; Confluent's registry calls these listeners, kafkastore.topic
    # and kafkastore.topic.replication.factor)
    _D("schema.registry.listeners", "list", [], "logbroker only: URLs (http://host:port, "
       "https://host:port) on which the broker serves Confluent Schema Registry's REST API; "
       "empty: no registry", _registry_urls),
    _D("schema.registry.topic", "string", "_schemas", "logbroker only: the compacted topic "
       "holding the registry's schemas, configs and modes"),
    _D("schema.registry.topic.replication.factor", "int", 3, "logbroker only: replication factor "
       "of schema.registry.topic on a cluster (it is created once that many brokers are alive; a "
       "single node uses 1)", at_least(1)),
    # Logs
    _D("log.dirs", "list", None, "data directories; overrides log.dir"),
    _D("log.dir", "string", None, "data directory when log.dirs is not set; logbroker's default "
       "is unset, so that `logbroker serve` chooses one and prints it (Kafka's is /tmp/kafka-logs)"),
    _D("num.partitions", "int", 1, "partitions of an auto-created or unspecified topic", at_least(1)),
    _D("default.replication.factor", "int", 1, "replication factor of auto-created topics",
       at_least(1)),
    _D("auto.create.topics.enable", "boolean", True,
       "create a topic when a client asks for metadata of an unknown one"),
    _D("delete.topic.enable", "boolean", True, "allow deleting topics"),
    _D("num.recovery.threads.per.data.dir", "int", 1,
       "threads per data directory for recovery at startup", at_least(1)),
    _D("log.roll.hours", "int", 168, "segment.ms in hours, when log.roll.ms is not set",
       at_least(1)),
    _D("log.roll.jitter.hours", "int", 0,
       "segment.jitter.ms in hours, when log.roll.jitter.ms is not set", at_least(0)),
    _D("log.retention.minutes", "int", None,
       "retention.ms in minutes, when log.retention.ms is not set"),
    _D("log.retention.hours", "int", 168,
       "retention.ms in hours, when neither log.retention.ms nor log.retention.minutes is set"),
    _D("log.retention.check.interval.ms", "long", 300_000,
       "how often logs are checked for segments to delete", at_least(1)),
    _D("log.flush.scheduler.interval.ms", "long", LONG_MAX,
       "how often logs are checked for a flush; flush.ms when log.flush.interval.ms is not set"),
    _D("log.flush.offset.checkpoint.interval.ms", "int", 60_000,
       "how often recovery-point-offset-checkpoint is written", at_least(0)),
    _D("log.flush.start.offset.checkpoint.interval.ms", "int", 60_000,
       "how often log-start-offset-checkpoint is written", at_least(0)),
    # Log cleaner
    _D("log.cleaner.enable", "boolean", True, "run the log cleaner (compaction)"),
    _D("log.cleaner.threads", "int", 1, "log cleaner threads", at_least(0)),
    _D("log.cleaner.backoff.ms", "long", 15_000, "sleep when there is no log to clean",
       at_least(0)),
    _D("log.cleaner.dedupe.buffer.size", "long", 134_217_728,
       "memory for deduplication, over all cleaner threads"),
    _D("log.cleaner.io.buffer.size", "int", 524_288, "memory for cleaner I/O buffers",
       at_least(0)),
    _D("log.cleaner.io.buffer.load.factor", "double", 0.9, "load factor of the dedupe buffer"),
    _D("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308,
       "cleaner I/O throttle, reads and writes together"),
    # Replication
    _D("replica.lag.time.max.ms", "long", 30_000,
       "a follower not caught up for this long leaves the ISR"),
    _D("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX,
       "bytes per second all replica moves between log dirs together may copy", at_least(1)),
    _D("replica.fetch.max.bytes", "int", 1_048_576, "bytes per partition a follower asks for",
       at_least(0)),
    _D("replica.fetch.min.bytes", "int", 1, "bytes a follower's fetch waits for"),
    _D("replica.fetch.wait.max.ms", "int", 500, "longest a follower's fetch waits"),
    _D("replica.fetch.backoff.ms", "int", 1000, "sleep after a follower fetch error",
       at_least(0)),
    _D("replica.fetch.response.max.bytes", "int", 10_485_760,
       "bytes a follower asks for in one fetch response", at_least(0)),
    _D("replica.high.watermark.checkpoint.interval.ms", "long", 5000,
       "how often replication-offset-checkpoint (high watermarks) is written"),
    _D("auto.leader.rebalance.enable", "boolean", True,
       "the controller moves leadership back to preferred replicas (the first of each assignment)"),
    _D("leader.imbalance.check.interval.seconds", "long", 300,
       "how often the controller checks whether leadership is imbalanced", at_least(1)),
    _D("leader.imbalance.per.broker.percentage", "int", 10,
       "the share of a broker's preferred partitions led elsewhere above which the controller "
       "rebalances", at_least(0)),
    _D("controlled.shutdown.enable", "boolean", True,
       "on SIGTERM, ask the controller to move leadership away before leaving the cluster"),
    _D("controlled.shutdown.max.retries", "int", 3,
       "controlled shutdown attempts before shutting down uncleanly"),
    _D("controlled.shutdown.retry.backoff.ms", "long", 5000,
       "wait between controlled shutdown attempts", at_least(0)),
    # ZooKeeper
    _D("zookeeper.connect", "string", None,
       "ZooKeeper hosts (host:port,…[/chroot]); unset: a single node whose metadata is a file"),
    _D("zookeeper.session.timeout.ms", "int", 18_000, "ZooKeeper session timeout"),
    _D("zookeeper.connection.timeout.ms", "int", None,
       "how long to wait to connect to ZooKeeper; defaults to zookeeper.session.timeout.ms"),
    # Network
    _D("socket.request.max.bytes", "int", 104_857_600, "largest request accepted",
       at_least(1)),
    _D("socket.send.buffer.bytes", "int", 102_400, "SO_SNDBUF of client sockets (-1: OS default)"),
    _D("socket.receive.buffer.bytes", "int", 102_400,
       "SO_RCVBUF of client sockets (-1: OS default)"),
    _D("connections.max.idle.ms", "long", 600_000, "close connections idle this long"),
    _D("max.connections", "int", INT_MAX, "connections the broker holds at once; at the limit it "
       "stops accepting until one closes (the inter-broker listener excepted); "
       "listener.name.<listener>.max.connections limits one listener", at_least(0)),
    _D("max.connections.per.ip", "int", INT_MAX, "connections from one IP address; more are "
       "closed at once", at_least(0)),
    _D("max.connections.per.ip.overrides", "string", "",
       "per-IP or per-host limits that replace max.connections.per.ip: host:count,host:count"),
    _D("max.request.partition.size.limit", "int", 2000,
       "most partitions one DescribeTopicPartitions answer holds", at_least(1)),
    _D("queued.max.requests", "int", 500,
       "requests queued per connection before reading from it pauses", at_least(1)),
    _D("request.timeout.ms", "int", 30_000, "timeout of the broker's own outbound requests"),
    # Group coordinator and offsets
    _D("offsets.topic.num.partitions", "int", 50, "partitions of __consumer_offsets",
       at_least(1)),
    _D("offsets.topic.replication.factor", "short", 3, "replication factor of __consumer_offsets; "
       "a cluster creates it only once this many brokers are alive, a single node uses 1", at_least(1)),
    _D("offsets.topic.segment.bytes", "int", 104_857_600, "segment.bytes of __consumer_offsets",
       at_least(1)),
    _D("offsets.retention.minutes", "int", 10_080,
       "committed offsets of an empty group are kept this long", at_least(1)),
    _D("offsets.retention.check.interval.ms", "long", 600_000,
       "how often stale offsets are looked for", at_least(1)),
    _D("offset.metadata.max.bytes", "int", 4096, "largest metadata of a committed offset"),
    _D("group.initial.rebalance.delay.ms", "int", 3000,
       "how long a new group waits for more members before its first rebalance"),
    _D("group.min.session.timeout.ms", "int", 6000, "smallest session timeout a member may ask"),
    _D("group.max.session.timeout.ms", "int", 1_800_000,
       "largest session timeout a member may ask"),
    # Consumer groups on the KIP-848 protocol
    _D("group.consumer.session.timeout.ms", "int", 45_000,
       "a consumer-protocol member heartbeating less often than this is removed", at_least(1)),
    _D("group.consumer.heartbeat.interval.ms", "int", 5_000,
       "how often consumer-protocol members are told to heartbeat", at_least(1)),
    _D("group.consumer.assignors", "list", ["uniform", "range"],
       "server-side assignors members may ask for, the first the default: uniform, range (or "
       "Kafka's class names of them)", _known_assignors),
    _D("group.consumer.max.size", "int", INT_MAX, "most members of one consumer group", at_least(1)),
    # Share groups (KIP-932) and their share coordinator
    _D("group.share.record.lock.duration.ms", "int", 30_000,
       "how long a share consumer holds the records it acquired before they are released", at_least(1000)),
    _D("group.share.delivery.count.limit", "int", 5,
       "deliveries of a record to share consumers before it is archived", between(2, 10)),
    _D("group.share.partition.max.record.locks", "int", 2000,
       "in-flight records of one share-partition (its window's size)", at_least(100)),
    _D("group.share.session.timeout.ms", "int", 45_000,
       "a share group member not heard from for this long is removed", at_least(1)),
    _D("group.share.heartbeat.interval.ms", "int", 5000,
       "how often share group members heartbeat", at_least(1)),
    _D("share.coordinator.state.topic.num.partitions", "int", 50, "partitions of __share_group_state",
       at_least(1)),
    _D("share.coordinator.state.topic.replication.factor", "short", 3,
       "replication factor of __share_group_state; a single node uses 1", at_least(1)),
    _D("share.coordinator.state.topic.min.isr", "short", 2, "min.insync.replicas of __share_group_state",
       at_least(1)),
    _D("share.coordinator.state.topic.segment.bytes", "int", 104_857_600,
       "segment.bytes of __share_group_state", at_least(1)),
    # Transactions and producer ids
    _D("transaction.state.log.num.partitions", "int", 50, "partitions of __transaction_state",
       at_least(1)),
    _D("transaction.state.log.replication.factor", "short", 3,
       "replication factor of __transaction_state", at_least(1)),
    _D("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state",
       at_least(1)),
    _D("transaction.state.log.segment.bytes", "int", 104_857_600,
       "segment.bytes of __transaction_state", at_least(1)),
    _D("transaction.state.log.load.buffer.size", "int", 5_242_880,
       "read buffer when loading __transaction_state", at_least(1)),
    _D("transaction.max.timeout.ms", "int", 900_000,
       "largest transaction.timeout.ms a producer may ask (INVALID_TRANSACTION_TIMEOUT above)", at_least(1)),
    _D("transactional.id.expiration.ms", "int", 604_800_000,
       "a transactional id idle this long is removed", at_least(1)),
    _D("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000,
       "how often transactions past their timeout are looked for and aborted", at_least(1)),
    _D("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3_600_000,
       "how often expired transactional ids are looked for", at_least(1)),
    _D("transaction.partition.verification.enable", "boolean", True,
       "check with the coordinator that a partition is in the transaction before the first "
       "transactional batch of a producer is appended to it (KIP-890)"),
    _D("producer.id.expiration.ms", "int", 86_400_000,
       "forget a producer id's state after this long without writes", at_least(1)),
    _D("delegation.token.secret.key", "string", None, "secret the HMAC of every delegation token "
       "is made with; the same on every broker of a cluster (unset: delegation tokens are off)"),
    _D("delegation.token.master.key", "string", None, "the old name of delegation.token.secret.key, "
       "used when that is unset"),
    _D("delegation.token.max.lifetime.ms", "long", 604_800_000,
       "longest a token can live, renewals included", at_least(1)),
    _D("delegation.token.expiry.time.ms", "long", 86_400_000,
       "how long a token lives until renewed, when its request names no period", at_least(1)),
    _D("delegation.token.expiry.check.interval.ms", "long", 3_600_000,
       "how often expired tokens are purged", at_least(1)),
    _D("telemetry.max.bytes", "int", 1_048_576,
       "largest client telemetry push (PushTelemetry's metrics, compressed) accepted", at_least(1)),
    _D("quota.window.num", "int", 11, "samples kept by the client quota rates", at_least(1)),
    _D("quota.window.size.seconds", "int", 1, "time span of each client quota sample", at_least(1)),
    _D("controller.quota.window.num", "int", 11,
       "samples of the controller mutation quota (its burst is quota × samples × window)", at_least(1)),
    _D("controller.quota.window.size.seconds", "int", 1,
       "time span of each controller mutation quota sample", at_least(1)),
    # Tiered storage (KIP-405; remote/).
    _D("remote.log.storage.system.enable", "boolean", False,
       "run the remote log manager: topics with remote.storage.enable upload closed segments "
       "to the remote store and read them back"),
    _D("remote.log.storage.manager.class.name", "string", None,
       "the remote store: s3 (settings rsm.config.s3.bucket, .endpoint, .region, .prefix; "
       "credentials from the AWS environment variables) or local (rsm.config.dir); Kafka's "
       "class-name form (…S3RemoteStorageManager, …LocalTieredStorage) is accepted",
       one_of_store_names()),
    _D("remote.log.manager.task.interval.ms", "long", 30_000,
       "how often each led tiered partition is checked for segments to upload and remote "
       "segments to expire", at_least(1)),
    _D("remote.fetch.max.wait.ms", "int", 500,
       "longest a fetch that reads from the remote store waits for it before answering "
       "REQUEST_TIMED_OUT for that partition", at_least(1)),
)

BROKER_CONFIGS: dict[str, BrokerConfigDef] = {
    d.name: d for d in sorted((*_BROKER_ONLY_DEFS, *_synonym_defs()), key=lambda d: d.name)
}
assert len(BROKER_CONFIGS) == len(_BROKER_ONLY_DEFS) + len(_synonym_defs()), "a key defined twice"

# Every other broker key of Kafka 3.9 (ZooKeeper mode and KRaft alike), read from its ConfigDefs,
# plus the authorizer's keys. Accepted with one warning each; see also KAFKA_ONLY_PREFIXES.
KAFKA_ONLY_CONFIGS: frozenset[str] = frozenset("""
alter.config.policy.class.name alter.log.dirs.replication.quota.window.num
alter.log.dirs.replication.quota.window.size.seconds
auto.include.jmx.reporter
background.threads broker.heartbeat.interval.ms broker.id.generation.enable
broker.session.timeout.ms client.quota.callback.class connection.failed.authentication.delay.ms
connections.max.reauth.ms control.plane.listener.name controller.listener.names
controller.quorum.append.linger.ms controller.quorum.bootstrap.servers
controller.quorum.election.backoff.max.ms controller.quorum.election.timeout.ms
controller.quorum.fetch.timeout.ms controller.quorum.request.timeout.ms
controller.quorum.retry.backoff.ms controller.quorum.voters
controller.socket.timeout.ms create.topic.policy.class.name
delete.records.purgatory.purge.interval.requests early.start.listeners
eligible.leader.replicas.enable fetch.max.bytes fetch.purgatory.purge.interval.requests
follower.replication.throttled.rate group.consumer.max.heartbeat.interval.ms
group.consumer.max.session.timeout.ms group.consumer.migration.policy
group.consumer.min.heartbeat.interval.ms group.consumer.min.session.timeout.ms
group.coordinator.append.linger.ms
group.coordinator.new.enable group.coordinator.rebalance.protocols group.coordinator.threads
group.max.size group.share.delivery.count.limit group.share.enable
group.share.heartbeat.interval.ms group.share.max.groups group.share.max.heartbeat.interval.ms
group.share.max.record.lock.duration.ms group.share.max.session.timeout.ms group.share.max.size
group.share.min.heartbeat.interval.ms group.share.min.record.lock.duration.ms
group.share.min.session.timeout.ms group.share.partition.max.record.locks
group.share.record.lock.duration.ms group.share.session.timeout.ms
initial.broker.registration.timeout.ms inter.broker.protocol.version
kafka.metrics.polling.interval.secs kafka.metrics.reporters
leader.replication.throttled.rate log.dir.failure.timeout.ms log.initial.task.delay.ms
log.message.format.version
max.connection.creation.rate max.connections max.connections.per.ip
max.connections.per.ip.overrides max.incremental.fetch.session.cache.slots
metadata.log.dir metadata.log.max.record.bytes.between.snapshots
metadata.log.max.snapshot.interval.ms metadata.log.segment.bytes metadata.log.segment.min.bytes
metadata.log.segment.ms metadata.max.idle.interval.ms metadata.max.retention.bytes
metadata.max.retention.ms metric.reporters metrics.num.samples metrics.recording.level
metrics.sample.window.ms node.id num.io.threads num.network.threads
num.replica.alter.log.dirs.threads num.replica.fetchers offsets.commit.required.acks
offsets.commit.timeout.ms offsets.load.buffer.size offsets.topic.compression.codec
password.encoder.cipher.algorithm password.encoder.iterations password.encoder.key.length
password.encoder.keyfactory.algorithm password.encoder.old.secret password.encoder.secret
principal.builder.class process.roles producer.id.expiration.check.interval.ms
producer.purgatory.purge.interval.requests queued.max.request.bytes
remote.log.index.file.cache.total.size.bytes
remote.log.manager.copier.thread.pool.size remote.log.manager.copy.max.bytes.per.second
remote.log.manager.copy.quota.window.num remote.log.manager.copy.quota.window.size.seconds
remote.log.manager.expiration.thread.pool.size remote.log.manager.fetch.max.bytes.per.second
remote.log.manager.fetch.quota.window.num remote.log.manager.fetch.quota.window.size.seconds
remote.log.manager.task.retry.backoff.max.ms
remote.log.manager.task.retry.backoff.ms remote.log.manager.task.retry.jitter
remote.log.manager.thread.pool.size remote.log.metadata.custom.metadata.max.bytes
remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path
remote.log.metadata.manager.impl.prefix remote.log.metadata.manager.listener.name
remote.log.reader.max.pending.tasks remote.log.reader.threads
remote.log.storage.manager.class.path
remote.log.storage.manager.impl.prefix
replica.selector.class
replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
replication.quota.window.size.seconds reserved.broker.max.id sasl.client.callback.handler.class
sasl.enabled.mechanisms sasl.jaas.config sasl.kerberos.kinit.cmd
sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
sasl.kerberos.ticket.renew.window.factor sasl.login.callback.handler.class sasl.login.class
sasl.login.connect.timeout.ms sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor
sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
sasl.mechanism.controller.protocol sasl.mechanism.inter.broker.protocol
sasl.oauthbearer.clock.skew.seconds sasl.oauthbearer.expected.audience
sasl.oauthbearer.expected.issuer sasl.oauthbearer.jwks.endpoint.refresh.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
sasl.oauthbearer.jwks.endpoint.url sasl.oauthbearer.scope.claim.name
sasl.oauthbearer.sub.claim.name sasl.oauthbearer.token.endpoint.url
sasl.server.callback.handler.class sasl.server.max.receive.size security.providers
server.max.startup.time.ms socket.connection.setup.timeout.max.ms
socket.connection.setup.timeout.ms socket.listen.backlog.size ssl.allow.dn.changes
ssl.allow.san.changes ssl.cipher.suites ssl.client.auth ssl.enabled.protocols
ssl.endpoint.identification.algorithm ssl.engine.factory.class ssl.key.password
ssl.keymanager.algorithm ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location
ssl.keystore.password ssl.keystore.type ssl.principal.mapping.rules ssl.protocol ssl.provider
ssl.secure.random.implementation ssl.trustmanager.algorithm ssl.truststore.certificates
ssl.truststore.location ssl.truststore.password ssl.truststore.type
unclean.leader.election.interval.ms unstable.api.versions.enable unstable.feature.versions.enable
zookeeper.clientCnxnSocket zookeeper.max.in.flight.requests zookeeper.metadata.migration.enable
zookeeper.metadata.migration.min.batch.size zookeeper.set.acl zookeeper.ssl.cipher.suites
zookeeper.ssl.client.enable zookeeper.ssl.crl.enable zookeeper.ssl.enabled.protocols
zookeeper.ssl.endpoint.identification.algorithm zookeeper.ssl.keystore.location
zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type zookeeper.ssl.ocsp.enable
zookeeper.ssl.protocol zookeeper.ssl.truststore.location zookeeper.ssl.truststore.password
zookeeper.ssl.truststore.type
""".split()) - BROKER_CONFIGS.keys()

# Per-listener overrides (`listener.name.internal.ssl.keystore.location`, …) are Kafka's too, and
# so are Kafka 4's share-group coordinator keys (KIP-932; its stock server.properties sets two).
KAFKA_ONLY_PREFIXES = ("listener.name.", "share.coordinator.")

# Kafka's PASSWORD-typed keys: DescribeConfigs hides their values.
PASSWORD_SUFFIXES = (
    "delegation.token.master.key", "delegation.token.secret.key", "password.encoder.old.secret",
    "password.encoder.secret", "sasl.jaas.config", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.password",
    "ssl.truststore.certificates", "ssl.truststore.password",
)

_KNOWN_NAMES = sorted(BROKER_CONFIGS.keys() | KAFKA_ONLY_CONFIGS)

def is_kafka_only(name: str) -> bool:
    """A key Kafka knows and logbroker accepts without using."""
    return name in KAFKA_ONLY_CONFIGS or name.startswith(KAFKA_ONLY_PREFIXES)


def closest_known_key(name: str) -> str | None:
    """The known key a misspelt `name` most likely meant, or None."""
    import difflib  # here: only a misspelt key needs it, not every broker's start

    matches = difflib.get_close_matches(name, _KNOWN_NAMES, n=1, cutoff=0.75)
    return matches[0] if matches else None


def parse_value(definition: BrokerConfigDef, raw: object) -> object:
    """Parse one value (text, or already typed) of an implemented key and check it.

    Raises ConfigError: `Invalid value 'abc' for configuration log.segment.bytes: expected an
    integer`.
    """
    try:
        value = _parse(definition.type, raw)
    except (TypeError, ValueError):
        raise ConfigError(f"Invalid value {_show(raw)} for configuration {definition.name}: "
                          f"{_expectation(definition.type)}") from None
    problem = definition.check(value) if definition.check and value is not None else None
    if problem:
        raise ConfigError(f"Invalid value {_show(raw)} for configuration {definition.name}: {problem}")
    return value


def _show(raw: object) -> str:
    return repr(raw) if isinstance(raw, str) else repr(format_value(raw))


def _expectation(kind: str) -> str:
    if kind in _RANGES:
        limit = _RANGES[kind]
        return f"expected an integer between {-limit - 1} and {limit}"
    return {
        "double": "expected a number",
        "boolean": "expected true or false",
        "list": "expected a comma-separated list",
    }.get(kind, "expected a string")


def _parse(kind: str, raw: object) -> object:
    if kind in _RANGES:
        if isinstance(raw, bool) or isinstance(raw, float):
            raise TypeError(raw)
        value = int(raw.strip()) if isinstance(raw, str) else int(raw)
        limit = _RANGES[kind]
        if not -limit - 1 <= value <= limit:
            raise ValueError(raw)
        return value
    if kind == "double":
        if isinstance(raw, bool):
            raise TypeError(raw)
        return float(raw.strip()) if isinstance(raw, str) else float(raw)
    if kind == "boolean":
        return parse_boolean(raw)
    if kind == "list":
        if isinstance(raw, (list, tuple)):
            return [str(item).strip() for item in raw if str(item).strip()]
        return [item.strip() for item in str(raw).split(",") if item.strip()]
    return str(raw).strip()


def parse_override(text: str) -> tuple[str, str]:
    """One `--override key=value` argument → (key, value). Raises ConfigError."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"Invalid override {text!r}: expected key=value")
    return key.strip(), value
