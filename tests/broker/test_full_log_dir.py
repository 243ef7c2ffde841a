"""a full log dir. Produce gets KAFKA_STORAGE_ERROR, FindCoordinator
COORDINATOR_NOT_AVAILABLE, the log one line per state change and no traceback; once there is room
the broker serves again without a restart, and nothing acknowledged is lost."""

from __future__ import annotations

import os
import re

from logbroker.protocol.apis import ApiKey
from logbroker.records.builder import build_batch
from logbroker.testing import TEST_OVERRIDES, BrokerProcess, wait_for

from clients import RawClient, create_topic, records_in

KAFKA_STORAGE_ERROR = 56
COORDINATOR_NOT_AVAILABLE = 15


def find_coordinator(raw: RawClient, version: int, key: str, key_type: int = 0) -> int:
    if version >= 4:
        return raw.request(ApiKey.FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=[key]).coordinators[0].error_code
    return raw.request(ApiKey.FIND_COORDINATOR, version, key=key, key_type=key_type).error_code


def test_a_full_log_dir_gets_kafkas_error_codes_and_heals_when_there_is_room(small_filesystem, tmp_path):
    data = small_filesystem / "data"
    broker = BrokerProcess(tmp_path / "broker", overrides={
        **TEST_OVERRIDES, "log.dirs": str(data), "offsets.topic.num.partitions": "3",
        "replica.high.watermark.checkpoint.interval.ms": "100",
        "log.flush.offset.checkpoint.interval.ms": "100"})
    broker.start()
    try:
        create_topic(broker.bootstrap, "t")
        filler = small_filesystem / "filler"
        filler.write_bytes(b"\0" * ((os.statvfs(small_filesystem).f_bavail
                                     * os.statvfs(small_filesystem).f_frsize) - (2 << 20)))
        batch = build_batch([(None, os.urandom(50_000))])
        acknowledged = 0
        with RawClient(broker.bootstrap) as raw:
            for _ in range(200):
                code = raw.produce("t", 0, batch).error_code
                if code == KAFKA_STORAGE_ERROR:
                    break
                assert code == 0
                acknowledged += 1
            else:
                raise AssertionError("the file system never filled up")
            assert raw.produce("t", 0, batch).error_code == KAFKA_STORAGE_ERROR
            for version in (0, 3, 4):
                assert find_coordinator(raw, version, "g") == COORDINATOR_NOT_AVAILABLE
            for version in (1, 4):  # a transactional id: __transaction_state cannot be created either
                assert find_coordinator(raw, version, "tx", key_type=1) == COORDINATOR_NOT_AVAILABLE
            # several checkpoint rounds fail meanwhile
            wait_for(lambda: broker.new_log_text().count("high-watermark checkpoint failed") >= 1,
                     timeout_s=10, what="the failing checkpoint's line")
            wait_for(lambda: raw.produce("t", 0, batch).error_code == KAFKA_STORAGE_ERROR
                     and "recovery-point checkpoint failed" in broker.new_log_text(), timeout_s=10,
                     what="a second round of checkpoints")

            filler.unlink()
            wait_for(lambda: raw.produce("t", 0, batch).error_code == 0, timeout_s=10, what="produce again")
            acknowledged += 1
            wait_for(lambda: find_coordinator(raw, 3, "g") == 0, timeout_s=15, what="a coordinator again")
            wait_for(lambda: "high-watermark checkpoint succeeded again" in broker.new_log_text(),
                     timeout_s=10, what="the checkpoint's recovery line")
            log_text = broker.new_log_text()
        assert "Traceback" not in log_text and not re.search(r"\] ERROR .*(Closing connection|Unexpected)", log_text)
        assert log_text.count("high-watermark checkpoint failed") == 1, log_text

        broker.restart()
        with RawClient(broker.bootstrap) as raw:
            total, offset = 0, 0
            while True:
                data_ = raw.fetch("t", 0, offset, partition_max_bytes=10 << 20)
                records = records_in(data_.records)
                if not records:
                    break
                total += len(records)
                offset = records[-1].offset + 1
        assert total == acknowledged
        assert "Error reading" not in broker.new_log_text()
    finally:
        broker.kill()
