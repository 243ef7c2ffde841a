"""The purgatory: requests that wait for something to happen on a partition, or for time to pass.

Kafka's DelayedOperationPurgatory. A delayed operation (an acks=-1 produce waiting for the high
watermark, a fetch waiting for min.bytes) is first tried at once (by `wait`, or by the caller
that then hands it to `watch`); if it cannot complete it is watched under every partition it
concerns, and `check_and_complete(tp)` — called after each append and each high-watermark move
on that partition — tries it again. It completes exactly once: by its condition, or by its
timeout, whichever comes first. The purgatory stops watching it then, or when its awaiter is
cancelled (a watched op may have no awaiter yet: its connection can close before the task that
would await it first runs). Runs on the event loop only.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, TypeVar

from logbroker.types import TopicPartition

T = TypeVar("T")


class DelayedOperation(Generic[T]):
    """`try_complete` returns a result when the operation can finish now, else None.
    `on_expiration` gives the result when the timeout strikes first."""

    def __init__(self, *, try_complete: Callable[[], T | None], on_expiration: Callable[[], T],
                 keys: Iterable[TopicPartition]) -> None:
        self.try_complete = try_complete
        self.on_expiration = on_expiration
        self.keys = tuple(keys)
        self.future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.timer: asyncio.TimerHandle | None = None

    def complete(self, result: T) -> None:
        if not self.future.done():
            self.future.set_result(result)
        if self.timer is not None:
            self.timer.cancel()


class Purgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[TopicPartition, set[DelayedOperation]] = defaultdict(set)

    def __len__(self) -> int:
        return len({op for ops in self._watchers.values() for op in ops})

    async def wait(self, op: DelayedOperation[T], timeout_ms: int) -> T:
        """Complete `op` now if it can, else park it until a check completes it or it times out."""
        result = op.try_complete()
        if result is not None:
            return result
        return await self.watch(op, timeout_ms)

    def watch(self, op: DelayedOperation[T], timeout_ms: int) -> Awaitable[T]:
        """Park `op` at once, without trying it: for a caller that has just found it cannot
        complete, with nothing run since (a `wait` would run its check again, a loop turn later).
        Returns what to await for the result."""
        loop = asyncio.get_running_loop()
        op.timer = loop.call_later(max(timeout_ms, 0) / 1000, self._expire, op)
        for key in op.keys:
            self._watchers[key].add(op)
        return self._outcome(op)

    async def _outcome(self, op: DelayedOperation[T]) -> T:
        try:
            return await op.future
        except asyncio.CancelledError:  # its awaiter went (the connection closed): unwatch it now
            self._unwatch(op)
            raise

    def check_and_complete(self, key: TopicPartition) -> int:
        """Try every operation watching `key`; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        for op in list(ops):
            if not op.future.done():
                result = op.try_complete()
                if result is None:
                    continue
                op.complete(result)
                completed += 1
            # Completed here, or done already (its awaiter cancelled it): no longer watched. The
            # purgatory unwatches what completes, since a watched op may have no awaiter yet.
            self._unwatch(op)
        return completed

    def _expire(self, op: DelayedOperation) -> None:
        if not op.future.done():
            op.complete(op.on_expiration())
        self._unwatch(op)

    def _unwatch(self, op: DelayedOperation) -> None:
        if op.timer is not None:
            op.timer.cancel()
        for key in op.keys:
            ops = self._watchers.get(key)
            if ops is not None:
                ops.discard(op)
                if not ops:
                    del self._watchers[key]
