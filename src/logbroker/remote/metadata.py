"""Remote segment metadata (Kafka's RemoteLogSegmentMetadata) and where a segment's objects live.

Layout, in the remote store under `rsm.config.s3.prefix` (S3) or `rsm.config.dir` (local) — Kafka's
LocalTieredStorage layout, one directory per partition, each file named by the segment's start
offset and its RemoteLogSegmentId (a random UUID in Kafka's base64 form):

    <topic>-<partition>-<topicId>/
        00000000000000004096-<segmentId>.log                       the segment's records, as on disk
        00000000000000004096-<segmentId>.index / .timeindex        its offset and time indexes
        00000000000000004096-<segmentId>.txnindex                  aborted transactions, when any
        00000000000000004096-<segmentId>.snapshot                  producer state at the end offset + 1
        00000000000000004096-<segmentId>.leader_epoch_checkpoint   the leader epochs up to there
        00000000000000004096-<segmentId>.metadata                  this metadata, as JSON

Why beside the files and not in `__remote_log_metadata`: the bucket alone then describes every
remote segment, so a broker with an erased disk, `logbroker dump-log` and the Spark source read it
without a broker or a topic, and there is no second log to keep consistent with the first.

States (Kafka's RemoteLogSegmentState): the `.metadata` object is written once with
COPY_SEGMENT_FINISHED after every other object of the segment is in the store — that write is the
commit of an upload. Objects of a segment id without a COPY_SEGMENT_FINISHED metadata are the
leftovers of a crashed upload and are deleted by the next pass (each attempt uses a fresh segment
id, so a retry never overwrites them). A deletion first rewrites the metadata as
DELETE_SEGMENT_STARTED, then deletes the files, the metadata last; a crash in between is finished
by the next pass. While `logbroker restore-topic` fills a directory it holds a `restoring`
object, and no broker loads (or cleans) the directory until it is gone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace

from logbroker.types import TopicPartition

COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"

# RemoteStorageManager.IndexType and the segment file, with their suffixes (LocalTieredStorage's).
SEGMENT = ".log"
OFFSET_INDEX = ".index"
TIME_INDEX = ".timeindex"
TRANSACTION_INDEX = ".txnindex"
PRODUCER_SNAPSHOT = ".snapshot"
LEADER_EPOCH = ".leader_epoch_checkpoint"
METADATA = ".metadata"
RESTORING = "restoring"  # a partition directory `logbroker restore-topic` is still filling
DATA_SUFFIXES = (SEGMENT, OFFSET_INDEX, TIME_INDEX, TRANSACTION_INDEX, PRODUCER_SNAPSHOT, LEADER_EPOCH)


def partition_dir(tp: TopicPartition, topic_id_str: str) -> str:
    """`<topic>-<partition>-<topicId>`: a partition's directory in the store."""
    return f"{tp.topic}-{tp.partition}-{topic_id_str}"


def parse_partition_dir(name: str) -> tuple[TopicPartition, str] | None:
    """The partition and topic id a store directory name holds; None for another name."""
    if len(name) < 26 or name[-23] != "-":
        return None
    topic, sep, partition = name[:-23].rpartition("-")
    if not (sep and topic and partition.isdigit()):
        return None
    return TopicPartition(topic, int(partition)), name[-22:]


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """One remote segment: offsets [start_offset, end_offset], its size, largest timestamp, the
    leader epochs in it (epoch → first offset), which optional files it has, and its state.

    Invariant: start_offset <= end_offset; every record of the segment lies in that range.
    """

    topic: str
    partition: int
    topic_id: str
    segment_id: str
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: dict[int, int] = field(default_factory=dict)
    has_txn_index: bool = False
    has_producer_snapshot: bool = False
    state: str = COPY_SEGMENT_FINISHED

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def directory(self) -> str:
        return partition_dir(self.topic_partition, self.topic_id)

    def key(self, suffix: str) -> str:
        """The object key (below the store's prefix) of one of this segment's files."""
        return f"{self.directory}/{self.start_offset:020d}-{self.segment_id}{suffix}"

    def data_suffixes(self) -> list[str]:
        """The suffixes of the files this segment has in the store, its metadata aside."""
        suffixes = [SEGMENT, OFFSET_INDEX, TIME_INDEX, LEADER_EPOCH]
        if self.has_txn_index:
            suffixes.append(TRANSACTION_INDEX)
        if self.has_producer_snapshot:
            suffixes.append(PRODUCER_SNAPSHOT)
        return suffixes

    def data_keys(self) -> list[str]:
        return [self.key(s) for s in self.data_suffixes()]

    def epoch_at(self, offset: int) -> int | None:
        """The leader epoch `offset` was written in, by this segment's epochs; None below them."""
        epochs = [e for e, start in self.segment_leader_epochs.items() if start <= offset]
        return max(epochs) if epochs else None

    def with_state(self, state: str) -> RemoteLogSegmentMetadata:
        return replace(self, state=state)

    def to_json(self) -> bytes:
        data = asdict(self)
        data["segment_leader_epochs"] = {str(k): v for k, v in self.segment_leader_epochs.items()}
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> RemoteLogSegmentMetadata:
        """Raises ValueError (or KeyError/TypeError) for bytes that are not such a metadata."""
        data = json.loads(raw)
        data["segment_leader_epochs"] = {int(k): int(v) for k, v in data["segment_leader_epochs"].items()}
        return cls(**data)


def parse_object_name(name: str) -> tuple[int, str, str] | None:
    """(start offset, segment id, suffix) of an object's file name; None for another name."""
    stem, dot, rest = name.partition(".")
    offset, dash, segment_id = stem.partition("-")
    if not (dot and dash and offset.isdigit() and len(offset) == 20):
        return None
    return int(offset), segment_id, "." + rest

