"""Offline backfill from a tiered storage bucket: `.option("path", "s3://bucket/prefix")` reads a
topic's remote segments on moto's S3 server, with no broker running."""

from __future__ import annotations

import json
import logging

import pytest
from confluent_kafka import Producer
from spark_kafka import consume_all, create_topic

from logbroker.testing import TEST_OVERRIDES, BrokerProcess, wait_for

KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@pytest.fixture(scope="module")
def tiered_bucket(tmp_path_factory):
    """A bucket the remote segments of topic `tiered` (2 partitions, committed and aborted
    transactions) were copied to; the broker stopped. Returns (options, what consumers read
    below the copied end of each partition)."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket="spark-tiered")
    patch = pytest.MonkeyPatch()
    for key, value in KEYS.items():
        patch.setenv(key, value)  # the broker's credentials (it inherits the environment)
    broker = BrokerProcess(tmp_path_factory.mktemp("tiered-spark"), overrides={
        **TEST_OVERRIDES, "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "s3", "rsm.config.s3.bucket": "spark-tiered",
        "rsm.config.s3.endpoint": endpoint, "rsm.config.s3.prefix": "c1",
        "remote.log.manager.task.interval.ms": "100"}).start()
    try:
        create_topic(broker.bootstrap, "tiered", 2, config={
            "remote.storage.enable": "true", "segment.bytes": "8192", "local.retention.bytes": "16384",
            "retention.ms": "-1"})  # the records are stamped in 2023
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "spark-tiered",
                             "batch.size": 2048, "linger.ms": 5})
        producer.init_transactions(30)
        for round_ in range(30):
            producer.begin_transaction()
            for i in range(30):
                producer.produce("tiered", value=f"r{round_}-{i}-".encode() * 8, partition=i % 2,
                                 timestamp=1_700_000_000_000 + round_ * 100 + i)
            producer.flush(30)
            (producer.abort_transaction if round_ % 4 == 1 else producer.commit_transaction)(30)
        log_dir = broker.data_dir
        wait_for(lambda: all(min(int(p.stem) for p in (log_dir / f"tiered-{n}").glob("*.log")) > 100
                             for n in (0, 1)), what="segments copied and deleted locally")
        expected = consume_all(broker.bootstrap, "tiered", 2)  # from the bucket, through the broker
        assert len(expected) == 22 * 30  # the committed rounds (8 of the 30 aborted)
    finally:
        assert broker.stop() == 0
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    copied_end = {}
    for item in s3.list_objects_v2(Bucket="spark-tiered", Prefix="c1/")["Contents"]:
        if item["Key"].endswith(".metadata"):
            meta = json.loads(s3.get_object(Bucket="spark-tiered", Key=item["Key"])["Body"].read())
            copied_end[meta["partition"]] = max(copied_end.get(meta["partition"], -1), meta["end_offset"])
    options = {"path": "s3://spark-tiered/c1", "rsm.config.s3.endpoint": endpoint,
               "rsm.config.s3.access.key.id": "testing", "rsm.config.s3.secret.access.key": "testing"}
    yield options, [r for r in expected if r["offset"] <= copied_end[r["partition"]]], copied_end
    server.stop()
    patch.undo()


def test_offline_read_of_the_bucket_equals_what_read_committed_consumers_read(spark, tiered_bucket):
    options, expected, copied_end = tiered_bucket
    reader = spark.read.format("logbroker").option("subscribe", "tiered")
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load()
    assert df.rdd.getNumPartitions() > 10  # one task per remote segment
    got = sorted(((r["partition"], r["offset"], bytes(r["value"]), round(r["timestamp"].timestamp() * 1000))
                  for r in df.collect()))
    want = sorted((r["partition"], r["offset"], r["value"], r["timestamp_ms"]) for r in expected)
    for partition in (0, 1):
        got_p = [r for r in got if r[0] == partition]
        want_p = [r for r in want if r[0] == partition]
        # Up to the bucket's last stable offset: a transaction whose marker is not in the bucket
        # yet ends what the bucket can say (at most one round of 15 records per partition).
        assert got_p == want_p[:len(got_p)]
        assert len(got_p) >= len(want_p) - 15
        assert copied_end[partition] > 100
    assert not any(r[2].startswith(b"r1-") for r in got)  # an aborted round
