"""The server-side assignors: every partition to one subscriber, balance, stickiness."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from logbroker.coordinator.assignors import MemberSpec, RangeAssignor, UniformAssignor, assignors_from_config

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]


def owners(result) -> dict[tuple[uuid.UUID, int], list[str]]:
    seen: dict[tuple[uuid.UUID, int], list[str]] = {}
    for member_id, assignment in result.items():
        for topic_id, ps in assignment.items():
            for p in ps:
                seen.setdefault((topic_id, p), []).append(member_id)
    return seen


def counts(result) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


subscriptions = st.lists(st.frozensets(st.sampled_from(TOPICS), min_size=1), min_size=1, max_size=6)
partition_counts = st.lists(st.integers(0, 7), min_size=len(TOPICS), max_size=len(TOPICS))


@given(subscriptions, partition_counts)
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(subscribed, sizes):
    partitions = dict(zip(TOPICS, sizes))
    members = [MemberSpec(f"m{i}", topics) for i, topics in enumerate(subscribed)]
    for assignor in (UniformAssignor(), RangeAssignor()):
        result = assignor.assign(members, partitions)
        assert set(result) == {m.member_id for m in members}
        seen = owners(result)
        expected = {(t, p) for m in members for t in m.topic_ids for p in range(partitions[t])}
        assert set(seen) == expected
        assert all(len(who) == 1 for who in seen.values())
        topics_of = {m.member_id: m.topic_ids for m in members}
        assert all(t in topics_of[who[0]] for (t, _), who in seen.items())


@given(st.integers(1, 8), partition_counts)
def test_uniform_balances_members_with_the_same_subscription_within_one(n, sizes):
    partitions = dict(zip(TOPICS, sizes))
    result = UniformAssignor().assign([MemberSpec(f"m{i}", frozenset(TOPICS)) for i in range(n)], partitions)
    assert counts(result)[-1] - counts(result)[0] <= 1


@given(st.integers(1, 6), st.integers(1, 24))
def test_uniform_moves_only_what_a_new_member_takes(n, size):
    partitions = {TOPICS[0]: size}
    members = [MemberSpec(f"m{i}", frozenset(TOPICS[:1])) for i in range(n)]
    before = UniformAssignor().assign(members, partitions)
    grown = [MemberSpec(m.member_id, m.topic_ids, before[m.member_id]) for m in members]
    grown.append(MemberSpec("new", frozenset(TOPICS[:1])))
    after = UniformAssignor().assign(grown, partitions)
    moved = sum(len(before[m.member_id].get(TOPICS[0], frozenset()) - after[m.member_id].get(TOPICS[0], frozenset()))
                for m in members)
    assert moved == sum(len(ps) for ps in after["new"].values())
    assert counts(after)[-1] - counts(after)[0] <= 1


def test_range_co_partitions_topics_of_the_same_size():
    members = [MemberSpec(m, frozenset(TOPICS[:2])) for m in ("b", "a", "c")]
    result = RangeAssignor().assign(members, {TOPICS[0]: 7, TOPICS[1]: 7})
    assert result["a"] == {TOPICS[0]: frozenset({0, 1, 2}), TOPICS[1]: frozenset({0, 1, 2})}
    assert result["b"][TOPICS[0]] == result["b"][TOPICS[1]] == frozenset({3, 4})
    assert result["c"][TOPICS[0]] == frozenset({5, 6})


def test_assignors_are_named_by_short_or_kafka_class_name():
    chosen = assignors_from_config(["org.apache.kafka.coordinator.group.assignor.RangeAssignor", "uniform"])
    assert list(chosen) == ["range", "uniform"]
