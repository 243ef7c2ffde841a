"""Kafka clients kept per Python worker process, reused across tasks and micro-batches.

Spark reuses its Python workers (`spark.python.worker.reuse`, on by default), so a module-level
cache lives as long as the worker: a streaming query's tasks find the producer (or consumer) that
the previous micro-batch's task left there, connected and with its metadata warm, instead of
paying a bootstrap, Metadata round trips and (for transactions) InitProducerId every batch.

Keys are the full client configuration, so two queries with different settings never share a
client. A transactional producer is keyed by its `transactional.id` as well (it is part of the
config): there is at most one per id per process, and it is never used by two tasks at once
because a task takes it out of the cache (`take`) and puts it back (`give_back`) only when it
finished cleanly — a task that fails drops its client, so nothing half-done is ever reused.
Idle clients beyond `MAX_IDLE_PER_KEY` are closed.

Not thread-safe by design: a Python worker runs one task at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

MAX_IDLE_PER_KEY = 2

_idle: dict[Hashable, list[Any]] = {}


def config_key(config: Mapping[str, object]) -> Hashable:
    """A hashable key for a client configuration (callbacks compare by identity)."""
    return tuple(sorted((key, value if isinstance(value, Hashable) else id(value))
                        for key, value in config.items()))


def take(key: Hashable, create: Callable[[], Any]) -> tuple[Any, bool]:
    """An idle client for `key`, or a new one from `create()`; returns (client, reused)."""
    idle = _idle.get(key)
    if idle:
        return idle.pop(), True
    return create(), False


def give_back(key: Hashable, client: Any, close: Callable[[Any], None]) -> None:
    """Keep `client` for the next task with the same key (or close it if enough are idle)."""
    idle = _idle.setdefault(key, [])
    if len(idle) >= MAX_IDLE_PER_KEY:
        close(client)
    else:
        idle.append(client)


def idle_count() -> int:
    return sum(len(clients) for clients in _idle.values())
