"""The leader of a tiered partition keeps its leader epoch lineage back to the earliest remote
offset, and reconciles the bucket with it: objects other leaders left there (a diverged copy, a
duplicate, an upload cut short, a metadata without its data) go, what is in the lineage stays."""

from __future__ import annotations

import json

from logbroker.storage.checkpoints import random_kafka_uuid, uuid_to_kafka_str

from clients import consume_confluent, create_topic, produce_confluent
from tiered_helpers import wait_until
from test_tiered_storage import PRODUCER, TIERED, local_segments, remote_metadata, specs, start_broker


def epoch_entries(broker, topic: str) -> list[tuple[int, int]]:
    lines = (broker.data_dir / f"{topic}-0" / "leader-epoch-checkpoint").read_text().split("\n")
    return [tuple(int(f) for f in line.split()) for line in lines[2:] if line]


def segment_keys(bucket, meta: dict) -> dict[str, str]:
    """suffix → key of a remote segment's objects."""
    stem = f"{meta['start_offset']:020d}-{meta['segment_id']}"
    return {k.rsplit(stem, 1)[1]: k for k in bucket.keys() if stem in k}


def plant(bucket, source: dict, *, suffixes, **changes) -> str:
    """Copy `source`'s objects (those with `suffixes`) under a fresh segment id, its metadata
    (when `.metadata` is among them) rewritten with `changes`; the new segment id."""
    segment_id = uuid_to_kafka_str(random_kafka_uuid())
    meta = {**source, **changes, "segment_id": segment_id}
    old_stem = f"{source['start_offset']:020d}-{source['segment_id']}"
    new_stem = f"{meta['start_offset']:020d}-{segment_id}"
    for suffix, key in segment_keys(bucket, source).items():
        if suffix in suffixes:
            body = json.dumps(meta).encode() if suffix == ".metadata" else bucket.get(key)
            bucket.client.put_object(Bucket=bucket.name, Key=key.replace(old_stem, new_stem), Body=body)
    return segment_id


def test_the_leader_keeps_its_lineage_and_deletes_what_lies_outside_it(tmp_path, bucket):
    broker = start_broker(tmp_path, bucket)
    try:
        topic = "lineage"
        create_topic(broker.bootstrap, topic, config=TIERED)
        produce_confluent(broker.bootstrap, topic, specs(2000), **PRODUCER)
        wait_until(lambda: local_segments(broker, topic)[0] > 1000, "local segments deleted after upload")
        # The epochs of the remote segments stay: the cache still starts at offset 0.
        assert epoch_entries(broker, topic)[0][1] == 0

        first, second, third = remote_metadata(bucket, topic)[:3]
        data = {".log", ".index", ".timeindex", ".leader_epoch_checkpoint", ".snapshot"}
        everything = data | {".metadata"}
        # A copy spanning the first two segments by a leader of an epoch this lineage never had:
        # it goes, and the two in-lineage segments it spans stay.
        diverged = plant(bucket, first, suffixes=everything, end_offset=second["end_offset"],
                         segment_leader_epochs={"0": first["start_offset"], "7": first["start_offset"] + 3})
        duplicate = plant(bucket, second, suffixes=everything)  # a second leader copied the same range
        orphan = plant(bucket, third, suffixes={".log", ".index"})  # an upload cut short
        broken = plant(bucket, third, suffixes={".metadata", ".index"})  # its .log never landed

        def settled():
            ids = {m["segment_id"] for m in remote_metadata(bucket, topic)}
            leftovers = [k for k in bucket.keys() if orphan in k or broken in k or diverged in k]
            return not leftovers and len(ids & {second["segment_id"], duplicate}) == 1 and ids

        ids = wait_until(settled, "the leader reconciling the bucket")
        assert {first["segment_id"], third["segment_id"]} <= ids
        text = broker.new_log_text()
        assert "outside the leader epoch lineage" in text
        assert f"wholly within segment {second['start_offset']}-{second['end_offset']}" in text
        assert f"(id {broken}) lacks its .log" in text
        assert "unfinished copies" in text and orphan in text
        segments = remote_metadata(bucket, topic)
        for before, after in zip(segments, segments[1:]):
            assert after["start_offset"] == before["end_offset"] + 1

        # After a restart too: the loaded log keeps the epochs of what is remote.
        broker.restart()
        records = consume_confluent(broker.bootstrap, topic, {0: 0}, 2000)
        assert [r.offset for r in records] == list(range(2000))
        assert [r.value for r in records] == [s.value for s in specs(2000)]
        assert epoch_entries(broker, topic)[0][1] == 0
    finally:
        broker.stop()
