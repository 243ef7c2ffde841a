"""Restoring a topic from the remote store: its segments copied under a new topic id.

A deleted or lost topic's partitions are directories `<topic>-<partition>-<oldTopicId>` in the
store. `logbroker restore-topic` creates the topic again (with remote.storage.enable) and copies
each partition's objects into `<topic>-<partition>-<newTopicId>` — server-side copies, the data
objects first and each segment's `.metadata` (rewritten with the new topic id) last, so a copy cut
short leaves no segment half there; a `restoring` object in the directory meanwhile keeps the
new leader from taking the copied objects for a crashed upload's. The new leader, whose local log is empty, finds the segments
on its next pass and starts its log after the store's last offset (remote_log_manager.py).
"""

from __future__ import annotations

from dataclasses import replace

from logbroker.errors import InvalidConfigError
from logbroker.remote.metadata import METADATA, RESTORING, parse_partition_dir, partition_dir
from logbroker.remote.storage_manager import RemoteStorageManager
from logbroker.remote.store_survey import survey
from logbroker.types import TopicPartition


async def find_topic(rsm: RemoteStorageManager, topic: str, topic_id: str | None) -> tuple[str, list[int]]:
    """The topic id whose directories hold `topic` (the one given, or the only one) and its
    partitions. InvalidConfigError when there is none, or several and no `topic_id`."""
    found: dict[str, list[int]] = {}
    for name in await rsm.list_directories():
        parsed = parse_partition_dir(name)
        if parsed is not None and parsed[0].topic == topic:
            found.setdefault(parsed[1], []).append(parsed[0].partition)
    if topic_id is not None:
        found = {k: v for k, v in found.items() if k == topic_id}
    if not found:
        raise InvalidConfigError(f"The remote store holds no segments of topic {topic}"
                                 + (f" with topic id {topic_id}" if topic_id else ""))
    if len(found) > 1:
        raise InvalidConfigError(f"The remote store holds topic {topic} under several topic ids "
                                 f"({', '.join(sorted(found))}): choose one with --topic-id")
    [(old_id, partitions)] = found.items()
    return old_id, sorted(partitions)


async def copy_partition(rsm: RemoteStorageManager, tp: TopicPartition, old_id: str, new_id: str) -> int:
    """Copy one partition's segments to the new topic id's directory; returns how many."""
    source, target = partition_dir(tp, old_id), partition_dir(tp, new_id)
    marker = f"{target}/{RESTORING}"
    await rsm.put(marker, b"")  # the new leader leaves the directory alone until it is gone
    segments = (await survey(rsm, source, {})).segments
    keys = await rsm.list_keys(source + "/")
    for key in keys:
        if not key.endswith(METADATA):
            await rsm.copy(key, target + key[len(source):])
    for segment in segments:
        restored = replace(segment, topic_id=new_id)
        await rsm.put(restored.key(METADATA), restored.to_json())
    await rsm.delete_keys([marker])
    return len(segments)

