"""Topic ids to names, for the APIs whose newer versions name topics by id (KIP-516)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

ZERO_UUID = uuid.UUID(int=0)


def topic_names(broker, topic_ids: Iterable[uuid.UUID | None]) -> list[str | None]:
    """The name of each topic id; None for an id this cluster does not know (UNKNOWN_TOPIC_ID)."""
    infos = [broker.store.topic_by_id(topic_id) if topic_id else None for topic_id in topic_ids]
    return [info.name if info is not None else None for info in infos]


def topic_id(broker, name: str) -> uuid.UUID:
    """The id of a topic by name; the zero uuid when there is no such topic (any more)."""
    info = broker.store.topic(name)
    return info.topic_id if info is not None else ZERO_UUID
