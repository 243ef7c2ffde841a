"""The leader of a tiered partition keeps its leader epoch lineage back to the earliest remote
offset, and reconciles the bucket with it: objects other leaders left there (a diverged copy, a
duplicate, an upload cut short, a metadata without its data) go, what is in the lineage stays."""

from __future__ import annotations

import json

from logbroker.storage.checkpoints import random_kafka_uuid, uuid_to_kafka_str

from clients import consume_confluent, create_topic, produce_confluent
from tiered_helpers import PRODUCER, TIERED, Store, local_segments, specs, start_broker, wait_until


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
        # The epochs of the remote segments stay: the cache still starts at offset 0, also once
        # the restart loaded the log (whose leadership then moves to a new epoch).
        assert epoch_entries(broker, topic)[0][1] == 0
        broker.restart()
        produce_confluent(broker.bootstrap, topic, specs(500, 2000), **PRODUCER)
        entries = epoch_entries(broker, topic)
        assert entries[0][1] == 0 and len(entries) >= 2
        (old_epoch, _), (new_epoch, new_start) = entries[-2], entries[-1]

        store = Store(bucket, topic)
        first, second, third = store.metadata()[:3]
        data = {".log", ".index", ".timeindex", ".leader_epoch_checkpoint", ".snapshot"}
        everything = data | {".metadata"}
        # A copy claiming records of the old epoch past where the new one started (one an old
        # leader made of records an unclean election dropped), spanning in-lineage segments: it
        # goes, they stay.
        diverged = plant(bucket, first, suffixes=everything, end_offset=new_start + 10,
                         segment_leader_epochs={str(old_epoch): first["start_offset"]})
        duplicate = plant(bucket, second, suffixes=everything)  # a second leader copied the same range
        orphan = plant(bucket, third, suffixes={".log", ".index"})  # an upload cut short
        broken = plant(bucket, third, suffixes={".metadata", ".index"})  # its .log never landed

        def settled():
            ids = {m["segment_id"] for m in store.metadata()}
            leftovers = [k for k in bucket.keys() if orphan in k or broken in k or diverged in k]
            return not leftovers and len(ids & {second["segment_id"], duplicate}) == 1 and ids

        ids = wait_until(settled, "the leader reconciling the bucket")
        assert {first["segment_id"], third["segment_id"]} <= ids
        text = broker.new_log_text()
        assert "outside the leader epoch lineage" in text
        assert f"wholly within segment {second['start_offset']}-{second['end_offset']}" in text
        assert f"(id {broken}) lacks its .log" in text
        assert "unfinished copies" in text and orphan in text
        segments = store.metadata()
        for before, after in zip(segments, segments[1:]):
            assert after["start_offset"] == before["end_offset"] + 1
        assert any(str(new_epoch) in m["segment_leader_epochs"] for m in segments)  # copies go on

        records = consume_confluent(broker.bootstrap, topic, {0: 0}, 2500)
        assert [r.offset for r in records] == list(range(2500))
        assert [r.value for r in records] == [s.value for s in specs(2500)]
        assert epoch_entries(broker, topic)[0][1] == 0
    finally:
        broker.stop()
