"""server/client_quotas: Kafka's sampled rate, the 8-level precedence of quota entities and the
throttle times, on a manual clock."""

from __future__ import annotations

import pytest

from logbroker.metadata.quota_entities import entity_of_path, entity_path, lookup_order, sanitize
from logbroker.server.client_quotas import ClientQuotas, SampledRate


class Clock:
    def __init__(self) -> None:
        self.now_ms = 0.0

    def __call__(self) -> float:
        return self.now_ms


def test_rate_is_measured_over_at_least_samples_minus_one_windows():
    rate = SampledRate(11, 1000, 0)
    rate.record(10_000, 0)
    assert rate.rate(0) == pytest.approx(1000)  # 10 000 bytes over 10 s
    for second in range(1, 30):
        rate.record(500, second * 1000)
    assert rate.rate(29_000) == pytest.approx(500, rel=0.1)


def test_old_samples_expire():
    rate = SampledRate(3, 1000, 0)
    rate.record(3000, 0)
    assert rate.rate(10_000) == 0


@pytest.mark.parametrize(("paths", "expected"), [
    (["users/alice/clients/app", "users/alice/clients/<default>", "users/alice", "clients/app"],
     ("users/alice/clients/app", ("alice", "app"))),
    (["users/alice/clients/<default>", "users/alice", "users/<default>/clients/app"],
     ("users/alice/clients/<default>", ("alice", "app"))),
    (["users/alice", "users/<default>/clients/app", "clients/app"], ("users/alice", ("alice", ""))),
    (["users/<default>/clients/app", "users/<default>/clients/<default>"],
     ("users/<default>/clients/app", ("alice", "app"))),
    (["users/<default>/clients/<default>", "users/<default>", "clients/app"],
     ("users/<default>/clients/<default>", ("alice", "app"))),
    (["users/<default>", "clients/app"], ("users/<default>", ("alice", ""))),
    (["clients/app", "clients/<default>"], ("clients/app", ("", "app"))),
    (["clients/<default>", "users/bob"], ("clients/<default>", ("", "app"))),
    (["users/bob"], (None, ("", "app"))),
])
def test_the_most_specific_of_the_eight_levels_wins(paths, expected):
    quotas = ClientQuotas(clock_ms=Clock())
    for i, path in enumerate(paths):
        quotas.update_entity(path, {"producer_byte_rate": str(1000 + i)})
    bound, tags = quotas.produce.quota("alice", "app")
    want_path, want_tags = expected
    assert tags == want_tags
    assert bound == (None if want_path is None else 1000 + paths.index(want_path))


def test_each_quota_type_is_looked_up_on_its_own():
    quotas = ClientQuotas(clock_ms=Clock())
    quotas.update_entity("users/alice", {"producer_byte_rate": "100", "SCRAM-SHA-256": "salt=…"})
    quotas.update_entity("clients/app", {"consumer_byte_rate": "200"})
    assert quotas.produce.quota("alice", "app")[0] == 100
    assert quotas.fetch.quota("alice", "app")[0] == 200
    assert quotas.request.quota("alice", "app")[0] is None
    quotas.update_entity("users/alice", {"SCRAM-SHA-256": "salt=…"})
    assert quotas.produce.quota("alice", "app")[0] is None
    assert quotas.configs == {"clients/app": {"consumer_byte_rate": 200.0}}


def test_throttle_time_brings_the_rate_back_to_the_quota():
    clock = Clock()
    quotas = ClientQuotas(clock_ms=clock)
    quotas.update_entity("clients/app", {"producer_byte_rate": "1000"})
    assert quotas.produce.record("u", "app", 10_000, 0) == 0  # the first window's burst
    throttle_ms = quotas.produce.record("u", "app", 5_000, 0)
    # 15 000 bytes over 10 s is 1500/s: silent for half the window
    assert throttle_ms == 5000


def test_a_client_that_obeys_its_throttle_times_runs_at_the_quota():
    quotas = ClientQuotas(clock_ms=Clock())
    quotas.update_entity("clients/app", {"producer_byte_rate": "100000"})
    now_ms, sent = 0.0, {}
    while now_ms < 120_000:
        throttle_ms = quotas.produce.record("u", "app", 20_000, now_ms)
        sent[now_ms] = 20_000
        now_ms += max(throttle_ms, 5)  # a fast client: a request every 5 ms unless throttled
    steady = sum(v for t, v in sent.items() if t >= 30_000) / 90
    assert steady == pytest.approx(100_000, rel=0.05)


def test_request_throttle_is_bounded_by_one_window():
    quotas = ClientQuotas(clock_ms=Clock())
    quotas.update_entity("users/<default>", {"request_percentage": "1"})
    assert quotas.request.record("u", "c", 500, 0) == 1000


def test_controller_mutation_bucket_may_go_below_zero_once():
    quotas = ClientQuotas(clock_ms=Clock())
    quotas.update_entity("users/u", {"controller_mutation_rate": "2"})  # burst 2 × 11 × 1 s = 22
    cm = quotas.controller_mutation
    assert cm.exceeded_throttle_ms("u", "c", 0) == 0
    assert cm.record("u", "c", 30, 0) == 4000  # 8 below zero at 2 a second
    assert cm.exceeded_throttle_ms("u", "c", 1000) == 3000
    assert cm.exceeded_throttle_ms("u", "c", 4001) == 0


def test_lookup_paths_sanitize_names():
    assert lookup_order("a b", "c*")[0] == ("users/a%20b/clients/c%2A", (sanitize("a b"), "c*"))


@pytest.mark.parametrize("entity", [{"user": "a/b"}, {"client-id": None}, {"user": None, "client-id": "x y"},
                                    {"user": "<default>"}])
def test_entity_paths_round_trip(entity):
    assert entity_of_path(entity_path(entity)) == entity


def test_idle_sensors_expire():
    clock = Clock()
    quotas = ClientQuotas(clock_ms=clock)
    quotas.update_entity("clients/<default>", {"producer_byte_rate": "100"})
    quotas.produce.record("u", "a", 10, 0)
    clock.now_ms = 3_000_000
    quotas.produce.record("u", "b", 10, clock.now_ms)
    clock.now_ms = 3_700_000
    quotas.expire_sensors()
    assert set(quotas.produce.sensors) == {("", "b")}


@pytest.mark.parametrize(("name", "znode"), [("alice", "alice"), ("a b", "a%20b"), ("a/b", "a%2Fb"),
                                             ("x*~", "x%2A%7E"), (".", "%2E"), ("..", "%2E%2E"),
                                             ("<default>", "%3Cdefault%3E")])
def test_names_are_sanitized_as_kafka_does(name, znode):
    assert sanitize(name) == znode
    assert entity_of_path(entity_path({"user": name})) == {"user": name}


def test_throttle_time_fits_the_int32_field():
    quotas = ClientQuotas(clock_ms=Clock())
    quotas.update_entity("clients/c", {"producer_byte_rate": "1", "controller_mutation_rate": "0.000001"})
    assert quotas.produce.record("u", "c", 1e12, 0) == (1 << 31) - 1
    assert quotas.controller_mutation.record("u", "c", 1e6, 0) == (1 << 31) - 1
