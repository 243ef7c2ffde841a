"""A fetch that waits (min.bytes not there yet) is answered when what it may read changes, and
only then: a consumer reads below the high watermark, so a leader's append that followers have
not fetched yet must not answer it (nor read the log again for it: ReplicaManager._fetch_has_news);
the follower's fetch that moves the high watermark must. A consumer at the end of the log parks
without reading at all, yet every error a read would answer still comes at once. Driven on a
ReplicaManager over a real log, broker 1 leading (with broker 2 as follower)."""

from __future__ import annotations

import asyncio

import pytest
from replica_managers import TIMEOUT_MS, TP, batch

from logbroker.replication.replica_manager import FetchPartitionRequest


def consumer_fetch(manager, offset: int, *, max_wait_ms: int = 5_000):
    return manager.fetch_messages(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                                  partitions=[FetchPartitionRequest(TP, offset, 1 << 20)])


def test_a_waiting_fetch_is_answered_when_the_high_watermark_moves_not_at_the_append(leader_of):
    manager = leader_of(isr=(1, 2), replicas=(1, 2))
    partition = manager.partitions[TP]
    reads = []
    read_partition = manager._read_partition
    manager._read_partition = lambda *a, **kw: reads.append(1) or read_partition(*a, **kw)

    async def run():
        waiting = asyncio.ensure_future(consumer_fetch(manager, 0))
        await asyncio.sleep(0)
        assert reads == [] and not waiting.done()  # at the end of the log: parked without a read
        produced = asyncio.ensure_future(manager.append_records(
            timeout_ms=TIMEOUT_MS, required_acks=1, entries={TP: batch(3)}))
        await asyncio.sleep(0.05)
        assert (await produced)[TP].last_offset == 2
        assert partition.log.log_end_offset == 3 and partition.high_watermark == 0
        assert not waiting.done() and reads == []  # the append woke it; nothing to read: no read
        partition.update_follower_fetch(2, 3)  # follower 2 has fetched the batch
        manager.on_isr_changed(partition)
        return await asyncio.wait_for(waiting, 5)

    results = asyncio.run(run())
    result = results[TP]
    assert result.error is None and result.high_watermark == 3
    assert result.records is not None and result.records.size == len(batch(3))
    assert reads == [1]


def test_a_waiting_fetch_ends_at_max_wait_with_no_records(leader_of):
    manager = leader_of(isr=(1, 2), replicas=(1, 2))

    async def run():
        waiting = consumer_fetch(manager, 0, max_wait_ms=200)
        await manager.append_records(timeout_ms=TIMEOUT_MS, required_acks=1, entries={TP: batch(2)})
        return await asyncio.wait_for(waiting, 5)

    result = asyncio.run(run())[TP]
    assert result.error is None and result.records is None and result.high_watermark == 0


def test_a_fetch_at_the_end_is_empty_and_one_below_it_starts_at_its_batch(leader_of):
    """The read a consumer at the end makes on every poll, and the one after the next append:
    from the first offset of the last batch appended (found without the index)."""
    manager = leader_of()
    sizes = []
    for n in (2, 5, 1):
        data = batch(n)
        sizes.append(len(data))
        asyncio.run(manager.append_records(timeout_ms=TIMEOUT_MS, required_acks=1, entries={TP: data}))
    at_end = manager.fetch_messages(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                    partitions=[FetchPartitionRequest(TP, 8, 1 << 20)])[TP]
    assert at_end.error is None and at_end.records is None and at_end.high_watermark == 8
    last = manager.fetch_messages(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                  partitions=[FetchPartitionRequest(TP, 7, 1 << 20)])[TP]
    assert (last.records.position, last.records.size) == (sizes[0] + sizes[1], sizes[2])
    middle = manager.fetch_messages(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                    partitions=[FetchPartitionRequest(TP, 4, 1 << 20)])[TP]
    assert (middle.records.position, middle.records.size) == (sizes[0], sizes[1] + sizes[2])


UNKNOWN_SERVER_ERROR, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION = -1, 1, 3
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75


def test_a_consumer_at_the_end_still_gets_every_error_at_once(leader_of):
    """Each of these fetches asks to wait 5 s for one byte at (or about) the log end; each is
    answered at once with the error a read finds (the shortcut that parks without reading must
    not hold them for max_wait)."""
    manager = leader_of(leader_epoch=1)
    other = TP._replace(partition=7)  # not hosted here

    async def run():
        await manager.append_records(timeout_ms=TIMEOUT_MS, required_acks=1, entries={TP: batch(2)})
        cases = {
            "negative partition_max_bytes": [FetchPartitionRequest(TP, 2, -1)],
            "past the end": [FetchPartitionRequest(TP, 3, 1 << 20)],
            "an older leader epoch": [FetchPartitionRequest(TP, 2, 1 << 20, 0)],
            "a newer leader epoch": [FetchPartitionRequest(TP, 2, 1 << 20, 2)],
            "a partition not hosted": [FetchPartitionRequest(TP, 2, 1 << 20),
                                       FetchPartitionRequest(other, 0, 1 << 20)],
        }
        answers = {}
        for name, partitions in cases.items():
            result = manager.fetch_messages(replica_id=-1, max_wait_ms=5_000, min_bytes=1, max_bytes=1 << 20,
                                            partitions=partitions)
            assert isinstance(result, dict), f"{name}: waited"
            answers[name] = {tp.partition: (r.error.code if r.error else 0) for tp, r in result.items()}
        negative_total = manager.fetch_messages(replica_id=-1, max_wait_ms=5_000, min_bytes=1, max_bytes=-1,
                                                partitions=[FetchPartitionRequest(TP, 2, 1 << 20)])
        assert isinstance(negative_total, dict), "a negative max_bytes waited"
        answers["negative max_bytes"] = {0: negative_total[TP].error.code}
        return answers

    assert asyncio.run(run()) == {
        "negative partition_max_bytes": {0: UNKNOWN_SERVER_ERROR},
        "past the end": {0: OFFSET_OUT_OF_RANGE},
        "an older leader epoch": {0: FENCED_LEADER_EPOCH},
        "a newer leader epoch": {0: UNKNOWN_LEADER_EPOCH},
        "a partition not hosted": {0: 0, 7: UNKNOWN_TOPIC_OR_PARTITION},
        "negative max_bytes": {0: UNKNOWN_SERVER_ERROR},
    }


@pytest.mark.parametrize("ended_by", ["max_wait", "an append"])
def test_a_parked_fetch_whose_waiter_never_ran_leaves_the_purgatory(leader_of, ended_by):
    """A consumer's fetch is parked as the handler returns, before any task awaits it; a
    connection that closes before that task first runs must not leave it watched for good,
    whether its wait then times out or an append completes it."""
    manager = leader_of()

    async def run():
        waiter = asyncio.ensure_future(consumer_fetch(manager, 0, max_wait_ms=300))
        parked = len(manager.fetch_purgatory)
        waiter.cancel()  # before its first step: the coroutine never runs
        if ended_by == "an append":
            await manager.append_records(timeout_ms=TIMEOUT_MS, required_acks=1, entries={TP: batch(1)})
            return parked, len(manager.fetch_purgatory)
        await asyncio.sleep(0.6)
        return parked, len(manager.fetch_purgatory)

    assert asyncio.run(run()) == (1, 0)


def test_a_parked_fetch_whose_waiter_is_cancelled_leaves_the_purgatory_at_once(leader_of):
    """The connection of a waiting fetch closes (its task is cancelled while it waits): the
    purgatory stops watching it then, not when its max_wait ends."""
    manager = leader_of()

    async def run():
        waiter = asyncio.ensure_future(consumer_fetch(manager, 0, max_wait_ms=5_000))
        await asyncio.sleep(0)  # the waiter is parked, awaiting its result
        parked = len(manager.fetch_purgatory)
        waiter.cancel()
        await asyncio.sleep(0)
        return parked, waiter.cancelled(), len(manager.fetch_purgatory)

    assert asyncio.run(run()) == (1, True, 0)
