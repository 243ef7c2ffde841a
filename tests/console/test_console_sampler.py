"""The throughput and lag sampler with a stand-in cluster: rates are differences of end offsets
between samples, and only watched groups are sampled."""

from __future__ import annotations

from types import SimpleNamespace

from logbroker.webconsole import sampler as sampler_module
from logbroker.webconsole.model import GroupInfo, GroupOffset
from logbroker.webconsole.sampler import Sampler


class FakeCluster:
    def __init__(self) -> None:
        self.ends = {("a", 0): 0, ("a", 1): 0, ("b", 0): 0}
        self.described: list[str] = []

    def metadata(self):
        topics = {}
        for topic, partition in self.ends:
            topics.setdefault(topic, SimpleNamespace(partitions={}))
            topics[topic].partitions[partition] = None
        return SimpleNamespace(topics=topics)

    def list_offsets(self, partitions, spec):
        return {tp: self.ends[tp] for tp in partitions}

    def group(self, group_id):
        self.described.append(group_id)
        return GroupInfo(group_id, "Empty", "", None, (),
                         (GroupOffset("a", 0, 0, self.ends[("a", 0)], None),))


def test_rates_are_end_offset_differences_per_second(monkeypatch):
    clock = iter([100.0, 102.0, 103.0])
    monkeypatch.setattr(sampler_module.time, "time", lambda: next(clock))
    cluster = FakeCluster()
    sampler = Sampler(cluster, interval_s=1)
    sampler.sample_once()
    assert sampler.topic_rates() == {} and sampler.rate_series() == []
    cluster.ends.update({("a", 0): 10, ("a", 1): 30, ("b", 0): 4})
    sampler.sample_once()
    assert sampler.topic_rates() == {"a": 20.0, "b": 2.0}
    cluster.ends[("b", 0)] = 7
    sampler.sample_once()
    assert sampler.rate_series() == [(102.0, 22.0), (103.0, 3.0)]
    assert sampler.rate_series("b") == [(102.0, 2.0), (103.0, 3.0)]
    assert sampler.rate_series("gone") == [(102.0, 0.0), (103.0, 0.0)]


def test_only_watched_groups_have_their_lag_sampled():
    cluster = FakeCluster()
    sampler = Sampler(cluster, interval_s=1)
    sampler.sample_once()
    assert cluster.described == []
    sampler.watch_group("g", total_lag=5)
    cluster.ends[("a", 0)] = 9
    sampler.sample_once()
    assert cluster.described == ["g"]
    assert [lag for _, lag in sampler.lag_series("g")] == [5, 9]
    assert sampler.lag_series("other") == []
