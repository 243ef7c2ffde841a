"""acks=-1: answered by the append itself when it moved the high watermark past the batch (a
leader alone in its ISR), else once the followers' fetches do. A ReplicaManager over real logs."""

from __future__ import annotations

import asyncio

from replica_managers import TIMEOUT_MS, TP, batch


def test_acks_all_on_a_leader_alone_in_its_isr_is_answered_by_the_append(leader_of):
    manager = leader_of()

    async def produce():
        return manager.append_records_now(timeout_ms=TIMEOUT_MS, required_acks=-1, entries={TP: batch(5)})

    results = asyncio.run(produce())
    assert isinstance(results, dict)  # no wait, no purgatory entry
    assert results[TP].error is None and (results[TP].base_offset, results[TP].last_offset) == (0, 4)
    assert manager.partitions[TP].high_watermark == 5


def test_acks_all_waits_while_the_high_watermark_is_at_the_batch_and_not_past_it(leader_of):
    manager = leader_of(isr=(1, 2), replicas=(1, 2))
    partition = manager.partitions[TP]

    async def produce():
        first = asyncio.ensure_future(manager.append_records_now(timeout_ms=TIMEOUT_MS, required_acks=-1,
                                                                 entries={TP: batch(2)}))
        partition.update_follower_fetch(2, 2)  # follower 2 has offsets 0-1: the high watermark is 2
        manager.on_isr_changed(partition)
        assert (await first)[TP].last_offset == 1
        second = manager.append_records_now(timeout_ms=TIMEOUT_MS, required_acks=-1, entries={TP: batch(1)})
        assert asyncio.iscoroutine(second)  # offset 2, and the high watermark is 2: not past it
        second = asyncio.ensure_future(second)
        await asyncio.sleep(0.05)
        assert not second.done()
        partition.update_follower_fetch(2, 3)
        manager.on_isr_changed(partition)
        return await second

    results = asyncio.run(produce())
    assert results[TP].error is None and results[TP].last_offset == 2
    assert partition.high_watermark == 3
