"""What a partition's directory in the remote store holds, sorted for reconciliation: the committed
segments, the broken ones (a metadata whose .log is not there), the deletions to finish, and the
orphans (objects no metadata names) with their age.

Reads the store (one listing, and a GET for each metadata object not already known); deletes
nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from logbroker.remote.metadata import (
    DELETE_SEGMENT_STARTED,
    METADATA,
    RESTORING,
    SEGMENT,
    RemoteLogSegmentMetadata,
    parse_object_name,
)
from logbroker.remote.storage_manager import RemoteResourceNotFoundError, RemoteStorageManager


@dataclass
class Survey:
    """One listing of a partition directory. `segments` are in start offset order."""

    restoring: bool = False
    segments: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    # (metadata, missing suffixes): broken without its .log (the records are not in the store:
    # nothing to keep); damaged with the .log but without another file (kept among `segments`:
    # the records may be nowhere else; reads of it fail until the file is back).
    broken: list[tuple[RemoteLogSegmentMetadata, list[str]]] = field(default_factory=list)
    damaged: list[tuple[RemoteLogSegmentMetadata, list[str]]] = field(default_factory=list)
    deleting: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    orphans: dict[str, int] = field(default_factory=dict)  # key → last modified (ms)


def missing_files(metadata: RemoteLogSegmentMetadata, suffixes: set[str]) -> list[str]:
    """The suffixes of the files `metadata` says its segment has and the store lacks."""
    return [s for s in metadata.data_suffixes() if s not in suffixes]


async def survey(rsm: RemoteStorageManager, directory: str,
                 known: dict[str, RemoteLogSegmentMetadata]) -> Survey:
    """List `directory`; the metadata of segment ids in `known` is not read again. A metadata
    object that disappears between the listing and its GET is a deletion in progress: left out.
    An unreadable one raises RemoteStorageError (RemoteStorageManager.get_metadata)."""
    objects = dict(await rsm.list_objects(directory + "/"))
    result = Survey(restoring=f"{directory}/{RESTORING}" in objects)
    files: dict[str, dict[str, str]] = {}  # segment id → suffix → key
    for key in objects:
        parsed = parse_object_name(key.rsplit("/", 1)[-1])
        if parsed is not None:
            files.setdefault(parsed[1], {})[parsed[2]] = key
    found: dict[str, RemoteLogSegmentMetadata] = {}
    to_read: dict[str, str] = {}
    for segment_id, by_suffix in files.items():
        if METADATA not in by_suffix:
            result.orphans.update({key: objects[key] for key in by_suffix.values()})
        elif segment_id in known:
            found[segment_id] = known[segment_id]
        else:
            to_read[segment_id] = by_suffix[METADATA]
    fetched = await asyncio.gather(*(rsm.get_metadata(k) for k in to_read.values()), return_exceptions=True)
    for segment_id, metadata in zip(to_read, fetched):
        if isinstance(metadata, RemoteResourceNotFoundError):
            continue
        if isinstance(metadata, BaseException):
            raise metadata
        found[segment_id] = metadata
    for segment_id, metadata in found.items():
        missing = missing_files(metadata, set(files[segment_id]))
        if metadata.state == DELETE_SEGMENT_STARTED:
            result.deleting.append(metadata)
        elif SEGMENT in missing:
            result.broken.append((metadata, missing))
        else:
            if missing:
                result.damaged.append((metadata, missing))
            result.segments.append(metadata)
    result.segments.sort(key=lambda m: (m.start_offset, m.end_offset))
    return result
