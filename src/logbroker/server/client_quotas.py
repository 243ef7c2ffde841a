"""Client quotas: Kafka's ClientQuotaManager (produce and fetch bytes), ClientRequestQuotaManager
(request time) and ControllerMutationQuotaManager (partitions created or deleted), over the
quota configs of users, client ids, both, and their defaults (metadata/quota_entities.py).

Which quota applies. For a request from principal U with client id C, each quota type is looked up
in Kafka's order — users/U/clients/C, users/U/clients/<default>, users/U,
users/<default>/clients/C, users/<default>/clients/<default>, users/<default>, clients/C,
clients/<default> — and the first level that sets it wins. The level also fixes the sensor the
request is counted in, by its metric tags (user, client-id): a quota set on users/U is shared by
every client id of U (tags (U, "")), one on clients/<default> is per client id (tags ("", C)).

How a rate is measured (Kafka's Rate over a SampledStat). `quota.window.num` samples (11) of
`quota.window.size.seconds` (1 s) each; a sample starts when the first value after the previous
one's window arrives, and a sample older than all the windows together is reset. The rate is the
sum of the samples divided by the time since the oldest sample started, but never by less than
(samples - 1) windows — so a new client may send a burst of up to quota × 10 s before it is
throttled, as in Kafka.

Throttling (KIP-219). After a request is counted, a rate above the quota gives a throttle time
(rate - quota) / quota × the measured window, the time for which the client must be silent for its
rate to come back to the quota. The response goes out at once carrying throttle_time_ms, and the
connection is muted — the broker stops reading from it — for that long (KafkaConnection.mute_for).
(Kafka delays instead the responses of request versions older than KIP-219's; logbroker answers
every version at once, so such an old client is slowed by the mute alone. Requests already read
from the socket when the mute starts — a pipelining client's — are still handled.)
A fetch over its byte quota is answered empty (its bytes not counted), as Kafka does, and a fetch's
max_bytes is capped at what the quota window allows. Request throttle times are bounded by one
window (ClientRequestQuotaManager.maxThrottleTimeMs).

Request time. Kafka counts the time its I/O and network threads spend on a client's requests,
request_percentage being a percentage of one thread. logbroker has one event loop, so a client's
request time is the event-loop time spent decoding, handling (the synchronous parts: an append,
building a fetch answer) and encoding its requests; 100 is the whole loop. Waiting (acks=-1, a long
poll) is not request time. Requests between brokers (followers' fetches, WriteTxnMarkers,
ControlledShutdown) are exempt, as Kafka exempts cluster actions.

Controller mutations (KIP-599) are counted in a token bucket of quota × samples × window tokens:
CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+ are refused with
THROTTLING_QUOTA_EXCEEDED (89) while the bucket is empty (a request may take it below zero once);
older versions are only counted.

Everything here runs on the event loop; configs change through `update_entity` (called on the loop
after a write or a change notice). Nothing is counted while no quota is configured at all.
"""

from __future__ import annotations

import logging
import math
from time import perf_counter_ns
from collections.abc import Callable, Mapping

from logbroker.errors import ThrottlingQuotaExceededError
from logbroker.metadata.quota_entities import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    lookup_order,
    quota_values,
)

log = logging.getLogger("kafka.server.ClientQuotaManager")

INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000  # Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds
NANOS_TO_PERCENTAGE = 100 / 1e9  # Kafka's nanosToPercentage: 1 s of time in one second = 100 %
INT32_MAX = (1 << 31) - 1  # throttle_time_ms is an int32


class SampledRate:
    """Kafka's Rate over `samples` windows of `window_ms`: total / measured window, per second."""

    __slots__ = ("samples", "window_ms", "_starts", "_values", "_current")

    def __init__(self, samples: int, window_ms: int, now_ms: float) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._starts = [now_ms]
        self._values = [0.0]
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        current = self._current
        if now_ms - self._starts[current] >= self.window_ms:
            current = (current + 1) % self.samples
            if current == len(self._starts):
                self._starts.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[current] = now_ms
                self._values[current] = 0.0
            self._current = current
        self._values[current] += value

    def _purge(self, now_ms: float) -> None:
        expire_ms = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire_ms:
                self._starts[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: float) -> float:
        """Rate.windowSize: time since the oldest sample, at least (samples - 1) windows."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full_windows = int(elapsed // self.window_ms)
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return elapsed

    def rate(self, now_ms: float) -> float:
        window_ms = self.window_size_ms(now_ms)
        return sum(self._values) / (window_ms / 1000) if window_ms > 0 else 0.0


class ThrottleStats:
    """The throttle-time sensor of a client: Kafka reports its average and max (ms)."""

    __slots__ = ("count", "total_ms", "max_ms")

    def __init__(self) -> None:
        self.count = 0
        self.total_ms = 0
        self.max_ms = 0

    def record(self, throttle_ms: int) -> None:
        self.count += 1
        self.total_ms += throttle_ms
        self.max_ms = max(self.max_ms, throttle_ms)

    @property
    def avg_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0


class ClientSensors:
    __slots__ = ("tags", "rate", "throttle", "last_ms")

    def __init__(self, tags: tuple[str, str], rate: SampledRate, now_ms: float) -> None:
        self.tags = tags
        self.rate = rate
        self.throttle = ThrottleStats()
        self.last_ms = now_ms  # when a value was last counted (idle sensors expire)


class ClientQuotaManager:
    """One quota type (`quota_key`, e.g. producer_byte_rate) with its sensors per metric tags.
    `metric_group` is Kafka's sensor group: Produce, Fetch, Request, ControllerMutation."""

    def __init__(self, quota_key: str, metric_group: str, *, samples: int, window_ms: int,
                 max_throttle_ms: int | None = None) -> None:
        self.quota_key = quota_key
        self.metric_group = metric_group
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        self.quotas: dict[str, float] = {}  # config path → bound
        self.sensors: dict[tuple[str, str], ClientSensors] = {}
        self._resolved: dict[tuple[str, str], tuple[float | None, tuple[str, str]]] = {}

    def set_quota(self, path: str, bound: float | None) -> None:
        if bound is None:
            if self.quotas.pop(path, None) is not None:
                log.info("Removing %s quota for %s", self.quota_key, path)
        elif self.quotas.get(path) != bound:
            log.info("Changing %s quota for %s to %s", self.quota_key, path, bound)
            self.quotas[path] = bound
        self._resolved.clear()

    def quota(self, user: str, client_id: str) -> tuple[float | None, tuple[str, str]]:
        """(bound or None, metric tags) for a principal name and client id."""
        key = (user, client_id)
        found = self._resolved.get(key)
        if found is None:
            found = (None, ("", client_id))
            for path, tags in lookup_order(user, client_id):
                bound = self.quotas.get(path)
                if bound is not None:
                    found = (bound, tags)
                    break
            if len(self._resolved) > 100_000:
                self._resolved.clear()
            self._resolved[key] = found
        return found

    def sensors_for(self, tags: tuple[str, str], now_ms: float) -> ClientSensors:
        sensors = self.sensors.get(tags)
        if sensors is None:
            sensors = self.sensors[tags] = ClientSensors(tags, SampledRate(self.samples, self.window_ms, now_ms),
                                                         now_ms)
        sensors.last_ms = now_ms
        return sensors

    def expire_sensors(self, now_ms: float, inactive_ms: float) -> None:
        """Forget the sensors of clients idle for `inactive_ms` (Kafka: one hour)."""
        for tags in [t for t, s in self.sensors.items() if now_ms - s.last_ms > inactive_ms]:
            del self.sensors[tags]

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Count `value` and return the throttle time (ms) its quota asks for, 0 within it."""
        bound, tags = self.quota(user, client_id)
        sensors = self.sensors_for(tags, now_ms)
        sensors.rate.record(value, now_ms)
        return 0 if bound is None else self._throttle_ms(bound, tags, sensors, value, now_ms)

    def _throttle_ms(self, bound: float, tags: tuple[str, str], sensors: ClientSensors, value: float,
                     now_ms: float) -> int:
        rate = sensors.rate.rate(now_ms)
        if rate <= bound:
            return 0
        throttle_ms = round((rate - bound) / bound * sensors.rate.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            throttle_ms = min(throttle_ms, self.max_throttle_ms)
        return min(max(int(throttle_ms), 0), INT32_MAX)  # throttle_time_ms is an int32

    def unrecord(self, user: str, client_id: str, value: float, now_ms: float) -> None:
        _, tags = self.quota(user, client_id)
        self.sensors_for(tags, now_ms).rate.record(-value, now_ms)

    def throttled(self, user: str, client_id: str, throttle_ms: int, now_ms: float) -> None:
        _, tags = self.quota(user, client_id)
        self.sensors_for(tags, now_ms).throttle.record(throttle_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """getMaxValueInQuotaWindow: what the quota lets through in (samples - 1) windows."""
        bound, _ = self.quota(user, client_id)
        if bound is None:
            return math.inf
        return bound * (self.samples - 1) * self.window_ms / 1000


class TokenBucketQuotaManager(ClientQuotaManager):
    """controller_mutation_rate: Kafka's TokenBucket — `quota × samples × window` tokens, refilled
    at `quota` a second; a request may take the bucket below zero, the next is then refused
    until it is positive again. The rate field holds the tokens used (for metrics)."""

    def __init__(self, quota_key: str, metric_group: str, *, samples: int, window_ms: int) -> None:
        super().__init__(quota_key, metric_group, samples=samples, window_ms=window_ms)
        self._buckets: dict[tuple[str, str], list[float]] = {}  # tags → [tokens, last ms]

    def expire_sensors(self, now_ms: float, inactive_ms: float) -> None:
        super().expire_sensors(now_ms, inactive_ms)
        for tags in [t for t in self._buckets if t not in self.sensors]:
            del self._buckets[tags]

    def _tokens(self, bound: float, tags: tuple[str, str], now_ms: float) -> list[float]:
        burst = bound * self.samples * self.window_ms / 1000
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = [burst, now_ms]
        bucket[0] = min(burst, bucket[0] + (now_ms - bucket[1]) / 1000 * bound)
        bucket[1] = now_ms
        return bucket

    def exceeded_throttle_ms(self, user: str, client_id: str, now_ms: float) -> int:
        """The throttle time when the bucket is empty (the request must be refused), else 0."""
        bound, tags = self.quota(user, client_id)
        if bound is None:
            return 0
        bucket = self._tokens(bound, tags, now_ms)
        return 0 if bucket[0] > 0 else min(math.ceil(-bucket[0] / bound * 1000) or 1, INT32_MAX)

    def _throttle_ms(self, bound: float, tags: tuple[str, str], sensors: ClientSensors, value: float,
                     now_ms: float) -> int:
        bucket = self._tokens(bound, tags, now_ms)
        bucket[0] -= value
        return 0 if bucket[0] >= 0 else min(math.ceil(-bucket[0] / bound * 1000), INT32_MAX)


class ClientQuotas:
    """The broker's quota managers and the quota configs they enforce (`broker.client_quotas`)."""

    def __init__(self, *, samples: int = 11, window_seconds: int = 1, controller_samples: int = 11,
                 controller_window_seconds: int = 1, clock_ms: Callable[[], float]) -> None:
        window_ms = window_seconds * 1000
        self.clock_ms = clock_ms
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, "Produce", samples=samples, window_ms=window_ms)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, "Fetch", samples=samples, window_ms=window_ms)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, "Request", samples=samples, window_ms=window_ms,
                                          max_throttle_ms=window_ms)
        self.controller_mutation = TokenBucketQuotaManager(
            CONTROLLER_MUTATION_RATE, "ControllerMutation", samples=controller_samples,
            window_ms=controller_window_seconds * 1000)
        self.managers = (self.produce, self.fetch, self.request, self.controller_mutation)
        self.configs: dict[str, dict[str, float]] = {}  # path → quota values, for DescribeClientQuotas
        self.enabled = False

    @classmethod
    def from_config(cls, config, clock_ms: Callable[[], float]) -> ClientQuotas:
        return cls(samples=getattr(config, "quota_window_num", 11),
                   window_seconds=getattr(config, "quota_window_size_seconds", 1),
                   controller_samples=getattr(config, "controller_quota_window_num", 11),
                   controller_window_seconds=getattr(config, "controller_quota_window_size_seconds", 1),
                   clock_ms=clock_ms)

    def expire_sensors(self, inactive_ms: float = INACTIVE_SENSOR_EXPIRATION_MS) -> None:
        now_ms = self.clock_ms()
        for manager in self.managers:
            manager.expire_sensors(now_ms, inactive_ms)

    def load(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        for path, config in configs.items():
            self.update_entity(path, config)

    def update_entity(self, path: str, config: Mapping[str, str]) -> None:
        """The entity at `path` now has `config` (its whole config; non-quota keys ignored)."""
        values = quota_values(config)
        if values:
            self.configs[path] = values
        else:
            self.configs.pop(path, None)
        for manager in self.managers:
            manager.set_quota(path, values.get(manager.quota_key))
        self.enabled = any(m.quotas for m in self.managers)


def principal_name(principal: str) -> str:
    """The name part of a principal (`User:alice` → `alice`), as Kafka's quota entities name users."""
    return principal.partition(":")[2] or principal


# Requests between brokers: exempt from the request quota, as Kafka exempts cluster actions.
_CLUSTER_ACTIONS = frozenset({7, 27})  # ControlledShutdown, WriteTxnMarkers


def throttle_request(broker, request, *, manager: ClientQuotaManager | None = None, value: float = 0.0) -> int:
    """Count a request against its client's quotas — its request time, and `value` (bytes) in
    `manager` when given — mute the connection for the larger throttle time and return it (0:
    within every quota). Marks the request counted, so the dispatcher does not count it again."""
    request.quota_done = True
    quotas = broker.client_quotas
    connection = request.connection
    if quotas is None or not quotas.enabled or connection is None:
        return 0
    user = principal_name(connection.principal)
    client_id = request.client_id or ""
    now_ms = quotas.clock_ms()
    bandwidth_ms = manager.record(user, client_id, value, now_ms) if manager is not None and manager.quotas else 0
    request_ms = 0
    if request.api_key not in _CLUSTER_ACTIONS and quotas.request.quotas:
        nanos = request.handler_ns or (perf_counter_ns() - request.start_ns)
        request_ms = quotas.request.record(user, client_id, nanos * NANOS_TO_PERCENTAGE, now_ms)
    throttle_ms = max(bandwidth_ms, request_ms)
    if throttle_ms > 0:
        throttled_by = manager if bandwidth_ms >= request_ms and manager is not None else quotas.request
        throttled_by.throttled(user, client_id, throttle_ms, now_ms)
        connection.mute_for(throttle_ms)
    return throttle_ms


class ControllerMutationQuota:
    """The controller mutation quota of one CreateTopics, CreatePartitions or DeleteTopics request
    (Kafka's Strict/PermissiveControllerMutationQuota). `strict` (CreateTopics v6+,
    CreatePartitions v3+, DeleteTopics v5+): `check` raises THROTTLING_QUOTA_EXCEEDED for a topic
    while the client's bucket is empty; older versions only count. `respond` puts the throttle
    time in the response and mutes the connection for it."""

    def __init__(self, broker, request, *, strict: bool) -> None:
        self.broker = broker
        self.request = request
        self.strict = strict
        self.throttle_ms = 0
        quotas = broker.client_quotas
        self.manager = quotas.controller_mutation \
            if quotas is not None and quotas.enabled and quotas.controller_mutation.quotas else None
        connection = request.connection
        self.user = principal_name(connection.principal) if connection is not None else ""
        self.client_id = request.client_id or ""

    def check(self) -> None:
        if self.manager is None or not self.strict:
            return
        wait_ms = self.manager.exceeded_throttle_ms(self.user, self.client_id, self.broker.client_quotas.clock_ms())
        if wait_ms:
            self.throttle_ms = max(self.throttle_ms, wait_ms)
            raise ThrottlingQuotaExceededError("The throttling quota has been exceeded.")

    def record(self, partitions: int) -> None:
        if self.manager is not None:
            throttle_ms = self.manager.record(self.user, self.client_id, partitions,
                                              self.broker.client_quotas.clock_ms())
            self.throttle_ms = max(self.throttle_ms, throttle_ms)

    def respond(self, response: dict) -> dict:
        request_ms = throttle_request(self.broker, self.request)
        if self.throttle_ms > request_ms:
            self.manager.throttled(self.user, self.client_id, self.throttle_ms, self.broker.client_quotas.clock_ms())
            self.request.connection.mute_for(self.throttle_ms)
        throttle_ms = max(request_ms, self.throttle_ms)
        return {**response, "throttle_time": throttle_ms} if throttle_ms else response
