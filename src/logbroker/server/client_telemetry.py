"""ClientTelemetry: KIP-714's broker side — which metrics each client is asked for, the limits on
its pushes, and the metrics it pushed, kept for the Prometheus endpoint.

A client calls GetTelemetrySubscriptions (with a zero instance id the first time: it is given
one), and gets the union of the metric prefixes of every subscription that matches it, the
shortest of their intervals, and a subscription id (CRC-32 of those, so it changes when they
do). It then pushes every interval. A push is refused, as in Kafka's ClientMetricsManager, with
UNKNOWN_SUBSCRIPTION_ID when its id is not the one the subscriptions now give (the client asks
again), THROTTLING_QUOTA_EXCEEDED when it comes sooner than the interval after the previous push
(the first push after a GetTelemetrySubscriptions is always in time; a terminating push is never
throttled), INVALID_REQUEST after the client's terminating push, UNSUPPORTED_COMPRESSION_TYPE,
TELEMETRY_TOO_LARGE over telemetry.max.bytes, INVALID_RECORD when it does not decode.

What was pushed is kept per client instance with its identity (instance id, client id, software
name and version, principal) and exposed on /metrics. The state is bounded: at most
MAX_CLIENT_INSTANCES clients (the least recently heard from goes first) and MAX_POINTS_PER_CLIENT
series each; a client not heard from for three of its intervals (at least MIN_IDLE_MS) is dropped
with its series (`expire_idle`, a periodic task).

Everything runs on the event loop except `reload` and `set_configs`, which block on ZooKeeper on
a cluster (the handlers call them from a thread).
"""

from __future__ import annotations

import logging
import struct
import uuid
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field


from logbroker.errors import (
    InvalidConfigError,
    InvalidRequestError,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    UnknownSubscriptionIdError,
    UnsupportedCompressionTypeError,
)
from logbroker.server import client_metrics_configs as cm
from logbroker.server.otlp_metrics import Point, decode_metrics

log = logging.getLogger("kafka.server.ClientMetricsManager")

MAX_CLIENT_INSTANCES = 1000
MAX_POINTS_PER_CLIENT = 2000
MIN_IDLE_MS = 60_000
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy: Kafka's order of preference
ZERO_UUID = uuid.UUID(int=0)


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    identity: dict[str, str]  # client_instance_id, client_id, client_software_*, principal
    source: dict[str, str]  # client_source_address / _port, for matching only
    last_get_ms: int = 0
    last_push_ms: int = -1
    last_seen_ms: int = 0
    interval_ms: int = cm.DEFAULT_INTERVAL_MS
    terminating: bool = False
    points: dict[tuple[str, tuple], Point] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClientSubscription:
    subscription_id: int
    metrics: tuple[str, ...]  # requested prefixes: () none, ("",) every metric
    interval_ms: int


class ClientTelemetry:
    def __init__(self, *, store, max_bytes: int, clock) -> None:
        self._store = store  # client_metrics_configs() / set_client_metrics_configs(name, configs)
        self.max_bytes = max_bytes
        self._clock = clock
        self._configs: dict[str, dict[str, str]] = {}
        self._subscriptions: dict[str, cm.Subscription] = {}
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()  # least recent first

    # -- subscriptions (the CLIENT_METRICS config resources) ---------------------------------
    def reload(self) -> None:
        """Read every subscription from the store (blocks on ZooKeeper on a cluster)."""
        self._use(self._store.client_metrics_configs())

    def configs(self, name: str) -> dict[str, str]:
        return dict(self._configs.get(name, {}))

    def names(self) -> list[str]:
        return sorted(self._configs)

    def set_configs(self, name: str, configs: dict[str, str], *, validate_only: bool) -> None:
        """Validate and store a subscription's configs (none: delete it)."""
        if not name:
            raise InvalidRequestError("A client metrics config resource needs a name")
        cm.parse(name, configs)
        if validate_only:
            return
        self._store.set_client_metrics_configs(name, configs)
        self.apply_change(name, configs)

    def apply_change(self, name: str, configs: dict[str, str]) -> None:
        """A subscription changed (here, or on another broker: its change notice)."""
        if configs == self._configs.get(name, {}):
            return
        self._use({**self._configs, name: configs} if configs else
                  {k: v for k, v in self._configs.items() if k != name})
        log.info("Client metrics subscription %s is now %s", name, configs or "deleted")

    def _use(self, all_configs: dict[str, dict[str, str]]) -> None:
        subscriptions = {}
        for name, configs in all_configs.items():
            try:
                subscriptions[name] = cm.parse(name, configs)
            except (InvalidRequestError, InvalidConfigError) as exc:
                log.warning("Ignoring client metrics subscription %s: %s", name, exc)
        self._configs = {name: dict(c) for name, c in all_configs.items() if c}
        self._subscriptions = subscriptions

    def subscription_for(self, instance: ClientInstance) -> ClientSubscription:
        client = {**instance.identity, **instance.source}
        matching = [s for s in self._subscriptions.values() if s.matches(client)]
        prefixes = sorted({m for s in matching for m in s.metrics})
        if cm.ALL_METRICS in prefixes:
            prefixes = [""]
        interval_ms = min((s.interval_ms for s in matching if s.metrics), default=cm.DEFAULT_INTERVAL_MS)
        digest = f"{','.join(prefixes)}|{interval_ms}|{instance.instance_id}".encode()
        subscription_id = struct.unpack(">i", struct.pack(">I", zlib.crc32(digest)))[0]
        return ClientSubscription(subscription_id, tuple(prefixes), interval_ms)

    # -- GetTelemetrySubscriptions and PushTelemetry ----------------------------------------
    def get_subscription(self, instance_id: uuid.UUID | None, *, identity: dict[str, str],
                         source: dict[str, str]) -> tuple[uuid.UUID, ClientSubscription]:
        if instance_id is None or instance_id == ZERO_UUID:
            instance_id = uuid.uuid4()
        instance = self._instance(instance_id, identity, source)
        instance.last_get_ms = self._clock.monotonic_ms()
        subscription = self.subscription_for(instance)
        instance.interval_ms = subscription.interval_ms
        return instance_id, subscription

    def push(self, instance_id: uuid.UUID | None, *, subscription_id: int, terminating: bool,
             compression_type: int, metrics: bytes, identity: dict[str, str], source: dict[str, str]) -> int:
        """Check and record one push; the number of points kept. Raises the push's error."""
        if instance_id is None or instance_id == ZERO_UUID:
            raise InvalidRequestError("Invalid NULL_UUID for the client instance id")
        instance = self._instance(instance_id, identity, source)
        subscription = self.subscription_for(instance)
        if instance.terminating:
            raise InvalidRequestError(f"Client {instance_id} sent a push after its terminating push")
        if subscription_id != subscription.subscription_id:
            raise UnknownSubscriptionIdError(f"Unknown client subscription id {subscription_id} for "
                                             f"client instance {instance_id}")
        now = self._clock.monotonic_ms()
        early = instance.last_push_ms >= instance.last_get_ms and \
            now - instance.last_push_ms < subscription.interval_ms
        if early and not terminating:
            raise ThrottlingQuotaExceededError(f"Too many telemetry pushes from client instance "
                                               f"{instance_id}: the push interval is {subscription.interval_ms} ms")
        if compression_type != 0 and compression_type not in ACCEPTED_COMPRESSION_TYPES:
            raise UnsupportedCompressionTypeError(f"Unknown compression type {compression_type}")
        if len(metrics) > self.max_bytes:
            raise TelemetryTooLargeError(f"Telemetry of {len(metrics)} bytes exceeds telemetry.max.bytes "
                                         f"({self.max_bytes})")
        instance.last_push_ms, instance.terminating = now, terminating
        instance.interval_ms = subscription.interval_ms
        return self._record(instance, decode_metrics(compression_type, metrics), subscription.metrics)

    def _record(self, instance: ClientInstance, points: list[Point], prefixes: tuple[str, ...]) -> int:
        kept = 0
        for point in points:
            if not any(point.name.startswith(p) for p in prefixes):
                continue  # not subscribed: a client may not fill the broker with others
            key = (point.name, point.attributes)
            old = instance.points.get(key)
            if old is None and len(instance.points) >= MAX_POINTS_PER_CLIENT:
                continue
            if old is not None and point.counter and point.delta:
                point = Point(point.name, point.attributes, old.value + point.value, True, True)
            instance.points[key] = point
            kept += 1
        return kept

    def _instance(self, instance_id: uuid.UUID, identity: dict[str, str], source: dict[str, str]) -> ClientInstance:
        instance = self.instances.get(instance_id)
        if instance is None:
            identity = {**identity, "client_instance_id": str(instance_id)}
            instance = self.instances[instance_id] = ClientInstance(instance_id, identity, source)
            while len(self.instances) > MAX_CLIENT_INSTANCES:
                self.instances.popitem(last=False)
        self.instances.move_to_end(instance_id)
        instance.last_seen_ms = self._clock.monotonic_ms()
        return instance

    def expire_idle(self) -> int:
        """Drop clients not heard from for three intervals (at least MIN_IDLE_MS); the count."""
        now = self._clock.monotonic_ms()
        idle = [i for i, inst in self.instances.items()
                if now - inst.last_seen_ms > max(3 * inst.interval_ms, MIN_IDLE_MS)]
        for instance_id in idle:
            del self.instances[instance_id]
        return len(idle)
